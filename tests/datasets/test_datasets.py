import gzip
import pickle

import numpy as np
import pandas as pd
import pytest

from accelml.datasets import load_dataset
from accelml.datasets.loaders import PICKLE_OPT_IN
from accelml.errors import AccelmlError


def test_generated_is_seeded_split_and_cached(tmp_path):
    options = {"generator": "classification", "n_samples": 200, "n_features": 6, "seed": 3}
    first = load_dataset("c", "generated", options, cache_dir=tmp_path)
    second = load_dataset("c", "generated", options, cache_dir=tmp_path)
    assert not first.from_cache and second.from_cache
    assert first.info == second.info
    assert np.array_equal(first.X_train, second.X_train)
    assert (first.info.n_train, first.info.n_test, first.info.n_features) == (150, 50, 6)
    reseeded = load_dataset("c", "generated", {**options, "seed": 4}, cache_dir=tmp_path)
    assert reseeded.info.digest != first.info.digest


def test_dtype_and_layout_are_applied_and_recorded(tmp_path):
    data = load_dataset("d", "generated", {"generator": "regression", "n_samples": 40,
                                           "n_features": 3, "dtype": "float32", "layout": "F"},
                        cache_dir=tmp_path)
    assert data.X_train.dtype == np.float32 and data.X_train.flags.f_contiguous
    assert (data.info.dtype, data.info.layout, data.info.task) == ("float32", "F", "regression")


def test_the_cache_keeps_the_dtype_asked_for_and_reads_back_the_same_data(tmp_path):
    options = {"generator": "classification", "n_samples": 300, "n_features": 5, "dtype": "float32"}
    made = load_dataset("f", "generated", options, cache_dir=tmp_path)
    (entry,) = tmp_path.glob("*.npz")
    with np.load(entry) as cached:
        assert cached["X_train"].dtype == cached["X_test"].dtype == np.float32
    again = load_dataset("f", "generated", options, cache_dir=tmp_path)
    assert again.from_cache and again.info == made.info
    as_float64 = load_dataset("f", "generated", {**options, "dtype": "float64"}, cache_dir=tmp_path)
    assert not as_float64.from_cache and as_float64.X_train.dtype == np.float64
    assert np.array_equal(as_float64.X_train.astype(np.float32), made.X_train)


@pytest.mark.parametrize("name, task, classes", [("digits", "classification", 10),
                                                 ("breast_cancer", "classification", 2),
                                                 ("wine", "classification", 3),
                                                 ("diabetes", "regression", None)])
def test_shipped_sets(tmp_path, name, task, classes):
    data = load_dataset(name, "shipped", {"name": name}, cache_dir=tmp_path)
    assert (data.info.task, data.info.n_classes) == (task, classes)


def test_files_npz_csv_parquet_and_content_hash_cache(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.integers(0, 2, 40)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=np.where(y, "yes", "no"))
    frame.to_csv(tmp_path / "d.csv", index=False)
    frame.to_parquet(tmp_path / "d.parquet")
    cache = tmp_path / "cache"
    from_npz = load_dataset("n", "file", {"path": str(tmp_path / "d.npz")}, cache_dir=cache)
    from_csv = load_dataset("c", "file", {"path": str(tmp_path / "d.csv"), "target": "label"},
                            cache_dir=cache)
    from_parquet = load_dataset("p", "file", {"path": str(tmp_path / "d.parquet"),
                                              "target": "label"}, cache_dir=cache)
    assert from_npz.info.task == from_csv.info.task == "classification"
    assert np.allclose(np.sort(from_csv.X_train, axis=0), np.sort(from_parquet.X_train, axis=0))
    assert set(np.unique(from_csv.y_train)) <= {0, 1}
    # changing the file's bytes gives a new cache entry, not a stale one
    np.savez(tmp_path / "d.npz", X=X * 2, y=y)
    changed = load_dataset("n", "file", {"path": str(tmp_path / "d.npz")}, cache_dir=cache)
    assert not changed.from_cache and changed.info.digest != from_npz.info.digest
    with pytest.raises(AccelmlError, match="no column 'nope'"):
        load_dataset("c", "file", {"path": str(tmp_path / "d.csv"), "target": "nope"},
                     cache_dir=cache)


