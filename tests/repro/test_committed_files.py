"""Stores and baselines written by earlier versions still read (issue 32's guardrail).

``fixtures/v2/`` holds a results store and its version-2 baseline, both written by accelml
as of main e2d082b (``fixtures/make_v2.py``); ``benchmarks/gpu/results`` holds the stores of
the GPU runs (some committed without their array files: reading their cases works, a report
of them is a clear StoreError naming the missing file). Each test works on a copy.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from accelml.agreement.baseline import Baseline
from accelml.agreement.check import check_run
from accelml.agreement.matrix import agreement_matrix
from accelml.errors import StoreError
from accelml.report import load_report
from accelml.results.store import ResultsStore

from .records import add_result

FIXTURES = Path(__file__).parent / "fixtures" / "v2"
RUN = "20261127T074500-fx0002"
GPU_STORES = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "results")
                    .rglob("*.sqlite"))


@pytest.fixture
def v2_store(tmp_path: Path) -> ResultsStore:
    shutil.copytree(FIXTURES / "store", tmp_path / "store")
    return ResultsStore(tmp_path / "store")


def test_a_version_2_baseline_checks_the_run_it_was_made_from(v2_store):
    baseline = Baseline.read(FIXTURES / "baseline-v2.json")
    assert json.loads((FIXTURES / "baseline-v2.json").read_text())["version"] == 2
    assert [entry.kind for entry in baseline.comparisons] == ["cross-backend", "cross-scale"]
    report = check_run(v2_store, RUN, baseline)
    assert report.ok, report.format()
    assert report.checked == 5 and report.metrics > 20


def test_a_version_2_baseline_still_names_what_moved(v2_store):
    """A rerun whose logistic regression probabilities moved by 1e-3 (the case's own answer
    and the cross-backend comparison) drifts; the baseline's tolerances still apply."""
    baseline = Baseline.read(FIXTURES / "baseline-v2.json")
    original = {r.case_id: r for r in v2_store.case_results(RUN)}
    rerun = "20261127T080000-fx0003"
    v2_store.create_run(replace(v2_store.get_run(RUN), run_id=rerun))
    for result in original.values():
        arrays = {ref.name: v2_store.read_array(ref.digest) for ref in result.predictions}
        if result.algorithm == "logistic_regression" and result.backend == "sklearn":
            arrays["probabilities"] = arrays["probabilities"] + 1e-3
        added = add_result(v2_store, rerun, algorithm=result.algorithm, backend=result.backend,
                           device=result.device, ranks=result.ranks, dataset=result.dataset,
                           task=result.task, params=dict(result.params), arrays=arrays,
                           scores={score.name: score.value for score in result.scores},
                           dl=result.dl, strategy=result.strategy)
        assert added.case_id == result.case_id
    drifts = check_run(v2_store, rerun, baseline).drifts
    moved = {drift.metric for drift in drifts}
    assert any("probabilities" in metric for metric in moved), moved
    assert any(metric.startswith("cross-backend.") for metric in moved), moved
    assert {drift.case.split(" on")[0] for drift in drifts} == {
        "logistic_regression/sklearn/cpu", "logistic_regression/sklearnex/cpu"}


def test_the_committed_v2_store_reads_and_reports(v2_store):
    matrix = agreement_matrix(v2_store, RUN)
    assert [entry.kind for entry in matrix.comparisons] == ["cross-backend", "cross-scale"]
    assert matrix.cross_backend[0].value("label_agreement") == 1.0
    text = load_report(RUN, v2_store.directory).text()
    assert "logistic_regression" in text and "cross-scale" in text
    assert isinstance(v2_store.read_array(v2_store.case_results(RUN)[0].predictions[0].digest),
                      np.ndarray)


@pytest.mark.parametrize("database", GPU_STORES, ids=lambda path: path.parent.name + "/" + path.name)
def test_the_committed_gpu_stores_read_and_report(database, tmp_path):
    copy = tmp_path / "results.sqlite"
    shutil.copy(database, copy)
    if (database.parent / "arrays").is_dir():
        shutil.copytree(database.parent / "arrays", tmp_path / "arrays")
    store = ResultsStore(copy, read_only=True)
    runs = store.list_runs()
    assert runs
    with sqlite3.connect(copy) as connection:   # the column and records keep the name workers
        stored_ranks = dict(connection.execute("SELECT run_id || case_id, workers FROM cases"))
    for run in runs:
        results = store.case_results(run.run_id)
        assert all(result.run_id == run.run_id for result in results)
        assert {result.run_id + result.case_id: result.ranks for result in results} == {
            key: value for key, value in stored_ranks.items() if key.startswith(run.run_id)}
        try:
            text = load_report(run.run_id, copy).text()
        except StoreError as missing:   # committed without (all) its array files
            assert "missing from the results store" in str(missing)
            with pytest.raises(StoreError):
                store.verify(run.run_id)
            continue
        assert run.run_id in text
