import json
import math

import pytest

from accelml.results.records import (
    SCHEMA_VERSION,
    ArrayRef,
    CaseResult,
    DatasetInfo,
    DLMeasurements,
    Environment,
    EpochMeasurement,
    FailureKind,
    PhaseTiming,
    RunRecord,
    SchemaError,
    Score,
    median_confidence_interval,
)


def full_case() -> CaseResult:
    env = Environment(python="3.11.7", platform="linux", cpu_model="cpu", logical_cores=2,
                      physical_cores=1, usable_cores=2, libraries=(("numpy", "2.0"),),
                      hostname="node1", slurm_job_id="42", threads=2)
    dl = DLMeasurements(model="mnist_cnn", epochs=(EpochMeasurement(0, 3.0, 1.0, 0.5),
                                                  EpochMeasurement(1, 2.0, 0.5, 0.8)),
                        per_rank_batch_size=32, ranks=4, learning_rate=0.04,
                        images_per_second=1000.0, strategy="horovod",
                        rank_weight_digests=("a", "a", "a", "a"))
    return CaseResult(
        run_id="r", case_id="c", algorithm="mnist_cnn", backend="keras", device="cpu",
        dataset="digits", status="ok", task="classification", ranks=4, strategy="horovod",
        params=(("epochs", 2),), timings=(PhaseTiming.from_samples("epoch", [2.0, 2.1]),),
        repeats=2, warmup=1, scores=(Score("accuracy", 0.8, True),),
        predictions=(ArrayRef("predictions", "0" * 64, "int64", (10,)),),
        repeat_prediction_digests=("x", "x"), peak_host_memory_bytes=10,
        thread_pools=(("openmp", 2),), environment=env,
        dataset_info=DatasetInfo("digits", "d", "shipped", "classification", 10, 5, 64, 10,
                                 "float64", "C", (64,)), dl=dl)


def test_case_result_round_trips_through_json():
    case = full_case()
    again = CaseResult.from_json(case.to_json())
    assert again == case
    assert again.dl.global_batch_size == 128
    assert again.dl.ranks_identical is True
    assert again.env_hash == case.environment.env_hash


def test_env_hash_ignores_host_and_job_but_not_versions():
    env = full_case().environment
    other_host = Environment.from_dict({**env.to_dict(), "hostname": "node2", "slurm_job_id": None})
    newer = Environment.from_dict({**env.to_dict(), "libraries": [["numpy", "2.1"]]})
    assert other_host.env_hash == env.env_hash
    assert newer.env_hash != env.env_hash


def test_failed_case_needs_a_reason_and_valid_status():
    with pytest.raises(ValueError):
        CaseResult("r", "c", "kmeans", "sklearn", "cpu", "d", status="failed")
    with pytest.raises(ValueError):
        CaseResult("r", "c", "kmeans", "sklearn", "cpu", "d", status="maybe")
    failed = CaseResult("r", "c", "kmeans", "sklearn", "cpu", "d", status="failed",
                        failure=FailureKind.TIMEOUT, reason="exceeded")
    assert CaseResult.from_json(failed.to_json()).failure is FailureKind.TIMEOUT


def test_newer_schema_is_refused():
    data = json.loads(full_case().to_json())
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(SchemaError):
        CaseResult.from_dict(data)


def test_run_record_round_trips():
    run = RunRecord("r1", "smoke", "h", "name = 'x'", case_ids=("a", "b"))
    assert RunRecord.from_json(run.to_json()) == run


def test_median_interval_of_six_samples_is_min_max_with_its_true_level():
    low, high, got = median_confidence_interval(list(range(6)))
    assert (low, high) == (0, 5)
    assert got == pytest.approx(0.96875)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_median_interval_of_fewer_samples_is_students_t_at_the_level_asked(n):
    # [min, max] of 3 samples would cover the median 75% of the time, not 95%
    import random
    import statistics

    samples = list(range(n))
    low, high, level = median_confidence_interval(samples)
    assert level == 0.95 and low < statistics.median(samples) < high
    assert (low + high) / 2 == pytest.approx(statistics.median(samples))
    rng = random.Random(n)
    trials = 4000
    hits = sum(low <= 0.0 <= high for low, high, _ in (
        median_confidence_interval([rng.gauss(0.0, 1.0) for _ in range(n)])
        for _ in range(trials)))
    assert hits / trials >= 0.93, hits / trials   # normal noise: at least the level, within sampling error


