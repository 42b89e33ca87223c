"""The ``horovod`` strategy on Keras 3 + TensorFlow: the loop over ``horovod.tensorflow``.

Horovod 0.28's Keras integration predates Keras 3 (its DistributedOptimizer wraps a Keras 3
optimizer without error but does not average gradients), so the loop is written here with
Horovod's TensorFlow primitives (a ``tf.function`` step over a tf.data pipeline), doing what
the tutorials' callbacks did; :mod:`accelml.dl.strategies.horovod` lists the semantics.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

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
)
from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.models import build_model
from accelml.dl.pipelines import evaluation_dataset, steps_per_epoch, train_dataset
from accelml.dl.strategies import tf_devices
from accelml.dl.turns import EpochGate
from accelml.errors import AccelmlError, UnavailableError


def _import_horovod() -> Any:
    try:
        import horovod.tensorflow as hvd
    except ImportError as error:
        raise UnavailableError(f"horovod.tensorflow does not import: {error}") from None
    return hvd


def train(config: TrainingConfig, data: ImageData) -> TrainingResult:
    clock = Clock()
    require_tensorboard(config)
    import tensorflow as tf

    hvd = _import_horovod()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if size != config.ranks:
        raise AccelmlError(f"horovod started {size} rank(s) but the case asks for "
                           f"{config.ranks} ranks")
    devices = tf_devices.configure(tf, config.device, gpu_index=hvd.local_rank(),
                                   processes_per_host=hvd.local_size())
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    import keras

    tf_devices.set_precision(keras, config.precision)
    seed_keras(keras, config.seed + rank)
    image_size = config.image_size if data.name != "generated" else None
    shape = ((image_size, image_size, data.image_shape[2]) if image_size else data.image_shape)
    model = build_model(config.model, keras, shape, data.classes, **config.model_arguments)
    steps = steps_per_epoch(len(data.x_train), size, config.batch_size, config.steps_per_epoch)
    learning_rate = make_learning_rate(keras, keras.ops, config, steps)
    optimizer = make_optimizer(keras, config, learning_rate)
    optimizer.build(model.trainable_variables)
    hvd.broadcast_variables([v.value for v in model.weights], root_rank=0)
    hvd.broadcast_variables([v.value for v in optimizer.variables], root_rank=0)

    train_data = train_dataset(tf, data.x_train, data.y_train, batch_size=config.batch_size,
                               steps=steps, rank=rank, size=size, shuffle=config.shuffle,
                               seed=config.seed, cache=config.cache,
                               cache_dir=config.cache_dir, image_size=image_size)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    trainable = model.trainable_variables
    averaged_state = [v for v in model.non_trainable_weights if v.dtype.startswith("float")]
    scales_loss = hasattr(optimizer, "scale_loss")

    def step(images: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = loss_fn(labels, predictions)
            if model.losses:
                loss = loss + tf.add_n(model.losses)
            scaled = optimizer.scale_loss(loss) if scales_loss else loss
        gradients = tape.gradient(scaled, trainable)
        gradients = hvd.grouped_allreduce(gradients, op=hvd.Average)
        optimizer.apply_gradients(zip(gradients, trainable, strict=True))
        hits = tf.equal(tf.argmax(predictions, -1, output_type=tf.int32),
                        tf.cast(labels, tf.int32))
        count = tf.cast(tf.shape(labels)[0], tf.float32)
        return tf.stack([loss * count, tf.reduce_sum(tf.cast(hits, tf.float32)), count])

    def average_moving_statistics() -> None:
        averaged = hvd.grouped_allreduce([v.value for v in averaged_state], op=hvd.Average)
        for variable, value in zip(averaged_state, averaged, strict=True):
            variable.assign(value)

    train_step, average_state = tf.function(step), tf.function(average_moving_statistics)

    output_dir = config.output_dir if rank == 0 else None      # rank 0 writes every file
    log = EpochLog(output_dir)
    summaries = (tf.summary.create_file_writer(os.path.join(output_dir, "tensorboard"))
                 if output_dir and config.tensorboard else None)
    setup_s = clock.seconds()

    epochs = []
    gate = EpochGate.from_environment()
    for epoch in range(config.epochs):
        gate.begin(epoch)
        clock = Clock()
        totals = tf.zeros(3)
        for images, labels in train_data:
            totals += train_step(images, labels)
        totals = hvd.allreduce(totals, op=hvd.Sum).numpy()
        if averaged_state:
            average_state()
        record = EpochRecord(epoch, clock.seconds(), float(totals[0] / totals[2]),
                             float(totals[1] / totals[2]),
                             learning_rate_value(learning_rate, (epoch + 1) * steps - 1),
                             int(totals[2]))
        epochs.append(record)
        end_epoch(config, record, model, log, rank=rank, output_dir=output_dir)
        if summaries is not None:
            _write_summaries(tf, summaries, config, model, record)
        gate.end(epoch, record.seconds)

    test_loss = test_accuracy = None
    if len(data.x_test):
        totals = tf.zeros(3)
        for images, labels in evaluation_dataset(tf, data.x_test, data.y_test,
                                           batch_size=config.batch_size, rank=rank, size=size,
                                           image_size=image_size):
            predictions = model(images, training=False)
            hits = tf.equal(tf.argmax(predictions, -1, output_type=tf.int32), labels)
            count = tf.cast(tf.shape(labels)[0], tf.float32)
            totals += tf.stack([loss_fn(labels, predictions) * count,
                                tf.reduce_sum(tf.cast(hits, tf.float32)), count])
        totals = hvd.allreduce(totals, op=hvd.Sum).numpy()
        test_loss, test_accuracy = float(totals[0] / totals[2]), float(totals[1] / totals[2])
    return rank_result(config, data, model, rank=rank, size=size, steps=steps,
                       epochs=tuple(epochs), test_loss=test_loss, test_accuracy=test_accuracy,
                       setup_s=setup_s, backend="tensorflow",
                       libraries=("tensorflow", "horovod"), output_dir=output_dir,
                       devices=tuple(devices))


def _write_summaries(tf: ModuleType, summaries: Any, config: TrainingConfig, model: Any,
                     record: EpochRecord) -> None:
    with summaries.as_default(step=record.epoch):
        tf.summary.scalar("epoch_loss", record.loss)
        tf.summary.scalar("epoch_accuracy", record.accuracy)
        tf.summary.scalar("learning_rate", record.learning_rate)
        if config.histogram_freq and record.epoch % config.histogram_freq == 0:
            for weight in model.weights:
                tf.summary.histogram(weight.path, weight.value)
    summaries.flush()
