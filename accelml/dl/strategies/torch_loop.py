"""Keras 3 on PyTorch, data-parallel: one rank's training loop over any library's collectives.

The strategies that run Keras on torch (``horovod`` with ``keras_backend = "torch"``,
``torch-ddp``) differ only in how ranks talk; each gives :func:`train_on_torch` a function
that joins the run and returns its :class:`Collectives`. Horovod's ``DistributedOptimizer``
and Keras callbacks do not work with Keras 3, so the step is written here, with the
semantics of the ``horovod`` TensorFlow loop:

- initial weights and optimizer state broadcast from rank 0;
- each step: ``model(x, training=True)`` under autograd, ``loss.backward()``, the gradients
  ``v.value.grad`` averaged across ranks (after the backward pass by ``collectives.average``,
  or during it where the library wraps the model, as DistributedDataParallel does),
  ``optimizer.apply`` with Keras's per-variable update (the fused ``torch._foreach`` one
  reads the learning rate back to the host, which a CUDA graph cannot record; one rule for
  eager and captured steps makes them train bitwise alike);
- learning rate scaled and warmed up by :func:`accelml.dl.common.make_learning_rate`;
- epoch and test loss/accuracy summed over every rank's samples (exact global metrics);
  BatchNorm runs per rank and its moving averages are averaged at the end of each epoch;
- checkpoints, TensorBoard (``torch.utils.tensorboard``), the CSV log and the final model
  written by rank 0 only.

Eagerly, each step is about a thousand small operations dispatched one by one through Keras,
and on a GPU the host cannot keep up (ResNet50V2 at batch 256: ~70-100 ms of host work for
~14 ms of GPU work). ``step_capture = "cuda-graph"`` records the step into CUDA graphs once,
before the first epoch (after a few eager warm-up steps whose updates are then undone), and
replays them: the whole step in one graph where the gradients are averaged inside it
(DistributedDataParallel's NCCL all-reduce), or two graphs around Horovod's all-reduce,
which runs on its own thread and cannot be recorded.

One device per rank: ``cuda:<local rank>`` on GPUs (``torch.cuda.set_device``), the CPU
otherwise (CUDA hidden, the host's cores shared between its ranks). No TensorFlow: each rank's
shard (``x[rank::size]`` cut to whole batches, as the tf.data pipeline's shard/take) is put on
its device once as uint8; every epoch draws a permutation (seeded by seed and rank) and each
batch is converted to float (and resized, e.g. CIFAR-10 to 128x128) on the device.

>>> import torch
>>> alone = Collectives(0, 1, 0, 1, average=list, total=lambda t: t, broadcast=lambda ts: None,
...                     library="torch")
>>> [t.tolist() for t in alone.average([torch.ones(2)])]
[[1.0, 1.0]]
"""

from __future__ import annotations

import os
import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from accelml.dl.common import (
    Clock,
    EpochLog,
    end_epoch,
    learning_rate_value,
    make_learning_rate,
    make_optimizer,
    rank_result,
    require_tensorboard,
    seed_keras,
    skipped_imports,
)
from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engines import CUBLAS_DETERMINISTIC_WORKSPACE
from accelml.dl.models import build_model
from accelml.dl.pipelines import steps_per_epoch
from accelml.dl.strategies import AUTO
from accelml.dl.strategies._torch_compile import CompiledParts, prepare_for_inductor
from accelml.dl.turns import EpochGate
from accelml.errors import AccelmlError, SpecError, UnavailableError

if TYPE_CHECKING:
    import torch


def _nothing_to_close() -> None:
    """A library whose ranks need no goodbye."""


@dataclass(frozen=True)
class Collectives:
    """How the ranks of one run talk: who this rank is, and what the loop asks of the others.

    ``average(tensors)``: the element-wise mean of each tensor over all ranks (new tensors,
    same order); ``total(tensor)``: the element-wise sum over all ranks; ``broadcast(tensors)``:
    rank 0's values copied into every rank's tensors, in place; ``close()``: leave the run.
    ``library``: the distribution doing it, recorded with the result's versions.
    ``averaging_model(model)``: the Keras model (a ``torch.nn.Module``) wrapped so that its
    backward pass averages the gradients across ranks (``DistributedDataParallel``), used for
    training steps; None: the step averages the gradients after the backward pass, with
    ``average``.
    """

    rank: int
    size: int
    local_rank: int
    local_size: int
    average: Callable[[list[torch.Tensor]], list[torch.Tensor]]
    total: Callable[[torch.Tensor], torch.Tensor]
    broadcast: Callable[[list[torch.Tensor]], None]
    library: str
    close: Callable[[], None] = field(default=_nothing_to_close)
    averaging_model: Callable[[Any], Callable[..., torch.Tensor]] | None = None


