"""The tutorials' models, built with whichever Keras module the strategy runs on.

Every builder takes the Keras module (Keras 3, or ``tf_keras`` where a strategy needs
legacy Keras), the input shape and the number of classes, and returns an uncompiled
model whose last layer is a float32 softmax.

>>> import keras
>>> build_model("mnist_cnn_dropout", keras, (28, 28, 1), 10).count_params()
1199882
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from types import ModuleType

from accelml.dl.engine_objects import KerasModel
from accelml.errors import SpecError

ModelBuilder = Callable[..., KerasModel]
"""``builder(keras, input_shape, classes, **model_options)``: an uncompiled model."""


def fashion_mnist_cnn(keras: ModuleType, input_shape: tuple[int, ...], classes: int, filters: int = 32,
                      dense: int = 128, dropout: float = 0.3) -> KerasModel:
    """The workshop's Fashion-MNIST CNN: two conv/pool blocks, a dense layer, softmax."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input(shape=input_shape),
        layers.Conv2D(filters, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(2 * filters, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2),
        layers.Flatten(),
        layers.Dense(dense, activation="relu"),
        layers.Dropout(dropout),
        layers.Dense(classes, activation="softmax", dtype="float32"),
    ], name="fashion_mnist_cnn")


def mnist_cnn(keras: ModuleType, input_shape: tuple[int, ...], classes: int) -> KerasModel:
    """Conv2D 32 5x5 relu, MaxPool 2, Conv2D 64 5x5 relu, MaxPool 2, Flatten, Dense softmax."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input(shape=input_shape),
        layers.Conv2D(32, 5, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(64, 5, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Flatten(),
        layers.Dense(classes, activation="softmax", dtype="float32"),
    ], name="mnist_cnn")


def mnist_cnn_dropout(keras: ModuleType, input_shape: tuple[int, ...], classes: int) -> KerasModel:
    """Conv 32 3x3, Conv 64 3x3, MaxPool, Dropout .25, Flatten, Dense 128, Dropout .5, Dense."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input(shape=input_shape),
        layers.Conv2D(32, 3, activation="relu"),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Dropout(0.25),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(classes, activation="softmax", dtype="float32"),
    ], name="mnist_cnn_dropout")


def mlp(keras: ModuleType, input_shape: tuple[int, ...], classes: int, hidden: Sequence[int] = (128, 64),
        dropout: float = 0.0) -> KerasModel:
    """Flatten, then Dense relu layers of the given widths, then softmax."""
    layers = [keras.Input(shape=input_shape), keras.layers.Flatten()]
    for width in hidden:
        layers.append(keras.layers.Dense(int(width), activation="relu"))
        if dropout:
            layers.append(keras.layers.Dropout(dropout))
    layers.append(keras.layers.Dense(classes, activation="softmax", dtype="float32"))
    return keras.Sequential(layers, name="mlp")


def small_resnet(keras: ModuleType, input_shape: tuple[int, ...], classes: int, width: int = 8,
                 blocks: int = 2) -> KerasModel:
    """A pre-activation ResNet with BatchNorm, small enough for tests."""
    layers = keras.layers
    inputs = keras.Input(shape=input_shape)
    x = layers.Conv2D(width, 3, padding="same", use_bias=False)(inputs)
    for stage in range(blocks):
        channels = width * 2**stage
        stride = 1 if stage == 0 else 2
        shortcut = x
        y = layers.BatchNormalization()(x)
        y = layers.Activation("relu")(y)
        if stride != 1 or shortcut.shape[-1] != channels:
            shortcut = layers.Conv2D(channels, 1, strides=stride, use_bias=False)(y)
        y = layers.Conv2D(channels, 3, strides=stride, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        y = layers.Activation("relu")(y)
        y = layers.Conv2D(channels, 3, padding="same", use_bias=False)(y)
        x = layers.Add()([shortcut, y])
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(classes, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs, name="small_resnet")


def _application(name: str) -> ModelBuilder:
    def build(keras: ModuleType, input_shape: tuple[int, ...], classes: int) -> KerasModel:
        application = getattr(keras.applications, name)
        return application(weights=None, input_shape=tuple(input_shape), classes=classes,
                           classifier_activation="softmax")
    build.__doc__ = f"keras.applications.{name}(weights=None, input_shape, classes)."
    return build


MODELS: dict[str, ModelBuilder] = {
    "fashion_mnist_cnn": fashion_mnist_cnn,
    "mnist_cnn": mnist_cnn,
    "mnist_cnn_dropout": mnist_cnn_dropout,
    "mlp": mlp,
    "small_resnet": small_resnet,
    "resnet50v2": _application("ResNet50V2"),
    "resnet152v2": _application("ResNet152V2"),
}


def _layers(model: KerasModel) -> Iterator[KerasModel]:
    """Every layer of ``model``, nested models' layers included."""
    stack = list(getattr(model, "layers", []))
    while stack:
        layer = stack.pop()
        yield layer
        stack.extend(getattr(layer, "layers", []))


def batchnorm_momentum(model: KerasModel) -> float | None:
    """The largest momentum of ``model``'s BatchNorm layers (their moving statistics forget
    slowest), None without BatchNorm.

    >>> import keras
    >>> batchnorm_momentum(build_model("small_resnet", keras, (8, 8, 1), 10))
    0.99
    >>> batchnorm_momentum(build_model("small_resnet", keras, (8, 8, 1), 10,
    ...                                batchnorm_momentum=0.9))
    0.9
    >>> batchnorm_momentum(build_model("mlp", keras, (8, 8, 1), 10)) is None
    True
    """
    found = [float(layer.momentum) for layer in _layers(model)
             if hasattr(layer, "moving_mean") and hasattr(layer, "momentum")]
    return max(found) if found else None


def _set_batchnorm_momentum(model: KerasModel, momentum: object) -> None:
    if not isinstance(momentum, (int, float)) or isinstance(momentum, bool) \
            or not 0.0 <= momentum < 1.0:
        raise SpecError(f"model_options batchnorm_momentum must be a number in [0, 1), "
                        f"not {momentum!r}")
    for layer in _layers(model):
        if hasattr(layer, "moving_mean") and hasattr(layer, "momentum"):
            layer.momentum = float(momentum)


def build_model(name: str, keras: ModuleType, input_shape: Sequence[int], classes: int,
                **options: object) -> KerasModel:
    """Build model ``name`` (one of :data:`MODELS`) with ``keras`` for ``input_shape``.

    Every model also takes ``batchnorm_momentum``: the momentum of all its BatchNorm layers'
    moving statistics (Keras: 0.99; MLPerf's ResNet-50: 0.9), which sets how many steps the
    statistics used at evaluation need to forget their initial values.
    """
    try:
        builder = MODELS[name]
    except KeyError:
        raise SpecError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
    momentum = options.pop("batchnorm_momentum", None)
    model = _built(name, builder, keras, input_shape, classes, options)
    if momentum is not None:
        _set_batchnorm_momentum(model, momentum)
    return model


def _built(name: str, builder: ModelBuilder, keras: ModuleType, input_shape: Sequence[int],
           classes: int, options: dict[str, object]) -> KerasModel:
    try:
        return builder(keras, tuple(input_shape), int(classes), **options)
    except TypeError as error:
        raise SpecError(f"model {name!r}: bad model_options {options}: {error}") from None
    except ValueError as error:
        raise SpecError(f"model {name!r} cannot take input shape {tuple(input_shape)}: "
                        f"{str(error).splitlines()[0]}") from None
