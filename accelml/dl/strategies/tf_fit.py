"""``single``, ``mirrored`` and ``multiworker``: ``model.fit`` under a tf.distribute strategy.

``single`` and ``mirrored`` run Keras 3 on TensorFlow. ``multiworker`` runs on ``tf_keras``
(``TF_USE_LEGACY_KERAS=1``, set by the launcher): MultiWorkerMirroredStrategy with Keras 3's
``fit`` fails (tensorflow/tensorflow#72388). Its cluster comes from ``TF_CONFIG``
(``launch(..., launcher="local-processes")``) or, inside a SLURM job step, from
``SlurmClusterResolver``. The dataset is batched with the global batch; tf.distribute splits
every batch across the replicas and averages the gradients; BatchNorm moving statistics
(per replica under Keras 3) are averaged across replicas at the end of every epoch, so all
replicas hold one model. Checkpoints, TensorBoard and the
CSV log come from the chief only (non-chief workers of ``multiworker`` write to temporary
directories that are removed, as tf.distribute requires).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from types import ModuleType

import numpy as np

from accelml.cases import Expectation
from accelml.dl.common import (
    Clock,
    EpochLog,
    files_under,
    fit_epoch_callback,
    in_slurm_step,
    make_learning_rate,
    make_optimizer,
    require_tensorboard,
    seed_keras,
    slurm_tasks_per_node,
    versions,
    weights_digest,
)
from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engine_objects import DistributionStrategy, KerasModel
from accelml.dl.engines import (
    installed,
    probe_keras,
    requirements,
    tensorflow_deterministic_environment,
    tensorflow_installed,
)
from accelml.dl.models import batchnorm_momentum, build_model
from accelml.dl.pipelines import evaluation_dataset, steps_per_epoch, train_dataset
from accelml.dl.strategies import (
    LOCAL_PROCESSES,
    SRUN,
    Determinism,
    Listener,
    Strategy,
    tf_devices,
)
from accelml.errors import UnavailableError


def _multiworker_strategy(tf: ModuleType, config: TrainingConfig) -> DistributionStrategy:
    if in_slurm_step():
        tasks_per_node = slurm_tasks_per_node()
        if config.device == "gpu":
            resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
                gpus_per_node=tasks_per_node, gpus_per_task=1)
        else:
            resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
                gpus_per_node=tasks_per_node, gpus_per_task=1, auto_set_gpu=False)
    elif os.environ.get("TF_CONFIG"):
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    else:
        raise UnavailableError("strategy 'multiworker' needs TF_CONFIG or a SLURM job step "
                               "(start it with accelml.dl.launch)")
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)


def train(config: TrainingConfig, data: ImageData) -> TrainingResult:
    clock = Clock()
    require_tensorboard(config)
    import tensorflow as tf

    legacy = config.strategy == "multiworker"
    processes = 1
    if legacy:
        task = 0
        if in_slurm_step():
            task = int(os.environ["SLURM_PROCID"])
            processes = slurm_tasks_per_node()
        elif os.environ.get("TF_CONFIG"):
            task = int(json.loads(os.environ["TF_CONFIG"])["task"]["index"])
            processes = config.ranks
        local_index = int(os.environ.get("SLURM_LOCALID", "0")) if in_slurm_step() else task
        devices = tf_devices.configure(tf, config.device, gpu_index=local_index,
                                       processes_per_host=processes)
        strategy = _multiworker_strategy(tf, config)
        import tf_keras as keras

        ops = tf
        rank = task
    else:
        devices = tf_devices.configure(
            tf, config.device, gpus_wanted=config.ranks,
            logical_cpus=config.ranks if config.strategy == "mirrored" else 0)
        strategy = (tf.distribute.MirroredStrategy(devices) if config.strategy == "mirrored"
                    else tf.distribute.get_strategy())
        import keras

        ops = keras.ops
        rank = 0
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    if strategy.num_replicas_in_sync != config.ranks:
        raise UnavailableError(f"{config.strategy} has {strategy.num_replicas_in_sync} "
                               f"replica(s), the case asks for {config.ranks}")
    tf_devices.set_precision(keras, config.precision)
    seed_keras(keras, config.seed)

    image_size = config.image_size if data.name != "generated" else None
    shape = ((image_size, image_size, data.image_shape[2]) if image_size else data.image_shape)
    steps = steps_per_epoch(len(data.x_train), config.ranks, config.batch_size,
                            config.steps_per_epoch)
    with strategy.scope():
        model = build_model(config.model, keras, shape, data.classes, **config.model_arguments)
        learning_rate = make_learning_rate(keras, ops, config, steps)
        model.compile(optimizer=make_optimizer(keras, config, learning_rate),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    train_data = train_dataset(tf, data.x_train, data.y_train,
                               batch_size=config.global_batch_size, steps=steps,
                               shuffle=config.shuffle, seed=config.seed, cache=config.cache,
                               cache_dir=config.cache_dir and os.path.join(config.cache_dir,
                                                                           f"worker-{rank}"),
                               image_size=image_size, repeat=True)
    if legacy:
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA)
        train_data = train_data.with_options(options)

    chief = rank == 0
    scratch = None
    if config.output_dir is not None and not chief:
        scratch = tempfile.mkdtemp(prefix=f"accelml-worker{rank}-")
    out_dir = config.output_dir if chief else scratch
    records: list[EpochRecord] = []
    log = EpochLog(config.output_dir if chief else None)

    def end_epoch(record: EpochRecord) -> None:
        records.append(record)
        log.write(record)

    def average_moving_statistics(epoch: int, logs: Mapping[str, float]) -> None:
        """Keras 3 BatchNorm under MirroredStrategy updates each replica's moving statistics
        on its own (aggregation NONE), so the replicas drift apart; average them each epoch."""
        for weight in model.non_trainable_weights:
            copies = getattr(weight.value, "values", None)
            if copies and len(copies) > 1 and weight.dtype.startswith("float"):
                mean = tf.add_n([tf.convert_to_tensor(c) for c in copies]) / len(copies)
                for copy in copies:
                    copy.assign(mean)

    epoch_timer = fit_epoch_callback(keras, learning_rate, steps, steps * config.global_batch_size,
                                     end_epoch)
    callbacks = [epoch_timer] if legacy else [
        keras.callbacks.LambdaCallback(on_epoch_end=average_moving_statistics), epoch_timer]
    if out_dir is not None and config.checkpoints:
        os.makedirs(os.path.join(out_dir, "checkpoints"), exist_ok=True)
        callbacks.append(keras.callbacks.ModelCheckpoint(
            os.path.join(out_dir, "checkpoints", "epoch-{epoch:03d}.weights.h5"),
            save_weights_only=True))
    if out_dir is not None and config.tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(os.path.join(out_dir, "tensorboard"),
                                                     histogram_freq=config.histogram_freq))
    setup_s = clock.seconds()
    model.fit(train_data, epochs=config.epochs, steps_per_epoch=steps, callbacks=callbacks,
              verbose=2 if config.verbose else 0)

    test_loss: float | None = None
    test_accuracy: float | None = None
    if len(data.x_test):
        test_data = evaluation_dataset(tf, data.x_test, data.y_test,
                                       batch_size=config.global_batch_size, image_size=image_size)
        if legacy:
            test_data = test_data.with_options(options)
        test_loss, test_accuracy = (float(v) for v in model.evaluate(test_data, verbose=0))
    if out_dir is not None and config.save_model:
        model.save(os.path.join(out_dir, "model.keras"))
    digests = _replica_digests(model, strategy) if config.strategy == "mirrored" else ()
    digest = weights_digest(model.get_weights())
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return TrainingResult(
        strategy=config.strategy, model=config.model, dataset=data.name,
        ranks=config.ranks, batch_per_rank=config.batch_size,
        global_batch=config.global_batch_size, learning_rate=config.scaled_learning_rate,
        parameters=int(model.count_params()), train_samples=len(data.x_train),
        test_samples=len(data.x_test), steps_per_epoch=steps, epochs=tuple(records),
        test_loss=test_loss, test_accuracy=test_accuracy, weights_digest=digest,
        rank_digests=digests or (digest,), setup_s=setup_s, data_s=0.0,
        backend="tensorflow (tf_keras)" if legacy else "tensorflow",
        versions=versions("tensorflow", "tf_keras") if legacy else versions("tensorflow"),
        files=files_under(config.output_dir) if chief else (),
        devices=tuple(devices), rank=rank, batchnorm_momentum=batchnorm_momentum(model))


def _replica_digests(model: KerasModel, strategy: DistributionStrategy) -> tuple[str, ...]:
    """One digest per device: the copy of every mirrored weight that lives on that replica.

    Sync-on-read variables (BatchNorm moving statistics) are per replica by design and
    read as their mean; they enter every replica's digest as that mean.
    """
    per_replica: list[list[np.ndarray]] = [[] for _ in range(strategy.num_replicas_in_sync)]
    for weight in model.weights:
        copies = getattr(weight.value, "values", None)
        if copies is None or len(copies) != len(per_replica):
            return ()
        sync_on_read = type(weight.value).__name__.startswith("SyncOnRead")
        for replica, copy in enumerate(copies):
            per_replica[replica].append(weight.numpy() if sync_on_read else copy.numpy())
    return tuple(weights_digest(arrays) for arrays in per_replica)


def _multiworker_listeners(launcher: str) -> Listener:
    """TensorFlow's gRPC server binds every interface and authenticates no one: one-host
    ranks get a private network (:mod:`accelml.dl.private_network`); under ``srun`` it
    listens on every interface of the job's nodes."""
    if launcher == LOCAL_PROCESSES:
        return Listener("a private network namespace: TensorFlow's gRPC server reachable by "
                        "the run's ranks only", True)
    return Listener("TensorFlow's gRPC server on every interface of the job's nodes, "
                    "unauthenticated (TensorFlow binds 0.0.0.0 and has no authentication)",
                    False)