def averaging_wrapper(collectives: Collectives) -> Callable[[Any], Callable[..., torch.Tensor]] | None:
    """The wrapper that averages gradients in the backward pass, where there is more than one
    rank to average over. One rank trains the bare model: a wrapper's per-step work
    (DistributedDataParallel on one H200: the CNN's compiled step 0.263 ms against 0.227 ms
    bare, benchmarks/RESULTS.md) would be charged to the engine, not to the strategy at N ranks.

    >>> import dataclasses
    >>> def wrap(model): return model
    >>> pair = Collectives(0, 2, 0, 2, average=list, total=lambda t: t, broadcast=lambda ts: None,
    ...                    library="torch", averaging_model=wrap)
    >>> averaging_wrapper(pair) is wrap, averaging_wrapper(dataclasses.replace(pair, size=1))
    (True, None)
    """
    return collectives.averaging_model if collectives.size > 1 else None


Connect = Callable[[TrainingConfig], Collectives]
"""Joins this process to the run's ranks (after ``torch`` can be imported) and returns how
they talk; a strategy's own (``horovod.torch``, ``torch.distributed``)."""


def prepare_torch_environment(config: TrainingConfig) -> None:
    """Before torch loads: a CPU run sees no GPU and its OpenMP threads sleep rather than spin
    while they wait (``OMP_WAIT_POLICY=PASSIVE`` unless set: on a host whose cores are busy
    with other work, spinning made an mlp step on digits with 2 threads 50-100x slower,
    80-180 ms against 1.6 ms); deterministic mode gets cuBLAS's fixed workspace (read when
    CUDA starts)."""
    if config.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if config.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC_WORKSPACE)


def place_rank(torch_module: Any, device: str, local_rank: int, local_size: int) -> str:
    """Pin this rank to its device and return its name: GPU ``local_rank`` (``device="gpu"``),
    or the CPU, with the thread count the case was given (``OMP_NUM_THREADS``, which torch
    reads itself) or else the host's cores shared between its ``local_size`` ranks."""
    if device == "gpu":
        if not torch_module.cuda.is_available():
            raise UnavailableError("device 'gpu' asked for, but PyTorch sees no CUDA device")
        index = local_rank % torch_module.cuda.device_count()
        torch_module.cuda.set_device(index)
        return f"cuda:{index}"
    if not os.environ.get("OMP_NUM_THREADS"):
        torch_module.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_size)))
    return "cpu"


class _Shard:
    """This rank's share of a set of images, on its device: uint8 images, int64 labels."""

    def __init__(self, torch_module: Any, x: np.ndarray, y: np.ndarray, device: str,
                 image_size: int | None) -> None:
        self.torch = torch_module
        self.images = torch_module.as_tensor(np.ascontiguousarray(x), device=device)
        self.labels = torch_module.as_tensor(np.asarray(y, np.int64), device=device)
        self.image_size = image_size

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def batch(self, indices: torch.Tensor | slice) -> tuple[torch.Tensor, torch.Tensor]:
        """Images (float in [0, 1], resized where asked, channels last) and labels."""
        images = self.images[indices].float() / 255.0
        if self.image_size is not None:
            channels_first = images.permute(0, 3, 1, 2)
            images = self.torch.nn.functional.interpolate(
                channels_first, size=(self.image_size, self.image_size), mode="bilinear",
                align_corners=False).permute(0, 2, 3, 1)
        return images, self.labels[indices]

    def picks(self, batch_size: int, order: torch.Tensor | None = None,
              whole_only: bool = True) -> Iterator[torch.Tensor | slice]:
        """Which images each batch takes, in ``order`` (None: stored order); the last partial
        batch unless ``whole_only``."""
        count = len(self) - len(self) % batch_size if whole_only else len(self)
        for start in range(0, count, batch_size):
            yield (order[start:start + batch_size] if order is not None
                   else slice(start, start + batch_size))

    def batches(self, batch_size: int, order: torch.Tensor | None = None,
                whole_only: bool = True) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The batches of :meth:`picks`."""
        for picked in self.picks(batch_size, order, whole_only):
            yield self.batch(picked)


def train_on_torch(config: TrainingConfig, data: ImageData, connect: Connect) -> TrainingResult:
    """Train this rank's share of ``config`` with Keras 3 on torch, ranks joined by ``connect``."""
    clock = Clock()
    require_tensorboard(config)
    if config.cache == "disk":
        raise SpecError("training cache = 'disk' is a tf.data cache; Keras on torch keeps "
                        "each rank's shard in device memory (use cache = 'memory')")
    prepare_torch_environment(config)
    try:
        import torch
    except ImportError as error:
        raise UnavailableError(f"torch does not import: {error}") from None
    collectives = connect(config)
    try:
        return _train(torch, config, data, collectives, clock)
    finally:
        collectives.close()


