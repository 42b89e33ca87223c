"""Where data comes from: generators, sklearn's shipped sets, files, Keras and OpenML.

Each loader returns ``(X, y, task)`` or, for sets that come split (Keras, generated images),
the four arrays. No loader touches the network unless the spec asks for a Keras/OpenML set
*without* a ``path``; with ``path`` they read the local copy (the layout those libraries
download).

This module owns the names each source offers: :data:`GENERATORS`, :data:`SHIPPED_TASKS`,
:data:`KERAS_CLASSES` and :data:`FILE_FORMATS`. The spec's validation reads them (through
:data:`accelml.datasets.registry.NAMED_SOURCES`), and so does the deep-learning input
(:mod:`accelml.dl.data`), so what validates is what loads.

>>> X, y, task = generated("blobs", n_samples=10, n_features=2, centers=2, seed=0)
>>> X.shape, task
((10, 2), 'classification')
>>> sorted(KERAS_CLASSES.items())
[('cifar10', 10), ('cifar100', 100), ('fashion_mnist', 10), ('mnist', 10)]
"""

from __future__ import annotations

import csv
import gzip
import os
import pickle
import zipfile
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from accelml.errors import AccelmlError

SHIPPED_TASKS: Mapping[str, str] = MappingProxyType({
    "digits": "classification",
    "breast_cancer": "classification",
    "wine": "classification",
    "iris": "classification",
    "diabetes": "regression",
})
"""The small sets that ship inside scikit-learn (``sklearn.datasets.load_<name>``), by task."""

GENERATOR_TASKS: Mapping[str, str] = MappingProxyType({
    "classification": "classification", "regression": "regression", "blobs": "classification"})
"""Generators of tabular data (scikit-learn's ``make_<name>``), by task."""

IMAGE_GENERATOR = "images"
"""The generator of synthetic uint8 images (:func:`generated_images`), for keras cases: learnable
but not trivially (test accuracy between chance and 0.92)."""

GENERATORS: tuple[str, ...] = (*GENERATOR_TASKS, IMAGE_GENERATOR)
"""Every ``generator`` a generated dataset may name."""

KERAS_CLASSES: Mapping[str, int] = MappingProxyType({
    "mnist": 10, "fashion_mnist": 10, "cifar10": 10, "cifar100": 100})
"""The Keras image classification sets (``keras.datasets.<name>``), with their class counts."""

FILE_FORMATS = (".npz", ".csv", ".parquet")
UNREADABLE = (OSError, ValueError, EOFError, zipfile.BadZipFile)
"""What reading a damaged or foreign data file raises (an ``.npz`` that is no zip archive
raises ``BadZipFile``, one cut short ``EOFError``): each becomes one line naming the file."""
"""File types a ``file`` dataset may be (OpenML's local copies may also be ``.arff``)."""

KERAS_FOLDERS: Mapping[str, str] = MappingProxyType({
    "cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"})
"""Folders Keras unpacks its CIFAR downloads into; a ``path`` may name the folder above them."""