def _tf_config(rank: int, addresses: tuple[str, ...]) -> dict[str, str]:
    """``multiworker`` as local processes: every rank gets the cluster and its own index."""
    return {"TF_CONFIG": json.dumps({"cluster": {"worker": list(addresses)},
                                     "task": {"type": "worker", "index": rank}})}


_SINGLE = Strategy(
    name="single",
    doc="one process, one device: model.fit (Keras 3 on TensorFlow)",
    keras_backends=("tensorflow",),
    train=train,
    probe=functools.partial(requirements, probe_keras, tensorflow_installed),
    determinism=Determinism(Expectation(True, "seeds, TF op determinism and fixed thread pools"),
                            environment=tensorflow_deterministic_environment,
                            seeds_tensorflow=True),
    libraries=("keras", "tensorflow"),
    max_ranks=1,
    default=True,
)
_IN_DEVICE_ORDER = dataclasses.replace(_SINGLE.determinism, expectation=Expectation(
    True, "seeds and TF op determinism; tf.distribute all-reduces in a fixed device order"))

STRATEGY = (
    _SINGLE,
    dataclasses.replace(
        _SINGLE, name="mirrored", max_ranks=None, default=False,
        doc="tf.distribute.MirroredStrategy: one process, `ranks` devices of one host "
            "(logical CPU devices without GPUs)",
        determinism=_IN_DEVICE_ORDER),
    dataclasses.replace(
        _SINGLE, name="multiworker", max_ranks=None, default=False,
        doc="tf.distribute.MultiWorkerMirroredStrategy: one process per rank, on tf_keras",
        probe=functools.partial(requirements, probe_keras, tensorflow_installed,
                                functools.partial(installed, "tf_keras", "tf-keras", "tf-keras")),
        determinism=_IN_DEVICE_ORDER,
        libraries=("keras", "tensorflow", "tf-keras"),
        multi_process=True,
        launchers=(LOCAL_PROCESSES, SRUN),
        local_process_environment=_tf_config,
        listeners=_multiworker_listeners,
        private_network=True,
        # MultiWorkerMirroredStrategy with Keras 3's fit fails (tensorflow/tensorflow#72388)
        environment_before_import=(("TF_USE_LEGACY_KERAS", "1"),)),
)