def _train(torch: Any, config: TrainingConfig, data: ImageData, collectives: Collectives,
           clock: Clock) -> TrainingResult:
    rank, size = collectives.rank, collectives.size
    if size != config.ranks:
        raise AccelmlError(f"{config.strategy} started {size} rank(s) but the case asks for "
                           f"{config.ranks} ranks")
    device = place_rank(torch, config.device, collectives.local_rank, collectives.local_size)
    if config.deterministic:
        torch.use_deterministic_algorithms(True)
    elif device != "cpu":
        torch.backends.cudnn.benchmark = True
    import keras

    if keras.backend.backend() != "torch":
        raise UnavailableError(f"Keras runs on {keras.backend.backend()}; set "
                               "KERAS_BACKEND=torch (accelml.dl.launch does)")
    keras.mixed_precision.set_global_policy(config.precision)
    seed_keras(keras, config.seed + rank)
    image_size = config.image_size if data.name != "generated" else None
    shape = (image_size, image_size, data.image_shape[2]) if image_size else data.image_shape
    model = build_model(config.model, keras, shape, data.classes, **config.model_arguments)
    steps = steps_per_epoch(len(data.x_train), size, config.batch_size, config.steps_per_epoch)
    learning_rate = make_learning_rate(keras, keras.ops, config, steps)
    optimizer = make_optimizer(keras, config, learning_rate, per_variable=True)
    trainable = model.trainable_variables
    optimizer.build(trainable)
    collectives.broadcast([v.value.data for v in [*model.weights, *optimizer.variables]])

    shuffling = torch.Generator().manual_seed(config.seed + rank)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    averaged_state = [v for v in model.non_trainable_weights if v.dtype.startswith("float")]

    def measured(predictions: torch.Tensor, labels: torch.Tensor,
                 loss: torch.Tensor) -> torch.Tensor:
        """(summed loss, correct predictions, samples) of one batch."""
        hits = (predictions.argmax(-1) == labels).sum().float()
        count = torch.full_like(hits, float(labels.shape[0]))
        return torch.stack([loss.detach().float() * count, hits, count])

    capture = config.captures_steps
    if config.compiles_steps:
        prepare_for_inductor(model)
    averaging = averaging_wrapper(collectives)
    if averaging is None:
        forward = model
    elif capture:                       # DDP under capture is built on a side stream
        forward = _on_side_stream(torch, lambda: averaging(model))
    else:
        forward = averaging(model)
    reduce_after_backward = averaging is None and size > 1

    def loss_and_metrics(images: torch.Tensor,
                         labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        predictions = forward(images, training=True)
        loss = loss_fn(labels, predictions)
        return loss, measured(predictions, labels, loss)

    def update(gradients: list[torch.Tensor]) -> None:
        with torch.no_grad():
            optimizer.apply(gradients, trainable)

    compiled = CompiledParts(torch, {"forward and loss": loss_and_metrics, "update": update}) \
        if config.compiles_steps else None
    predict = compiled.part("forward and loss") if compiled else loss_and_metrics
    apply = compiled.part("update") if compiled else update

    def forward_backward(indices: torch.Tensor | slice) -> tuple[torch.Tensor, list[torch.Tensor]]:
        images, labels = shard.batch(indices)
        for variable in trainable:
            variable.value.grad = None
        loss, metrics = predict(images, labels)
        if model.losses:
            loss = loss + sum(model.losses)
        optimizer.scale_loss(loss).backward()
        gradients = [v.value.grad if v.value.grad is not None else torch.zeros_like(v.value)
                     for v in trainable]
        return metrics, gradients

    def train_step(indices: torch.Tensor | slice) -> torch.Tensor:
        metrics, gradients = forward_backward(indices)
        if reduce_after_backward:
            gradients = collectives.average(gradients)
        apply(gradients)
        return metrics

    shard = _Shard(torch, data.x_train[rank::size][:steps * config.batch_size],
                   data.y_train[rank::size][:steps * config.batch_size], device, image_size)
    step: Step = train_step
    captured: CapturedStep | None = None
    path = _eager_path(config)
    state = [v.value for v in [*model.weights, *optimizer.variables]]
    if compiled is not None and not capture:     # compiled (or failed to) before training
        with _state_kept(torch, state, generator=True):
            train_step(next(shard.picks(config.batch_size)))
    if capture:
        try:
            captured = _captured_step(
                torch, forward_backward, apply,
                collectives.average if reduce_after_backward else None,
                state, [v.value for v in trainable], config.batch_size,
                warmup=_DDP_CAPTURE_WARMUP if averaging is not None else _CAPTURE_WARMUP)
            step = captured.step
            path = _captured_path(config, split=reduce_after_backward, ranks=size)
        except RecordingFailed as failure:
            if config.step_capture != AUTO:
                raise AccelmlError(f"{failure} (step_capture = '{config.step_capture}'; "
                                   "'none' trains eagerly)") from None
            torch.cuda.synchronize()
            path = f"eager (auto: {failure})"
    if compiled is not None:
        path = _compiled_path(config, compiled, path)

    output_dir = config.output_dir if rank == 0 else None      # rank 0 writes every file
    log = EpochLog(output_dir)
    summaries = _summary_writer(output_dir) if output_dir and config.tensorboard else None
    setup_s = clock.seconds()

    epochs = []
    gate = EpochGate.from_environment()
    for epoch in range(config.epochs):
        gate.begin(epoch)
        clock = Clock()
        order = (torch.randperm(len(shard), generator=shuffling).to(device)
                 if config.shuffle else None)
        totals = torch.zeros(3, device=device)
        for picked in shard.picks(config.batch_size, order):
            totals += step(picked)
        loss_sum, hits, count = collectives.total(totals).tolist()
        if averaged_state:
            averaged = collectives.average([v.value.data for v in averaged_state])
            for variable, value in zip(averaged_state, averaged, strict=True):
                variable.assign(value)
        record = EpochRecord(epoch, clock.seconds(), loss_sum / count, hits / count,
                             learning_rate_value(learning_rate, (epoch + 1) * steps - 1),
                             int(count))
        epochs.append(record)
        end_epoch(config, record, model, log, rank=rank, output_dir=output_dir)
        if summaries is not None:
            _write_summaries(summaries, config, model, record)
        gate.end(epoch, record.seconds)
    if summaries is not None:
        summaries.close()
    if captured is not None:
        with _state_kept(torch, state, generator=True):
            path += "; " + timed_phases(torch, captured, shard.picks(config.batch_size),
                                        min(_TIMED_STEPS, steps))

    test_loss = test_accuracy = None
    if len(data.x_test):
        tests = _Shard(torch, data.x_test[rank::size], data.y_test[rank::size], device,
                       image_size)
        totals = torch.zeros(3, device=device)
        with torch.no_grad():
            for images, labels in tests.batches(config.batch_size, whole_only=False):
                predictions = model(images, training=False)
                totals += measured(predictions, labels, loss_fn(labels, predictions))
        loss_sum, hits, count = collectives.total(totals).tolist()
        test_loss, test_accuracy = loss_sum / count, hits / count
    return rank_result(config, data, model, rank=rank, size=size, steps=steps,
                       epochs=tuple(epochs), test_loss=test_loss, test_accuracy=test_accuracy,
                       setup_s=setup_s, backend="torch",
                       libraries=("torch", collectives.library), output_dir=output_dir,
                       devices=(device,), path=path)


def _eager_path(config: TrainingConfig) -> str:
    """What :attr:`TrainingResult.path` says of eager steps, and why they ran."""
    if config.step_capture == "none":
        return "eager (asked: step_capture = 'none')"
    if config.compiles_steps:
        return "not captured (CUDA graphs need a GPU)"
    return "eager (auto: CUDA graphs need Keras on torch on a GPU)"


def _compiled_path(config: TrainingConfig, compiled: CompiledParts, then: str) -> str:
    """What :attr:`TrainingResult.path` says of a step whose parts Inductor compiled (or failed
    to), ``then`` saying how it ran."""
    how = "auto" if config.step_capture == AUTO else "asked"
    failures = compiled.failures()
    if not compiled.compiled_names():
        return f"eager kernels ({how}: compiling failed: {next(iter(failures.values()))}); {then}"
    eager = "".join(f"; {name} eager: compiling failed: {failure}"
                    for name, failure in failures.items())
    return (f"Inductor-compiled {' + '.join(compiled.compiled_names())} ({how}: "
            f"{compiled.graphs()} graph(s), the backward through AOTAutograd{eager}); {then}")


def _captured_path(config: TrainingConfig, split: bool, ranks: int) -> str:
    """What :attr:`TrainingResult.path` says of captured steps."""
    how = "auto" if config.step_capture == AUTO else "asked"
    if ranks == 1:
        return f"CUDA graph ({how}): the whole step replayed (one rank: nothing to average)"
    if split:
        return (f"CUDA graphs ({how}): forward-backward and update replayed, gradients "
                "averaged between them in one flat all-reduce")
    return f"CUDA graph ({how}): the whole step, gradient all-reduce inside, replayed"


_TIMED_STEPS = 50
"""Steps :func:`timed_phases` times after the last epoch (fewer where an epoch has fewer)."""

_CAPTURE_WARMUP = 3
_DDP_CAPTURE_WARMUP = 11
"""Eager steps before a step is recorded into a CUDA graph (lazy set-up, cuDNN's autotuning);
DistributedDataParallel needs 11 (PyTorch's notes on CUDA graphs)."""

Step = Callable[[Any], "torch.Tensor"]


def _on_side_stream(torch: Any, work: Callable[[], Any]) -> Any:
    """``work()`` run on a fresh CUDA stream, ordered after and before the current one's
    work (warm-up before a CUDA graph's recording must not run on the default stream)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        result = work()
    torch.cuda.current_stream().wait_stream(side)
    return result


@contextmanager
def _constants_kept_on_device(torch: Any, made: dict[tuple[object, ...], Any],
                              pinned: list[Any]) -> Iterator[None]:
    """Constants that Keras copies from the host to the GPU in every step (``torch.as_tensor``
    of a Python number, a tuple of numbers such as a loss's ``ops.shape``, a NumPy array) made
    once and then reused: a copy from host memory cannot be recorded in a CUDA graph. The
    warm-up steps make them; the recording finds them made, or, for one first seen while
    recording, records a copy from pinned host memory kept for the graph's life. Each is a
    constant of the step (its value is in the key), as it is eagerly. ``made`` (the device
    tensors) and ``pinned`` (the host copies) must live as long as the graphs that read them.
    """
    original = torch.as_tensor

    def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Any:
        if torch.compiler.is_compiling():      # traced by Dynamo: a constant of its graph
            return original(data, dtype=dtype, device=device)
        if device is None or torch.device(device).type != "cuda":
            return original(data, dtype=dtype, device=device)
        if isinstance(data, (bool, int, float)):
            key: tuple[object, ...] = (type(data).__name__, data, str(dtype), str(device))
        elif isinstance(data, (np.ndarray, np.generic)):
            array = np.asarray(data)
            key = (array.dtype.str, array.shape, array.tobytes(), str(dtype), str(device))
        elif isinstance(data, (list, tuple)) and _numbers_only(data):   # e.g. ops.shape(x)
            key = (type(data).__name__, repr(data), str(dtype), str(device))
        else:
            return original(data, dtype=dtype, device=device)
        if key not in made:
            if torch.cuda.is_current_stream_capturing():     # first seen while recording
                pinned.append(original(data, dtype=dtype).pin_memory())
                made[key] = pinned[-1].to(device, non_blocking=True)
            else:
                made[key] = original(data, dtype=dtype, device=device)
        return made[key]

    torch.as_tensor = as_tensor
    try:
        yield
    finally:
        torch.as_tensor = original


def _numbers_only(data: list[Any] | tuple[Any, ...]) -> bool:
    return all(_numbers_only(item) if isinstance(item, (list, tuple))
               else isinstance(item, (bool, int, float, np.generic)) for item in data)


def _where_recording_failed(error: BaseException) -> str:
    """The innermost frame of Keras or accelml in ``error``'s traceback: the line that asked
    for what a CUDA graph cannot record."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if "/keras/" in frame.filename or "/accelml/" in frame.filename]
    if not frames:
        return "unknown place"
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} ({frame.line})"


class RecordingFailed(AccelmlError):
    """A step asked for something a CUDA graph cannot record (a host copy, a sync)."""


class _Recording:
    """``work()`` run eagerly (on a side stream) for its first ``warmup`` calls, then recorded
    into a CUDA graph and from then on replayed; every call does the work once and returns
    what the recording returned (tensors a replay refreshes in place)."""

    def __init__(self, torch: Any, work: Callable[[], Any], warmup: int) -> None:
        self.torch, self.work, self.warmup = torch, work, warmup
        self.calls = 0
        self.graph: Any = None
        self.outputs: Any = None

    def __call__(self) -> Any:
        if self.graph is None and self.calls < self.warmup:
            self.calls += 1
            return _on_side_stream(self.torch, self.work)
        if self.graph is None:
            graph = self.torch.cuda.CUDAGraph()
            try:
                with self.torch.cuda.graph(graph):
                    self.outputs = self.work()
            except RuntimeError as error:
                raise RecordingFailed(
                    f"the training step could not be recorded into a CUDA graph: "
                    f"{str(error).splitlines()[0]} at {_where_recording_failed(error)}") from None
            self.graph = graph
        self.graph.replay()
        return self.outputs


@dataclass(frozen=True)
class CapturedStep:
    """A step replayed from CUDA graphs: ``step(indices)`` trains on those images;
    ``phases`` are its parts in order (name, work), which :func:`timed_phases` times."""

    step: Step
    phases: tuple[tuple[str, Callable[[], Any]], ...]
    select: Callable[[Any], None]


def _captured_step(torch: Any, forward_backward: Callable[[Any], tuple[Any, list[Any]]],
                   apply: Callable[[list[Any]], None],
                   average: Callable[[list[Any]], list[Any]] | None, state: list[Any],
                   parameters: list[Any], batch_size: int, warmup: int) -> CapturedStep:
    """The training step replayed from CUDA graphs: one graph for the whole step, or, where
    the gradients are averaged after the backward pass by a library that cannot be recorded
    (Horovod's background thread), a graph up to the gradients, ``average``, and a graph for
    the update. Warm-up and recording run before the first epoch on the first images, and
    every tensor of ``state`` (weights, optimizer variables) is put back afterwards, so
    training sees each batch once, as eagerly. The step then only copies its batch's image
    indices into the index tensor the graphs read."""
    device = parameters[0].device
    picked = torch.arange(batch_size, device=device)
    step: Callable[[], Any]
    if average is None:
        def whole_step() -> Any:
            metrics, gradients = forward_backward(picked)
            apply(gradients)
            return metrics

        step = _Recording(torch, whole_step, warmup)
        phases: tuple[tuple[str, Callable[[], Any]], ...] = (("step", step),)
    else:
        # the gradients leave the first graph as one flat buffer and come back averaged into
        # another, so the library makes one all-reduce of one tensor per step, with no
        # per-tensor negotiation or fusion-buffer copies. On the workshop CNN (4 x H200) a
        # Horovod step still spends ~1.4 ms beyond the 1-GPU step either way: the epoch went
        # from 0.50 s (one tensor per variable) to 0.45 s, the rest is Horovod's hand-off.
        flat, averaged_flat = (torch.zeros(sum(p.numel() for p in parameters),
                                           dtype=parameters[0].dtype, device=device)
                               for _ in range(2))
        averaged = list(_views(averaged_flat, parameters))
        outgoing = list(_views(flat, parameters))

        def gradients_out() -> Any:
            metrics, gradients = forward_backward(picked)
            torch._foreach_copy_(outgoing, gradients)
            return metrics

        first = _Recording(torch, gradients_out, warmup)
        second = _Recording(torch, lambda: apply(averaged), warmup)

        def exchange() -> None:
            averaged_flat.copy_(average([flat])[0])

        def split_step() -> Any:
            metrics = first()
            exchange()
            second()
            return metrics

        step = split_step
        phases = (("forward-backward", first), ("all-reduce", exchange), ("update", second))

    constants: dict[tuple[object, ...], Any] = {}
    pinned: list[Any] = []
    # state put back also where recording failed and training goes on eagerly
    with _state_kept(torch, state), _constants_kept_on_device(torch, constants, pinned):
        for _ in range(warmup + 1):
            step()

    def select(indices: Any, graph_inputs: tuple[Any, ...] = (constants, pinned)) -> None:
        # graph_inputs: kept alive as long as the step, since the graphs read them
        if isinstance(indices, slice):
            indices = torch.arange(indices.start, indices.stop, device=device)
        picked.copy_(indices)

    def replayed(indices: Any) -> Any:
        select(indices)
        return step()

    return CapturedStep(replayed, phases, select)


def timed_phases(torch: Any, captured: CapturedStep, picks: Iterator[Any], steps: int) -> str:
    """The captured step's time, phase by phase, over ``steps`` more steps (batches from
    ``picks``), as text: the wall time a step and each phase's time on the GPU (CUDA events
    on the step's stream; a phase waiting on another library, Horovod's all-reduce, counts
    from the previous phase's end to its own), the rest being the GPU idle between steps,
    waiting for the host. Medians over the steps. Every rank must call it (a phase may be a
    collective); the caller undoes the steps' updates."""
    marks = [[torch.cuda.Event(enable_timing=True) for _ in range(len(captured.phases) + 1)]
             for _ in range(steps)]
    torch.cuda.synchronize()
    started = time.perf_counter()
    for events, indices in zip(marks, picks, strict=False):
        captured.select(indices)
        events[0].record()
        for (_, work), event in zip(captured.phases, events[1:], strict=True):
            work()
            event.record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - started) * 1000 / steps
    parts = [(name, statistics.median(events[i].elapsed_time(events[i + 1]) for events in marks))
             for i, (name, _) in enumerate(captured.phases)]
    on_gpu = " + ".join(f"{name} {ms:.3f}" for name, ms in parts)
    idle = wall - sum(ms for _, ms in parts)
    return (f"a step timed phase by phase over {steps} more steps (undone): {wall:.3f} ms = "
            f"{on_gpu} ms on the GPU + {max(idle, 0.0):.3f} ms waiting for the host")


