"""Baseline files and the check: planted drifts are named, tolerances apply, bad files exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from accelml.agreement.baseline import Baseline, Tolerances, make_baseline
from accelml.agreement.check import check_run
from accelml.agreement.point import Bounds, measures
from accelml.cli import main
from accelml.errors import SpecError
from accelml.results.store import ResultsStore

from .records import add_result, new_run


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    uniform = rng.uniform(size=(300, 3))        # no cluster structure: the seed decides the clusters
    return X[:400], y[:400], X[400:], y[400:], uniform


def _fit_logistic(data, C=1.0):
    X, y, X_test, y_test, _ = data
    model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=500)).fit(X, y)
    return model.predict(X_test), model.predict_proba(X_test), model.score(X_test, y_test)


def _fit_kmeans(data, seed):
    uniform = data[4]
    model = KMeans(4, n_init=1, random_state=seed).fit(uniform)
    return model.predict(uniform), model.inertia_


def _store_run(store, data, *, C=1.0, seed=0, backend="sklearn", perturb=0.0, flip=False,
               repeats_differ=False):
    """One run of two cases: logistic regression (backend, C) and k-means (seed)."""
    run_id = new_run(store)
    predictions, probabilities, accuracy = _fit_logistic(data, C)
    if flip:
        predictions = predictions.copy()
        predictions[0] = 1 - predictions[0]
        accuracy = float(np.mean(predictions == data[3]))
    probabilities = probabilities + perturb
    add_result(store, run_id, algorithm="logistic_regression", backend=backend,
               task="classification", params={"C": C},
               arrays={"predictions": predictions, "probabilities": probabilities},
               scores={"accuracy": accuracy})
    labels, inertia = _fit_kmeans(data, seed)
    repeats = [labels, labels[::-1].copy()] if repeats_differ else None
    add_result(store, run_id, algorithm="kmeans", task="clustering",
               params={"n_clusters": 4, "random_state": seed},
               arrays={"predictions": labels}, scores={"inertia": inertia},
               repeat_arrays=repeats)
    return run_id


@pytest.fixture
def baseline_run(tmp_path, data):
    store = ResultsStore(tmp_path / "results")
    run_id = _store_run(store, data)
    baseline = make_baseline(store, run_id)
    path = tmp_path / "baseline.json"
    baseline.write(path)
    return store, run_id, path


def _drifts(report):
    return {(d.case.split(" on")[0], d.metric) for d in report.drifts}


def test_baseline_file_is_reviewable_and_checks_its_own_run(baseline_run, data):
    store, run_id, path = baseline_run
    text = path.read_text()
    document = json.loads(text)
    assert text.startswith("{\n  ") and document["format"] == "accelml-baseline"
    assert document["environment"]["env_hash"] and document["run_id"] == run_id
    assert list(document) == sorted(document)
    case = next(c for c in document["cases"].values() if c["algorithm"] == "kmeans")
    assert case["arrays"]["predictions"]["values"][:5] == _fit_kmeans(data, 0)[0][:5].tolist()
    assert case["expectation"]["bitwise"] is True and case["measures"]["identical"] is True
    baseline = Baseline.read(path)
    report = check_run(store, run_id, baseline)
    assert report.ok and report.exit_code == 0 and report.checked == 2
    assert "within tolerance" in report.format()
    again = ResultsStore(store.directory)
    assert check_run(again, _store_run(again, data), baseline).ok     # a fresh identical run


def test_library_change_drift_names_case_and_metrics(baseline_run, data):
    store, _, path = baseline_run
    drifted = _store_run(store, data, perturb=1e-3, flip=True)
    report = check_run(store, drifted, Baseline.read(path))
    assert not report.ok and report.exit_code == 1
    assert _drifts(report) == {
        ("logistic_regression/sklearn/cpu", "predictions.label_agreement"),
        ("logistic_regression/sklearn/cpu", "probabilities.max_abs_diff"),
        ("logistic_regression/sklearn/cpu", "accuracy.score_difference"),
    }
    probabilities = next(d for d in report.drifts if d.metric == "probabilities.max_abs_diff")
    assert probabilities.current == pytest.approx(1e-3)
    table = report.format()
    assert "DRIFT" in table and "accuracy.score_difference" in table and "logistic_regression/sklearn/cpu" in table


def test_changed_seed_is_caught(baseline_run, data):
    store, _, path = baseline_run
    report = check_run(store, _store_run(store, data, seed=3), Baseline.read(path))
    changes = {d.metric: d for d in report.drifts if d.case.startswith("kmeans")}
    assert changes["case"].difference == "params.random_state: 0 -> 3"
    assert "inertia.score_difference" in changes
    assert not any(d.case.startswith("logistic") for d in report.drifts)


def test_changed_parameter_is_caught(baseline_run, data):
    store, _, path = baseline_run
    report = check_run(store, _store_run(store, data, C=0.001), Baseline.read(path))
    changes = {d.metric: d for d in report.drifts}
    assert changes["case"].difference == "params.C: 1.0 -> 0.001"
    assert changes["case"].case.startswith("logistic_regression/sklearn/cpu")
    assert "probabilities.max_abs_diff" in changes


def test_swapped_backend_is_caught(baseline_run, data):
    store, _, path = baseline_run
    report = check_run(store, _store_run(store, data, backend="sklearnex"), Baseline.read(path))
    (case_drift,) = [d for d in report.drifts if d.metric == "case"]
    assert case_drift.difference == "backend: 'sklearn' -> 'sklearnex'"
    assert "logistic_regression/sklearnex/cpu" in case_drift.note


def test_repeats_that_should_be_identical(baseline_run, data):
    store, _, path = baseline_run
    report = check_run(store, _store_run(store, data, repeats_differ=True), Baseline.read(path))
    assert _drifts(report) == {("kmeans/sklearn/cpu", "repeats.identical")}


def test_tolerances_per_case_and_metric(baseline_run, data, tmp_path):
    store, _, path = baseline_run
    drifted = _store_run(store, data, perturb=1e-3)
    document = json.loads(path.read_text())
    case_id = next(k for k, c in document["cases"].items() if c["algorithm"] == "logistic_regression")
    document["cases"][case_id]["tolerances"] = {"max_abs_diff.probabilities": {"atol": 2e-3}}
    loosened = tmp_path / "loosened.json"
    loosened.write_text(json.dumps(document))
    assert check_run(store, drifted, Baseline.read(loosened)).ok
    document["cases"][case_id]["tolerances"] = {"max_abs_diff.probabilities": {"atol": 5e-4}}
    loosened.write_text(json.dumps(document))
    assert not check_run(store, drifted, Baseline.read(loosened)).ok
    labels = next(measure for measure in measures() if measure.name == "label_agreement")
    loose = Tolerances.from_dict({"label_agreement": {"atol": 0.1}}, measures_used=measures())
    assert loose.bound(labels, "predictions") == Bounds(atol=0.1)


def test_missing_failed_and_new_cases(baseline_run, data):
    store, _, path = baseline_run
    run_id = new_run(store)
    predictions, probabilities, accuracy = _fit_logistic(data)
    add_result(store, run_id, algorithm="logistic_regression", task="classification",
               params={"C": 1.0}, status="failed", reason="MemoryError: out of memory")
    add_result(store, run_id, algorithm="ridge", task="regression", arrays={"predictions": probabilities[:, 0]})
    report = check_run(store, run_id, Baseline.read(path))
    metrics = {d.metric: d for d in report.drifts}
    assert metrics["status"].note == "MemoryError: out of memory"
    assert metrics["case"].current == "missing" and metrics["case"].case.startswith("kmeans")
    assert any("not in the baseline: ridge/sklearn/cpu" in note for note in report.notes)


def test_large_arrays_keep_digest_and_summary(tmp_path, data):
    store = ResultsStore(tmp_path / "results")
    run_id = _store_run(store, data)
    baseline = make_baseline(store, run_id, inline_limit=10)
    case = next(c for c in baseline.cases if c.data["algorithm"] == "logistic_regression")
    assert "values" not in case.data["arrays"]["probabilities"]
    assert set(case.data["arrays"]["probabilities"]["summary"]) == {"mean", "std", "min", "max"}
    drifted = _store_run(store, data, perturb=1e-3)
    with_arrays = check_run(store, drifted, baseline)              # the old arrays are in the store
    assert ("logistic_regression/sklearn/cpu", "probabilities.max_abs_diff") in _drifts(with_arrays)
    other = ResultsStore(tmp_path / "elsewhere")                    # another machine: no old arrays
    summary_only = check_run(other, _store_run(other, data, perturb=1e-3), baseline)
    (moved,) = [d for d in summary_only.drifts if d.metric == "probabilities.max_abs_diff"]
    assert moved.current == pytest.approx(1e-3) and "summary was compared" in moved.note
    assert check_run(other, _store_run(other, data), baseline).ok


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"format": "something-else"}', "not an accelml baseline"),
    ('{"format": "accelml-baseline", "version": 99, "cases": {}}', "version 99"),
    ('{"format": "accelml-baseline", "version": 1, "cases": {}, "tolerances": {"speed": 1}}',
     "unknown tolerance 'speed'"),
    ('{"format": "accelml-baseline", "version": 1, "cases": {"c": {"status": "ok", "arrays": '
     '{"p": {"digest": "00", "dtype": "int64", "shape": [1], "values": [1]}}}}}',
     "do not match the digest"),
])
def test_bad_baseline_files_are_spec_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SpecError, match=message):
        Baseline.read(path)
    with pytest.raises(SpecError, match="no such baseline"):
        Baseline.read(tmp_path / "absent.json")


def test_check_command_exit_codes(baseline_run, data, tmp_path, capsys):
    store, run_id, path = baseline_run
    results = str(store.directory)
    assert main(["check", "--run", run_id, "--baseline", str(path), "--results-dir", results]) == 0
    assert "within tolerance" in capsys.readouterr().out

    drifted = _store_run(store, data, perturb=1e-3)
    assert main(["check", "--run", drifted, "--baseline", str(path), "--results-dir", results]) == 1
    out = capsys.readouterr().out
    assert "probabilities.max_abs_diff" in out and "logistic_regression/sklearn/cpu" in out

    assert main(["check", "--run", drifted, "--baseline", str(path), "--results-dir", results,
                 "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["drifts"][0]["case_id"]

    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    for argv in (["check", "--run", run_id, "--baseline", str(bad), "--results-dir", results],
                 ["check", "--run", "nosuchrun", "--baseline", str(path), "--results-dir", results],
                 ["check", "--baseline", str(path), "--results-dir", results],
                 ["check", "--run", run_id, "--baseline", str(path),
                  "--results-dir", str(tmp_path / "empty")]):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err.startswith("accelml check: error: ")


def test_update_baseline_keeps_reviewed_tolerances(baseline_run, data, capsys):
    store, run_id, path = baseline_run
    document = json.loads(path.read_text())
    document["tolerances"]["cases"]["score_difference"] = {"atol": 0.5}
    path.write_text(json.dumps(document))
    newer = _store_run(store, data)
    assert main(["check", "--run", newer, "--baseline", str(path), "--results-dir",
                 str(store.directory), "--update-baseline"]) == 0
    assert "wrote" in capsys.readouterr().out
    rewritten = Baseline.read(path)
    score = next(measure for measure in measures() if measure.name == "score_difference")
    assert rewritten.run_id == newer and rewritten.tolerances.bound(score) == Bounds(atol=0.5)


def test_deep_learning_loss_accuracy_and_rank_drift(tmp_path):
    from accelml.results.records import DLMeasurements, EpochMeasurement

    store = ResultsStore(tmp_path / "results")

    def run(loss, accuracy, digests):
        run_id = new_run(store)
        dl = DLMeasurements(model="mnist_cnn", epochs=(EpochMeasurement(0, 1.0, loss),),
                            per_rank_batch_size=32, ranks=2, learning_rate=0.01,
                            images_per_second=50.0, strategy="horovod",
                            rank_weight_digests=digests, final_loss=loss, final_accuracy=accuracy)
        add_result(store, run_id, algorithm="mnist_cnn", backend="keras", ranks=2,
                   strategy="horovod", task="classification", dl=dl,
                   scores={"final_train_loss": loss})
        return run_id

    baseline = make_baseline(store, run(0.40, 0.90, ("w", "w")))
    assert baseline.cases[0].data["measures"]["ranks_identical"] is True
    assert check_run(store, run(0.40, 0.90, ("w", "w")), baseline).ok
    report = check_run(store, run(0.45, 0.88, ("w", "v")), baseline)
    metrics = {d.metric: d for d in report.drifts}
    assert set(metrics) == {"final_loss.loss_difference", "final_accuracy.accuracy_difference",
                            "ranks.ranks_identical", "final_train_loss.score_difference"}
    assert metrics["final_loss.loss_difference"].difference == pytest.approx(0.05)


def _two_backends(store, data, other_C=0.05):
    """A run of logistic regression on two backends whose answers differ (another C)."""
    run_id = new_run(store)
    for backend, C in (("sklearn", 1.0), ("sklearnex", other_C)):
        predictions, probabilities, accuracy = _fit_logistic(data, C)
        add_result(store, run_id, algorithm="logistic_regression", backend=backend,
                   task="classification", params={"C": 1.0},
                   arrays={"predictions": predictions, "probabilities": probabilities},
                   scores={"accuracy": accuracy})
    return run_id


def test_the_runs_comparisons_are_kept_and_gated_by_each_measures_key(tmp_path, data):
    store = ResultsStore(tmp_path / "results")
    run_id = _two_backends(store, data)
    path = tmp_path / "baseline.json"
    make_baseline(store, run_id).write(path)
    document = json.loads(path.read_text())
    (comparison,) = document["comparisons"]
    values = comparison["measures"]
    assert comparison["kind"] == "cross-backend" and values["identical"] is False
    assert 0.5 < values["label_agreement"] < 1.0 and values["max_abs_diff"] > 0
    assert document["tolerances"]["comparisons"]["label_agreement"] == {"atol": 0.0, "rtol": 0.0}
    assert check_run(store, run_id, Baseline.read(path)).ok

    comparison["measures"]["label_agreement"] = 1.0          # the baseline said: no label differs
    path.write_text(json.dumps(document))
    report = check_run(store, run_id, Baseline.read(path))
    (drift,) = report.drifts
    assert drift.metric == "cross-backend.label_agreement" and drift.baseline == 1.0
    assert drift.case.startswith("logistic_regression/sklearnex/cpu")
    assert "against logistic_regression/sklearn/cpu" in drift.note
    document["tolerances"]["comparisons"]["label_agreement"] = {"atol": 0.5}
    path.write_text(json.dumps(document))
    assert check_run(store, run_id, Baseline.read(path)).ok

    moved = _two_backends(store, data, other_C=0.01)      # sklearnex now answers differently
    metrics = {d.metric for d in check_run(store, moved, Baseline.read(path)).drifts}
    assert {"cross-backend.max_abs_diff", "cross-backend.mean_abs_diff"} <= metrics
    assert "probabilities.max_abs_diff" in metrics              # the case's own answer moved too


def test_a_version_1_baseline_is_still_read_and_updated_with_comparisons(tmp_path, data, capsys):
    store = ResultsStore(tmp_path / "results")
    run_id = _two_backends(store, data)
    path = tmp_path / "baseline.json"
    document = make_baseline(store, run_id).to_dict()
    document["version"] = 1                                 # as accelml wrote it before measures
    del document["comparisons"]
    document["tolerances"] = {"score": {"atol": 1e-9, "rtol": 1e-6}, "labels": {"min_agreement": 1.0},
                              "values": {"atol": 1e-9, "rtol": 1e-6}, "bitwise": False, "ranks": True}
    for case in document["cases"].values():               # what version 1 kept of a case alone
        case["repeats_identical"] = case.pop("measures")["identical"]
    path.write_text(json.dumps(document))
    assert check_run(store, run_id, Baseline.read(path)).ok
    assert main(["check", "--run", run_id, "--baseline", str(path), "--results-dir",
                 str(store.directory), "--update-baseline"]) == 0
    capsys.readouterr()
    updated = json.loads(path.read_text())
    assert updated["version"] == 3 and len(updated["comparisons"]) == 1
    assert "label_agreement" in updated["tolerances"]["comparisons"]
    assert updated["tolerances"]["cases"]["identical"] is False


def test_a_measure_of_the_baseline_that_is_not_installed_is_a_note(tmp_path, data):
    store = ResultsStore(tmp_path / "results")
    run_id = _two_backends(store, data)
    document = make_baseline(store, run_id).to_dict()
    document["comparisons"][0]["measures"]["spearman"] = 0.99
    report = check_run(store, run_id, Baseline.from_dict(document))
    assert report.ok
    assert any("not installed here" in note and "spearman" in note for note in report.notes)
