"""Image classification data as NumPy arrays (uint8 images, int labels); no TensorFlow needed.

Data sets (:data:`DATASETS`): ``digits`` (scikit-learn's shipped 8x8 digits), ``generated``
(class-dependent patterns plus noise, any size; learnable but not trivially: test accuracy at
most 0.92, see :func:`accelml.datasets.loaders.generated_images`), and every Keras set the dataset loaders
offer (:data:`accelml.datasets.loaders.KERAS_CLASSES`: ``mnist``, ``fashion_mnist``,
``cifar10``, ``cifar100``), read by :func:`accelml.datasets.loaders.keras_dataset`. For the
Keras sets, ``data_path`` points at local files so that compute nodes without internet can
read a copy staged by the user: an ``.npz`` with ``x_train``, ``y_train``, ``x_test``,
``y_test`` (the layout of Keras' ``mnist.npz``), or a directory in the layout Keras
downloads (``fashion_mnist``: the four ``*-idx?-ubyte.gz`` files; ``cifar10``:
``cifar-10-batches-py``; ``cifar100``: ``cifar-100-python``). Without ``data_path`` the
Keras loader is called (it downloads into ``~/.keras/datasets``).

>>> data = load_image_data("digits")
>>> data.x_train.shape, data.x_train.dtype, data.classes
((1437, 8, 8, 1), dtype('uint8'), 10)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelml.datasets.loaders import KERAS_CLASSES, keras_dataset
from accelml.datasets.loaders import generated_images as generated_arrays
from accelml.datasets.registry import load_dataset
from accelml.errors import AccelmlError, SpecError

DATASETS = ("digits", "generated", *KERAS_CLASSES)
"""The data sets deep-learning training reads: the Keras sets are the loaders' own."""


@dataclass(frozen=True, eq=False)
class ImageData:
    """Train and test images (N, H, W, C) uint8 and labels (N,) int32."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int

    @property
    def image_shape(self) -> tuple[int, int, int]:
        height, width, channels = self.x_train.shape[1:]
        return int(height), int(width), int(channels)

    def subset(self, train: int | None, test: int | None) -> ImageData:
        """The first ``train`` / ``test`` samples (None keeps all)."""
        return ImageData(self.name, self.x_train[:train], self.y_train[:train],
                         self.x_test[:test], self.y_test[:test], self.classes)


DIGITS_SPLIT = {"name": "digits", "test_size": 0.2}
"""The digits' split (a stratified fifth held out, seed 0), made by the dataset registry."""


def _digits() -> ImageData:
    # Through the registry's cache: a rank reads the split from an .npz there instead of
    # importing scikit-learn (~2.5 CPU-s a process) to load and split the digits again.
    loaded = load_dataset("digits", "shipped", DIGITS_SPLIT)

    def images(x: np.ndarray) -> np.ndarray:
        return np.round(x.reshape(-1, 8, 8, 1) * (255.0 / 16.0)).astype(np.uint8)

    def labels(y: np.ndarray | None) -> np.ndarray:
        assert y is not None, "digits have labels"
        return y.astype(np.int32)

    return ImageData("digits", images(loaded.X_train), labels(loaded.y_train),
                     images(loaded.X_test), labels(loaded.y_test), 10)


def generated_images(samples: int = 2048, test_samples: int = 512, size: int = 32,
                     channels: int = 3, classes: int = 10, seed: int = 0) -> ImageData:
    """Learnable synthetic images, 8% of their labels flipped
    (:func:`accelml.datasets.loaders.generated_images`).

    >>> generated_images(64, 16, size=16).x_train.shape
    (64, 16, 16, 3)
    """
    x_train, y_train, x_test, y_test = generated_arrays(samples, test_samples, size, channels,
                                                        classes, seed)
    return ImageData("generated", x_train, y_train, x_test, y_test, classes)


def _keras_set(name: str, data_path: str | None) -> ImageData:
    x_train, y_train, x_test, y_test = keras_dataset(name, data_path)
    classes = KERAS_CLASSES[name]

    def images(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype != np.uint8:
            raise AccelmlError(f"{name} images must be uint8, found {x.dtype}")
        return x[..., None] if x.ndim == 3 else x

    def labels(y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, np.int32).reshape(-1)
        if len(y) and (y.min() < 0 or y.max() >= classes):
            raise AccelmlError(f"{name} labels must lie in 0..{classes - 1} ({classes} classes), "
                               f"found {y.min()}..{y.max()}")
        return y

    return ImageData(name, images(x_train), labels(y_train), images(x_test), labels(y_test),
                     classes)


def load_image_data(name: str, data_path: str | None = None, train_samples: int | None = None,
                    test_samples: int | None = None, image_size: int | None = None,
                    seed: int = 0) -> ImageData:
    """Load data set ``name`` (one of :data:`DATASETS`), cut to the requested sizes.

    ``image_size`` is only used to draw ``generated`` images at that size; for the other
    sets the resize (e.g. CIFAR-10 to 128x128) happens on the fly in the input pipeline.
    """
    if name == "digits":
        data = _digits()
    elif name == "generated":
        data = generated_images(train_samples or 2048, test_samples or 512,
                                size=image_size or 32, seed=seed)
    elif name in KERAS_CLASSES:
        data = _keras_set(name, data_path)
    else:
        raise SpecError(f"unknown dataset {name!r} for deep learning; known: {', '.join(DATASETS)}")
    return data.subset(train_samples, test_samples)
