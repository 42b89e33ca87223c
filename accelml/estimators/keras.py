"""The ``keras`` backend: neural networks trained by :mod:`accelml.dl` (Horovod, tf.distribute, JAX).

Keras cases are not scikit-learn estimators: their "algorithm" is a model from
:data:`accelml.dl.models.MODELS` and the runner measures them through
``accelml.runner.hooks.measure_keras`` (epoch times, images/s, per-rank weight digests). This
module registers the backend so that ``accelml.backends()`` and ``python -m accelml backends``
show whether this machine can train on CPU and on CUDA, and so that asking it for a classical
algorithm fails with a clear reason.

>>> from accelml.estimators import get_backend
>>> backend = get_backend("keras")
>>> backend.devices
('cpu', 'cuda')
>>> "kmeans" in backend.missing, backend.deep_learning
(True, True)
"""

from __future__ import annotations

import importlib.util

from accelml.cases import CaseLike, Expectation
from accelml.estimators._algorithms import ALGORITHMS
from accelml.estimators._registry import Backend
from accelml.probe import Availability, list_gpus, probe_horovod, probe_jax, probe_keras


def _engines() -> tuple[list[str], list[str]]:
    """(what can run Keras here, why the rest cannot)."""
    have: list[str] = []
    lacking: list[str] = []
    if importlib.util.find_spec("tensorflow") is not None:
        have.append("tensorflow")
    else:
        lacking.append("tensorflow is not installed")
    jax = probe_jax()
    if jax.available:
        have.append("jax")
    else:
        lacking.append(jax.detail)
    return have, lacking


def probe_keras_backend(device: str) -> Availability:
    """Keras with TensorFlow or JAX; on ``cuda`` a GPU the engine can see.

    It does not import TensorFlow (slow); GPU presence comes from NVML.
    """
    keras = probe_keras()
    if not keras.available:
        return Availability("keras", device, False, None, keras.detail)
    engines, lacking = _engines()
    if not engines:
        return Availability("keras", device, False, keras.version, "; ".join(lacking))
    horovod = probe_horovod()
    strategies = ["single"]
    if "tensorflow" in engines:
        strategies += ["mirrored", "multiworker"]
        if horovod.available:
            strategies.append("horovod")
    if "jax" in engines:
        strategies += ["jax-dataparallel", "jax-pmean"]
    detail = f"engines: {', '.join(engines)}; strategies: {', '.join(strategies)}"
    if not horovod.available:
        detail += f" (horovod: {horovod.detail})"
    if device == "cuda":
        gpus, reason = list_gpus()
        if not gpus:
            return Availability("keras", "cuda", False, keras.version, reason)
        detail = f"{len(gpus)} GPU(s); " + detail
    return Availability("keras", device, True, keras.version, detail)


def repeat_expectation(case: CaseLike, deterministic: bool) -> Expectation:
    """Training repeats bitwise only in deterministic mode; each strategy adds its conditions."""
    if not deterministic:
        return Expectation(False, "Keras training outside deterministic mode draws unseeded "
                                  "initial weights and picks non-deterministic kernels")
    return Expectation(True, "Keras training in deterministic mode: seeded, deterministic "
                             "kernels, fixed thread pools")


BACKEND = Backend(
    name="keras",
    summary="Keras 3 models trained data-parallel: single, horovod, mirrored, multiworker, "
            "jax-dataparallel, jax-pmean (accelml.dl)",
    devices=("cpu", "cuda"),
    probe=probe_keras_backend,
    repeat_expectation=repeat_expectation,
    libraries=("keras", "tensorflow", "tf-keras", "jax", "jaxlib"),
    deep_learning=True,
    measurer="accelml.runner.hooks:measure_keras",
    implementations={},
    how_to_get={
        "cpu": "pip install keras tensorflow (or jax); Horovod: make/build-horovod.sh",
        "cuda": "a GPU node with tensorflow[and-cuda] or jax[cuda12]",
    },
    missing={name: ("backend 'keras' trains neural networks (accelml.dl models such as "
                    "mnist_cnn or resnet50v2), not " + name)
             for name in ALGORITHMS},
)
