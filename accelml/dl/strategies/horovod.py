"""``horovod``: one process per rank, Keras 3 on TensorFlow or on PyTorch, Horovod's all-reduce.

One strategy on two Keras engines (``keras_backend = "tensorflow"``, the default, or
``"torch"``); each engine has its own loop over its Horovod binding:
:mod:`~accelml.dl.strategies._horovod_tensorflow` (``horovod.tensorflow``, a ``tf.function``
step over tf.data) and :mod:`~accelml.dl.strategies._horovod_torch` (``horovod.torch``'s
collectives in :mod:`~accelml.dl.strategies.torch_loop`). Horovod 0.28's Keras integration
predates Keras 3 (its DistributedOptimizer wraps a Keras 3 optimizer without error but does
not average gradients), so both loops do what the tutorials' callbacks did:

- initial weights and optimizer state broadcast from rank 0;
- each step: gradients of the local batch, one ``grouped_allreduce(op=Average)``, apply;
- learning rate scaled by the number of ranks (linear, sqrt or none) and warmed up from
  ``lr / size`` over ``warmup_epochs`` (the schedule of LearningRateWarmupCallback, without
  its momentum correction);
- epoch loss/accuracy summed over all ranks' samples (exact global metrics, the job of
  MetricAverageCallback); BatchNorm runs per rank (local statistics) and its moving
  averages are averaged across ranks at the end of each epoch, so all ranks hold one model;
- checkpoints, TensorBoard, the CSV log and the final model written by rank 0 only;
- one GPU per rank (by local rank) on GPUs, where Horovod all-reduces with NCCL; gloo
  (``horovodrun --gloo``) or MPI on CPUs.

``HOROVOD_TIMELINE``, ``HOROVOD_FUSION_THRESHOLD`` and ``HOROVOD_CYCLE_TIME`` come from the
environment the launcher sets from the config's ``horovod_*`` keys (:func:`horovod_environment`),
on either engine.

>>> env = horovod_environment(TrainingConfig(strategy="horovod", ranks=2, deterministic=True))
>>> env["HOROVOD_FUSION_THRESHOLD"]
'0'
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from accelml.cases import Expectation
from accelml.dl.config import TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engines import (
    probe_keras,
    requirements,
    tensorflow_deterministic_environment,
    tensorflow_installed,
    torch_deterministic_environment,
    torch_installed,
)
from accelml.dl.strategies import (
    SRUN,
    Determinism,
    Listener,
    Strategy,
    _horovod_tensorflow,
    _horovod_torch,
)
from accelml.probe import Availability, distribution_version, find_launcher, import_or_reason, list_gpus

ENGINES: dict[str, Callable[[TrainingConfig, ImageData], TrainingResult]] = {
    "tensorflow": _horovod_tensorflow.train,
    "torch": _horovod_torch.train,
}
"""Each Keras engine's loop; the first is the default."""


def train(config: TrainingConfig, data: ImageData) -> TrainingResult:
    """This rank's share, on the loop of the run's Keras engine."""
    return ENGINES[config.engine](config, data)


ENGINE_INSTALLED: dict[str, Callable[[], Availability]] = {
    "tensorflow": tensorflow_installed,
    "torch": torch_installed,
}


def probe_binding(engine: str) -> Availability:
    """Horovod's binding for Keras engine ``engine`` (``horovod.tensorflow``, ``horovod.torch``):
    whether it imports and which of gloo, MPI, NCCL it was built with; a CPU transport
    (gloo or MPI) makes it usable, and on a machine with GPUs NCCL is asked for."""
    name = f"horovod.{engine}"
    engine_found = ENGINE_INSTALLED[engine]()
    if not engine_found.available:
        return Availability(name, "-", False, None, engine_found.detail)
    if engine == "torch" and not _horovod_torch.built_with_torch():
        return Availability(name, "-", False, distribution_version("horovod"),
                            "horovod was built without PyTorch (HOROVOD_WITH_PYTORCH=1)")
    module, reason = import_or_reason(name, "horovod", "horovod (make builds it)")
    if module is None:
        return Availability(name, "-", False, None, reason)
    built = [transport for transport in ("gloo", "mpi", "nccl")
             if getattr(module, f"{transport}_built")()]
    detail = "built with " + ", ".join(built) if built else "built with no transport"
    gpus, _ = list_gpus()
    if gpus and "nccl" not in built:
        detail += " (no NCCL: GPU tensors are reduced through host memory)"
    usable = "gloo" in built or "mpi" in built
    return Availability(name, "-", usable, distribution_version("horovod"), detail)


