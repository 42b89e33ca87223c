"""Turn a dataset definition into train/test arrays, cached on disk by content hash.

A definition is a ``source`` and its ``options`` (what a ``[datasets.NAME]`` table of a spec
holds). :func:`load_dataset` returns a :class:`LoadedData` whose ``info`` records the
digest of the arrays, their shapes, dtype and memory layout.

The cache key is the hash of the definition plus, for files, the hash of the file's bytes,
so editing a data file invalidates its cache entry. The cache lives in ``$ACCELML_CACHE_DIR``
(default ``~/.cache/accelml/datasets``) unless a ``cache_dir`` is given.

>>> import tempfile
>>> data = load_dataset("tiny", "generated", {"generator": "blobs", "n_samples": 40,
...                     "n_features": 3, "centers": 2}, cache_dir=tempfile.mkdtemp())
>>> data.X_train.shape, data.info.task, data.info.layout
((30, 3), 'classification', 'C')
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from accelml.cases import canonical_json
from accelml.datasets import loaders
from accelml.errors import AccelmlError
from accelml.file_cache import cache_home
from accelml.results.records import DatasetInfo

CACHE_FORMAT = 1


@dataclass(frozen=True)
class NamedSource:
    """A source whose datasets are picked by name: the option that names one (``key``), the
    names its loader offers, and what a name is called in messages."""

    key: str
    names: tuple[str, ...]
    what: str


NAMED_SOURCES: Mapping[str, NamedSource] = MappingProxyType({
    "generated": NamedSource("generator", loaders.GENERATORS, "generator"),
    "shipped": NamedSource("name", tuple(loaders.SHIPPED_TASKS), "shipped dataset"),
    "keras": NamedSource("name", tuple(loaders.KERAS_CLASSES), "keras dataset"),
})
"""source -> the names its loader offers; the spec's validation reads this, so a name that
validates is one the loader loads.

