"""Issue 17: speedups per phase with their intervals (main phase first), iterations and
different optima of iterative fits, fair starts for clustering, and rank identity of
data-parallel rows, in the table, --json, CSV and HTML. Real scikit-learn and sklearnex runs
on small data, one process per case."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from sklearn.cluster import KMeans

from accelml import compare
from accelml.datasets import load_dataset
from accelml.report.export import read_csv
from accelml.report.html import render_html
from accelml.report.render import load_report
from accelml.report.table import build_rows, has_interval, phase_speedup_text, render_text
from accelml.results import (
    CaseResult,
    DLMeasurements,
    EpochMeasurement,
    PhaseTiming,
    ResultsStore,
    RunRecord,
)
from accelml.spec.load import load_spec_text

intel_cluster = pytest.importorskip("sklearnex.cluster")

# Unstructured data: with random_state=0 stock and Intel k-means++ start from different
# centroids and end in different local optima (about 1% apart in inertia).
KMEANS_X = np.random.default_rng(0).normal(size=(2000, 5))
KMEANS_PARAMS = {"n_clusters": 8, "random_state": 0}


def _training_data(comparison):
    """The rows the cases fitted on (the file source's training split), loaded as they were."""
    dataset = load_spec_text(comparison.run.spec_text, "<stored spec>").cases[0].dataset
    return load_dataset(dataset.name, dataset.source, dict(dataset.options)).X_train


def _by_backend(rows):
    return {row.backend: row for row in rows}


def _exports(comparison, tmp_path):
    report = load_report(comparison.run_id, comparison.store.directory)
    document = json.loads(json.dumps(report.to_dict()))
    csv_rows = read_csv(report.write_csv(tmp_path / "table.csv"))
    return report, document, csv_rows, render_html(report)


@pytest.mark.slow
def test_knn_shows_the_predict_speedup_first_and_every_phase_with_its_interval(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1500, 10))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    result = compare("knn_classifier", ["sklearn", "sklearnex"], data=(X, y), repeats=3,
                     params={"neighbor_search": "brute"}, results_dir=tmp_path / "results")
    intel = _by_backend(result.rows())["sklearnex"]
    assert intel.main_phase == "predict"
    assert [value.phase for value in intel.phase_speedups] == ["predict", "fit"]
    for value in intel.phase_speedups:     # NaN bounds: n too small for an interval
        assert not has_interval(value) or value.low <= value.value <= value.high
    assert intel.speedup == intel.phase_speedups[0].value
    assert result.speedup(phase="predict")["sklearnex/cpu"] == pytest.approx(intel.speedup)
    line = next(line for line in result.table(width=400).splitlines() if "sklearnex" in line)
    assert line.index("predict ") < line.index("fit ")

    report, document, csv_rows, html = _exports(result, tmp_path)
    row = next(r for r in document["rows"] if r["backend"] == "sklearnex")
    assert row["main_phase"] == "predict" and row["speedup"] == row["predict_speedup"]
    assert row["fit_speedup_low"] is None or \
        row["fit_speedup_low"] <= row["fit_speedup"] <= row["fit_speedup_high"]
    written = next(r for r in csv_rows if r["backend"] == "sklearnex")
    assert written["predict_speedup"] == pytest.approx(intel.speedup)
    assert phase_speedup_text(intel.phase_speedups[0]) in html
    assert phase_speedup_text(intel.phase_speedups[1]) in html


@pytest.mark.slow
def test_a_different_kmeans_optimum_is_flagged_with_iterations_and_reason(tmp_path):
    result = compare("kmeans", ["sklearn", "sklearnex"], data=(KMEANS_X, None), repeats=2,
                     params=KMEANS_PARAMS, results_dir=tmp_path / "results")
    X_train = _training_data(result)
    stock = KMeans(8, random_state=0, n_init=1).fit(X_train)
    intel_fit = intel_cluster.KMeans(8, random_state=0, n_init=1).fit(X_train)
    assert abs(intel_fit.inertia_ / stock.inertia_ - 1) > 1e-3    # the premise of the test
    rows = _by_backend(result.rows())
    intel = rows["sklearnex"]
    assert {r.backend: r.iterations for r in result.results} == {
        "sklearn": stock.n_iter_, "sklearnex": intel_fit.n_iter_}
    assert (intel.iterations.iterations, intel.iterations.reference_iterations) == (
        intel_fit.n_iter_, stock.n_iter_)
    assert intel.iterations.per_iteration_speedup is not None
    assert intel.different_optimum and not rows["sklearn"].different_optimum
    reason = intel.optimum.reason
    assert reason.startswith("inertia ") and \
        f"after {intel_fit.n_iter_} vs {stock.n_iter_} iterations" in reason
    assert "fair_start" in reason

    text = result.table(width=400)
    assert f"{intel_fit.n_iter_} vs {stock.n_iter_} it" in text
    assert "different optimum [1]" in text
    assert f"[1] {intel.case_id}: different optimum: inertia" in text

    compared = next(r for r in result.to_json()["rows"] if r["backend"] == "sklearnex")
    assert compared["different_optimum"] is True and compared["optimum"]["reason"] == reason
    assert compared["iterations"]["per_iteration_speedup"] == pytest.approx(
        intel.iterations.per_iteration_speedup)
    report, document, csv_rows, html = _exports(result, tmp_path)
    row = next(r for r in document["rows"] if r["backend"] == "sklearnex")
    assert row["different_optimum"] is True and row["optimum_reason"] == reason
    assert (row["iterations"], row["reference_iterations"]) == (intel_fit.n_iter_, stock.n_iter_)
    written = next(r for r in csv_rows if r["backend"] == "sklearnex")
    assert written["different_optimum"] is True and written["iterations"] == intel_fit.n_iter_
    assert "different optimum" in html and "fair_start" in html


