"""``runtime = "charliecloud"``: ``ch-run`` on a directory image (Charliecloud 0.31, Debian's
``charliecloud-runtime``; unprivileged, through user namespaces).

- command: ``ch-run [OPTIONS] IMAGE_DIR -- CMD ...``;
- environment: ``--unset-env='*'`` clears what ch-run would pass through from the host, then
  ``--set-env=NAME=VALUE`` for each variable passed in (``--env-no-expand``: values are taken
  as written, no ``$`` expansion);
- binds: ``-b SRC[:DST]``; ch-run cannot create a mount point in a read-only image, so
  :func:`make_mount_points` creates the missing ones in the image directory first, and empty
  ``/etc/hosts`` and ``/etc/resolv.conf``, which ch-run replaces with the host's;
- GPUs: no run-time flag; ``ch-fromhost --nvidia IMAGE_DIR`` copies the host's NVIDIA
  libraries into the image once (a site does this when it builds the image);
- working directory: ``--cd DIR``.

>>> from accelml.cases import Container
>>> RUNTIME.command(Container("charliecloud", "/img/bookworm", ("/data",)), ["python3", "-V"])
['ch-run', '--unset-env=*', '--env-no-expand', '-b', '/data', '/img/bookworm', '--', 'python3', '-V']
"""

from __future__ import annotations

import os

from accelml.containers import Runtime, bind_source_destination


def image_problem(image: str) -> str:
    """ch-run runs a directory holding a root file system (``ch-convert`` makes one from a
    SIF or Docker image)."""
    if not os.path.isdir(image):
        return (f"container image {image} is not a directory: ch-run runs directory images "
                "(make one with ch-convert IMAGE DIR)")
    if not any(os.path.isdir(os.path.join(image, folder)) for folder in ("usr", "bin")):
        return f"container image {image} has no usr/ or bin/: not a root file system"
    return ""


HOST_FILES = ("/etc/hosts", "/etc/resolv.conf")
"""Files ch-run replaces with the host's when the image has them: without the host's
``/etc/hosts`` a rank cannot resolve the host name its launcher gives as the rendezvous."""


def make_mount_points(image: str, binds: tuple[str, ...]) -> str:
    """Create the destination of each bind that the image lacks, and the files of
    :data:`HOST_FILES` (ch-run mounts the image read-only and cannot create them); why it
    could not, or ""."""
    for bind in (*HOST_FILES, *binds):
        source, destination = bind_source_destination(bind)
        inside = os.path.join(image, destination.lstrip("/"))
        if os.path.lexists(inside):
            continue
        try:
            if os.path.isdir(source):
                os.makedirs(inside, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(inside), exist_ok=True)
                open(inside, "a").close()
        except OSError as error:
            return (f"cannot create the mount point {destination} in image {image} for bind "
                    f"{bind} ({error.strerror}); create it in the image")
    return ""


RUNTIME = Runtime(
    name="charliecloud",
    executable="ch-run",
    summary="Charliecloud: ch-run IMAGE_DIR -- CMD (unprivileged, directory images)",
    exec_arguments=(),
    bind=lambda bind: ("-b", bind),
    set_variable=lambda name, value: (f"--set-env={name}={value}",),
    workdir=lambda folder: ("--cd", folder),
    clean_environment=("--unset-env=*", "--env-no-expand"),
    gpu_arguments=(),
    gpu_note="GPUs: ch-fromhost --nvidia IMAGE_DIR once, to copy the host's NVIDIA libraries in",
    image_problem=image_problem,
    separator=("--",),
    environment_note="--unset-env='*', then --set-env=NAME=VALUE for each variable passed in",
    prepare=make_mount_points,
)
