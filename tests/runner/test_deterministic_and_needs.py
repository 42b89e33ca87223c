"""Deterministic mode through the pipeline, and cases this machine cannot give GPUs to."""

import dataclasses
from types import SimpleNamespace

import pytest

from accelml.cases import Case, DatasetSpec
from accelml.errors import SpecError
from accelml.executors import ensure_scale
from accelml.executors.local_cluster import LocalExecutor
from accelml.orchestration import plan_run, run_experiment
from accelml.probe import list_gpus, usable_cores
from accelml.results.store import ResultsStore
from accelml.runner.process import CaseTask, execute_case
from accelml.spec.load import load_spec_text

DATA = """
[datasets.data]
source = "generated"
generator = "classification"
n_samples = 400
n_features = 6
seed = 0
"""

FOREST = """
reference = "sklearn"
repeats = 2
warmup = 0
threads = 1
EXTRA
""" + DATA + """
[[cases]]
algorithm = "random_forest_classifier"
backend = "sklearn"
dataset = "data"
params = {n_estimators = 5}
"""


def test_spec_deterministic_mode_seeds_the_case_and_repeats_bitwise(tmp_path):
    plain = load_spec_text(FOREST.replace("EXTRA", ""), "plain.toml")
    experiment = load_spec_text(FOREST.replace("EXTRA", "deterministic = true"), "det.toml")
    assert experiment.deterministic and not plain.deterministic
    (seeded,) = plan_run(experiment).experiment.cases
    assert dict(seeded.params) == {"n_estimators": 5, "random_state": 0}
    assert seeded.case_id != plain.cases[0].case_id
    store = ResultsStore(tmp_path)
    run = run_experiment(experiment, store)
    assert run.deterministic and run.case_ids == (seeded.case_id,)
    (result,) = store.case_results(run.run_id)
    assert result.ok, result.reason
    assert dict(result.params)["random_state"] == 0
    digests = result.repeat_prediction_digests
    assert len(digests) == 2 and len(set(digests)) == 1


def test_deterministic_argument_equals_the_spec_key(tmp_path):
    plain = load_spec_text(FOREST.replace("EXTRA", ""), "plain.toml")
    keyed = load_spec_text(FOREST.replace("EXTRA", "deterministic = true"), "det.toml")
    store = ResultsStore(tmp_path)
    run = run_experiment(plain, store, deterministic=True)
    assert run.deterministic
    assert run.case_ids == tuple(c.case_id for c in plan_run(keyed).experiment.cases)
    # resuming a deterministic run with the plain spec keeps deterministic mode
    resumed = run_experiment(plain, store, resume=run.run_id)
    assert resumed.run_id == run.run_id and resumed.status == "finished"


def test_an_interrupted_deterministic_run_resumes_seeded_and_other_cases_are_refused(tmp_path):
    plain = load_spec_text(FOREST.replace("EXTRA", ""), "plain.toml")
    store = ResultsStore(tmp_path)
    planned = []

    def stop(record, pending):
        planned.append(record.run_id)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):       # as `accelml check --deterministic`
        run_experiment(plain, store, on_plan=stop, deterministic=True)
    (run_id,) = planned
    assert store.finished_case_ids(run_id) == set() and store.get_run(run_id).deterministic
    resumed = run_experiment(plain, store, resume=run_id)
    (result,) = store.case_results(run_id)
    assert resumed.status == "finished" and resumed.deterministic
    assert dict(result.params)["random_state"] == 0
    other = dataclasses.replace(plain, cases=plain.cases[:0])
    with pytest.raises(SpecError, match="planned other cases"):
        run_experiment(other, store, resume=run_id)


def test_the_task_environment_reaches_the_case_process(tmp_path):
    """ACCELML_CACHE_DIR is read inside the case process: the dataset cache lands there."""
    (case,) = load_spec_text(FOREST.replace("EXTRA", ""), "plain.toml").cases
    cache = tmp_path / "cache-from-task-env"
    output = execute_case(CaseTask(case=case, run_id="r", threads=1,
                                     environment={"ACCELML_CACHE_DIR": str(cache)},
                                     deterministic=True))
    assert output.result.ok, output.result.reason
    assert cache.is_dir() and any(cache.iterdir())


