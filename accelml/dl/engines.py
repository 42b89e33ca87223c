"""Keras and the engines it runs on (TensorFlow, JAX, PyTorch): what is installed here, and
what each engine needs in deterministic mode.

Strategies (:mod:`accelml.dl.strategies`) name the engines they run on and build their probes
and their deterministic-mode environment from these pieces. Only :func:`probe_tensorflow`
and :func:`probe_torch` import their engine (seconds); the strategy probes use
:func:`tensorflow_installed` and :func:`torch_installed`, which do not.

>>> requirements(lambda: Availability("a", "-", True, "1.0"),
...              lambda: Availability("b", "-", False, None, "b is not installed")).detail
'b: b is not installed'
>>> sorted(tensorflow_deterministic_environment(threads=2))
['TF_CUDNN_DETERMINISTIC', 'TF_DETERMINISTIC_OPS', 'TF_NUM_INTEROP_THREADS', 'TF_NUM_INTRAOP_THREADS']
>>> torch_deterministic_environment(threads=None)
{'CUBLAS_WORKSPACE_CONFIG': ':4096:8'}
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable

from accelml.probe import Availability, distribution_version, import_or_reason

XLA_DETERMINISTIC_FLAG = "--xla_gpu_deterministic_ops=true"
CUBLAS_DETERMINISTIC_WORKSPACE = ":4096:8"
"""cuBLAS's deterministic workspace (``CUBLAS_WORKSPACE_CONFIG``), which
``torch.use_deterministic_algorithms`` requires on CUDA; read when CUDA starts."""


def probe_keras() -> Availability:
    module, reason = import_or_reason("keras", "keras", "keras")
    if module is None:
        return Availability("keras", "-", False, None, reason)
    return Availability("keras", "-", True, distribution_version("keras"),
                        f"backend {module.backend.backend()}")


def probe_tensorflow() -> Availability:
    """TensorFlow, imported, with the GPUs it sees (slow: for ``accelml backends``)."""
    module, reason = import_or_reason("tensorflow", "tensorflow", "tensorflow")
    if module is None:
        return Availability("tensorflow", "cpu", False, None, reason)
    gpus = module.config.list_physical_devices("GPU")
    device = "cuda" if gpus else "cpu"
    return Availability("tensorflow", device, True, distribution_version("tensorflow"),
                        f"{len(gpus)} GPU(s)" if gpus else "CPU only")


def probe_jax() -> Availability:
    module, reason = import_or_reason("jax", "jax", "jax, or jax[cuda12] on a GPU machine")
    if module is None:
        return Availability("jax", "-", False, None, reason)
    devices = module.devices()
    kinds = sorted({device.platform for device in devices})
    return Availability("jax", kinds[0] if len(kinds) == 1 else "-", True, distribution_version("jax"),
                        f"{len(devices)} device(s): {', '.join(kinds)}")


def probe_torch() -> Availability:
    """PyTorch, imported, with the CUDA devices it sees (slow: for ``accelml backends``)."""
    module, reason = import_or_reason("torch", "torch", "torch (CPU wheels: --index-url "
                                      "https://download.pytorch.org/whl/cpu)")
    if module is None:
        return Availability("torch", "cpu", False, None, reason)
    gpus = module.cuda.device_count() if module.cuda.is_available() else 0
    return Availability("torch", "cuda" if gpus else "cpu", True, distribution_version("torch"),
                        f"{gpus} CUDA device(s)" if gpus else "CPU only")


def installed(module: str, distribution: str, install_hint: str) -> Availability:
    """Whether ``module`` is there to import (found, not imported).

    >>> installed("no_such_module_here", "nothing", "nothing").detail
    'nothing is not installed (pip install nothing)'
    """
    if importlib.util.find_spec(module) is None:
        return Availability(distribution, "-", False, None,
                            f"{distribution} is not installed (pip install {install_hint})")
    return Availability(distribution, "-", True, distribution_version(distribution))


def tensorflow_installed() -> Availability:
    return installed("tensorflow", "tensorflow", "tensorflow")


def torch_installed() -> Availability:
    return installed("torch", "torch", "torch")


def requirements(*checks: Callable[[], Availability]) -> Availability:
    """Available when every check is; otherwise why not (``name: reason`` of each that is not).

    The version lists what was found (``keras 3.5.0, tensorflow 2.21.0``).
    """
    found = [check() for check in checks]
    missing = [f"{row.name}: {row.detail}" for row in found if not row.available]
    versions = ", ".join(f"{row.name} {row.version}" for row in found if row.version)
    names = ", ".join(row.name for row in found)
    if missing:
        return Availability(names, "-", False, versions or None, "; ".join(missing))
    return Availability(names, "-", True, versions or None, f"needs {names}: all found")


def tensorflow_deterministic_environment(threads: int | None) -> dict[str, str]:
    """What TensorFlow reads for deterministic kernels (and fixed thread pools), before import."""
    environment = {"TF_DETERMINISTIC_OPS": "1", "TF_CUDNN_DETERMINISTIC": "1"}
    if threads is not None:
        environment["TF_NUM_INTRAOP_THREADS"] = str(threads)
        environment["TF_NUM_INTEROP_THREADS"] = "1"
    return environment


def jax_deterministic_environment(threads: int | None) -> dict[str, str]:
    """XLA's deterministic GPU ops, added to the ``XLA_FLAGS`` already set (read before JAX loads).

    >>> XLA_DETERMINISTIC_FLAG in jax_deterministic_environment(None)["XLA_FLAGS"]
    True
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if XLA_DETERMINISTIC_FLAG in flags:
        return {"XLA_FLAGS": flags}
    return {"XLA_FLAGS": (flags + " " + XLA_DETERMINISTIC_FLAG).strip()}


def torch_deterministic_environment(threads: int | None) -> dict[str, str]:
    """What PyTorch needs before CUDA starts for ``torch.use_deterministic_algorithms(True)``
    (which the torch loop turns on itself, with the seeds); its thread count is set in-process."""
    return {"CUBLAS_WORKSPACE_CONFIG": CUBLAS_DETERMINISTIC_WORKSPACE}
