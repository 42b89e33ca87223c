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
Dropout draws the same masks on every device (the seed state is replicated).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
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
    versions,
    weights_digest,
)
from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engine_objects import KerasModel, KerasOptimizer
from accelml.dl.engines import jax_deterministic_environment, probe_jax, probe_keras, requirements
from accelml.dl.models import batchnorm_momentum, build_model
from accelml.dl.pipelines import steps_per_epoch
from accelml.dl.strategies import Determinism, Strategy
from accelml.errors import SpecError, UnavailableError

if TYPE_CHECKING:
    from jax import Array, Device

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
    if len(devices) < config.workers:
        hint = (" (on CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N; "
                "accelml.dl.launch sets it)" if platform == "cpu" else "")
        raise UnavailableError(f"{config.workers} {platform} devices asked for, JAX sees "
                               f"{len(devices)}{hint}")
    chosen: list[Device] = devices[:config.workers]
    return chosen


def train(config: TrainingConfig, data: ImageData) -> TrainingResult:
    clock = Clock()
    require_tensorboard(config)
    if config.precision == "mixed_float16":
        raise SpecError("jax strategies take precision 'mixed_bfloat16' or 'float32', "
                        "not 'mixed_float16' (no loss scaling in the stateless step)")
    if config.device == "gpu":
        _overlap_collectives_with_compute()
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
    workers = len(devices)
    mesh = Mesh(np.array(devices), ("batch",))
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
    per_device = config.strategy == "jax-pmean"
    keras.distribution.set_distribution(
        None if per_device else keras.distribution.DataParallel(devices=devices))
    keras.mixed_precision.set_global_policy(config.precision)
    keras.utils.set_random_seed(config.seed)

    image_size = config.image_size if data.name != "generated" else None
    channels = data.image_shape[2]
    shape = (image_size, image_size, channels) if image_size else data.image_shape
    model = build_model(config.model, keras, shape, data.classes, **config.model_arguments)
    batch = config.batch_size
    steps = steps_per_epoch(len(data.x_train), workers, batch, config.steps_per_epoch)
    learning_rate = make_learning_rate(keras, keras.ops, config, steps)
    optimizer = make_optimizer(keras, config, learning_rate)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    block = len(data.x_train) // workers
    x_blocks = np.stack([data.x_train[i::workers][:block] for i in range(workers)])
    y_blocks = np.stack([data.y_train[i::workers][:block] for i in range(workers)])
    x_dev = jax.device_put(x_blocks, split)
    y_dev = jax.device_put(y_blocks.astype(np.int32), split)

    def preprocess(images: Array) -> Array:
        images = images.astype(jnp.float32) / 255.0
        if image_size:
            images = jax.image.resize(images, (images.shape[0], image_size, image_size,
                                               images.shape[3]), "bilinear")
        return images

    def take_batch(x_block: Array, y_block: Array, order: Array, step: Array) -> tuple[Array, Array]:
        index = jax.lax.dynamic_slice_in_dim(order, step * batch, batch)
        return jnp.take(x_block, index, axis=0), jnp.take(y_block, index, axis=0)

    def gradients(trainable: list[Array], non_trainable: list[Array], images: Array,
                  labels: Array) -> tuple[tuple[Array, tuple[Array, list[Array]]], list[Array]]:
        def loss_of(trainable: list[Array],
                    non_trainable: list[Array]) -> tuple[Array, tuple[Array, list[Array]]]:
            predictions, non_trainable = model.stateless_call(trainable, non_trainable, images,
                                                              training=True)
            return loss_fn(labels, predictions), (predictions, non_trainable)
        return jax.value_and_grad(loss_of, has_aux=True)(trainable, non_trainable)

    def totals_of(loss: Array, predictions: Array, labels: Array) -> Array:
        hits = jnp.sum(jnp.argmax(predictions, -1) == labels).astype(jnp.float32)
        count = jnp.float32(labels.shape[0])
        return jnp.stack([loss.astype(jnp.float32) * count, hits, count])

    floating = [jnp.issubdtype(v.dtype, jnp.floating) for v in model.non_trainable_variables]

    step_fn: Callable[[State, Array, Array, Array, Array, Array], tuple[State, Array]]
    if per_device:
        def device_step(state: State, totals: Array, x_block: Array, y_block: Array, order: Array,
                        step: Array) -> tuple[State, Array]:
            trainable, non_trainable, optimizer_vars = state
            images, labels = take_batch(x_block[0], y_block[0], order[0], step)
            (loss, (predictions, updated)), grads = gradients(
                trainable, [v[0] for v in non_trainable], preprocess(images), labels)
            grads = jax.lax.pmean(grads, "batch")
            trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads,
                                                                  trainable)
            totals = totals + totals_of(loss, predictions, labels)[None]
            return (trainable, [v[None] for v in updated], optimizer_vars), totals

        # non-trainable variables carry one copy per device: (workers, *shape), split
        state_specs = (P(), P("batch"), P())
        step_fn = jax.jit(jax.shard_map(
            device_step, mesh=mesh,
            in_specs=(state_specs, P("batch"), P("batch"), P("batch"), P("batch"), P()),
            out_specs=(state_specs, P("batch")), check_vma=False), donate_argnums=(0, 1))
        average_moving = jax.jit(jax.shard_map(
            lambda values: [jax.lax.pmean(v, "batch") if f else v
                            for v, f in zip(values, floating, strict=True)],
            mesh=mesh, in_specs=(P("batch"),), out_specs=P("batch"), check_vma=False))
    else:
        gather = jax.jit(jax.shard_map(
            lambda x, y, order, step: take_batch(x[0], y[0], order[0], step),
            mesh=mesh, in_specs=(P("batch"), P("batch"), P("batch"), P()),
            out_specs=(P("batch"), P("batch")), check_vma=False))

        def global_step(state: State, totals: Array, images: Array,
                        labels: Array) -> tuple[State, Array]:
            trainable, non_trainable, optimizer_vars = state
            (loss, (predictions, non_trainable)), grads = gradients(
                trainable, non_trainable, preprocess(images), labels)
            trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads,
                                                                  trainable)
            return ((trainable, non_trainable, optimizer_vars),
                    totals + totals_of(loss, predictions, labels))

        jitted = jax.jit(global_step, donate_argnums=(0, 1))

        def gathered_step(state: State, totals: Array, x: Array, y: Array, order: Array,
                          step: Array) -> tuple[State, Array]:
            result: tuple[State, Array] = jitted(state, totals, *gather(x, y, order, step))
            return result

        step_fn = gathered_step

    trainable = jax.device_put([v.value for v in model.trainable_variables], replicated)
    optimizer_vars = jax.device_put([v.value for v in optimizer.variables], replicated)
    totals_shape: tuple[int, ...]
    if per_device:
        non_trainable = jax.device_put(
            [np.stack([np.asarray(v.value)] * workers) for v in model.non_trainable_variables],
            split)
        totals_shape, totals_sharding = (workers, 3), split
    else:
        non_trainable = jax.device_put([v.value for v in model.non_trainable_variables],
                                       replicated)
        totals_shape, totals_sharding = (3,), replicated
    state: State = (trainable, non_trainable, optimizer_vars)

    def shared(state: State) -> State:
        """The state with one copy of each variable (after an epoch all devices agree)."""
        if not per_device:
            return state
        return state[0], [v[0] for v in state[1]], state[2]
    output_dir = config.output_dir
    log = EpochLog(output_dir)
    summaries = (_summary_writer(os.path.join(output_dir, "tensorboard"))
                 if output_dir is not None and config.tensorboard else None)
    step_numbers = [jax.device_put(np.int32(s), replicated) for s in range(steps)]
    rng = np.random.default_rng(config.seed)
    # XLA's CPU devices (forced host devices) can deadlock in an all-reduce when several
    # steps are queued on a busy machine, so there each step finishes before the next
    in_lockstep = config.device != "gpu" and workers > 1
    setup_s = clock.seconds()

    records: list[EpochRecord] = []
    for epoch in range(config.epochs):
        clock = Clock()
        order = jax.device_put(
            np.stack([rng.permutation(block) if config.shuffle else np.arange(block)
                      for _ in range(workers)]).astype(np.int32), split)
        totals = jax.device_put(np.zeros(totals_shape, np.float32), totals_sharding)
        for step in range(steps):
            state, totals = step_fn(state, totals, x_dev, y_dev, order, step_numbers[step])
            if in_lockstep:
                jax.block_until_ready(totals)
        if per_device:
            state = (state[0], average_moving(state[1]), state[2])
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

    final = shared(state)
    _store(model, optimizer, final)
    test_loss: float | None = None
    test_accuracy: float | None = None
    if len(data.x_test):
        test_loss, test_accuracy = _evaluate(jax, jnp, model, loss_fn, final, data, preprocess,
                                             config.global_batch_size)
    if output_dir is not None and config.save_model:
        model.save(os.path.join(output_dir, "model.keras"))
    digests = _device_digests(model, state, devices, stacked_non_trainable=per_device)
    return TrainingResult(
        strategy=config.strategy, model=config.model, dataset=data.name, workers=workers,
        batch_per_worker=batch, global_batch=batch * workers,
        learning_rate=config.scaled_learning_rate, parameters=int(model.count_params()),
        train_samples=len(data.x_train), test_samples=len(data.x_test), steps_per_epoch=steps,
        epochs=tuple(records), test_loss=test_loss, test_accuracy=test_accuracy,
        weights_digest=digests[0], rank_digests=digests, setup_s=setup_s, data_s=0.0,
        backend="jax", versions=versions("jax", "jaxlib"),
        files=files_under(output_dir),
        devices=tuple(str(d) for d in devices), batchnorm_momentum=batchnorm_momentum(model))