def _touch(item):
    """Leaves a mark for each item it is called with (a case process would start here)."""
    item.marker.touch()
    return item.name


def test_local_executor_does_not_start_a_case_needing_more_gpus_than_here(tmp_path):
    gpus, _ = list_gpus()
    items = [SimpleNamespace(name="gpu", marker=tmp_path / "gpu", device="cuda",
                             ranks=len(gpus) + 1, strategy="mirrored"),
             SimpleNamespace(name="cpu", marker=tmp_path / "cpu", device="cpu", ranks=1,
                             strategy=None)]
    with LocalExecutor(jobs=1) as executor:
        outcomes = {o.item.name: o for o in executor.map(_touch, items)}
    assert (tmp_path / "cpu").exists() and not (tmp_path / "gpu").exists()
    assert outcomes["cpu"].ok and outcomes["cpu"].result == "cpu"
    gpu = outcomes["gpu"]
    assert not gpu.ok and gpu.failure == "unavailable" and gpu.result is None
    assert gpu.error.startswith(f"needs {len(gpus) + 1} GPU(s); this machine has {len(gpus)}")


@pytest.mark.skipif(bool(list_gpus()[0]), reason="this machine has a GPU")
def test_a_cuda_case_without_gpus_is_recorded_unavailable_and_the_rest_run(tmp_path):
    spec = "repeats = 1\nwarmup = 0\nthreads = 1\n" + DATA + """
[[cases]]
algorithm = "gradient_boosting_classifier"
backend = "xgboost"
device = ["cpu", "cuda"]
dataset = "data"
params = {n_estimators = 5}
"""
    store = ResultsStore(tmp_path)
    run = run_experiment(load_spec_text(spec, "gpu.toml"), store)
    results = {r.device: r for r in store.case_results(run.run_id)}
    assert results["cpu"].ok, results["cpu"].reason
    cuda = results["cuda"]
    assert cuda.status == "failed" and cuda.failure.value == "unavailable"
    assert cuda.reason.startswith("needs 1 GPU(s); this machine has 0 (")
    assert cuda.timings == ()        # its process never started


def test_a_first_run_that_takes_long_enough_counts_and_says_why(tmp_path):
    """Issue 17: with skip_warmup_after below the fit's time, the first (primed) full run is a
    counted repeat: no warm-up round, its predictions are among the repeats', the note says why."""
    text = FOREST.replace("repeats = 2\nwarmup = 0", "repeats = {min = 2, max = 2, "
                          "skip_warmup_after = 0.000001}\nwarmup = 1").replace("EXTRA", "")
    store = ResultsStore(tmp_path)
    run = run_experiment(load_spec_text(text, "skip.toml"), store)
    (result,) = store.case_results(run.run_id)
    assert result.ok and (result.warmup, result.repeats) == (0, 2)
    assert result.timing("fit").count == 2 and result.timing("fit").warmup_samples == ()
    assert len(result.repeat_prediction_digests) == 2
    assert result.warmup_note.startswith("fit: the first run took ")
    assert "counted as a repeat instead of a warm-up" in result.warmup_note


@pytest.mark.skipif(bool(list_gpus()[0]), reason="this machine has a GPU")
def test_a_cuda_case_of_more_ranks_than_cores_is_unavailable_here_not_refused():
    """Without GPUs, xgboost_scaling_check's 4-GPU case is recorded unavailable like the
    other GPU cases, not refused for its 4 ranks on a 2-core machine; a CPU case of more
    ranks than cores is still refused."""
    data = DatasetSpec("d", "shipped", (("name", "digits"),))
    too_many = usable_cores() + 1
    gpu_case = Case("gradient_boosting_classifier", "xgboost", "cuda", data, ranks=too_many)
    # recorded unavailable before the cases are grouped (a 1-GPU case interleaved with a
    # 4-GPU one on a 2-GPU machine ran neither when the group's need was the shortfall)
    assert ensure_scale([gpu_case], None) == {
        gpu_case.case_id: f"needs {too_many} GPU(s); this machine has 0 ({list_gpus()[1]})"}
    with pytest.raises(SpecError, match=f"{too_many} ranks on this machine"):
        ensure_scale([Case("gradient_boosting_classifier", "xgboost", "cpu", data,
                           ranks=too_many)], None)
