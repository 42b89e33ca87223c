"""TensorFlow device and thread set-up, done before any TF op runs."""

from __future__ import annotations

import os
from types import ModuleType

from accelml.errors import AccelmlError, UnavailableError


def configure(tf: ModuleType, device: str, *, gpu_index: int | None = None, gpus_wanted: int = 1,
              logical_cpus: int = 0, processes_per_host: int = 1) -> list[str]:
    """Pin this process to its devices and return their names.

    ``device="gpu"``: GPU ``gpu_index`` (one per rank, by local rank) or the first
    ``gpus_wanted`` GPUs, with memory growth on. ``device="cpu"``: GPUs hidden, and the
    host's cores shared out between the ``processes_per_host`` ranks of this host;
    ``logical_cpus > 1`` splits the CPU into that many logical devices (to run
    MirroredStrategy without GPUs).
    """
    try:
        return _configure(tf, device, gpu_index, gpus_wanted, logical_cpus, processes_per_host)
    except RuntimeError as error:  # TensorFlow was already initialised in this process
        have = [d.name for d in tf.config.list_logical_devices("GPU" if device == "gpu"
                                                                else "CPU")]
        wanted = gpus_wanted if device == "gpu" and gpu_index is None else max(1, logical_cpus)
        if len(have) == wanted:
            return ["/" + name.split("device:")[-1].lower() for name in have]
        raise AccelmlError(f"TensorFlow is already initialised in this process ({error}); "
                           "run the training in a fresh process with accelml.dl.launch") from None


def _configure(tf: ModuleType, device: str, gpu_index: int | None, gpus_wanted: int, logical_cpus: int,
               processes_per_host: int) -> list[str]:
    gpus = tf.config.list_physical_devices("GPU")
    if device == "gpu":
        if not gpus:
            raise UnavailableError("device 'gpu' asked for, but TensorFlow sees no GPU")
        chosen = [gpus[gpu_index % len(gpus)]] if gpu_index is not None else gpus[:gpus_wanted]
        if len(chosen) < (1 if gpu_index is not None else gpus_wanted):
            raise UnavailableError(f"{gpus_wanted} GPUs asked for, TensorFlow sees {len(gpus)}")
        tf.config.set_visible_devices(chosen, "GPU")
        for gpu in chosen:
            tf.config.experimental.set_memory_growth(gpu, True)
        return [f"/gpu:{i}" for i in range(len(chosen))]
    if gpus:
        tf.config.set_visible_devices([], "GPU")
    threads = max(1, (os.cpu_count() or 1) // max(1, processes_per_host))
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    if logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(logical_cpus)])
        return [f"/cpu:{i}" for i in range(logical_cpus)]
    return ["/cpu:0"]


def set_precision(keras: ModuleType, precision: str) -> None:
    keras.mixed_precision.set_global_policy(precision)