def _overlap_collectives_with_compute() -> None:
    """Let XLA schedule the gradient all-reduce while the backward pass still runs.

    Read when JAX first initialises its GPU backend, so it must be set before that; a flag
    the user already put in ``XLA_FLAGS`` is left as it is.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_enable_latency_hiding_scheduler" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_enable_latency_hiding_scheduler=true").strip()


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
                    stacked_non_trainable: bool = False) -> tuple[str, ...]:
    """One digest per device, over that device's own copy of every weight.

    With ``stacked_non_trainable`` each non-trainable value is (devices, *shape), split so
    that each device holds its own row.
    """
    trainable, non_trainable, _ = state
    stacked = {id(v) for v in model.non_trainable_variables} if stacked_non_trainable else set()
    by_id = {id(v): a for v, a in zip(model.trainable_variables, trainable, strict=True)}
    by_id.update({id(v): a for v, a in zip(model.non_trainable_variables, non_trainable, strict=True)})
    digests = []
    for device in devices:
        arrays: list[np.ndarray] = []
        for weight in model.weights:
            value = by_id[id(weight)]
            copy = [s.data for s in value.addressable_shards if s.device == device]
            array = np.asarray(copy[0] if copy else value)
            arrays.append(array[0] if id(weight) in stacked else array)
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
    """JAX on the config's device: on CPU, ``workers`` XLA host devices; on GPU, no up-front
    memory grab (XLA otherwise takes 75% of each GPU, and the recorded peak GPU memory
    would be that, not what the model needs).

    >>> jax_rank_environment(TrainingConfig(strategy="jax-pmean", workers=2))["JAX_PLATFORMS"]
    'cpu'
    """
    if config.device == "gpu":
        return {"XLA_PYTHON_CLIENT_PREALLOCATE": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE",
                                                                "false")}
    env = {"JAX_PLATFORMS": "cpu"}
    if config.workers > 1:
        flags = os.environ.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count="
                            f"{config.workers}").strip()
    return env


_DATA_PARALLEL = Strategy(
    name="jax-dataparallel",
    doc="Keras 3 on JAX, one process: one jitted step over the global batch sharded across "
        "`workers` devices (keras.distribution.DataParallel; global BatchNorm)",
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
            "one pmean averages the gradients (Horovod semantics; BatchNorm per device)"),
)
