"""XGBoost on 1 and 2 workers (xgboost.dask on a dask cluster the case process starts):
locally and inside a real SLURM job, with the cross-scale agreement in the matrix and the
baseline, and a negative control on other data."""

from __future__ import annotations

import doctest
import importlib

import pytest

from accelml.agreement.baseline import make_baseline
from accelml.agreement.matrix import agreement_matrix, compare_results
from accelml.errors import SpecError
from accelml.executors.cluster_settings import load_cluster_settings
from accelml.executors.resources import CaseNeeds
from accelml.orchestration import run_experiment
from accelml.report.matrix_table import format_matrix
from accelml.report.table import build_rows
from accelml.results.store import ResultsStore
from accelml.spec.load import load_spec_text

DATA = """
[datasets.{name}]
source = "generated"
generator = "classification"
n_samples = 4000
n_features = 8
n_informative = 5
seed = {seed}
dtype = "float32"
"""

SPEC = """
name = "xgboost_workers"
reference = "xgboost"
repeats = 1
warmup = 0
threads = 1
""" + DATA.format(name="data", seed=0) + DATA.format(name="other", seed=1) + """
[[cases]]
algorithm = "gradient_boosting_classifier"
backend = "xgboost"
ranks = [1, 2]
dataset = "data"
params = {n_estimators = 30, max_depth = 6, max_leaf_nodes = 63, max_bins = 32, random_state = 0}
"""

OTHER_DATA = """
[[cases]]
algorithm = "gradient_boosting_classifier"
backend = "xgboost"
dataset = "other"
params = {n_estimators = 30, max_depth = 6, max_leaf_nodes = 63, max_bins = 32, random_state = 0}
"""


def run(tmp_path, kind, text=SPEC):
    experiment = load_spec_text(text, "workers.toml")
    store = ResultsStore(tmp_path / f"results-{kind}")
    table = {"kind": kind, "jobs": 1}
    if kind == "slurm":
        table.update({"worker-start-timeout": 300, "shared-directory": str(tmp_path / "jobs")})
    settings = load_cluster_settings(spec_table=table)
    record = run_experiment(experiment, store, settings=settings, cache_dir=str(tmp_path / "cache"))
    return store, record.run_id, {(r.ranks, r.dataset): r for r in store.case_results(record.run_id)}


def check_two_workers(result, started_by):
    assert result.ok, result.reason
    phases = {timing.phase: timing for timing in result.timings}
    assert {"load", "place", "fit", "predict"} <= set(phases)
    assert len(phases["fit"].samples) == result.repeats >= 1
    assert result.workers_started_by == started_by
    assert len(result.worker_peak_memory_bytes) == 2
    assert all(peak > 10 * 2**20 for peak in result.worker_peak_memory_bytes)
    assert result.prediction().shape == (1000,)


def check_cross_scale(store, run_id, one, two):
    matrix = agreement_matrix(store, run_id)
    (row,) = matrix.cross_scale
    assert (row.a.case_id, row.b.case_id) == (one.case_id, two.case_id)
    assert not row.expectation.bitwise
    assert "quantile sketch" in row.expectation.reason and "1 vs 2 ranks" in row.expectation.reason
    assert row.value("label_agreement") > 0.95
    assert row.reading("max_abs_diff") is not None and row.reading("score_difference") is not None
    assert not matrix.unexpected
    assert "cross-scale" in format_matrix(matrix)
    baseline = make_baseline(store, run_id)
    (kept,) = [entry for entry in baseline.comparisons if entry.kind == "cross-scale"]
    assert dict(kept.values)["label_agreement"] == row.value("label_agreement")
    return row


@pytest.mark.slow
def test_one_and_two_local_workers_agree_and_other_data_does_not(tmp_path):
    store, run_id, results = run(tmp_path, "local", SPEC + OTHER_DATA)
    one, two, other = results[1, "data"], results[2, "data"], results[1, "other"]
    assert one.ok and one.workers_started_by == "" and not one.worker_peak_memory_bytes
    check_two_workers(two, "local-processes")
    row = check_cross_scale(store, run_id, one, two)
    # the table shows the 2-worker case against its 1-worker case: scaling and agreement
    (shown,) = [r for r in build_rows(store, results.values(), "xgboost") if r.case_id == two.case_id]
    assert shown.speedup == one.timing("fit").median / two.timing("fit").median
    assert shown.efficiency == shown.speedup / 2
    assert shown.agreement.kind == "label_agreement"
    assert shown.agreement.value == row.value("label_agreement")
    # the negative control: the 1-worker training on other data is far from the 2-worker answer
    assert other.ok
    control = compare_results(store, other, store, two, kind="cross-scale")
    assert control.value("label_agreement") < 0.8 < row.value("label_agreement")
    assert "the dataset differs" in control.expectation.reason