@contextmanager
def _state_kept(torch: Any, state: list[Any], generator: bool = False) -> Iterator[None]:
    """Every tensor of ``state`` (and, with ``generator``, torch's CPU random state) put back
    as it was when the block ends, however it ends: steps run before training (warm-up,
    recording, compiling) leave no trace in what training sees."""
    saved = [tensor.detach().clone() for tensor in state]
    random_state = torch.get_rng_state() if generator else None
    try:
        yield
    finally:
        with torch.no_grad():
            for tensor, value in zip(state, saved, strict=True):
                tensor.copy_(value)
        if random_state is not None:
            torch.set_rng_state(random_state)


def _views(flat: Any, like: list[Any]) -> Iterator[Any]:
    """Views of consecutive pieces of the 1-D ``flat``, shaped as each tensor of ``like``."""
    start = 0
    for tensor in like:
        yield flat[start:start + tensor.numel()].view(tensor.shape)
        start += tensor.numel()


def _summary_writer(output_dir: str) -> Any:
    """TensorBoard's writer through ``torch.utils.tensorboard`` (needs the tensorboard package,
    checked before training by :func:`accelml.dl.common.require_tensorboard`). TensorBoard
    writes through TensorFlow wherever it is installed; where nothing has imported TensorFlow
    the writer is made without it, so TensorBoard writes the same event files through its own
    stub (TensorFlow would cost each rank ~5 CPU-s and its memory)."""
    with skipped_imports(["tensorflow"]):
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(os.path.join(output_dir, "tensorboard"))


def _write_summaries(summaries: Any, config: TrainingConfig, model: Any,
                     record: EpochRecord) -> None:
    summaries.add_scalar("epoch_loss", record.loss, record.epoch)
    summaries.add_scalar("epoch_accuracy", record.accuracy, record.epoch)
    summaries.add_scalar("learning_rate", record.learning_rate, record.epoch)
    if config.histogram_freq and record.epoch % config.histogram_freq == 0:
        for weight in model.weights:
            summaries.add_histogram(weight.path, np.asarray(weight.numpy()), record.epoch)
    summaries.flush()
