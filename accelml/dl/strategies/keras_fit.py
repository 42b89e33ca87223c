"""``keras-fit``: plain ``model.fit`` from NumPy arrays on one device, the way the Keras tutorials
train, on whichever engine Keras runs on (JAX by default: the GPU machines have no TensorFlow).

The baseline that accelml's own steps are measured against: the images are scaled to float32
in [0, 1] in NumPy (``x.astype("float32") / 255``) and handed to ``model.fit`` with the batch
size; Keras slices, shuffles and copies each batch to the device itself. Where the case asks
for another image size, the model starts with a ``Resizing`` layer. Nothing here imports
TensorFlow unless Keras runs on it (or TensorBoard logs are asked for).
"""

from __future__ import annotations

import functools
import importlib
import os

from accelml.cases import Expectation
from accelml.dl.common import (
    Clock,
    EpochLog,
    end_epoch,
    fit_epoch_callback,
    make_learning_rate,
    make_optimizer,
    rank_result,
    require_tensorboard,
    seed_keras,
)
from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engines import (
    jax_deterministic_environment,
    probe_keras,
    requirements,
    tensorflow_deterministic_environment,
    torch_deterministic_environment,
)
from accelml.dl.models import build_model
from accelml.dl.pipelines import steps_per_epoch
from accelml.dl.strategies import Determinism, Strategy
from accelml.dl.strategies.jax_steps import jax_rank_environment
from accelml.errors import UnavailableError

ENGINE_DISTRIBUTIONS = {"jax": ("jax", "jaxlib"), "torch": ("torch",),
                        "tensorflow": ("tensorflow",)}
"""The distributions each Keras engine is recorded by in the result."""


def train(config: TrainingConfig, data: ImageData) -> TrainingResult:
    clock = Clock()
    require_tensorboard(config)
    import keras

    engine = keras.backend.backend()
    if engine != config.engine:
        raise UnavailableError(f"Keras runs on {engine}; the case asks for {config.engine} "
                               "(set KERAS_BACKEND; accelml.dl.launch does)")
    if config.deterministic:
        _deterministic_ops(engine)
    keras.mixed_precision.set_global_policy(config.precision)
    seed_keras(keras, config.seed)

    image_size = config.image_size if data.name != "generated" else None
    model = build_model(config.model, keras,
                        (image_size, image_size, data.image_shape[2]) if image_size
                        else data.image_shape, data.classes, **dict(config.model_options))
    if image_size and (image_size, image_size) != data.image_shape[:2]:
        model = keras.Sequential([keras.Input(data.image_shape),
                                  keras.layers.Resizing(image_size, image_size), model])
    batch = config.batch_size
    steps = steps_per_epoch(len(data.x_train), 1, batch, config.steps_per_epoch)
    learning_rate = make_learning_rate(keras, keras.ops, config, steps)
    model.compile(optimizer=make_optimizer(keras, config, learning_rate),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x_train = data.x_train[:steps * batch].astype("float32") / 255.0
    y_train = data.y_train[:steps * batch]

    records: list[EpochRecord] = []
    log = EpochLog(config.output_dir)

    def finish_epoch(record: EpochRecord) -> None:
        records.append(record)
        end_epoch(config, record, model, log, rank=0, output_dir=config.output_dir)

    callbacks = [fit_epoch_callback(keras, learning_rate, steps, steps * batch, finish_epoch)]
    if config.output_dir is not None and config.tensorboard:
        try:
            callbacks.append(keras.callbacks.TensorBoard(
                os.path.join(config.output_dir, "tensorboard"),
                histogram_freq=config.histogram_freq))
        except ImportError as error:
            raise UnavailableError(f"TensorBoard logs from model.fit need TensorFlow "
                                   f"({error}); set tensorboard = false") from None
    setup_s = clock.seconds()
    model.fit(x_train, y_train, batch_size=batch, epochs=config.epochs, shuffle=config.shuffle,
              callbacks=callbacks, verbose=2 if config.verbose else 0)

    test_loss: float | None = None
    test_accuracy: float | None = None
    if len(data.x_test):
        test_loss, test_accuracy = (float(v) for v in model.evaluate(
            data.x_test.astype("float32") / 255.0, data.y_test, batch_size=batch, verbose=0))
    return rank_result(config, data, model, rank=0, size=1, steps=steps, epochs=tuple(records),
                       test_loss=test_loss, test_accuracy=test_accuracy, setup_s=setup_s,
                       backend=engine, libraries=ENGINE_DISTRIBUTIONS.get(engine, ()),
                       output_dir=config.output_dir, devices=_devices(keras, config))


def _deterministic_ops(engine: str) -> None:
    """The engine's deterministic kernels, turned on in this process (XLA reads its flag from
    the environment: :func:`deterministic_environment`)."""
    if engine == "torch":
        importlib.import_module("torch").use_deterministic_algorithms(True)
    elif engine == "tensorflow":
        importlib.import_module("tensorflow").config.experimental.enable_op_determinism()


def _devices(keras: object, config: TrainingConfig) -> tuple[str, ...]:
    """The device Keras trained on, as its engine names it (the config's kind where Keras
    cannot list devices on this engine)."""
    try:
        listed = keras.distribution.list_devices()  # type: ignore[attr-defined]
    except (AttributeError, NotImplementedError, RuntimeError, ValueError):
        listed = []
    return (str(listed[0]),) if listed else (config.device,)


def deterministic_environment(threads: int | None) -> dict[str, str]:
    """What each engine reads before it loads for deterministic kernels (whichever one Keras
    runs on, the others' variables are inert).

    >>> sorted(deterministic_environment(None))
    ['CUBLAS_WORKSPACE_CONFIG', 'TF_CUDNN_DETERMINISTIC', 'TF_DETERMINISTIC_OPS', 'XLA_FLAGS']
    """
    return {**tensorflow_deterministic_environment(threads),
            **jax_deterministic_environment(threads), **torch_deterministic_environment(threads)}


def rank_environment(config: TrainingConfig) -> dict[str, str]:
    """On JAX, the JAX strategies' variables (one device; on GPUs no up-front memory grab);
    on CPU, CUDA hidden from every engine.

    >>> rank_environment(TrainingConfig(strategy="keras-fit"))
    {'JAX_PLATFORMS': 'cpu', 'CUDA_VISIBLE_DEVICES': ''}
    """
    env = jax_rank_environment(config) if config.engine == "jax" else {}
    if config.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


STRATEGY = Strategy(
    name="keras-fit",
    doc="one process, one device: plain model.fit from NumPy arrays, as the Keras tutorials "
        "train (Keras 3 on JAX, PyTorch or TensorFlow)",
    keras_backends=("jax", "torch", "tensorflow"),
    train=train,
    probe=functools.partial(requirements, probe_keras),
    determinism=Determinism(
        Expectation(True, "seeds and the engine's deterministic kernels (XLA deterministic "
                          "ops, torch deterministic algorithms, TF op determinism)"),
        environment=deterministic_environment),
    libraries=("keras",),
    rank_environment=rank_environment,
    max_ranks=1,
)