def test_median_interval_covers_the_median_at_the_stated_level():
    # Exact coverage check by simulation against a known median (uniform(0,1): median 0.5).
    import random

    rng = random.Random(0)
    n, trials, hits, levels = 25, 2000, 0, set()
    for _ in range(trials):
        low, high, level = median_confidence_interval([rng.random() for _ in range(n)])
        hits += low <= 0.5 <= high
        levels.add(level)
    (level,) = levels
    assert level >= 0.95
    assert hits / trials >= level - 0.02   # binomial sd of the estimate is about 0.005


def test_phase_timing_flags_noise_against_target():
    steady = PhaseTiming.from_samples("fit", [1.0, 1.01, 0.99, 1.0, 1.0], target_rel=0.05)
    noisy = PhaseTiming.from_samples("fit", [1.0, 2.0, 0.5], target_rel=0.05)
    assert not steady.noisy and steady.converged(0.05)
    assert noisy.noisy and not noisy.converged(0.05)
    assert steady.q1 <= steady.median <= steady.q3
    single = PhaseTiming.from_samples("load", [0.3])
    assert single.count == 1 and not single.noisy and math.isinf(single.ci_halfwidth_rel) is False


def test_failed_result_carries_the_case_identity_and_one_line_of_reason():
    from accelml.cases import Case, DatasetSpec

    case = Case("mnist_cnn", "keras", "cpu", DatasetSpec("digits", "shipped", (("name", "digits"),)),
                ranks=2, strategy="horovod", params=(("epochs", 1),))
    result = CaseResult.failed(case, "run-1", FailureKind.KILLED, "\n  killed by SIGTERM\nmore\n",
                               threads=3, attempts=2, wall_seconds=1.5)
    assert (result.case_id, result.algorithm, result.backend, result.device, result.dataset,
            result.ranks, result.strategy, result.params) == (
        case.case_id, "mnist_cnn", "keras", "cpu", "digits", 2, "horovod", (("epochs", 1),))
    assert (result.status, result.failure, result.reason) == ("failed", FailureKind.KILLED,
                                                              "killed by SIGTERM")
    assert (result.threads, result.attempts, result.wall_seconds) == (3, 2, 1.5)
    assert result.finished_at and CaseResult.from_dict(result.to_dict()) == result
    with pytest.raises(ValueError, match="needs a reason"):
        CaseResult.failed(case, "run-1", FailureKind.ERROR, " \n ")
    with pytest.raises(ValueError, match="failure kind"):
        CaseResult.failed(case, "run-1", FailureKind.NONE, "why")


def test_a_failed_result_is_built_only_by_case_result_failed():
    """Every other module asks CaseResult.failed; none spells out status=FAILED itself."""
    import ast
    from pathlib import Path

    import accelml

    package = Path(accelml.__file__).parent
    builders = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and any(
                    keyword.arg == "status" and "FAILED" in ast.unparse(keyword.value)
                    for keyword in node.keywords):
                builders.append(f"{path.relative_to(package)}:{node.lineno}")
    assert [builder.split(":")[0] for builder in builders] == ["results/records.py"], builders


def test_a_phase_interval_never_reaches_below_zero_seconds():
    # Two spread samples (a 10M-row CPU fit on a busy host): Student's t with one degree of
    # freedom gives 39.5 +- 45 s; a duration's interval stops at zero.
    timing = PhaseTiming.from_samples("fit", [35.9, 43.0])
    assert timing.ci_low == 0.0 and timing.ci_high == pytest.approx(39.45 + 12.706 * 5.02 / 2**0.5, rel=1e-3)
    assert timing.median == pytest.approx(39.45)


def test_a_result_written_before_ranks_were_named_so_reads_with_its_ranks():
    """The stored names stay ``workers`` and ``per_worker_batch_size`` (what the store and
    every record written before the rename hold); the new names are read too."""
    case = full_case()
    data = json.loads(case.to_json())
    assert (data["workers"], data["dl"]["workers"], data["dl"]["per_worker_batch_size"]) == (4, 4, 32)
    assert "ranks" not in data and "per_rank_batch_size" not in data["dl"]
    assert CaseResult.from_dict(data).ranks == 4
    renamed = {**data, "ranks": data.pop("workers"),
               "dl": {**data["dl"], "ranks": 4, "per_rank_batch_size": 32}}
    del renamed["dl"]["workers"], renamed["dl"]["per_worker_batch_size"]
    assert CaseResult.from_dict(renamed) == case
