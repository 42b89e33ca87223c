"""Dataset names come from the loaders: a name the spec accepts is one both loaders load.

Issue 14: the names were listed twice (``spec/schema.py``, ``dl/data.py``); a spec with the
keras dataset ``"cifar100"`` validated, then its case failed at run time.
"""

import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accelml.datasets import load_dataset
from accelml.datasets.loaders import PICKLE_OPT_IN
from accelml.dl.config import TrainingConfig
from accelml.dl.data import load_image_data
from accelml.errors import SpecError
from accelml.estimators.keras import training_config_dict
from accelml.spec.load import load_spec, load_spec_text

REPO = Path(__file__).resolve().parents[2]

KERAS_SPEC = """
name = "images"
reference = "keras"
repeats = 1
warmup = 0

[datasets.images]
source = "keras"
name = "NAME"
path = "PATH"

[[cases]]
algorithm = "mlp"
backend = "keras"
dataset = "images"
epochs = 1
batch_size = 8
"""


def _keras_spec(name: str, path: Path) -> str:
    return KERAS_SPEC.replace("NAME", name).replace("PATH", str(path))


def _allowed_keras_names(tmp_path: Path) -> list[str]:
    """The keras names validation accepts, as it tells the user (not read from a table)."""
    with pytest.raises(SpecError) as error:
        load_spec_text(_keras_spec("no-such-set", tmp_path), "probe.toml", tmp_path)
    found = re.search(r"unknown keras dataset 'no-such-set'; allowed: (.*)$", str(error.value))
    assert found, str(error.value)
    return found.group(1).split(", ")


def _write_npz(path: Path, classes: int, channels: int) -> None:
    rng = np.random.default_rng(0)
    shape = (28, 28) if channels == 1 else (32, 32, 3)
    np.savez(path, x_train=rng.integers(0, 256, (12, *shape), dtype=np.uint8),
             y_train=np.arange(12, dtype=np.uint8) % classes,
             x_test=rng.integers(0, 256, (4, *shape), dtype=np.uint8),
             y_test=np.arange(4, dtype=np.uint8) % classes)


def test_every_keras_name_that_validates_loads_for_classical_and_deep_learning_cases(tmp_path):
    names = _allowed_keras_names(tmp_path)
    assert {"mnist", "fashion_mnist", "cifar10", "cifar100"} <= set(names)
    for name in names:
        copy = tmp_path / f"{name}.npz"
        _write_npz(copy, classes=10, channels=1 if "mnist" in name else 3)
        (case,) = load_spec_text(_keras_spec(name, copy), f"{name}.toml", tmp_path).cases
        config = TrainingConfig.from_dict(training_config_dict(case))
        images = load_image_data(config.dataset, config.data_path)
        assert images.x_train.shape[0] == 12 and images.y_test.tolist() == [0, 1, 2, 3]
        arrays = load_dataset(name, "keras", dict(case.dataset.options), cache_dir=tmp_path / "c")
        assert arrays.info.n_train == 12 and arrays.info.task == "classification"


def _write_cifar100(folder: Path) -> None:
    """The layout of Keras' cifar-100-python download: pickled ``train`` and ``test`` with
    ``data`` (N x 3072, channel-major) and ``fine_labels`` / ``coarse_labels``."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for part, count in (("train", 30), ("test", 10)):
        fine = [(7 * i) % 100 for i in range(count)]
        if part == "train":
            fine[0] = 99
        with open(folder / part, "wb") as handle:
            pickle.dump({b"data": rng.integers(0, 256, (count, 3072), dtype=np.uint8),
                         b"fine_labels": fine, b"coarse_labels": [f // 5 for f in fine],
                         b"filenames": [b"x.png"] * count}, handle)


def test_cifar100_validates_and_loads_its_100_classes_from_the_cifar_layout(tmp_path, monkeypatch):
    monkeypatch.setenv(PICKLE_OPT_IN, "1")      # pickled batches outside Keras's cache
    _write_cifar100(tmp_path / "cifar-100-python")
    (case,) = load_spec_text(_keras_spec("cifar100", tmp_path), "c100.toml", tmp_path).cases
    config = TrainingConfig.from_dict(training_config_dict(case))
    images = load_image_data(config.dataset, config.data_path)
    assert images.classes == 100
    assert images.x_train.shape == (30, 32, 32, 3) and images.x_test.shape == (10, 32, 32, 3)
    assert images.y_train.max() == 99
    with open(tmp_path / "cifar-100-python" / "train", "rb") as handle:
        first = pickle.load(handle, encoding="bytes")[b"data"][0]
    assert np.array_equal(images.x_train[0], first.reshape(3, 32, 32).transpose(1, 2, 0))
    arrays = load_dataset("c100", "keras", dict(case.dataset.options), cache_dir=tmp_path / "c")
    assert arrays.info.n_classes == len(set(np.concatenate([arrays.y_train, arrays.y_test])))


@pytest.mark.slow
def test_cifar100_case_trains_end_to_end(tmp_path):
    """Validation, loading and training agree: the case runs, with a 100-way output."""
    _write_cifar100(tmp_path / "cifar-100-python")
    spec = tmp_path / "c100.toml"
    spec.write_text(_keras_spec("cifar100", tmp_path))
    out = subprocess.run([sys.executable, "-m", "accelml", "compare", str(spec), "--json",
                          "--no-progress", "--allow-pickle-data", "--results-dir", str(tmp_path / "results"),
                          "--cache-dir", str(tmp_path / "cache")],
                         check=False, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]


def test_a_keras_name_the_loaders_do_not_offer_is_a_one_line_spec_error(tmp_path):
    spec = tmp_path / "emnist.toml"
    spec.write_text(_keras_spec("emnist", tmp_path))
    results = tmp_path / "results"
    for command in (["compare", str(spec)], ["check", str(spec), "--baseline",
                                             str(tmp_path / "b.json"), "--update-baseline"]):
        out = subprocess.run([sys.executable, "-m", "accelml", *command, "--results-dir",
                              str(results)], check=False, capture_output=True, text=True,
                             cwd=tmp_path, timeout=300)
        assert out.returncode == 2, out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert "datasets.images.name: unknown keras dataset 'emnist'; allowed: " in line
        assert "cifar100" in line and out.stdout == ""
        assert not results.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["emnist.toml"]
    with pytest.raises(SpecError, match="unknown keras dataset 'emnist'"):
        load_spec(spec)
