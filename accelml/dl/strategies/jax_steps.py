"""``jax-dataparallel`` and ``jax-pmean``: Keras 3 on JAX, with an input path that keeps devices fed.

For machines with JAX but no TensorFlow: nothing here imports TensorFlow (unless TensorBoard
logs are asked for). ``model.fit`` on JAX feeds each batch from the host and scales poorly
over several GPUs, so training runs as a stateless jitted step
(``model.stateless_call`` + ``optimizer.stateless_apply``) over data that already lives on the
devices: the uint8 training images are split once into one block per device; each step every
device takes its batch from its own block by a per-epoch permutation, converts it to float
(and resizes, e.g. CIFAR-10 to 128x128) inside the compiled step.

``jax-dataparallel``: ``keras.distribution.DataParallel`` over the devices; one jitted program
over the global batch sharded along its first axis. XLA inserts the gradient all-reduce;
BatchNorm statistics are computed over the global batch.

``jax-pmean``: the step runs per device under ``jax.shard_map`` and its one collective is the
``lax.pmean`` of the gradients (Horovod semantics: batch statistics are per device). Each
device keeps its own BatchNorm moving averages and metric totals through the epoch; the
moving averages are averaged across devices at the end of each epoch, which gives the same
values as averaging them every step, since they are linear in the batch statistics, and
takes that collective out of the step (``benchmarks/bench_jax_step.py`` measures it).
Dropout draws the same masks on every device (the seed state is replicated). How the
gradients are averaged is the training keys ``gradient_reduction`` (one all-reduce per
variable, buckets in backward order, or reduce-scatter with a sharded update: see
:data:`GRADIENT_REDUCTIONS`) and ``gradient_reduce_dtype`` (float32 or bfloat16 on the wire).
:func:`build_device_step` builds that step; the benchmarks call it too.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from accelml.cases import Expectation
from accelml.dl.common import (
    Clock,
    EpochLog,
    files_under,
    learning_rate_value,
    make_learning_rate,
    make_optimizer,
    require_tensorboard,
    save_model,
    seed_keras,
    versions,
    weights_digest,
)
from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engine_objects import KerasModel, KerasOptimizer
from accelml.dl.engines import jax_deterministic_environment, probe_jax, probe_keras, requirements
from accelml.dl.models import batchnorm_momentum, build_model
from accelml.dl.pipelines import steps_per_epoch
from accelml.dl.strategies import ALLREDUCE, AUTO, FLOAT32, Determinism, Strategy
from accelml.dl.turns import EpochGate
from accelml.errors import SpecError, UnavailableError

if TYPE_CHECKING:
    from jax import Array, Device
    from jax.sharding import Mesh

    State: TypeAlias = tuple[list[Array], list[Array], list[Array]]
    """The training state: trainable, non-trainable and optimizer variables."""
    Loss: TypeAlias = Callable[[Array, Array], Array]
    """A Keras loss: ``loss(labels, predictions)``."""


def _devices(jax: ModuleType, config: TrainingConfig) -> list[Device]:
    platform = "gpu" if config.device == "gpu" else "cpu"
    try:
        devices = jax.devices(platform)
    except RuntimeError as error:
        raise UnavailableError(f"JAX has no {platform} devices: {error}") from None
    if len(devices) < config.ranks:
        hint = (" (on CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N; "
                "accelml.dl.launch sets it)" if platform == "cpu" else "")
        raise UnavailableError(f"{config.ranks} {platform} devices asked for, JAX sees "
                               f"{len(devices)}{hint}")
    chosen: list[Device] = devices[:config.ranks]
    return chosen


REDUCE_DTYPES = (FLOAT32, "bfloat16")
BUCKETS = "buckets"
REDUCE_SCATTER = "reduce-scatter"
NO_REDUCTION = "none"
GRADIENT_REDUCTIONS = (ALLREDUCE, BUCKETS, REDUCE_SCATTER)
"""How ``jax-pmean`` averages gradients (training key ``gradient_reduction``).