>>> NAMED_SOURCES["keras"].names
('mnist', 'fashion_mnist', 'cifar10', 'cifar100')
"""


@dataclass(frozen=True, eq=False)
class LoadedData:
    """Train/test arrays of one dataset and what describes them."""

    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray | None
    y_test: np.ndarray | None
    info: DatasetInfo
    from_cache: bool = False


def default_cache_dir() -> Path:
    configured = os.environ.get("ACCELML_CACHE_DIR")
    if configured:
        return Path(configured)
    return cache_home() / "datasets"


def dataset_task(source: str, options: Mapping[str, Any]) -> str | None:
    """The task a dataset serves, when its definition says (None: only known after loading)."""
    if "task" in options:
        return str(options["task"])
    if source == "generated":
        return loaders.GENERATOR_TASKS.get(options.get("generator", ""))
    if source == "shipped":
        return loaders.SHIPPED_TASKS.get(options.get("name", ""))
    if source == "keras":
        return "classification"
    return None


def _file_hash(path: str) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def _path_hash(path: str) -> str:
    location = Path(path)
    if location.is_dir():
        hasher = hashlib.sha256()
        for file in sorted(p for p in location.rglob("*") if p.is_file()):
            hasher.update(str(file.relative_to(location)).encode())
            hasher.update(_file_hash(str(file)).encode())
        return hasher.hexdigest()
    return _file_hash(path)


def cache_key(source: str, options: Mapping[str, Any]) -> str:
    """Hash of the definition and of the bytes of any file it reads."""
    identity = {"format": CACHE_FORMAT, "source": source, **options}
    if "path" in options:
        if not Path(options["path"]).exists():
            raise AccelmlError(f"dataset file not found: {options['path']}")
        identity["path"] = _path_hash(options["path"])
    return hashlib.sha256(canonical_json(identity).encode()).hexdigest()[:32]


def data_digest(*arrays: np.ndarray | None) -> str:
    hasher = hashlib.sha256()
    for array in arrays:
        if array is None:
            hasher.update(b"none|")
            continue
        array = np.ascontiguousarray(array)
        hasher.update(f"{array.dtype.str}|{array.shape}|".encode())
        hasher.update(array.tobytes())
    return hasher.hexdigest()


def _split(X: np.ndarray, y: np.ndarray | None, test_size: float, seed: int, task: str
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    from sklearn.model_selection import train_test_split

    if y is None:
        X_train, X_test = train_test_split(X, test_size=test_size, random_state=seed)
        return X_train, X_test, None, None
    stratify = None
    if task == "classification":
        _, counts = np.unique(y, return_counts=True)
        if counts.min() >= 2:
            stratify = y
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, random_state=seed, stratify=stratify)
    return X_train, X_test, y_train, y_test


def _load_raw(source: str, options: Mapping[str, Any]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, str]:
    seed = options.get("seed", 0)
    test_size = options.get("test_size", 0.25)
    X: np.ndarray
    y: np.ndarray | None
    if source == "keras":
        x_train, y_train, x_test, y_test = loaders.keras_dataset(options["name"], options.get("path"))
        if options.get("train_samples"):
            x_train, y_train = x_train[: options["train_samples"]], y_train[: options["train_samples"]]
        if options.get("test_samples"):
            x_test, y_test = x_test[: options["test_samples"]], y_test[: options["test_samples"]]
        if x_train.ndim == 3:
            x_train, x_test = x_train[..., None], x_test[..., None]
        x_train = x_train.astype(np.float32) / 255.0
        x_test = x_test.astype(np.float32) / 255.0
        return x_train, x_test, y_train.reshape(-1), y_test.reshape(-1), "classification"
    if source == "generated":
        generator_options = {key: options[key] for key in (
            "n_samples", "n_features", "n_informative", "n_classes", "centers", "cluster_std",
            "noise") if key in options}
        X, y, task = loaders.generated(options["generator"], seed=seed, **generator_options)
    elif source == "shipped":
        X, y, task = loaders.shipped(options["name"])
    elif source == "file":
        X, y = loaders.from_file(options["path"], target=options.get("target"),
                                 x_key=options.get("x_key", "X"), y_key=options.get("y_key", "y"))
        task = options.get("task") or ("clustering" if y is None else _guess_task(y))
    elif source == "openml":
        X, y = loaders.openml(name=options.get("name"), data_id=options.get("data_id"),
                              version=options.get("version"), path=options.get("path"),
                              target=options.get("target"))
        task = options.get("task") or ("clustering" if y is None else _guess_task(y))
        if options.get("max_samples") and len(X) > options["max_samples"]:
            rows = np.random.default_rng(seed).choice(len(X), options["max_samples"], replace=False)
            X, y = X[np.sort(rows)], None if y is None else y[np.sort(rows)]
    else:
        raise AccelmlError(f"unknown dataset source {source!r}")
    task = options.get("task", task)
    return (*_split(np.asarray(X), None if y is None else np.asarray(y), test_size, seed, task),
            task)


def _guess_task(y: np.ndarray) -> str:
    y = np.asarray(y)
    if y.dtype.kind in "biuOUS" or (y.dtype.kind == "f" and np.all(np.mod(y, 1) == 0)
                                  and len(np.unique(y)) <= max(20, int(len(y) ** 0.5))):
        return "classification"
    return "regression"


def _finish(X: np.ndarray, dtype: str, layout: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.dtype(dtype))
    return np.asfortranarray(X) if layout == "F" else np.ascontiguousarray(X)


def _write_cache(path: Path, arrays: dict[str, np.ndarray], task: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
    os.close(handle)
    try:
        np.savez(temporary, allow_pickle=False, task=np.array(task), **arrays)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load_dataset(name: str, source: str, options: Mapping[str, Any],
                 cache_dir: str | Path | None = None) -> LoadedData:
    """Load (or read from the cache) one dataset; see the module docstring."""
    options = dict(options)
    dtype = options.get("dtype", "float32" if source == "keras" else "float64")
    layout = options.get("layout", "C")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    entry = cache / f"{cache_key(source, options)}.npz"
    from_cache = False
    arrays: dict[str, np.ndarray] = {}
    task = None
    if entry.exists():
        try:
            with np.load(entry, allow_pickle=False) as archive:
                arrays = {key: archive[key] for key in archive.files if key != "task"}
                task = str(archive["task"])
            from_cache = True
        except (*loaders.UNREADABLE, KeyError):
            arrays, task = {}, None   # a damaged entry is rebuilt below
    if task is None:
        X_train, X_test, y_train, y_test, task = _load_raw(source, options)
        # kept in the dtype asked for (part of the key): a float32 set of 40M x 50 rows is
        # cached, read and held as 8 GB, not as the 16 GB that the generators draw in float64
        arrays = {"X_train": _finish(X_train, dtype, "C"), "X_test": _finish(X_test, dtype, "C")}
        del X_train, X_test
        if y_train is not None and y_test is not None:
            arrays.update(y_train=y_train, y_test=y_test)
        try:
            _write_cache(entry, arrays, task)
        except OSError:
            pass   # a read-only cache only costs the next load its time
    X_train = _finish(arrays["X_train"], dtype, layout)
    X_test = _finish(arrays["X_test"], dtype, layout)
    y_train, y_test = arrays.get("y_train"), arrays.get("y_test")
    n_classes = None
    if task == "classification" and y_train is not None:
        n_classes = int(len(np.unique(np.concatenate([y_train, y_test]))))
    info = DatasetInfo(
        name=name,
        digest=data_digest(X_train, X_test, y_train, y_test)[:32],
        source=source,
        task=task,
        n_train=int(X_train.shape[0]),
        n_test=int(X_test.shape[0]),
        n_features=int(np.prod(X_train.shape[1:])),
        n_classes=n_classes,
        dtype=str(X_train.dtype),
        layout="F" if (X_train.ndim > 1 and X_train.flags.f_contiguous
                       and not X_train.flags.c_contiguous) else "C",
        feature_shape=tuple(int(d) for d in X_train.shape[1:]),
    )
    return LoadedData(X_train, X_test, y_train, y_test, info, from_cache)
