"""A rank imports Keras without what Keras and TensorFlow import where installed but a rank never
uses (scikit-learn, pandas, matplotlib, and JAX on the other engines): about 3 CPU-s of every
rank's start (benchmarks/bench_rank_start.py). Its digits come from the dataset registry's cache,
not from scikit-learn. A rank on torch that saves its model and writes TensorBoard logs imports
no TensorFlow (Keras and TensorBoard would, ~5 CPU-s). What it skipped stays importable
afterwards."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from accelml.dl.config import TrainingConfig
from accelml.dl.data import load_image_data

RANK = """
import json, sys
from accelml.dl.rank import main
code = main(sys.argv[1:3])
loaded = [name for name in ("sklearn", "pandas", "matplotlib", "jax", "tensorflow")
          if name in sys.modules]
import pandas, sklearn   # a rank's own code may still import them
print(json.dumps({"code": code, "loaded": loaded}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("strategy,engine", [("single", "tensorflow"), ("torch-ddp", "torch")])
def test_a_rank_trains_without_importing_what_it_never_uses(tmp_path, monkeypatch, strategy, engine):
    if importlib.util.find_spec(engine) is None:
        pytest.skip(f"{engine} is not installed")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    load_image_data("digits")   # the registry's cache, as the first rank of a machine fills it
    config = TrainingConfig(model="mlp", dataset="digits", strategy=strategy, keras_backend=engine,
                            epochs=1, train_samples=256, test_samples=64, save_model=True,
                            tensorboard=engine == "torch", output_dir=str(tmp_path / "out"))
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    done = subprocess.run([sys.executable, "-c", RANK, str(tmp_path / "config.json"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "ACCELML_RANK": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"code": 0, "loaded": [engine] if engine == "tensorflow" else []}
    written = json.loads((tmp_path / "rank-0.json").read_text())
    assert written["ok"] is True, written
    assert written["result"]["train_samples"] == 256
    assert (tmp_path / "out" / "model.keras").stat().st_size > 0
    if config.tensorboard:
        (events,) = (tmp_path / "out" / "tensorboard").glob("events.out.tfevents.*")
        assert events.stat().st_size > 0


def test_the_digits_split_is_scikit_learns_stratified_fifth(tmp_path, monkeypatch):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    bunch = load_digits()
    images = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    expected = train_test_split(images, bunch.target.astype(np.int32), test_size=0.2,
                                random_state=0, stratify=bunch.target)
    for _ in ("computed", "read from the cache"):
        data = load_image_data("digits")
        found = (data.x_train, data.x_test, data.y_train, data.y_test)
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(found, expected, strict=True))
