"""Image classification data as NumPy arrays (uint8 images, int labels); no TensorFlow needed.

Data sets: ``digits`` (scikit-learn's shipped 8x8 digits), ``generated`` (class-dependent
patterns plus noise; any size), and the Keras loaders ``mnist``, ``fashion_mnist`` and
``cifar10``. For the Keras sets, ``data_path`` points at local files so that compute nodes
without internet can read a copy staged by the user: either an ``.npz`` with ``x_train``,
``y_train``, ``x_test``, ``y_test`` (the layout of Keras' ``mnist.npz``), or a directory in
the layout Keras downloads (``fashion_mnist``: the four ``*-idx?-ubyte.gz`` files;
``cifar10``: ``cifar-10-batches-py`` with ``data_batch_1..5`` and ``test_batch``). Without
``data_path`` the Keras loader is called (it downloads into ``~/.keras/datasets``).

>>> data = load_image_data("digits")
>>> data.x_train.shape, data.x_train.dtype, data.classes
((1437, 8, 8, 1), dtype('uint8'), 10)
"""

from __future__ import annotations

import gzip
import os
import pickle
from dataclasses import dataclass

import numpy as np

from accelml.errors import AccelmlError, SpecError

DATASETS = ("digits", "generated", "mnist", "fashion_mnist", "cifar10")


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
        return tuple(self.x_train.shape[1:])

    def subset(self, train: int | None, test: int | None) -> "ImageData":
        """The first ``train`` / ``test`` samples (None keeps all)."""
        return ImageData(self.name, self.x_train[:train], self.y_train[:train],
                         self.x_test[:test], self.y_test[:test], self.classes)


def _digits() -> ImageData:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    x_train, x_test, y_train, y_test = train_test_split(
        images, bunch.target.astype(np.int32), test_size=0.2, random_state=0,
        stratify=bunch.target)
    return ImageData("digits", x_train, y_train, x_test, y_test, 10)


def generated_images(samples: int = 2048, test_samples: int = 512, size: int = 32,
                     channels: int = 3, classes: int = 10, seed: int = 0) -> ImageData:
    """Learnable synthetic images: one smooth random pattern per class, blended 3:2 with uniform noise.

    >>> generated_images(64, 16, size=16).x_train.shape
    (64, 16, 16, 3)
    """
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 255, size=(classes, 4, 4, channels))
    reps = -(-size // 4)
    patterns = np.kron(coarse, np.ones((1, reps, reps, 1)))[:, :size, :size, :].astype(np.uint16)

    def draw(count: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, classes, size=count).astype(np.int32)
        images = np.empty((count, size, size, channels), np.uint8)
        for start in range(0, count, 1024):  # bounded scratch, also for 50k x 128x128
            part = labels[start:start + 1024]
            noise = rng.integers(0, 256, (len(part), size, size, channels), dtype=np.uint16)
            images[start:start + 1024] = (3 * patterns[part] + 2 * noise) // 5
        return images, labels

    x_train, y_train = draw(samples)
    x_test, y_test = draw(test_samples)
    return ImageData("generated", x_train, y_train, x_test, y_test, classes)


def _read_idx(path: str, offset: int) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        return np.frombuffer(handle.read(), np.uint8, offset=offset)


def _fashion_mnist_dir(path: str) -> tuple[np.ndarray, ...]:
    names = ("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz",
             "t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz")
    missing = [n for n in names if not os.path.exists(os.path.join(path, n))]
    if missing:
        raise AccelmlError(f"fashion_mnist data_path {path!r} lacks {', '.join(missing)}")
    y_train, x_train, y_test, x_test = (
        _read_idx(os.path.join(path, n), 8 if "labels" in n else 16) for n in names)
    return (x_train.reshape(len(y_train), 28, 28), y_train,
            x_test.reshape(len(y_test), 28, 28), y_test)


def _cifar10_dir(path: str) -> tuple[np.ndarray, ...]:
    if os.path.isdir(os.path.join(path, "cifar-10-batches-py")):
        path = os.path.join(path, "cifar-10-batches-py")

    def batch(name: str) -> tuple[np.ndarray, np.ndarray]:
        file = os.path.join(path, name)
        if not os.path.exists(file):
            raise AccelmlError(f"cifar10 data_path {path!r} lacks {name}")
        with open(file, "rb") as handle:
            record = pickle.load(handle, encoding="bytes")
        images = np.asarray(record[b"data"], np.uint8).reshape(-1, 3, 32, 32)
        return images.transpose(0, 2, 3, 1), np.asarray(record[b"labels"])

    parts = [batch(f"data_batch_{i}") for i in range(1, 6)]
    x_test, y_test = batch("test_batch")
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            x_test, y_test)


def _keras_set(name: str, data_path: str | None) -> ImageData:
    classes = 10
    if data_path is None:
        try:
            import keras
            loader = getattr(keras.datasets, name)
            (x_train, y_train), (x_test, y_test) = loader.load_data()
        except Exception as error:  # network, proxy, corrupt cache: say which and how to avoid it
            raise AccelmlError(f"keras.datasets.{name}.load_data() failed ({error}); "
                               "stage the files and pass data_path") from None
    elif data_path.endswith(".npz"):
        if not os.path.exists(data_path):
            raise AccelmlError(f"{name} data_path {data_path!r} does not exist")
        with np.load(data_path, allow_pickle=False) as arrays:
            missing = {"x_train", "y_train", "x_test", "y_test"} - set(arrays.files)
            if missing:
                raise AccelmlError(f"{data_path!r} lacks array(s) {', '.join(sorted(missing))}")
            x_train, y_train, x_test, y_test = (
                arrays[k] for k in ("x_train", "y_train", "x_test", "y_test"))
    elif name == "fashion_mnist":
        x_train, y_train, x_test, y_test = _fashion_mnist_dir(data_path)
    elif name == "cifar10":
        x_train, y_train, x_test, y_test = _cifar10_dir(data_path)
    else:
        raise AccelmlError(f"{name} data_path must be an .npz file, not {data_path!r}")

    def images(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype != np.uint8:
            raise AccelmlError(f"{name} images must be uint8, found {x.dtype}")
        return x[..., None] if x.ndim == 3 else x

    return ImageData(name, images(x_train), np.asarray(y_train, np.int32).reshape(-1),
                     images(x_test), np.asarray(y_test, np.int32).reshape(-1), classes)


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
    elif name in DATASETS:
        data = _keras_set(name, data_path)
    else:
        raise SpecError(f"unknown dataset {name!r} for deep learning; known: {', '.join(DATASETS)}")
    return data.subset(train_samples, test_samples)