@pytest.mark.slow
@pytest.mark.slurm
def test_two_workers_start_as_ranks_of_their_slurm_job(slurm_available, tmp_path):
    store, run_id, results = run(tmp_path, "slurm")
    one, two = results[1, "data"], results[2, "data"]
    assert one.ok and one.environment.slurm_job_id
    check_two_workers(two, "srun")
    assert two.environment.slurm_job_id
    check_cross_scale(store, run_id, one, two)


def test_a_two_worker_case_asks_its_job_for_two_ranks():
    (one, two) = load_spec_text(SPEC, "workers.toml").cases
    assert CaseNeeds.of_case(one).ranks == 1
    needs = CaseNeeds.of_case(two)
    assert (needs.ranks, needs.cores, needs.gpus) == (2, 1, 0)


def test_backends_that_train_in_one_process_refuse_several_workers():
    text = SPEC.replace('backend = "xgboost"', 'backend = "sklearn"').replace(
        'reference = "xgboost"', 'reference = "sklearn"')
    with pytest.raises(SpecError, match="trains gradient_boosting_classifier in one process only.*"
                                        "on dask workers, one a rank: xgboost"):
        load_spec_text(text, "workers.toml")


@pytest.mark.parametrize("name", ["accelml.runner.dask_workers", "accelml.runner.scores",
                                  "accelml.expectations", "accelml.estimators.xgboost"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("set_here, expected", [(None, ("PASSIVE", "1")), (("ACTIVE", "0"), ("ACTIVE", "0"))])
def test_workers_sleep_and_block_while_they_wait_unless_told_otherwise(tmp_path, monkeypatch, set_here, expected):
    # Spinning OpenMP threads starved the workers' all-reduce once their threads filled the
    # cores (2 workers x 2 threads on 2 cores: 21.9 s instead of 2.8 s for one fit); XGBoost's
    # non-blocking NCCL communicator sleeps 5 ms per collective still in progress (4 GPUs:
    # 28 instead of 10 ms per round).
    from accelml.runner.dask_workers import dask_cluster

    names = ("OMP_WAIT_POLICY", "NCCL_COMM_BLOCKING")
    for name, value in zip(names, set_here or (None, None), strict=True):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    with dask_cluster(2, 1, "cpu", "local-processes", str(tmp_path)) as client:
        seen = client.run(lambda: tuple(__import__("os").environ.get(name) for name in names))
    assert sorted(seen.values()) == [expected, expected]


@pytest.mark.slow
@pytest.mark.alone   # its two dask workers must be training by the 25 s limit, not still starting
def test_a_two_worker_case_killed_at_its_time_limit_says_where_its_workers_were(tmp_path):
    """The workers answer the runner's request for stacks (a dask preload), and the
    failure's reason names where their busiest threads were: inside XGBoost's training.
    Where load from outside the suite kept a worker starting past 25 s (a clean-clone run
    of the whole suite: one of the two stacks named, in XGBoost), once more at 90 s: by then
    both train, unless the stacks name the wrong places."""
    for limit in (25, 90):
        spec = (SPEC.replace("repeats = 1", f"repeats = 1\ntime_limit = {limit}")
                .replace("ranks = [1, 2]", "ranks = 2")
                .replace("n_estimators = 30,", "n_estimators = 1000000,"))
        store, _, results = run(tmp_path, "local", spec)
        result = results[(2, "data")]
        workers = result.reason.partition("; its dask workers were in ")[2].split(" | ")
        if sum("xgboost/" in place for place in workers) == 2:
            break
    assert result.failure.value == "timeout" and "\n" not in result.reason, result.reason
    assert "; its dask workers were in " in result.reason, result.reason
    assert len(workers) == 2 and all("xgboost/" in place for place in workers), result.reason