def _idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def test_keras_loaders_read_local_copies(tmp_path, monkeypatch):
    monkeypatch.setenv(PICKLE_OPT_IN, "1")      # the CIFAR copy below is pickled, outside Keras's cache
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 255, (12, 28, 28)), rng.integers(0, 10, 12)
    folder = tmp_path / "fashion"
    folder.mkdir()
    _idx(folder / "train-images-idx3-ubyte.gz", images[:8])
    _idx(folder / "train-labels-idx1-ubyte.gz", labels[:8])
    _idx(folder / "t10k-images-idx3-ubyte.gz", images[8:])
    _idx(folder / "t10k-labels-idx1-ubyte.gz", labels[8:])
    data = load_dataset("f", "keras", {"name": "fashion_mnist", "path": str(folder)},
                        cache_dir=tmp_path / "c")
    assert data.X_train.shape == (8, 28, 28, 1) and data.X_train.dtype == np.float32
    assert np.allclose(data.X_train[..., 0] * 255, images[:8])
    assert np.array_equal(data.y_test, labels[8:])
    np.savez(tmp_path / "mnist.npz", x_train=images[:8], y_train=labels[:8],
             x_test=images[8:], y_test=labels[8:])
    npz = load_dataset("m", "keras", {"name": "mnist", "path": str(tmp_path / "mnist.npz"),
                                      "train_samples": 5}, cache_dir=tmp_path / "c")
    assert npz.info.n_train == 5 and npz.info.feature_shape == (28, 28, 1)
    cifar = tmp_path / "cifar-10-batches-py"
    cifar.mkdir()
    for name, count in (("data_batch_1", 6), ("data_batch_2", 4), ("test_batch", 3)):
        with open(cifar / name, "wb") as handle:
            pickle.dump({b"data": rng.integers(0, 255, (count, 3072)).astype(np.uint8),
                         b"labels": list(rng.integers(0, 10, count))}, handle)
    data = load_dataset("cf", "keras", {"name": "cifar10", "path": str(cifar)},
                        cache_dir=tmp_path / "c")
    assert data.X_train.shape == (10, 32, 32, 3) and data.info.n_test == 3


def test_openml_reads_a_local_arff(tmp_path):
    arff = tmp_path / "tiny.arff"
    rows = "\n".join(f"{i}.0,{i % 3}.5,{'a' if i % 2 else 'b'}" for i in range(20))
    arff.write_text("@RELATION tiny\n@ATTRIBUTE x NUMERIC\n@ATTRIBUTE z NUMERIC\n"
                    "@ATTRIBUTE class {a,b}\n@DATA\n" + rows + "\n")
    data = load_dataset("o", "openml", {"name": "tiny", "path": str(arff)}, cache_dir=tmp_path / "c")
    assert data.info.task == "classification" and data.info.n_classes == 2
    assert data.info.n_features == 2


class _RunsCode:
    """What an attacker pickles: unpickling it calls ``os.system``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def _cifar_folder(folder, data):
    folder.mkdir(parents=True)
    for name in ("data_batch_1", "test_batch"):
        with open(folder / name, "wb") as handle:
            pickle.dump(data, handle)


def test_pickled_cifar_loads_only_from_the_keras_cache_or_with_the_opt_in(tmp_path, monkeypatch):
    monkeypatch.delenv(PICKLE_OPT_IN, raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras-home"))
    batch = {b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 2]}
    outside = tmp_path / "shared" / "cifar-10-batches-py"
    _cifar_folder(outside, batch)
    with pytest.raises(AccelmlError, match="load only from Keras's cache .* --allow-pickle-data"):
        load_dataset("c", "keras", {"name": "cifar10", "path": str(outside)}, cache_dir=tmp_path / "c")
    cached = tmp_path / "keras-home" / "datasets" / "cifar-10-batches-py"
    _cifar_folder(cached, batch)
    data = load_dataset("c", "keras", {"name": "cifar10", "path": str(cached)}, cache_dir=tmp_path / "c")
    assert data.X_train.shape == (2, 32, 32, 3)
    monkeypatch.setenv(PICKLE_OPT_IN, "1")
    data = load_dataset("c", "keras", {"name": "cifar10", "path": str(outside)}, cache_dir=tmp_path / "c2")
    assert data.X_train.shape == (2, 32, 32, 3)


def test_a_pickle_that_runs_code_is_refused_even_with_the_opt_in(tmp_path, monkeypatch):
    monkeypatch.setenv(PICKLE_OPT_IN, "1")
    marker = tmp_path / "pwned"
    folder = tmp_path / "cifar-10-batches-py"
    _cifar_folder(folder, {b"data": _RunsCode(marker), b"labels": [0]})
    with pytest.raises(AccelmlError, match="not a CIFAR batch .*refusing global posix.system"):
        load_dataset("c", "keras", {"name": "cifar10", "path": str(folder)}, cache_dir=tmp_path / "c")
    assert not marker.exists()
