"""Pieces every strategy shares: the learning-rate schedule, optimizer, weight digest, logs."""

from __future__ import annotations

import contextlib
import csv
import gc
import hashlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, TypeAlias

import numpy as np
import psutil

from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engine_objects import KerasOptimizer, Tensor
from accelml.dl.models import batchnorm_momentum
from accelml.dl.turns import EpochGate
from accelml.errors import UnavailableError


class _Skipped(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes ``import name`` (and its submodules) fail as if ``name`` were not installed, while
    ``importlib.util.find_spec`` still finds it (torch._dynamo reads where libraries live).

    >>> finder = _Skipped(frozenset({"json"}))
    >>> finder.find_spec("csv", None) is None, finder.find_spec("json", None).name
    (True, 'json')
    >>> finder.create_module(finder.find_spec("json", None))
    Traceback (most recent call last):
    ModuleNotFoundError: json is skipped here (accelml.dl.common.skipped_imports)
    """

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None:
            spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        raise ModuleNotFoundError(f"{spec.name} is skipped here (accelml.dl.common.skipped_imports)",
                                  name=spec.name)

    def exec_module(self, module: ModuleType) -> None:
        raise AssertionError("create_module refuses every module")


@contextlib.contextmanager
def skipped_imports(names: Iterable[str]) -> Iterator[tuple[str, ...]]:
    """For the block, importing any of ``names`` not imported yet (or its submodules) fails as if
    it were not installed; modules that try them (``try: import pandas``) carry on without them.
    The block gets the names skipped; one already imported stays as it is.

    >>> with skipped_imports(["tabnanny", "sys"]) as skipped:
    ...     skipped
    ('tabnanny',)
    >>> with skipped_imports(["tabnanny"]):
    ...     import tabnanny
    Traceback (most recent call last):
    ModuleNotFoundError: tabnanny is skipped here (accelml.dl.common.skipped_imports)
    """
    skipped = tuple(sorted({name for name in names if name not in sys.modules}))
    finder = _Skipped(frozenset(skipped))
    sys.meta_path.insert(0, finder)
    try:
        yield skipped
    finally:
        sys.meta_path.remove(finder)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, as it was after it. Importing a
    framework allocates millions of objects and frees few, and the collector would walk the
    growing module graph again and again: ``import keras`` took 8-10% less CPU without it
    (torch 6.02 -> 5.54, TensorFlow 5.52 -> 5.03, JAX 3.26 -> 2.94 CPU-s, means of 3). What
    runs after the block finds the collector as Python's defaults leave it.

    >>> with collector_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def tensorflow_hidden(keras: ModuleType) -> Iterator[None]:
    """Keras on JAX or torch, told for the block that TensorFlow is not installed, where no code
    has imported it. Keras asks whether TensorFlow is installed by importing it (~5 CPU-s and its
    memory in each rank) where only a loaded one could matter: to seed tf.data, or to see whether
    an object it saves is a ``tf.TensorShape``. On TensorFlow, or once it is loaded, nothing
    changes."""
    from keras.src.utils import module_utils

    lazy = module_utils.tensorflow
    if keras.backend.backend() == "tensorflow" or "tensorflow" in sys.modules:
        yield
        return
    known = lazy._available
    lazy._available = False
    try:
        yield
    finally:
        lazy._available = known


def seed_keras(keras: ModuleType, seed: int) -> None:
    """``keras.utils.set_random_seed(seed)`` (Python, NumPy, Keras's global seed generator and
    the engine: torch's generator on torch), without TensorFlow's where Keras does not run on
    it (:func:`tensorflow_hidden`): the JAX and torch loops use no tf.data."""
    with tensorflow_hidden(keras):
        keras.utils.set_random_seed(seed)


def save_model(keras: ModuleType, model: Any, output_dir: str) -> None:
    """``model.save(output_dir/model.keras)``, without importing TensorFlow on JAX or torch
    (:func:`tensorflow_hidden`)."""
    with tensorflow_hidden(keras):
        model.save(os.path.join(output_dir, "model.keras"))


def weights_digest(arrays: Iterable[object]) -> str:
    """SHA-256 over the weights in order: shape, dtype and bytes of each array.

    >>> weights_digest([np.zeros(2, np.float32)]) == weights_digest([np.zeros(2, np.float32)])
    True
    >>> weights_digest([np.zeros(2)]) == weights_digest([np.ones(2)])
    False
    """
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(np.asarray(array))
        digest.update(f"{array.shape}|{array.dtype.str}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def versions(*distributions: str) -> tuple[tuple[str, str], ...]:
    found = []
    for name in ("keras", "numpy") + distributions:
        try:
            found.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            pass
    return tuple(sorted(set(found)))


LearningRate: TypeAlias = float | Callable[[Tensor], Tensor]
"""A constant rate, or a Keras schedule of the optimizer's step counter."""


def make_learning_rate(keras: ModuleType, ops: ModuleType, config: TrainingConfig,
                       steps: int) -> LearningRate:
    """A float, or a Keras schedule that warms up like Horovod's LearningRateWarmupCallback.

    ``ops`` is ``keras.ops`` for Keras 3 or ``tf`` for ``tf_keras``; the schedule is a
    function of the optimizer's step counter, so it works in ``fit``, in a
    ``tf.function`` loop and in a jitted JAX step alike.
    """
    target = config.scaled_learning_rate
    ranks, warmup = config.ranks, float(config.warmup_epochs)
    if warmup <= 0 or ranks <= 1:
        return target

    class HorovodWarmup(keras.optimizers.schedules.LearningRateSchedule):  # type: ignore[misc,name-defined]  # Keras: no type hints
        def __call__(self, step: Tensor) -> Tensor:
            fraction = (ops.cast(step, "float32") + 1.0) / float(steps)
            warming = target / ranks * (fraction * (ranks - 1) / warmup + 1.0)
            return ops.where(fraction >= warmup, ops.cast(target, "float32"), warming)

        def get_config(self) -> dict[str, float | int]:
            return {"target": target, "ranks": ranks, "warmup_epochs": warmup,
                    "steps_per_epoch": steps}

    schedule: Callable[[Tensor], Tensor] = HorovodWarmup()
    return schedule


def learning_rate_value(learning_rate: LearningRate, step: int) -> float:
    """The rate a float-or-schedule gives at optimizer step ``step``."""
    if callable(learning_rate):
        return float(learning_rate(step))      # a scalar on any engine's device (CUDA too)
    return float(learning_rate)


def make_optimizer(keras: ModuleType, config: TrainingConfig,
                   learning_rate: LearningRate, *, per_variable: bool = False) -> KerasOptimizer:
    """The case's optimizer. ``per_variable``: Keras's own update, variable by variable in
    tensor ops, instead of the fused one a backend may swap in (on torch, ``torch._foreach``
    calls whose learning rate is read back to the host, which a CUDA graph cannot record):
    Keras swaps only its own classes, so a subclass keeps the generic update."""
    chosen = keras.optimizers.SGD if config.optimizer == "sgd" else keras.optimizers.Adam
    if per_variable:
        chosen = type(chosen.__name__, (chosen,), {"__doc__": chosen.__doc__})
    if config.optimizer == "sgd":
        optimizer = chosen(learning_rate=learning_rate, momentum=config.momentum)
    else:
        optimizer = chosen(learning_rate=learning_rate)
    if config.precision == "mixed_float16":
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer


class EpochLog:
    """Rank 0's CSV log (``output_dir/training_log.csv``): one row per epoch."""

    def __init__(self, output_dir: str | None) -> None:
        self.path = os.path.join(output_dir, "training_log.csv") if output_dir else None
        if output_dir and self.path:
            os.makedirs(output_dir, exist_ok=True)
            with open(self.path, "w", newline="") as handle:
                csv.writer(handle).writerow(["epoch", "seconds", "loss", "accuracy",
                                             "learning_rate", "images"])

    def write(self, record: EpochRecord) -> None:
        if self.path:
            with open(self.path, "a", newline="") as handle:
                csv.writer(handle).writerow([record.epoch, record.seconds, record.loss,
                                             record.accuracy, record.learning_rate,
                                             record.images])


def end_epoch(config: TrainingConfig, record: EpochRecord, model: Any, log: EpochLog, *,
              rank: int, output_dir: str | None) -> None:
    """What a rank-per-process loop does as an epoch ends, besides TensorBoard: where it
    writes (``output_dir``: rank 0's, else None), the checkpoint and the CSV row; on rank 0
    with ``verbose``, a progress line."""
    if output_dir:
        if config.checkpoints:
            directory = os.path.join(output_dir, "checkpoints")
            os.makedirs(directory, exist_ok=True)
            model.save_weights(os.path.join(directory,
                                            f"epoch-{record.epoch + 1:03d}.weights.h5"))
        log.write(record)
    if config.verbose and rank == 0:
        print(f"epoch {record.epoch + 1}/{config.epochs}: {record.seconds:.2f}s loss "
              f"{record.loss:.4f} accuracy {record.accuracy:.4f}", flush=True)


def rank_result(config: TrainingConfig, data: ImageData, model: Any, *, rank: int, size: int,
                steps: int, epochs: tuple[EpochRecord, ...], test_loss: float | None,
                test_accuracy: float | None, setup_s: float, backend: str,
                libraries: tuple[str, ...], output_dir: str | None,
                devices: tuple[str, ...], path: str = "") -> TrainingResult:
    """One rank's result of a rank-per-process loop, with the digest of its final weights;
    where it writes (``output_dir``), the final model is saved first (``save_model``)."""
    if output_dir and config.save_model:
        import keras

        save_model(keras, model, output_dir)
    digest = weights_digest(model.get_weights())
    return TrainingResult(
        strategy=config.strategy, model=config.model, dataset=data.name, ranks=size,
        batch_per_rank=config.batch_size, global_batch=config.batch_size * size,
        learning_rate=config.scaled_learning_rate, parameters=int(model.count_params()),
        train_samples=len(data.x_train), test_samples=len(data.x_test), steps_per_epoch=steps,
        epochs=epochs, test_loss=test_loss, test_accuracy=test_accuracy,
        weights_digest=digest, rank_digests=(digest,), setup_s=setup_s, data_s=0.0,
        backend=backend, versions=versions(*libraries), files=files_under(output_dir),
        devices=devices, rank=rank, batchnorm_momentum=batchnorm_momentum(model), path=path)


def files_under(directory: str | None) -> tuple[str, ...]:
    if not directory or not os.path.isdir(directory):
        return ()
    return tuple(sorted(os.path.relpath(os.path.join(root, name), directory)
                        for root, _, names in os.walk(directory) for name in names))


class Clock:
    """perf_counter stopwatch; the caller synchronises the device before reading it."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.start


def fit_epoch_callback(keras: ModuleType, learning_rate: LearningRate, steps: int, images: int,
                       record: Callable[[EpochRecord], None]) -> object:
    """A ``model.fit`` callback that times each epoch and hands ``record`` its
    :class:`EpochRecord` (fit's loss and accuracy logs, the rate at its last step, ``images``
    trained in it). In an interleaved comparison group each epoch after the first waits for
    its turn before its clock starts (:class:`accelml.dl.turns.EpochGate`)."""
    clock = Clock()
    gate = EpochGate.from_environment()

    def start(epoch: int, logs: Mapping[str, float] | None) -> None:
        nonlocal clock
        gate.begin(epoch)
        clock = Clock()

    def end(epoch: int, logs: Mapping[str, float]) -> None:
        seconds = clock.seconds()
        record(EpochRecord(epoch, seconds, float(logs["loss"]), float(logs["accuracy"]),
                           learning_rate_value(learning_rate, (epoch + 1) * steps - 1), images))
        gate.end(epoch, seconds)

    callback: object = keras.callbacks.LambdaCallback(on_epoch_begin=start, on_epoch_end=end)
    return callback


def require_tensorboard(config: TrainingConfig) -> None:
    """Fail before training, not at the first summary, when TensorBoard logs cannot be written."""
    if config.tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise UnavailableError("tensorboard = true needs the tensorboard package "
                               "(pip install tensorboard)")


LOOPBACK = "127.0.0.1"
"""Where the ranks of a one-host run listen: nobody on another machine can reach them."""


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` TCP ports free on ``host`` now (for ranks to meet on).

    >>> len(set(free_ports(2)))
    2
    """
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def loopback_interface() -> str:
    """The name of the interface that holds 127.0.0.1 (``lo`` on Linux): what gloo and NCCL
    are told to use in a one-host run, so that their listeners stay on loopback too.

    >>> loopback_interface() != ""
    True
    """
    for name, addresses in psutil.net_if_addrs().items():
        if any(address.family == socket.AF_INET and address.address == LOOPBACK
               for address in addresses):
            return name
    return "lo"


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` only (``host`` resolved to its address), for a
    library that would otherwise listen on every interface (torch's TCPStore takes its
    file descriptor).

    >>> sock = listening_socket(LOOPBACK, 0)
    >>> sock.getsockname()[0]
    '127.0.0.1'
    >>> sock.close()
    """
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(128)
    return sock


def in_slurm_step(environment: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is a task of a SLURM job step (started by ``srun``).

    >>> in_slurm_step({"SLURM_STEP_ID": "0", "SLURM_PROCID": "1"}), in_slurm_step({})
    (True, False)
    """
    return bool(environment.get("SLURM_STEP_ID")) and bool(environment.get("SLURM_PROCID"))


def slurm_tasks_per_node(environment: Mapping[str, str] = os.environ) -> int:
    """The most tasks of this job step on one node (``SLURM_STEP_TASKS_PER_NODE``: '2(x3),1').

    >>> slurm_tasks_per_node({"SLURM_STEP_TASKS_PER_NODE": "2(x3),1"})
    2
    """
    layout = (environment.get("SLURM_STEP_TASKS_PER_NODE")
              or environment.get("SLURM_TASKS_PER_NODE") or "1")
    return max(int(part.split("(")[0]) for part in layout.split(","))
