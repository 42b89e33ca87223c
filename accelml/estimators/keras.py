"""The ``keras`` backend: neural networks trained by :mod:`accelml.dl` (Horovod, tf.distribute,
JAX, torch.distributed).

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

from accelml.cases import CaseLike, Expectation
from accelml.dl.engines import probe_keras
from accelml.dl.strategies import STRATEGIES_POINT, find_strategy, probe_strategy
from accelml.estimators._algorithms import ALGORITHMS
from accelml.estimators._registry import Backend
from accelml.probe import Availability, list_gpus


def probe_keras_backend(device: str) -> Availability:
    """Keras, and the strategies that can train here (each strategy's own probe); on ``cuda``
    a GPU, as NVML sees it."""
    keras = probe_keras()
    if not keras.available:
        return Availability("keras", device, False, None, keras.detail)
    found = [(record, probe_strategy(record)) for record in STRATEGIES_POINT.records()]
    usable = [record for record, row in found if row.available]
    lacking = "; ".join(f"{record.name}: {row.detail}" for record, row in found
                        if not row.available)
    if not usable:
        return Availability("keras", device, False, keras.version,
                            f"no strategy can run here ({lacking})")
    engines = dict.fromkeys(engine for record in usable for engine in record.keras_backends)
    detail = (f"engines: {', '.join(engines)}; "
              f"strategies: {', '.join(record.name for record in usable)}")
    if lacking:
        detail += f" (unavailable: {lacking})"
    if device == "cuda":
        gpus, reason = list_gpus()
        if not gpus:
            return Availability("keras", "cuda", False, keras.version, reason)
        detail = f"{len(gpus)} GPU(s); " + detail
    return Availability("keras", device, True, keras.version, detail)


def repeat_expectation(case: CaseLike, deterministic: bool) -> Expectation:
    """Training repeats bitwise only in deterministic mode, as far as its strategy promises."""
    if not deterministic:
        return Expectation(False, "Keras training outside deterministic mode draws unseeded "
                                  "initial weights and picks non-deterministic kernels")
    record = find_strategy(case.strategy)
    if record is None:
        return Expectation(False, f"strategy {case.strategy!r} is not installed here")
    return record.determinism.expectation


BACKEND = Backend(
    name="keras",
    summary="Keras 3 models trained data-parallel by accelml.dl's strategies (tf.distribute, "
            "Horovod, JAX, torch.distributed, and any installed as plug-ins)",
    devices=("cpu", "cuda"),
    probe=probe_keras_backend,
    repeat_expectation=repeat_expectation,
    cross_device_reason="CPU (Eigen/oneDNN) and GPU (cuDNN/cuBLAS) kernels sum in different "
                        "orders; rounding differences grow over training steps",
    libraries=("keras",),
    deep_learning=True,
    main_phase="epoch",
    measurer="accelml.runner.hooks:measure_keras",
    implementations={},
    how_to_get={
        "cpu": "pip install keras tensorflow (or jax, or torch); Horovod: make/build-horovod.sh",
        "cuda": "a GPU node with tensorflow[and-cuda], jax[cuda12] or torch (CUDA wheels)",
    },
    missing={name: ("backend 'keras' trains neural networks (accelml.dl models such as "
                    "mnist_cnn or resnet50v2), not " + name)
             for name in ALGORITHMS},
)