def probe_horovod() -> Availability:
    """horovodrun, and Horovod's binding for each Keras engine (available when one works)."""
    version = distribution_version("horovod")
    if version is None:
        return Availability("horovod", "-", False, None,
                            "horovod is not installed (make/build-horovod.sh builds it)")
    if find_launcher("horovodrun") is None:
        return Availability("horovod", "-", False, version, "horovodrun is not on PATH")
    bindings = {engine: probe_binding(engine) for engine in ENGINES}
    detail = "; ".join(f"{engine}: {row.detail}" if row.available
                       else f"{engine}: unavailable ({row.detail})"
                       for engine, row in bindings.items())
    return Availability("horovod", "-", any(row.available for row in bindings.values()),
                        version, detail)


def probe() -> Availability:
    """Keras and Horovod, with what each engine's binding was built with."""
    horovod = probe_horovod()
    found = requirements(probe_keras, lambda: horovod)
    return dataclasses.replace(found, detail=horovod.detail) if found.available else found


def horovod_environment(config: TrainingConfig) -> dict[str, str]:
    """Horovod's knobs from the config: timeline, tensor fusion (off in deterministic mode
    unless set), cycle time."""
    env: dict[str, str] = {}
    if config.horovod_timeline:
        env["HOROVOD_TIMELINE"] = os.path.abspath(config.horovod_timeline)
        env["HOROVOD_TIMELINE_MARK_CYCLES"] = "1" if config.horovod_timeline_mark_cycles else "0"
    if config.horovod_fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(int(config.horovod_fusion_threshold_mb) * 2**20)
    elif config.deterministic:
        env["HOROVOD_FUSION_THRESHOLD"] = "0"
    if config.horovod_cycle_time_ms is not None:
        env["HOROVOD_CYCLE_TIME"] = str(config.horovod_cycle_time_ms)
    return env


def horovod_deterministic_environment(threads: int | None) -> dict[str, str]:
    """Deterministic kernels of either engine (TensorFlow's, torch's cuBLAS workspace), and
    Horovod's tensor fusion off: each gradient is reduced on its own, so chunk boundaries and
    summation order do not depend on timing."""
    return {**tensorflow_deterministic_environment(threads),
            **torch_deterministic_environment(threads),
            "HOROVOD_FUSION_THRESHOLD": "0", "HOROVOD_HIERARCHICAL_ALLREDUCE": "0"}


def listeners(launcher: str) -> Listener:
    """``horovodrun`` (one host): its rendezvous key-value server and the ranks' gloo sockets
    on 127.0.0.1 (:mod:`accelml.dl.loopback_horovodrun`); under ``mpirun``/``srun`` Horovod
    starts no server of its own and the ranks meet through MPI.

    Horovod's shared secret (``HOROVOD_SECRET_KEY``, ``horovod.runner.common.util.secret``)
    signs only the messages of horovodrun's driver and task services; its gloo rendezvous
    server (``horovod.runner.http.http_server``) and the ranks' client of it (the C++
    ``HTTPStore``: plain HTTP PUT and GET, nothing that carries a credential) take none
    (Horovod 0.28). So accelml never spreads horovodrun over hosts (``-H localhost:N``,
    loopback only); runs over several nodes go through ``srun`` or ``mpirun``."""
    if launcher == "horovodrun":
        return Listener("loopback only: horovodrun's rendezvous server and gloo on 127.0.0.1",
                        True)
    return Listener(f"MPI's own transports under {launcher} (Horovod starts no server); "
                    "what they listen on is the MPI installation's setting", True)


STRATEGY = Strategy(
    name="horovod",
    doc="one process per rank, Keras 3 on TensorFlow or PyTorch (keras_backend), gradients "
        "averaged by Horovod's allreduce",
    keras_backends=tuple(ENGINES),
    train=train,
    probe=probe,
    determinism=Determinism(
        Expectation(True, "seeds, deterministic kernels (TF op determinism, torch's "
                          "deterministic algorithms) and Horovod fusion off: every allreduce "
                          "sums in rank order, so runs repeat bitwise"),
        environment=horovod_deterministic_environment, seeds_tensorflow=True,
        notes=("Horovod tensor fusion is off: allreduce is slower than in normal runs",)),
    libraries=("keras", "tensorflow", "torch", "horovod"),
    multi_process=True,
    launchers=("horovodrun", "mpirun", SRUN),
    default_launcher="horovodrun",
    mpi_ranks=True,
    rank_environment=horovod_environment,
    listeners=listeners,
)
