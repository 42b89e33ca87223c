"""The check on real runs: the runner's processes, a resumed run, and 10 reruns of the smoke spec."""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from pathlib import Path

import pytest

from accelml.agreement.baseline import Baseline, make_baseline
from accelml.agreement.check import check_run
from accelml.agreement.matrix import agreement_matrix
from accelml.cli import main
from accelml.orchestration import default_threads, new_run_id, run_experiment
from accelml.results.records import RunRecord, utc_now
from accelml.results.store import ResultsStore
from accelml.runner.determinism import deterministic_experiment
from accelml.runner.fingerprint import fingerprint
from accelml.runner.process import CaseInput
from accelml.runner.run_case import run_case
from accelml.spec.load import load_spec

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "experiments" / "smoke.toml"
RERUNS = 10

TINY = """
name = "tiny"
reference = "sklearn"
repeats = 2
warmup = 1
time_limit = 120

[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 300
n_features = 3
centers = 3
seed = 0

[datasets.cancer]
source = "shipped"
name = "breast_cancer"

[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {n_clusters = 3, n_init = 1, random_state = 0}

[[cases]]
algorithm = "random_forest_classifier"
backend = "sklearn"
dataset = "cancer"
params = {n_estimators = 5, random_state = 0}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny spec: one full run through ``check SPEC --update-baseline``, and one run that
    was interrupted after its first case (stored as such) and then finished by ``resume``."""
    root = tmp_path_factory.mktemp("tiny")
    spec = root / "tiny.toml"
    spec.write_text(TINY)
    results, baseline = root / "results", root / "baseline.json"
    saved = dict(os.environ)
    code = main(["check", str(spec), "--baseline", str(baseline), "--update-baseline",
                 "--deterministic", "--results-dir", str(results),
                 "--cache-dir", str(root / "cache")])
    assert dict(os.environ) == saved     # the mode's environment went to the case processes only
    assert code == 0 and baseline.exists()
    store = ResultsStore(results)
    (checked,) = store.list_runs()
    assert checked.deterministic
    experiment = load_spec(spec)
    interrupted = _rerun_in_process(experiment, store, root, experiment.cases[:1],
                                    threads=default_threads(1), status=RunRecord.INTERRUPTED,
                                    planned=experiment.cases)
    resumed = run_experiment(experiment, store, cache_dir=str(root / "cache"), resume=interrupted)
    assert resumed.run_id == interrupted and resumed.status == RunRecord.FINISHED
    assert len(store.case_results(interrupted)) == 2
    return store, baseline, resumed.run_id, experiment, root


@pytest.mark.slow
def test_baseline_from_one_run_passes_on_a_resumed_run(tiny, capsys):
    store, baseline, resumed, _, _ = tiny
    assert Baseline.read(baseline).run_id != resumed
    assert main(["check", "--run", resumed, "--baseline", str(baseline),
                 "--results-dir", str(store.directory)]) == 0
    assert "2 case(s)" in capsys.readouterr().out
    matrix = agreement_matrix(store, resumed)
    assert [entry.identical for entry in matrix.run_to_run] == [True, True]
    assert not matrix.unexpected


def _rerun_in_process(experiment, store: ResultsStore, root: Path, cases=None,
                      threads: int = 1, status: str = RunRecord.FINISHED, planned=None) -> str:
    """Run cases through the runner's in-process entry (``run_case``) and store them as a run.

    ``planned`` (default: ``cases``) are the cases the run record lists; with ``status``
    ``interrupted`` and fewer ``cases`` than planned this is a run cut short.
    """
    cases = list(experiment.cases if cases is None else cases)
    planned = cases if planned is None else list(planned)
    run = RunRecord(run_id=new_run_id(), spec_name=experiment.name,
                    spec_hash=experiment.text_hash, spec_text=experiment.text,
                    spec_path=experiment.path, reference_backend=experiment.reference,
                    created_at=utc_now(), planned_cases=len(planned),
                    environment=fingerprint(threads),
                    case_ids=tuple(case.case_id for case in planned))
    store.create_run(run)
    for case in cases:
        arrays_dir = root / "arrays" / run.run_id / case.case_id
        arrays_dir.parent.mkdir(parents=True, exist_ok=True)   # the case's scratch: the caller's
        document = run_case(CaseInput(
            case=dataclasses.replace(case, threads=threads), run_id=run.run_id,
            arrays_dir=str(arrays_dir), cache_dir=str(root / "cache"), threads=threads,
            time_limit_s=120, spawned_at=time.time()))
        result = document.result
        assert result.ok, result.reason
        store.add_case_result(result, {digest: (arrays_dir / f"{digest}.npy").read_bytes()
                                       for digest in document.arrays})
    store.set_run_status(run.run_id, status)
    return run.run_id


