"""The Python API: accelml.compare(...) on in-memory data, through the real pipeline."""

import numpy as np
from sklearn.datasets import make_blobs

import accelml
from accelml.report.table import Agreement


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
    from accelml.compare import Comparison

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


def test_accelml_compare_stays_callable_after_the_module_is_imported():
    import importlib

    importlib.import_module("accelml.compare")
    assert callable(accelml.compare)
    assert accelml.compare.Comparison is not None


def test_deterministic_compare_fills_in_the_seed(tmp_path):
    X, y = make_blobs(n_samples=300, n_features=4, centers=2, random_state=0)
    result = accelml.compare("random_forest_classifier", ["sklearn"], data=(X, y), repeats=2,
                             params={"n_estimators": 5}, threads=1, results_dir=tmp_path,
                             deterministic=True)
    (case,) = result.results
    assert case.ok and dict(case.params)["random_state"] == 0 and result.run.deterministic
    assert len(set(case.repeat_prediction_digests)) == 1
    assert not result.agreement_matrix().unexpected