def generated(generator: str, *, n_samples: int = 1000, n_features: int = 20,
              n_informative: int | None = None, n_classes: int = 2, centers: int = 3,
              cluster_std: float = 1.0, noise: float = 0.0, seed: int = 0
              ) -> tuple[np.ndarray, np.ndarray, str]:
    """scikit-learn's ``make_classification`` / ``make_regression`` / ``make_blobs`` with a seed."""
    from sklearn import datasets

    if generator == "classification":
        informative = n_informative or max(2, min(n_features, n_features // 2))
        if n_classes * 2 > 2**informative:
            raise AccelmlError(f"make_classification needs n_classes * 2 <= 2**n_informative "
                               f"({n_classes} classes, {informative} informative features)")
        X, y = datasets.make_classification(
            n_samples=n_samples, n_features=n_features, n_informative=informative,
            n_redundant=min(2, n_features - informative), n_classes=n_classes, random_state=seed)
    elif generator == "regression":
        X, y = datasets.make_regression(
            n_samples=n_samples, n_features=n_features,
            n_informative=n_informative or max(1, n_features // 2), noise=noise,
            random_state=seed)
    elif generator == "blobs":
        X, y = datasets.make_blobs(n_samples=n_samples, n_features=n_features, centers=centers,
                                   cluster_std=cluster_std, random_state=seed)
    elif generator == IMAGE_GENERATOR:
        raise AccelmlError(f"generator {IMAGE_GENERATOR!r} draws image data for keras cases only; "
                           f"use {', '.join(GENERATOR_TASKS)} for this algorithm")
    else:
        raise AccelmlError(f"unknown generator {generator!r}; allowed: {', '.join(GENERATORS)}")
    return X, y, GENERATOR_TASKS[generator]


IMAGE_LABEL_NOISE = 0.08
"""Share of each generated image split whose label is flipped to another class: no model, however
large or long trained, scores above ``1 - IMAGE_LABEL_NOISE`` test accuracy on them."""

_IMAGE_BASES = 8       # smooth patterns shared by all classes; a class is a mixture of them
_IMAGE_CELLS = 4       # a base is a random 4x4 grid of cells, upsampled to the image size
_IMAGE_JITTER = 0.2    # per-sample spread of the mixture weights (a class's weights have norm 1)
_IMAGE_SIGNAL = 90.0   # pattern amplitude in grey levels at contrast 1
_IMAGE_NOISE = 90      # uniform pixel noise in [-90, 90] grey levels


def generated_images(samples: int = 2048, test_samples: int = 512, size: int = 32,
                     channels: int = 3, classes: int = 10, seed: int = 0,
                     label_noise: float = IMAGE_LABEL_NOISE
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test) of learnable but not trivial synthetic images: uint8
    images (N, size, size, channels), int32 labels; the same for the same arguments.

    Every class mixes the same few smooth random patterns (bases) with weights of its own; each
    image draws its weights around its class's (jitter), a contrast, a circular shift by up to
    half a pattern cell in each direction, and uniform pixel noise. Then exactly
    ``label_noise`` (:data:`IMAGE_LABEL_NOISE`) of each split's labels are moved to another
    class; the images are the same whatever ``label_noise`` is.

    Expected test accuracy, whatever the model's capacity: at most ``1 - label_noise`` (0.92;
    a flipped label cannot be predicted from its image) and a little below it, 0.88-0.91 by seed
    (0.90 at seed 0) for a model that reads the weights exactly, as neighbouring classes'
    jittered weights overlap; chance is ``1 / classes``. The signal is
    smooth, strong and shift-tolerant, so a CNN picks it up within an epoch or two: the
    workshop CNN reaches 0.84 on 2,000 16x16 images in 3 epochs and 0.895 on
    60,000 28x28 images on GPUs (ResNet50V2 at 128 px with BatchNorm momentum 0.9: 0.893; BatchNorm
    at Keras's 0.99 after few steps scores lower in evaluation mode)
    (``benchmarks/bench_generated_images.py`` prints it for any shape). Drawn in chunks of
    about 8M pixel values, so the scratch memory stays small (~100 MB) also for 65,536 images
    of 128x128.

    >>> x_train, y_train, x_test, y_test = generated_images(64, 16, size=16)
    >>> x_train.shape, x_train.dtype, y_test.shape
    ((64, 16, 16, 3), dtype('uint8'), (16,))
    """
    rng = np.random.default_rng(seed)
    cells = _IMAGE_CELLS
    bases = rng.uniform(-1.0, 1.0, (_IMAGE_BASES, cells, cells, channels))
    weights = rng.normal(size=(classes, _IMAGE_BASES))
    weights /= np.linalg.norm(weights, axis=1, keepdims=True)
    reach = size // (2 * cells)                          # largest shift: half a cell
    cell_of = np.arange(-reach, size + reach) * cells // size % cells   # pixel -> cell, margins
    chunk = max(1, 2**23 // (size * size * channels))    # bounded scratch: ~8M values a chunk

    def draw(count: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, classes, size=count).astype(np.int32)
        images = np.empty((count, size, size, channels), np.uint8)
        for start in range(0, count, chunk):
            part = labels[start:start + chunk]
            mixture = weights[part] + _IMAGE_JITTER * rng.normal(size=(len(part), _IMAGE_BASES))
            mixture *= rng.uniform(0.6, 1.4, (len(part), 1))                    # contrast
            coarse = np.rint(_IMAGE_SIGNAL * np.einsum("nb,bhwc->nhwc", mixture, bases))
            canvas = coarse.astype(np.int16).take(cell_of, axis=1).take(cell_of, axis=2)
            shifts = rng.integers(0, 2 * reach + 1, (len(part), 2))
            noisy = rng.integers(128 - _IMAGE_NOISE, 128 + _IMAGE_NOISE + 1,
                                 (len(part), size, size, channels), dtype=np.int16)
            for image, pattern, (down, right) in zip(noisy, canvas, shifts, strict=True):
                image += pattern[down:down + size, right:right + size]   # circular shift
            np.clip(noisy, 0, 255, out=noisy)
            images[start:start + len(part)] = noisy
        flipped = rng.permutation(count)[:round(label_noise * count)]
        offsets = rng.integers(1, classes, count)    # drawn whole: the same images at any noise
        labels[flipped] = (labels[flipped] + offsets[:len(flipped)]) % classes
        return images, labels

    x_train, y_train = draw(samples)
    x_test, y_test = draw(test_samples)
    return x_train, y_train, x_test, y_test


def shipped(name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """One of the small sets that ship inside scikit-learn (no download)."""
    from sklearn import datasets

    loader = getattr(datasets, f"load_{name}", None)
    if loader is None or name not in SHIPPED_TASKS:
        raise AccelmlError(f"unknown shipped dataset {name!r}; allowed: {', '.join(SHIPPED_TASKS)}")
    bunch = loader()
    return np.asarray(bunch.data), np.asarray(bunch.target), SHIPPED_TASKS[name]


def _frame_to_arrays(frame: Any, target: str | None, where: str) -> tuple[np.ndarray, np.ndarray | None]:
    import pandas as pd

    if target is not None and target not in frame.columns:
        raise AccelmlError(f"{where}: no column {target!r}; columns: "
                           + ", ".join(map(str, frame.columns[:20])))
    y = None
    if target is not None:
        column = frame[target]
        if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            y = pd.Categorical(column).codes.astype(np.int64)
        else:
            y = column.to_numpy()
        frame = frame.drop(columns=[target])
    categorical = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    if categorical:
        frame = pd.get_dummies(frame, columns=categorical, dtype=float)
    X = frame.to_numpy(dtype=np.float64, na_value=np.nan)
    return X, y


def file_problem(path: str, *, target: str | None = None, x_key: str = "X", y_key: str | None = None
                 ) -> tuple[str, str] | None:
    """``(key, what is wrong)`` when ``path`` lacks the ``target`` column (``.csv``, ``.parquet``)
    or the ``x_key``/``y_key`` arrays (``.npz``) a spec names; read without loading the data.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "d.csv").write_text("a,b,species\\n1,2,setosa\\n")
    >>> file_problem(str(folder / "d.csv"), target="Species")
    ('target', "no column 'Species'; columns: a, b, species")
    """
    file = Path(path)
    suffix = file.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(file, allow_pickle=False) as archive:
                names = tuple(archive.files)
            for key, name in (("x_key", x_key), ("y_key", y_key)):
                if name is not None and name not in names:
                    return key, f"no array {name!r}; arrays: {', '.join(names)}"
            return None
        if suffix == ".csv":
            with open(file, newline="") as handle:
                columns = tuple(next(csv.reader(handle), []))
        elif suffix == ".parquet":
            import pyarrow.parquet

            columns = tuple(pyarrow.parquet.read_schema(file).names)
        else:
            return None
    except UNREADABLE as error:
        return "path", f"cannot read {file}: {error}"
    if target is not None and target not in columns:
        return "target", f"no column {target!r}; columns: {', '.join(columns[:20])}"
    return None


def class_codes(y: np.ndarray) -> np.ndarray:
    """String (or boolean) labels as class codes 0..k-1 in sorted label order, as
    ``pandas.Categorical`` numbers a CSV's text column; other labels unchanged.

    >>> class_codes(np.array(["b", "a", "b"])).tolist()
    [1, 0, 1]
    """
    if y.dtype.kind in "USb":
        return np.unique(y, return_inverse=True)[1].astype(np.int64).reshape(y.shape)
    return y


def from_file(path: str, *, target: str | None = None, x_key: str = "X",
              y_key: str = "y") -> tuple[np.ndarray, np.ndarray | None]:
    """``.npz`` (arrays ``x_key``/``y_key``), ``.csv`` or ``.parquet`` (``target`` column).
    Text labels become class codes (:func:`class_codes`): a classification target."""
    file = Path(path)
    suffix = file.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(file, allow_pickle=False) as archive:
                if x_key not in archive:
                    raise AccelmlError(f"{file}: no array {x_key!r}; arrays: {', '.join(archive.files)}")
                X = archive[x_key]
                y = class_codes(archive[y_key]) if y_key in archive else None
            return X, y
        import pandas as pd

        if suffix == ".csv":
            frame = pd.read_csv(file)
        elif suffix == ".parquet":
            frame = pd.read_parquet(file)
        elif suffix == ".arff":
            from scipy.io import arff

            data, _ = arff.loadarff(file)
            frame = pd.DataFrame(data)
            for column in frame.columns:
                if not pd.api.types.is_numeric_dtype(frame[column]):
                    frame[column] = frame[column].str.decode("utf-8")
            target = target or frame.columns[-1]
        else:
            raise AccelmlError(f"{file}: unsupported file type {suffix!r} ({', '.join(FILE_FORMATS)})")
    except UNREADABLE as error:
        raise AccelmlError(f"{file}: cannot read: {error}") from None
    return _frame_to_arrays(frame, target, str(file))


def _read_idx(path: Path) -> np.ndarray:
    """An IDX file (MNIST / Fashion-MNIST layout), gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        content = handle.read()
    dims = content[3]
    shape = tuple(int.from_bytes(content[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(content, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def _idx_pair(folder: Path, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of one split of an MNIST-layout folder (``train`` or ``t10k``)."""
    def find(stem: str) -> Path:
        for candidate in (folder / f"{stem}.gz", folder / stem):
            if candidate.exists():
                return candidate
        raise AccelmlError(f"{folder}: no {stem}(.gz)")

    return (_read_idx(find(f"{prefix}-images-idx3-ubyte")),
            _read_idx(find(f"{prefix}-labels-idx1-ubyte")))


PICKLE_OPT_IN = "ACCELML_ALLOW_PICKLE"
"""Set to ``1`` (what ``compare --allow-pickle-data`` does for its case processes) to read
pickled CIFAR batches outside Keras's own download cache (:func:`keras_cache_dir`)."""

_PICKLE_GLOBALS = frozenset({
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
    *((module, name) for module in ("numpy.core.multiarray", "numpy._core.multiarray")
      for name in ("_reconstruct", "scalar")),
    *((module, "_frombuffer") for module in ("numpy.core.numeric", "numpy._core.numeric")),
})
"""The only globals a CIFAR batch may name: what NumPy arrays pickle as, nothing callable else."""


def keras_cache_dir() -> Path:
    """Where Keras keeps its downloads (``$KERAS_HOME/datasets``, default ``~/.keras/datasets``).

    >>> keras_cache_dir().name
    'datasets'
    """
    return Path(os.environ.get("KERAS_HOME") or Path.home() / ".keras") / "datasets"


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that builds dicts, lists, bytes and NumPy arrays and refuses any other global."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"refusing global {module}.{name} (not an array)")
        return super().find_class(module, name)


def _check_pickle_allowed(file: Path) -> None:
    """Pickled data loads only from Keras's own cache, or where the user opted in."""
    if os.environ.get(PICKLE_OPT_IN) == "1" or file.resolve().is_relative_to(keras_cache_dir().resolve()):
        return
    raise AccelmlError(f"{file}: pickled CIFAR batches load only from Keras's cache "
                       f"({keras_cache_dir()}) or with compare --allow-pickle-data "
                       f"({PICKLE_OPT_IN}=1): unpickling a file can run its code")


def _cifar_batch(file: Path) -> tuple[np.ndarray, np.ndarray]:
    """One pickled CIFAR batch: images (N, 32, 32, 3) uint8 and labels (CIFAR-100: fine).

    It is read only from Keras's cache or with the opt-in (:data:`PICKLE_OPT_IN`), and even
    then by an unpickler that builds nothing but containers and arrays."""
    _check_pickle_allowed(file)
    try:
        with open(file, "rb") as handle:
            data = _ArraysOnly(handle, encoding="bytes").load()  # the format CIFAR ships in
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError) as error:
        raise AccelmlError(f"{file}: not a CIFAR batch ({error})") from None
    if not isinstance(data, dict):
        raise AccelmlError(f"{file}: not a CIFAR batch (no data / labels)")
    labels = data.get(b"labels", data.get(b"fine_labels"))
    if labels is None or b"data" not in data:
        raise AccelmlError(f"{file}: not a CIFAR batch (no data / labels)")
    images = np.asarray(data[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    return images.transpose(0, 2, 3, 1), np.asarray(labels)


def _local_copy(name: str, location: Path
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read a local copy, recognised by its layout (see :func:`keras_dataset`)."""
    if not location.exists():
        raise AccelmlError(f"{location}: not found (a local copy of keras dataset {name!r})")
    if location.is_file() and location.suffix == ".npz":
        try:
            with np.load(location, allow_pickle=False) as archive:
                missing = {"x_train", "y_train", "x_test", "y_test"} - set(archive.files)
                if missing:
                    raise AccelmlError(f"{location}: lacks array(s) {', '.join(sorted(missing))}")
                return (archive["x_train"], archive["y_train"], archive["x_test"],
                        archive["y_test"])
        except UNREADABLE as error:
            raise AccelmlError(f"{location}: cannot read: {error}") from None
    if location.is_dir():
        if name in KERAS_FOLDERS and (location / KERAS_FOLDERS[name]).is_dir():
            location = location / KERAS_FOLDERS[name]
        if any(location.glob("train-images-idx3-ubyte*")):
            return (*_idx_pair(location, "train"), *_idx_pair(location, "t10k"))
        train_files = sorted(location.glob("data_batch_*")) or \
            [file for file in (location / "train",) if file.is_file()]
        test_file = next((file for file in (location / "test_batch", location / "test")
                          if file.is_file()), None)
        if train_files and test_file is not None:
            parts = [_cifar_batch(file) for file in train_files]
            x_test, y_test = _cifar_batch(test_file)
            return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                    x_test, y_test)
    raise AccelmlError(f"{location}: not a local copy of keras dataset {name!r} "
                       "(an .npz with x_train/y_train/x_test/y_test, or the folder Keras "
                       "downloads: MNIST-layout idx files, or CIFAR batches)")


def keras_dataset(name: str, path: str | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test) of a Keras dataset (one of :data:`KERAS_CLASSES`).

    ``path`` is a local copy in the layout Keras downloads: an ``.npz`` with arrays x_train,
    y_train, x_test, y_test (the form of ``mnist.npz``; any set may use it), a folder with
    the four ``*-idx?-ubyte(.gz)`` files (MNIST, Fashion-MNIST), or a CIFAR folder
    (``cifar-10-batches-py``: ``data_batch_*`` and ``test_batch``; ``cifar-100-python``:
    ``train`` and ``test``, fine labels) or the folder above it. Without ``path`` it calls
    ``keras.datasets.<name>.load_data()``, which downloads into ``~/.keras/datasets``.
    """
    if name not in KERAS_CLASSES:
        raise AccelmlError(f"unknown keras dataset {name!r}; allowed: {', '.join(KERAS_CLASSES)}")
    if path is not None:
        return _local_copy(name, Path(path))
    try:
        import keras

        (x_train, y_train), (x_test, y_test) = getattr(keras.datasets, name).load_data()
    except Exception as error:  # the download or the import failed; say which set and why
        raise AccelmlError(f"keras dataset {name!r} could not be loaded ({error}); "
                           "give path = a local copy") from None
    return x_train, y_train, x_test, y_test


def openml(*, name: str | None = None, data_id: int | None = None, version: int | None = None,
           path: str | None = None, target: str | None = None
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """An OpenML dataset: from ``path`` (.arff, .csv or .parquet) or fetched by name/id."""
    if path is not None:
        return from_file(path, target=target)
    from sklearn.datasets import fetch_openml

    try:
        bunch = fetch_openml(name=name, data_id=data_id, version=version or "active",
                             as_frame=True, parser="auto")
    except Exception as error:  # network or OpenML errors: name the set and why
        raise AccelmlError(f"openml dataset {name or data_id!r} could not be fetched ({error}); "
                           "give path = a local .arff/.csv/.parquet copy") from None
    frame = bunch.frame
    target = target or (bunch.target_names[0] if bunch.target_names else None)
    return _frame_to_arrays(frame, target, f"openml {name or data_id}")