``allreduce``: one mean per variable (XLA's combiner merges them); ``buckets``: the gradients
in backward order (last layer first), flattened into buckets of ``gradient_bucket_mb``, one
all-reduce per bucket, so that a bucket can travel while the backward pass still computes the
next; ``reduce-scatter`` (ZeRO style): each bucket is reduce-scattered, every device updates
its 1/N share of each variable with its 1/N of the optimizer state and keeps only its shares;
the next step starts by all-gathering the weights, bucket by bucket in forward order, which
can overlap the forward pass. ``none`` (benchmarks only) averages nothing: the floor that no reduction beats.
"""


@dataclass(frozen=True)
class StepOptions:
    """How the per-device step (``jax-pmean``) averages across devices.

    ``reduction``: one of :data:`GRADIENT_REDUCTIONS` or ``none``; ``reduce_dtype``: the
    dtype gradients travel in (averaged in float32 again on arrival); ``bucket_mb``: bucket
    size of ``buckets`` and ``reduce-scatter``; ``moving_each_step``: average BatchNorm moving
    statistics and metric totals every step, not once per epoch (same result, one more
    collective per step; benchmarks measure its cost).

    >>> options = StepOptions.of(TrainingConfig(strategy="jax-pmean", gradient_bucket_mb=4,
    ...                                         gradient_reduction="buckets"))
    >>> options.reduction, options.bucket_bytes, options.xla_flags[0]
    ('buckets', 4194304, '--xla_gpu_all_reduce_combine_threshold_bytes=4194304')
    >>> StepOptions(reduce_dtype="float16")
    Traceback (most recent call last):
    accelml.errors.SpecError: gradient reduce dtype must be one of float32, bfloat16, not 'float16'
    """

    reduction: str = ALLREDUCE
    reduce_dtype: str = FLOAT32
    bucket_mb: float = 25.0
    moving_each_step: bool = False

    def __post_init__(self) -> None:
        if self.reduction not in GRADIENT_REDUCTIONS + (NO_REDUCTION,):
            raise SpecError(f"gradient reduction must be one of "
                            f"{', '.join(GRADIENT_REDUCTIONS + (NO_REDUCTION,))}, "
                            f"not {self.reduction!r}")
        if self.reduce_dtype not in REDUCE_DTYPES:
            raise SpecError(f"gradient reduce dtype must be one of {', '.join(REDUCE_DTYPES)}, "
                            f"not {self.reduce_dtype!r}")
        if not self.bucket_mb > 0:
            raise SpecError(f"gradient bucket size must be > 0 MB, not {self.bucket_mb!r}")

    @classmethod
    def of(cls, config: TrainingConfig, gradient_bytes: int | None = None) -> StepOptions:
        """The options a training config asks for; ``auto`` keys resolved by
        :func:`chosen_reduction` for ``gradient_bytes`` of float32 gradients (None: before
        the model is built, where ``auto`` reads as ``buckets``, the path whose XLA flags
        must be set first).

        >>> config = TrainingConfig(strategy="jax-pmean", ranks=4)
        >>> StepOptions.of(config, gradient_bytes=94 * 2**20).reduction
        'buckets'
        >>> StepOptions.of(config, gradient_bytes=2**20).reduction
        'allreduce'
        """
        reduction, dtype = config.gradient_reduction, config.gradient_reduce_dtype
        if reduction == AUTO:
            reduction = (BUCKETS if gradient_bytes is None
                         else chosen_reduction(config, gradient_bytes))
        return cls(reduction, FLOAT32 if dtype == AUTO else dtype, config.gradient_bucket_mb)

    def describe(self, config: TrainingConfig, gradient_bytes: int) -> str:
        """The gradient reduction as :attr:`TrainingResult.path` gives it."""
        how = {ALLREDUCE: "one all-reduce", BUCKETS: f"buckets of {self.bucket_mb:g} MB",
               REDUCE_SCATTER: f"reduce-scatter in buckets of {self.bucket_mb:g} MB",
               NO_REDUCTION: "none"}[self.reduction]
        picked = [key for key in ("gradient_reduction", "gradient_reduce_dtype")
                  if getattr(config, key) == AUTO]
        why = (f" (auto: {gradient_bytes / 2**20:.1f} MB of gradients, {config.ranks} "
               f"device{'s' if config.ranks > 1 else ''})" if picked else "")
        return f"gradients: {how}, {self.reduce_dtype}{why}"

    @property
    def bucket_bytes(self) -> int:
        return int(self.bucket_mb * 2**20)

    @property
    def xla_flags(self) -> tuple[str, ...]:
        """XLA (GPU) flags the reduction needs: with buckets, XLA's combiners may merge no
        more than a bucket, or they would join buckets again into one late collective."""
        if self.reduction not in (BUCKETS, REDUCE_SCATTER):
            return ()
        return tuple(f"--xla_gpu_{kind}_combine_threshold_bytes={self.bucket_bytes}"
                     for kind in ("all_reduce", "reduce_scatter", "all_gather"))


BUCKETS_FROM = 2
"""``auto`` reduces in buckets from this many buckets' worth of gradients on: measured on
4 x H200, ResNet50V2 (94 MB) reaches 0.975 efficiency in 25 MB buckets against 0.875 with one
all-reduce, while the workshop CNN (1.7 MB, one bucket) gets nothing from buckets but their
cost (0.374 s an epoch against 0.215 s on one GPU)."""


def chosen_reduction(config: TrainingConfig, gradient_bytes: int) -> str:
    """How ``auto`` averages ``gradient_bytes`` of gradients: one all-reduce on one device or
    for gradients that fill fewer than :data:`BUCKETS_FROM` buckets, buckets otherwise.

    >>> config = TrainingConfig(strategy="jax-pmean", ranks=2, gradient_bucket_mb=25)
    >>> chosen_reduction(config, 94 * 2**20), chosen_reduction(config, 30 * 2**20)
    ('buckets', 'allreduce')
    >>> chosen_reduction(config.replace(ranks=1), 94 * 2**20)
    'allreduce'
    """
    if config.ranks == 1 or gradient_bytes < BUCKETS_FROM * config.gradient_bucket_mb * 2**20:
        return ALLREDUCE
    return BUCKETS


DISPATCH_FLOPS = 2e11
"""Work one dispatch should carry at least: ``auto`` runs ``DISPATCH_FLOPS / step FLOPs``
steps per dispatch (XLA's cost analysis of the compiled step). A ResNet50V2 step at batch 256
(~1e12 FLOPs, 14 ms on an H200) stays one step per dispatch; the workshop CNN's (1.9e8 FLOPs by
that analysis, so its whole epoch runs in one dispatch) took 0.26 ms one step per dispatch on
one H200 and 0.95 ms on four, bound by the host's dispatch, against 0.20 and 0.27 ms now."""


def steps_per_dispatch(config: TrainingConfig, step_flops: float | None, steps: int) -> int:
    """Steps one dispatch runs: ``steps_per_execution`` where set, else enough steps for
    :data:`DISPATCH_FLOPS`, spread evenly over the epoch's ``steps``, on GPUs (on XLA's CPU
    devices the workshop CNN ran 13x slower as a loop of 32 steps than step by step).

    >>> config = TrainingConfig(strategy="jax-pmean", device="gpu")
    >>> steps_per_dispatch(config, 1.9e8, 937), steps_per_dispatch(config, 1.6e9, 938)
    (937, 118)
    >>> steps_per_dispatch(config, 1e12, 256)
    1
    >>> steps_per_dispatch(config.replace(steps_per_execution=50), None, 20)
    20
    >>> steps_per_dispatch(config.replace(device="cpu"), 1.6e9, 938)
    1
    """
    if config.steps_per_execution is not None:
        return min(config.steps_per_execution, steps)
    if config.device != "gpu" or not step_flops or step_flops <= 0:
        return 1
    most = max(1, min(steps, int(DISPATCH_FLOPS // step_flops)))
    dispatches = -(-steps // most)
    return -(-steps // dispatches)


def gradient_buckets(sizes: Sequence[int], itemsize: int, bucket_bytes: int) -> list[list[int]]:
    """Indices of variables of ``sizes`` elements in backward order (last first), grouped into
    buckets that close once they hold ``bucket_bytes`` (the last one may hold less).

    >>> gradient_buckets([10, 10, 30, 5], itemsize=4, bucket_bytes=80)
    [[3, 2], [1, 0]]
    >>> gradient_buckets([10, 10, 30, 5], itemsize=2, bucket_bytes=10**6)
    [[3, 2, 1, 0]]
    """
    buckets: list[list[int]] = [[]]
    filled = 0
    for index in reversed(range(len(sizes))):
        if filled >= bucket_bytes:
            buckets.append([])
            filled = 0
        buckets[-1].append(index)
        filled += sizes[index] * itemsize
    return [bucket for bucket in buckets if bucket]


def make_preprocess(image_size: int | None) -> Callable[[Array], Array]:
    """uint8 images to float in [0, 1], resized to ``image_size`` (None: as they are), inside
    the compiled step."""
    import jax
    import jax.numpy as jnp

    def preprocess(images: Array) -> Array:
        images = images.astype(jnp.float32) / 255.0
        if image_size:
            images = jax.image.resize(images, (images.shape[0], image_size, image_size,
                                               images.shape[3]), "bilinear")
        return images

    return preprocess


def _take_batch(x_block: Array, y_block: Array, order: Array, step: Array,
                batch: int) -> tuple[Array, Array]:
    """Batch ``step`` of one device's block, in the epoch's ``order``."""
    import jax
    import jax.numpy as jnp

    index = jax.lax.dynamic_slice_in_dim(order, step * batch, batch)
    return jnp.take(x_block, index, axis=0), jnp.take(y_block, index, axis=0)


def _gradients(model: KerasModel, loss_fn: Loss, trainable: list[Array],
               non_trainable: list[Array], images: Array,
               labels: Array) -> tuple[tuple[Array, tuple[Array, list[Array]]], list[Array]]:
    """(loss, (predictions, updated non-trainable variables)), gradients of the trainable."""
    import jax

    def loss_of(trainable: list[Array]) -> tuple[Array, tuple[Array, list[Array]]]:
        predictions, updated = model.stateless_call(trainable, non_trainable, images,
                                                    training=True)
        return loss_fn(labels, predictions), (predictions, updated)

    result: tuple[tuple[Array, tuple[Array, list[Array]]], list[Array]] = (
        jax.value_and_grad(loss_of, has_aux=True)(trainable))
    return result


def _totals(loss: Array, predictions: Array, labels: Array) -> Array:
    """A batch's (loss x count, hits, count), summed into an epoch's totals."""
    import jax.numpy as jnp

    hits = jnp.sum(jnp.argmax(predictions, -1) == labels).astype(jnp.float32)
    count = jnp.float32(labels.shape[0])
    return jnp.stack([loss.astype(jnp.float32) * count, hits, count])


StepFunction: TypeAlias = Callable[["State", "Array", "Array", "Array", "Array", "Array"],
                                   tuple["State", "Array"]]
"""``step(state, totals, x_blocks, y_blocks, orders, step_number) -> (state, totals)``."""


@dataclass(frozen=True)
class DeviceStep:
    """The per-device training step of ``jax-pmean``, built by :func:`build_device_step`.

    ``step`` trains one batch on every device; ``state`` is the first state (the model's and
    the optimizer's current values, in the step's layout: non-trainable variables one row per
    device; under ``reduce-scatter`` the optimizer state split across the devices).
    ``steps(count)`` is the program that trains ``count`` batches in one dispatch (a loop on
    the devices; ``steps(1)`` is ``step``), from the step number it is given.
    ``shared(state)`` is one copy of every model and ``optimizer`` variable in its own shape
    (for storing; after ``average_moving`` all devices agree); ``average_moving(state)``
    averages the BatchNorm moving statistics across the devices; ``device_copies(state)``
    has every model variable as (devices, *shape), each device's row the copy that device
    trains with (under ``reduce-scatter``: the one it gathers).
    """

    optimizer: KerasOptimizer
    step: StepFunction
    state: State
    shared: Callable[[State], State]
    average_moving: Callable[[State], State]
    device_copies: Callable[[State], State]
    steps: Callable[[int], StepFunction]


def build_device_step(model: KerasModel, new_optimizer: Callable[[], KerasOptimizer],
                      loss_fn: Loss, mesh: Mesh, batch: int,
                      preprocess: Callable[[Array], Array],
                      options: StepOptions) -> DeviceStep:
    """The jitted per-device step (under ``jax.shard_map`` over ``mesh``'s one axis) that
    averages gradients as ``options`` say; ``new_optimizer()`` makes an unbuilt optimizer
    (twice under ``reduce-scatter``: once for the model, once for the devices' shares).
    ``batch`` is per device; the step takes it from each device's block of uint8 images."""
    import jax
    import jax.numpy as jnp
    import keras
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    axis = mesh.axis_names[0]
    ranks = int(mesh.devices.size)
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P(axis))
    optimizer = new_optimizer()
    optimizer.build(model.trainable_variables)
    variables = list(model.trainable_variables)
    shapes = [tuple(v.shape) for v in variables]
    sizes = [int(np.prod(shape)) for shape in shapes]
    shards = [-(-size // ranks) for size in sizes]
    travel = jnp.dtype(options.reduce_dtype)
    buckets = gradient_buckets(sizes, travel.itemsize, options.bucket_bytes)
    floating = [jnp.issubdtype(v.dtype, jnp.floating) for v in model.non_trainable_variables]
    sharded = options.reduction == REDUCE_SCATTER

    updater = optimizer
    if sharded:
        updater = new_optimizer()
        updater.build([keras.Variable(np.zeros(shard, v.dtype), dtype=v.dtype,
                                      name=f"share_{i}")
                       for i, (v, shard) in enumerate(zip(variables, shards, strict=True))])
    # under reduce-scatter the slot variables (1-D, one share per device) are split; the
    # optimizer's own scalars (step count, rate) are replicated
    split_slots = [sharded and len(v.shape) > 0 for v in updater.variables]
    optimizer_specs = [P(axis) if s else P() for s in split_slots]

    def travelling(gradient: Array) -> Array:
        return gradient.astype(travel)

    def arrived(total: Array, like: Array) -> Array:
        return (total.astype(jnp.float32) / ranks).astype(like.dtype)

    def all_reduced(grads: list[Array]) -> list[Array]:
        if options.reduction == NO_REDUCTION:
            return grads
        if options.reduction == ALLREDUCE:
            if travel == jnp.float32:
                mean: list[Array] = jax.lax.pmean(grads, axis)
                return mean
            return [arrived(jax.lax.psum(travelling(g), axis), g) for g in grads]
        reduced = list(grads)
        for bucket in buckets:
            flat = jax.lax.psum(jnp.concatenate([travelling(grads[i]).ravel()
                                                 for i in bucket]), axis)
            pieces = jnp.split(flat, np.cumsum([sizes[i] for i in bucket])[:-1])
            for i, piece in zip(bucket, pieces, strict=True):
                reduced[i] = arrived(piece, grads[i]).reshape(shapes[i])
        return reduced

    def padded(value: Array, index: int) -> Array:
        """A variable flattened and padded to ``ranks`` equal shares, one row each."""
        flat = value.ravel()
        return jnp.pad(flat, (0, ranks * shards[index] - sizes[index])).reshape(
            ranks, shards[index])

    def gathered(shares: list[Array]) -> list[Array]:
        """Every variable whole again from the devices' shares, one all-gather per bucket."""
        whole = list(shares)
        for bucket in reversed(buckets):        # forward order: the first layers first
            mine = jnp.concatenate([shares[i] for i in bucket])
            rows = jax.lax.all_gather(mine, axis, axis=0, tiled=False)
            columns = jnp.split(rows, np.cumsum([shards[i] for i in bucket])[:-1], axis=1)
            for i, column in zip(bucket, columns, strict=True):
                whole[i] = column.ravel()[:sizes[i]].reshape(shapes[i])
        return whole

    def sharded_update(shares: list[Array], grads: list[Array],
                       optimizer_vars: list[Array]) -> tuple[list[Array], list[Array]]:
        grad_shares: list[Array] = list(grads)
        for bucket in buckets:
            rows = jnp.concatenate([padded(travelling(grads[i]), i) for i in bucket], axis=1)
            mine = jax.lax.psum_scatter(rows, axis, scatter_dimension=0, tiled=True)[0]
            pieces = jnp.split(mine, np.cumsum([shards[i] for i in bucket])[:-1])
            for i, piece in zip(bucket, pieces, strict=True):
                grad_shares[i] = arrived(piece, grads[i])
        shares, optimizer_vars = updater.stateless_apply(optimizer_vars, grad_shares, shares)
        return shares, optimizer_vars

    def device_step(state: State, totals: Array, x_block: Array, y_block: Array, order: Array,
                    step: Array) -> tuple[State, Array]:
        trainable, non_trainable, optimizer_vars = state
        images, labels = _take_batch(x_block[0], y_block[0], order[0], step, batch)
        (loss, (predictions, updated)), grads = _gradients(
            model, loss_fn, gathered(trainable) if sharded else trainable,
            [v[0] for v in non_trainable], preprocess(images), labels)
        step_totals = _totals(loss, predictions, labels)
        if options.moving_each_step:
            moving = jax.lax.pmean([v for v, f in zip(updated, floating, strict=True) if f],
                                   axis)[::-1]
            updated = [moving.pop() if f else v for v, f in zip(updated, floating, strict=True)]
            step_totals = jax.lax.psum(step_totals, axis) / ranks
        if sharded:
            trainable, optimizer_vars = sharded_update(trainable, grads, optimizer_vars)
        else:
            trainable, optimizer_vars = updater.stateless_apply(optimizer_vars,
                                                                all_reduced(grads), trainable)
        return (trainable, [v[None] for v in updated], optimizer_vars), totals + step_totals[None]

    # non-trainable variables carry one copy per device: (ranks, *shape), split; under
    # reduce-scatter the weights are their devices' shares, gathered as a step starts (so
    # the gather can overlap the forward pass), each (ranks * share,) split
    weight_spec = P(axis) if sharded else P()
    state_specs = (weight_spec, P(axis), optimizer_specs)

    def device_steps(count: int) -> Callable[..., tuple[State, Array]]:
        if count == 1:
            return device_step

        def steps(state: State, totals: Array, x_block: Array, y_block: Array, order: Array,
                  first: Array) -> tuple[State, Array]:
            def body(i: Array, carry: tuple[State, Array]) -> tuple[State, Array]:
                return device_step(*carry, x_block, y_block, order, first + i)

            done: tuple[State, Array] = jax.lax.fori_loop(0, count, body, (state, totals))
            return done
        return steps

    @functools.cache
    def steps_of(count: int) -> StepFunction:
        program: StepFunction = jax.jit(jax.shard_map(
            device_steps(count), mesh=mesh,
            in_specs=(state_specs, P(axis), P(axis), P(axis), P(axis), P()),
            out_specs=(state_specs, P(axis)), check_vma=False), donate_argnums=(0, 1))
        return program

    step = steps_of(1)
    average = jax.jit(jax.shard_map(
        lambda values: [jax.lax.pmean(v, axis) if f else v
                        for v, f in zip(values, floating, strict=True)],
        mesh=mesh, in_specs=(P(axis),), out_specs=P(axis), check_vma=False))

    def average_moving(state: State) -> State:
        return state[0], average(state[1]), state[2]

    own_copies = jax.jit(jax.shard_map(
        lambda weights: [v[None] for v in (gathered(weights) if sharded else weights)],
        mesh=mesh, in_specs=(weight_spec,), out_specs=P(axis), check_vma=False))

    def device_copies(state: State) -> State:
        return own_copies(state[0]), state[1], state[2]

    def flat_shares(value: np.ndarray, index: int) -> np.ndarray:
        return np.pad(value.ravel(), (0, ranks * shards[index] - sizes[index]))

    # host copies: the step donates its state, which must not take the model's own buffers
    state: State = (
        jax.device_put([flat_shares(np.asarray(v.value), i) if sharded else np.asarray(v.value)
                        for i, v in enumerate(variables)], split if sharded else replicated),
        jax.device_put([np.stack([np.asarray(v.value)] * ranks)
                        for v in model.non_trainable_variables], split),
        [jax.device_put(np.concatenate([np.asarray(v.value)] * ranks) if s
                        else np.asarray(v.value), split if s else replicated)
         for v, s in zip(updater.variables, split_slots, strict=True)])

    def shared(state: State) -> State:
        optimizer_values = [value.reshape(-1)[:int(np.prod(v.shape))].reshape(v.shape)
                            if s else value
                            for v, value, s in zip(optimizer.variables, state[2], split_slots,
                                                   strict=True)]
        weights = ([value[:size].reshape(shape) for value, size, shape in
                    zip(state[0], sizes, shapes, strict=True)] if sharded else state[0])
        return weights, [v[0] for v in state[1]], optimizer_values

    return DeviceStep(optimizer, step, state, shared, average_moving, device_copies, steps_of)


def train(config: TrainingConfig, data: ImageData) -> TrainingResult:
    clock = Clock()
    require_tensorboard(config)
    if config.precision == "mixed_float16":
        raise SpecError("jax strategies take precision 'mixed_bfloat16' or 'float32', "
                        "not 'mixed_float16' (no loss scaling in the stateless step)")
    per_device = config.strategy == "jax-pmean"
    options = StepOptions.of(config)
    if config.device == "gpu":
        set_gpu_xla_flags(options)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as error:
        raise UnavailableError(f"jax does not import: {error}") from None
    import keras
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    if keras.backend.backend() != "jax":
        raise UnavailableError(f"Keras runs on {keras.backend.backend()}; set KERAS_BACKEND=jax "
                               "(accelml.dl.launch does)")
    devices = _devices(jax, config)
    ranks = len(devices)
    mesh = Mesh(np.array(devices), ("batch",))
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
    keras.distribution.set_distribution(
        None if per_device else keras.distribution.DataParallel(devices=devices))
    keras.mixed_precision.set_global_policy(config.precision)
    seed_keras(keras, config.seed)

    image_size = config.image_size if data.name != "generated" else None
    channels = data.image_shape[2]
    shape = (image_size, image_size, channels) if image_size else data.image_shape
    model = build_model(config.model, keras, shape, data.classes, **config.model_arguments)
    batch = config.batch_size
    steps = steps_per_epoch(len(data.x_train), ranks, batch, config.steps_per_epoch)
    learning_rate = make_learning_rate(keras, keras.ops, config, steps)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    preprocess = make_preprocess(image_size)

    block = len(data.x_train) // ranks
    x_blocks = np.stack([data.x_train[i::ranks][:block] for i in range(ranks)])
    y_blocks = np.stack([data.y_train[i::ranks][:block] for i in range(ranks)])
    x_dev = jax.device_put(x_blocks, split)
    y_dev = jax.device_put(y_blocks.astype(np.int32), split)

    step_fn: StepFunction
    totals_shape: tuple[int, ...]
    step_numbers = [jax.device_put(np.int32(s), replicated) for s in range(steps)]
    per_dispatch = 1
    gradient_bytes = 4 * sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    if per_device:
        options = StepOptions.of(config, gradient_bytes)
        program = build_device_step(
            model, functools.partial(make_optimizer, keras, config, learning_rate), loss_fn,
            mesh, batch, preprocess, options)
        optimizer, state = program.optimizer, program.state
        totals_shape, totals_sharding = (ranks, 3), split
        one_step = program.step.lower(  # type: ignore[attr-defined]
            state, jax.device_put(np.zeros(totals_shape, np.float32), totals_sharding),
            x_dev, y_dev, jax.device_put(np.zeros((ranks, block), np.int32), split),
            step_numbers[0]).compile()
        step_flops = _flops(one_step)
        per_dispatch = steps_per_dispatch(config, step_flops, steps)
        step_fn = one_step if per_dispatch == 1 else program.steps(per_dispatch)
        dispatch_why = ("asked" if config.steps_per_execution is not None else
                        "auto: one on CPUs" if config.device != "gpu" else
                        f"auto: {step_flops:.2g} FLOPs a step" if step_flops else
                        "auto: no cost analysis")
        path = (f"{per_dispatch} step{'s' if per_dispatch > 1 else ''} per dispatch "
                f"({dispatch_why}); {options.describe(config, gradient_bytes)}")
    else:
        optimizer = make_optimizer(keras, config, learning_rate)
        optimizer.build(model.trainable_variables)
        gather = jax.jit(jax.shard_map(
            lambda x, y, order, step: _take_batch(x[0], y[0], order[0], step, batch),
            mesh=mesh, in_specs=(P("batch"), P("batch"), P("batch"), P()),
            out_specs=(P("batch"), P("batch")), check_vma=False))

        def global_step(state: State, totals: Array, images: Array,
                        labels: Array) -> tuple[State, Array]:
            trainable, non_trainable, optimizer_vars = state
            (loss, (predictions, non_trainable)), grads = _gradients(
                model, loss_fn, trainable, non_trainable, preprocess(images), labels)
            trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads,
                                                                  trainable)
            return ((trainable, non_trainable, optimizer_vars),
                    totals + _totals(loss, predictions, labels))

        jitted = jax.jit(global_step, donate_argnums=(0, 1))

        def gathered_step(state: State, totals: Array, x: Array, y: Array, order: Array,
                          step: Array) -> tuple[State, Array]:
            result: tuple[State, Array] = jitted(state, totals, *gather(x, y, order, step))
            return result

        step_fn = gathered_step
        path = "1 step per dispatch; gradients: one all-reduce inserted by XLA, float32"
        state = (jax.device_put([v.value for v in model.trainable_variables], replicated),
                 jax.device_put([v.value for v in model.non_trainable_variables], replicated),
                 jax.device_put([v.value for v in optimizer.variables], replicated))
        totals_shape, totals_sharding = (3,), replicated

    def shared(state: State) -> State:
        """The state with one copy of each variable (after an epoch all devices agree)."""
        return program.shared(state) if per_device else state
    output_dir = config.output_dir
    log = EpochLog(output_dir)
    summaries = (_summary_writer(os.path.join(output_dir, "tensorboard"))
                 if output_dir is not None and config.tensorboard else None)
    rng = np.random.default_rng(config.seed)
    # XLA's CPU devices (forced host devices) can deadlock in an all-reduce when several
    # steps are queued on a busy machine, so there each step finishes before the next
    in_lockstep = config.device != "gpu" and ranks > 1
    setup_s = clock.seconds()

    records: list[EpochRecord] = []
    gate = EpochGate.from_environment()
    for epoch in range(config.epochs):
        gate.begin(epoch)
        clock = Clock()
        order = jax.device_put(
            np.stack([rng.permutation(block) if config.shuffle else np.arange(block)
                      for _ in range(ranks)]).astype(np.int32), split)
        totals = jax.device_put(np.zeros(totals_shape, np.float32), totals_sharding)
        for first in range(0, steps, per_dispatch):
            count = min(per_dispatch, steps - first)
            run = step_fn if count == per_dispatch else program.steps(count)
            state, totals = run(state, totals, x_dev, y_dev, order, step_numbers[first])
            if in_lockstep:
                jax.block_until_ready(totals)
        if per_device:
            state = program.average_moving(state)
        jax.block_until_ready(state)
        loss_hits_count = np.asarray(totals).reshape(-1, 3).sum(axis=0)
        record = EpochRecord(epoch, clock.seconds(),
                             float(loss_hits_count[0] / loss_hits_count[2]),
                             float(loss_hits_count[1] / loss_hits_count[2]),
                             learning_rate_value(learning_rate, (epoch + 1) * steps - 1),
                             int(loss_hits_count[2]))
        records.append(record)
        if output_dir is not None:
            _store(model, optimizer, shared(state))
            if config.checkpoints:
                directory = os.path.join(output_dir, "checkpoints")
                os.makedirs(directory, exist_ok=True)
                model.save_weights(os.path.join(directory,
                                                f"epoch-{epoch + 1:03d}.weights.h5"))
            if summaries is not None:
                summaries(record)
            log.write(record)
        if config.verbose:
            print(f"epoch {epoch + 1}/{config.epochs}: {record.seconds:.2f}s loss "
                  f"{record.loss:.4f} accuracy {record.accuracy:.4f}", flush=True)
        gate.end(epoch, record.seconds)

    final = shared(state)
    _store(model, optimizer, final)
    test_loss: float | None = None
    test_accuracy: float | None = None
    if len(data.x_test):
        test_loss, test_accuracy = _evaluate(jax, jnp, model, loss_fn, final, data, preprocess,
                                             config.global_batch_size)
    if output_dir is not None and config.save_model:
        save_model(keras, model, output_dir)
    digests = _device_digests(model, program.device_copies(state) if per_device else state,
                              devices, stacked=per_device)
    return TrainingResult(
        strategy=config.strategy, model=config.model, dataset=data.name, ranks=ranks,
        batch_per_rank=batch, global_batch=batch * ranks,
        learning_rate=config.scaled_learning_rate, parameters=int(model.count_params()),
        train_samples=len(data.x_train), test_samples=len(data.x_test), steps_per_epoch=steps,
        epochs=tuple(records), test_loss=test_loss, test_accuracy=test_accuracy,
        weights_digest=digests[0], rank_digests=digests, setup_s=setup_s, data_s=0.0,
        backend="jax", versions=versions("jax", "jaxlib"),
        files=files_under(output_dir),
        devices=tuple(str(d) for d in devices), batchnorm_momentum=batchnorm_momentum(model),
        path=path)


def _flops(compiled: object) -> float | None:
    """The FLOPs of one run of a compiled program by XLA's cost analysis (None: not given)."""
    try:
        analysis = compiled.cost_analysis()  # type: ignore[attr-defined]
    except Exception:      # a backend without cost analysis
        return None
    if isinstance(analysis, list):
        analysis = analysis[0] if analysis else {}
    flops = analysis.get("flops") if isinstance(analysis, dict) else None
    return float(flops) if flops else None


def set_gpu_xla_flags(options: StepOptions) -> None:
    """Let XLA schedule the gradient reduction while the backward pass still runs, and keep
    its combiners from merging buckets (:attr:`StepOptions.xla_flags`).

    Read when JAX first initialises its GPU backend, so it must be set before that; a flag
    the user already put in ``XLA_FLAGS`` is left as it is.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in ("--xla_gpu_enable_latency_hiding_scheduler=true",) + options.xla_flags:
        if flag.partition("=")[0] not in flags:
            flags = (flags + " " + flag).strip()
    os.environ["XLA_FLAGS"] = flags


def _store(model: KerasModel, optimizer: KerasOptimizer, state: State) -> None:
    trainable, non_trainable, optimizer_vars = state
    for variables, values in ((model.trainable_variables, trainable),
                              (model.non_trainable_variables, non_trainable),
                              (optimizer.variables, optimizer_vars)):
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)


def _evaluate(jax: ModuleType, jnp: ModuleType, model: KerasModel, loss_fn: Loss, state: State,
              data: ImageData, preprocess: Callable[[Array], Array],
              batch_size: int) -> tuple[float, float]:
    """Test loss and accuracy over ``data``'s test set, in batches of ``batch_size``."""
    trainable, non_trainable, _ = state

    def loss_sum_and_hits(images: Array, labels: Array) -> tuple[Array, Array]:
        predictions, _ = model.stateless_call(trainable, non_trainable, preprocess(images),
                                              training=False)
        hits = jnp.sum(jnp.argmax(predictions, -1) == labels)
        return loss_fn(labels, predictions) * labels.shape[0], hits

    evaluate = jax.jit(loss_sum_and_hits)

    loss = hits = 0.0
    for start in range(0, len(data.x_test), batch_size):
        part_loss, part_hits = evaluate(data.x_test[start:start + batch_size],
                                        data.y_test[start:start + batch_size].astype(np.int32))
        loss, hits = loss + float(part_loss), hits + float(part_hits)
    return loss / len(data.x_test), hits / len(data.x_test)


def _device_digests(model: KerasModel, state: State, devices: Sequence[Device],
                    stacked: bool = False) -> tuple[str, ...]:
    """One digest per device, over that device's own copy of every weight.

    With ``stacked`` each value is (devices, *shape), split so that each device holds its
    own row (:attr:`DeviceStep.device_copies`).
    """
    trainable, non_trainable, _ = state
    by_id = {id(v): a for v, a in zip(model.trainable_variables, trainable, strict=True)}
    by_id.update({id(v): a for v, a in zip(model.non_trainable_variables, non_trainable, strict=True)})
    digests = []
    for device in devices:
        arrays: list[np.ndarray] = []
        for weight in model.weights:
            value = by_id[id(weight)]
            copy = [s.data for s in value.addressable_shards if s.device == device]
            array = np.asarray(copy[0] if copy else value)
            arrays.append(array[0] if stacked else array)
        digests.append(weights_digest(arrays))
    return tuple(digests)


def _summary_writer(directory: str) -> Callable[[EpochRecord], None]:
    """A function that writes an epoch's loss, accuracy and learning rate as TensorBoard scalars."""
    try:
        import tensorflow as tf
    except ImportError as error:
        raise UnavailableError(f"TensorBoard logs from the jax strategies need TensorFlow "
                               f"for tf.summary ({error}); set tensorboard = false") from None
    writer = tf.summary.create_file_writer(directory)

    def write(record: EpochRecord) -> None:
        with writer.as_default(step=record.epoch):
            tf.summary.scalar("epoch_loss", record.loss)
            tf.summary.scalar("epoch_accuracy", record.accuracy)
            tf.summary.scalar("learning_rate", record.learning_rate)
        writer.flush()

    return write


def jax_rank_environment(config: TrainingConfig) -> dict[str, str]:
    """JAX on the config's device: on CPU, ``ranks`` XLA host devices; on GPU, no up-front
    memory grab (XLA otherwise takes 75% of each GPU, and the recorded peak GPU memory
    would be that, not what the model needs).

    >>> jax_rank_environment(TrainingConfig(strategy="jax-pmean", ranks=2))["JAX_PLATFORMS"]
    'cpu'
    """
    if config.device == "gpu":
        return {"XLA_PYTHON_CLIENT_PREALLOCATE": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE",
                                                                "false")}
    env = {"JAX_PLATFORMS": "cpu"}
    if config.ranks > 1:
        flags = os.environ.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count="
                            f"{config.ranks}").strip()
    return env


_DATA_PARALLEL = Strategy(
    name="jax-dataparallel",
    doc="Keras 3 on JAX, one process: one jitted step over the global batch sharded across "
        "`ranks` devices (keras.distribution.DataParallel; global BatchNorm)",
    keras_backends=("jax",),
    train=train,
    probe=functools.partial(requirements, probe_keras, probe_jax),
    determinism=Determinism(Expectation(True, "seeds and XLA deterministic ops"),
                            environment=jax_deterministic_environment),
    libraries=("keras", "jax", "jaxlib"),
    rank_environment=jax_rank_environment,
)

STRATEGY = (
    _DATA_PARALLEL,
    dataclasses.replace(
        _DATA_PARALLEL, name="jax-pmean",
        doc="Keras 3 on JAX, one process: the step runs per device under jax.shard_map and "
            "averages the gradients (all-reduce, buckets or reduce-scatter; Horovod "
            "semantics; BatchNorm per device)",
        gradient_reductions=GRADIENT_REDUCTIONS, gradient_reduce_dtypes=REDUCE_DTYPES),
)