@pytest.fixture
def deterministic_process():
    """Sets deterministic mode's environment in this test process; restored afterwards.

    The runner collects garbage before every timed round; in a test process full of
    imported modules that costs 0.2 s a round, so the objects alive now are frozen out of
    the collector (``gc.freeze``) while the reruns go on.
    """
    saved = dict(os.environ)
    gc.collect()
    gc.freeze()
    try:
        yield os.environ.update
    finally:
        gc.unfreeze()
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.slow
def test_deterministic_smoke_spec_has_no_false_alarms_over_10_reruns(tmp_path, deterministic_process):
    experiment, environment = deterministic_experiment(load_spec(SMOKE))
    assert [c.case_id for c in experiment.cases] == [c.case_id for c in load_spec(SMOKE).cases]
    deterministic_process(environment)
    store = ResultsStore(tmp_path / "results")
    first = _rerun_in_process(experiment, store, tmp_path)
    baseline = make_baseline(store, first)
    assert all(case.data["expectation"]["bitwise"] for case in baseline.cases)
    alarms = []
    for _ in range(RERUNS):
        rerun = _rerun_in_process(experiment, store, tmp_path)
        report = check_run(store, rerun, baseline)
        alarms.extend(report.drifts)
        alarms.extend(agreement_matrix(store, rerun).unexpected)
    assert alarms == []
    assert len(store.list_runs()) == RERUNS + 1


@pytest.mark.parametrize("change, metric_expected", [
    ({"random_state": 1}, "params.random_state: 0 -> 1"),          # a changed seed
    ({"max_depth": 2}, "params.max_depth: None -> 2"),               # a changed parameter
])
def test_planted_drift_in_real_runs_is_named(tiny, change, metric_expected):
    store, baseline_path, _, experiment, root = tiny
    forest = next(c for c in experiment.cases if c.algorithm == "random_forest_classifier")
    drifted = dataclasses.replace(forest, params=tuple(sorted({**forest.params_dict, **change}.items())))
    others = [c for c in experiment.cases if c is not forest]
    run_id = _rerun_in_process(experiment, store, root, others + [drifted], threads=2)
    report = check_run(store, run_id, Baseline.read(baseline_path))
    assert report.exit_code == 1
    named = {(d.case.split(" on")[0], d.metric): d for d in report.drifts}
    assert named[("random_forest_classifier/sklearn/cpu", "case")].difference == metric_expected
    assert ("random_forest_classifier/sklearn/cpu", "probabilities.max_abs_diff") in named
    assert not any(case.startswith("kmeans") for case, _ in named)


def test_swapped_backend_in_a_real_run_is_named(tiny):
    store, baseline_path, _, experiment, root = tiny
    kmeans = next(c for c in experiment.cases if c.algorithm == "kmeans")
    swapped = dataclasses.replace(kmeans, backend="sklearnex")
    others = [c for c in experiment.cases if c is not kmeans]
    run_id = _rerun_in_process(experiment, store, root, [swapped] + others, threads=2)
    report = check_run(store, run_id, Baseline.read(baseline_path))
    (drift,) = [d for d in report.drifts if d.metric == "case"]
    assert drift.case.startswith("kmeans/sklearn/cpu")
    assert drift.difference == "backend: 'sklearn' -> 'sklearnex'"
