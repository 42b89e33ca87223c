"""The Python API: accelml.compare(...) on in-memory data, through the real pipeline."""

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_blobs

import accelml
from accelml.report.table import Agreement


@pytest.mark.slow
def test_compare_in_memory_data(tmp_path):
    X, _ = make_blobs(n_samples=600, n_features=4, centers=3, random_state=0)
    result = accelml.compare("kmeans", ["sklearn", "sklearnex"], data=(X, None), repeats=2,
                             params={"n_clusters": 3, "n_init": 1, "random_state": 0},
                             threads=1, results_dir=tmp_path, cluster="local", jobs=1)
    assert [r.status for r in result.results] == ["ok", "ok"]
    assert {r.task for r in result.results} == {"clustering"}
    speedups = result.speedup(reference="sklearn")
    assert set(speedups) == {"sklearn/cpu", "sklearnex/cpu"} and speedups["sklearn/cpu"] == 1.0
    agreement = result.agreement(reference="sklearn")
    assert isinstance(agreement["sklearnex/cpu"], Agreement)
    assert agreement["sklearnex/cpu"].kind == "label_agreement" and agreement["sklearnex/cpu"].value > 0.95
    table = result.table()
    assert "kmeans" in table and "sklearnex" in table and "ref" in table
    # everything is in the store, readable later by any reader
    from accelml.comparison import Comparison

    again = Comparison.from_store(result.store, result.run_id)
    assert again.results == result.results
    labels = result.store.read_array(result.results[0].prediction().digest)
    assert labels.shape == (150,) and np.issubdtype(labels.dtype, np.integer)
    # the agreement matrix: every repeat and the cross-backend pair
    matrix = result.agreement_matrix()
    assert len(matrix.run_to_run) == 2 and len(matrix.cross_backend) == 1
    assert matrix.cross_backend[0].value("label_agreement") == agreement["sklearnex/cpu"].value
    assert "cross-backend" in matrix.format() and matrix.to_dict()["reference"] == "sklearn"
    # the full report, written from the same store
    report = result.report(json=tmp_path / "report.json")
    assert report.run.run_id == result.run_id and (tmp_path / "report.json").exists()


def test_accelml_compare_is_a_plain_function_whatever_is_imported():
    import importlib
    import inspect

    for name in ("accelml.comparison", "accelml.orchestration", "accelml.cli.compare"):
        importlib.import_module(name)
    from accelml import compare

    assert inspect.isfunction(accelml.compare) and compare is accelml.compare
    assert compare is importlib.import_module("accelml.comparison").compare
    assert list(inspect.signature(compare).parameters)[:3] == ["algorithm", "backends", "data"]


def test_deterministic_compare_fills_in_the_seed(tmp_path):
    X, y = make_blobs(n_samples=300, n_features=4, centers=2, random_state=0)
    result = accelml.compare("random_forest_classifier", ["sklearn"], data=(X, y), repeats=2,
                             params={"n_estimators": 5}, threads=1, results_dir=tmp_path,
                             deterministic=True)
    (case,) = result.results
    assert case.ok and dict(case.params)["random_state"] == 0 and result.run.deterministic
    assert len(set(case.repeat_prediction_digests)) == 1
    assert not result.agreement_matrix().unexpected


CLEANUP_SCRIPT = """
import sys
from pathlib import Path

from pathlib import Path

import numpy as np

import accelml
from accelml.errors import SpecError

X = np.random.default_rng(0).normal(size=(200, 3))
options = dict(repeats=1, warmup=0, threads=1)
params = {"n_clusters": 2, "n_init": 1, "random_state": 0}
left = accelml.compare("kmeans", ["sklearn"], data=(X, None), params=params, **options)
assert (left.store.directory / "inputs").is_dir()      # the caller's data, copied
with accelml.compare("kmeans", ["sklearn"], data=(X, None), params=params, **options) as res:
    inside = res.store.directory
    assert res.results[0].ok and inside.is_dir()
assert not inside.exists(), "leaving the with block removes the temporary store"
kept = accelml.compare("kmeans", ["sklearn"], data=(X, None), params=params, keep=True, **options)
try:
    accelml.compare("kmeans", ["sklearn"], data=(X, None), params={"n_clusters": "many"})
except SpecError:
    pass
print(left.store.directory, kept.store.directory)
"""


@pytest.mark.slow
def test_a_temporary_store_is_removed_unless_kept(tmp_path):
    """accelml.compare without results_dir copies the caller's data into a temporary store:
    it goes at exit (or with close / a with block), stays with keep=True, and a compare that
    raises leaves none behind (issue 33: every run left /tmp/accelml-compare-* with X and y)."""
    import os
    import subprocess
    import sys

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    out = subprocess.run([sys.executable, "-c", CLEANUP_SCRIPT], capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(temporary)}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    left, kept = out.stdout.split()
    assert not os.path.exists(left)
    assert sorted(path.name for path in temporary.glob("accelml-compare-*")) == [os.path.basename(kept)]
    assert (Path(kept) / "results.sqlite").is_file()
