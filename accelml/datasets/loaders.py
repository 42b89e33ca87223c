"""Where data comes from: generators, sklearn's shipped sets, files, Keras and OpenML.

Each loader returns ``(X, y, task)`` or, for sets that come split (Keras), the four arrays.
No loader touches the network unless the spec asks for a Keras/OpenML set *without* a
``path``; with ``path`` they read the local copy (the layout those libraries download).

>>> X, y, task = generated("blobs", n_samples=10, n_features=2, centers=2, seed=0)
>>> X.shape, task
((10, 2), 'classification')
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from accelml.errors import AccelmlError

SHIPPED_TASKS = {
    "digits": "classification",
    "breast_cancer": "classification",
    "wine": "classification",
    "iris": "classification",
    "diabetes": "regression",
}
GENERATOR_TASKS = {"classification": "classification", "regression": "regression",
                   "blobs": "classification"}


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
    elif generator == "images":
        raise AccelmlError("generator 'images' draws image data for keras cases only; "
                           "use classification, regression or blobs for this algorithm")
    else:
        raise AccelmlError(f"unknown generator {generator!r}")
    return X, y, GENERATOR_TASKS[generator]


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


def from_file(path: str, *, target: str | None = None, x_key: str = "X",
              y_key: str = "y") -> tuple[np.ndarray, np.ndarray | None]:
    """``.npz`` (arrays ``x_key``/``y_key``), ``.csv`` or ``.parquet`` (``target`` column)."""
    file = Path(path)
    suffix = file.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(file, allow_pickle=False) as archive:
                if x_key not in archive:
                    raise AccelmlError(f"{file}: no array {x_key!r}; arrays: {', '.join(archive.files)}")
                X = archive[x_key]
                y = archive[y_key] if y_key in archive else None
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
            raise AccelmlError(f"{file}: unsupported file type {suffix!r} (.npz, .csv, .parquet)")
    except (OSError, ValueError) as error:
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


def keras_dataset(name: str, path: str | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test) of a Keras dataset.

    ``path`` is a local copy in the layout Keras downloads: ``mnist.npz`` (arrays x_train,
    y_train, x_test, y_test; any set may use this form), a Fashion-MNIST folder with the four
    ``*-idx?-ubyte.gz`` files, or the ``cifar-10-batches-py`` folder. Without ``path`` it calls
    ``keras.datasets.<name>.load_data()``, which downloads into ``~/.keras/datasets``.
    """
    if path is None:
        try:
            import keras

            (x_train, y_train), (x_test, y_test) = getattr(keras.datasets, name).load_data()
        except Exception as error:  # the download or the import failed; say which set and why
            raise AccelmlError(f"keras dataset {name!r} could not be loaded ({error}); "
                               "give path = a local copy") from None
        return x_train, y_train, x_test, y_test
    location = Path(path)
    if location.is_file() and location.suffix == ".npz":
        with np.load(location, allow_pickle=False) as archive:
            missing = {"x_train", "y_train", "x_test", "y_test"} - set(archive.files)
            if missing:
                raise AccelmlError(f"{location}: missing arrays {', '.join(sorted(missing))}")
            return (archive["x_train"], archive["y_train"], archive["x_test"], archive["y_test"])
    if location.is_dir() and name in ("mnist", "fashion_mnist"):
        def find(stem: str) -> Path:
            for candidate in (location / f"{stem}.gz", location / stem):
                if candidate.exists():
                    return candidate
            raise AccelmlError(f"{location}: no {stem}(.gz)")

        return (_read_idx(find("train-images-idx3-ubyte")), _read_idx(find("train-labels-idx1-ubyte")),
                _read_idx(find("t10k-images-idx3-ubyte")), _read_idx(find("t10k-labels-idx1-ubyte")))
    if location.is_dir() and name in ("cifar10", "cifar100"):
        def batch(file: Path) -> tuple[np.ndarray, np.ndarray]:
            with open(file, "rb") as handle:
                data = pickle.load(handle, encoding="bytes")  # the format CIFAR ships in
            labels = data.get(b"labels", data.get(b"fine_labels"))
            images = np.asarray(data[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
            return images.transpose(0, 2, 3, 1), np.asarray(labels)

        train_files = sorted(location.glob("data_batch_*")) or [location / "train"]
        parts = [batch(file) for file in train_files if file.exists()]
        test_file = location / "test_batch" if (location / "test_batch").exists() else location / "test"
        if not parts or not test_file.exists():
            raise AccelmlError(f"{location}: not a CIFAR python folder (data_batch_*, test_batch)")
        x_test, y_test = batch(test_file)
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                x_test, y_test)
    raise AccelmlError(f"{location}: not a local copy of keras dataset {name!r} "
                       "(an .npz with x_train/y_train/x_test/y_test, or the folder Keras downloads)")


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
