"""What Apptainer and SingularityCE share: ``TOOL exec [OPTIONS] IMAGE CMD ...``.

Their documented options (``apptainer exec --help``, ``singularity exec --help``):
``--cleanenv`` (start from an empty environment), ``--env NAME=VALUE`` (set one variable),
``--bind SRC[:DST[:OPTS]]``, ``--pwd DIR`` (working directory) and ``--nv`` (the host's
NVIDIA driver libraries and devices). An image is a ``.sif`` file or a sandbox directory.
"""

from __future__ import annotations

import os

from accelml.containers import Runtime


def image_problem(image: str) -> str:
    """A SIF file (its magic: ``SIF_MAGIC`` at byte 32) or a sandbox directory."""
    if os.path.isdir(image):
        return "" if os.path.isdir(os.path.join(image, "usr")) else (
            f"container image {image} is a directory without usr/: not a sandbox image")
    try:
        with open(image, "rb") as handle:
            head = handle.read(48)
    except OSError as error:
        return f"container image {image} cannot be read: {error.strerror}"
    if b"SIF_MAGIC" not in head:
        return f"container image {image} is not a SIF file (no SIF_MAGIC in its header)"
    return ""


def exec_runtime(name: str, executable: str, summary: str) -> Runtime:
    """The record of an ``exec``-style runtime called ``name`` (``executable`` on PATH)."""
    return Runtime(
        name=name,
        executable=executable,
        summary=summary,
        exec_arguments=("exec",),
        bind=lambda bind: ("--bind", bind),
        set_variable=lambda variable, value: ("--env", f"{variable}={value}"),
        workdir=lambda folder: ("--pwd", folder),
        clean_environment=("--cleanenv",),
        gpu_arguments=("--nv",),
        gpu_note="GPUs: --nv binds the host's NVIDIA driver libraries and devices",
        image_problem=image_problem,
        environment_note="--cleanenv, then --env NAME=VALUE for each variable passed in",
    )