@pytest.mark.slow
def test_fair_start_gives_every_backend_the_reference_centroids(tmp_path):
    result = compare("kmeans", ["sklearn", "sklearnex"], data=(KMEANS_X, None), repeats=2,
                     params={**KMEANS_PARAMS, "fair_start": True},
                     results_dir=tmp_path / "results")
    by_backend = {r.backend: r for r in result.results}
    starts = {backend: r.prediction("init") for backend, r in by_backend.items()}
    assert None not in starts.values()
    assert starts["sklearn"].digest == starts["sklearnex"].digest      # the same recorded array
    assert starts["sklearn"].shape == (8, 5)
    # scikit-learn from that array is scikit-learn from its own seed: the reference's start.
    stock = KMeans(8, random_state=0, n_init=1).fit(_training_data(result))
    assert by_backend["sklearn"].iterations == stock.n_iter_
    assert by_backend["sklearn"].score("inertia") == pytest.approx(stock.inertia_, rel=1e-12)
    intel = _by_backend(result.rows())["sklearnex"]
    assert not intel.different_optimum
    assert intel.iterations.iterations == intel.iterations.reference_iterations


def _dl_result(case_id, ranks, digests, seconds):
    epochs = tuple(EpochMeasurement(i, seconds, 1.0 / (i + 1)) for i in range(3))
    dl = DLMeasurements("mlp", epochs, 32, ranks, 0.01, 1000.0 * ranks,
                        strategy="horovod" if ranks > 1 else None, rank_weight_digests=digests)
    return CaseResult("run1", case_id, "mlp", "keras", "cpu", "mnist", "ok", ranks=ranks,
                      strategy="horovod" if ranks > 1 else None, dl=dl,
                      timings=(PhaseTiming.from_samples("epoch", [seconds] * 2,
                                                        target_rel=0.05),))


def test_multi_rank_rows_say_whether_the_ranks_ended_identical(tmp_path):
    store = ResultsStore(tmp_path / "results")
    results = [_dl_result("one", 1, ("a",), 4.0), _dl_result("two", 2, ("a", "a"), 2.2),
               _dl_result("four", 4, ("a", "a", "b", "a"), 1.2)]
    store.create_run(RunRecord("run1", "dl", "0" * 64, "", reference_backend="keras",
                               case_ids=tuple(r.case_id for r in results)))
    for result in results:
        assert store.add_case_result(result)
    rows = {row.case_id: row for row in build_rows(store, results, "keras")}
    assert (rows["two"].ranks_identical, rows["two"].ranks_differing) == (True, ())
    assert rows["one"].ranks_identical is None       # one rank: nothing to compare it with
    one_rank = render_text([rows["one"]], width=300)
    assert "identical" not in one_rank and "rank weights" not in one_rank.splitlines()[0]
    assert (rows["four"].ranks_identical, rows["four"].ranks_differing) == (False, (2,))
    text = render_text(list(rows.values()), width=300)
    assert "rank 2 differ from rank 0" in text and "identical" in text

    report = load_report("run1", store.directory)
    document = report.to_dict()
    by_id = {row["case_id"]: row for row in document["rows"]}
    assert by_id["four"]["ranks_identical"] is False and by_id["four"]["ranks_differing"] == "2"
    assert by_id["two"]["ranks_identical"] is True
    assert "rank 2 differ from rank 0" in render_html(report)


@pytest.mark.slow
def test_xgboost_rows_show_their_boosted_rounds_and_exports_keep_them_whole(tmp_path):
    """XGBoost knows the rounds it ran (fewer than n_estimators after early stopping): the
    table shows them beside scikit-learn's iterations, and export writes whole numbers
    (issue 33: XGBoost rows had none, and export wrote iteration counts as 2.0)."""
    import subprocess
    import sys

    X = np.random.default_rng(0).normal(size=(300, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    result = compare("gradient_boosting_classifier", ["sklearn", "xgboost"], data=(X, y),
                     repeats=1, warmup=0, threads=1, params={"n_estimators": 6, "random_state": 0},
                     results_dir=tmp_path / "results")
    assert {r.backend: r.iterations for r in result.results} == {"sklearn": 6, "xgboost": 6}
    fast = _by_backend(result.rows())["xgboost"]
    assert (fast.iterations.iterations, fast.iterations.reference_iterations) == (6, 6)
    assert "6 vs 6 it" in result.table(width=400)
    out = subprocess.run([sys.executable, "-m", "accelml", "export", "--all", "--results-dir",
                          str(tmp_path / "results"), "--csv", str(tmp_path / "cases.csv")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    with open(tmp_path / "cases.csv", newline="") as handle:
        assert [row["iterations"] for row in csv.DictReader(handle)] == ["6", "6"]
    assert str(result.to_frame()["iterations"].dtype) == "Int64"
