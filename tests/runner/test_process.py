"""The per-case process: timings that agree with a direct measurement, and failures recorded."""

import statistics
import time

import pytest
from threadpoolctl import threadpool_limits

from accelml.cases import Case, DatasetSpec
from accelml.results.records import CaseResult
from accelml.runner.process import CaseTask, execute_case
from accelml.spec.load import load_spec_text

SPEC = """
reference = "sklearn"
repeats = 5
warmup = 1
time_limit = 120
threads = 1

[datasets.data]
source = "generated"
generator = "classification"
n_samples = 20000
n_features = 40
seed = 0

[[cases]]
algorithm = "logistic_regression"
backend = "sklearn"
dataset = "data"
params = {max_iter = 300, C = 0.5}
"""


def run(case, cache_dir, threads=1) -> CaseResult:
    output = execute_case(CaseTask(case=case, run_id="r", cache_dir=str(cache_dir),
                                     threads=threads))
    return output.result, output.arrays


def direct_fit_samples(case, cache_dir, repeats=5) -> list[float]:
    """The same call measured by hand: same data (from the same cache), same threads."""
    from sklearn.base import clone

    from accelml.datasets import load_dataset
    from accelml.estimators import Estimator

    data = load_dataset(case.dataset.name, case.dataset.source, dict(case.dataset.options),
                        cache_dir=cache_dir)
    template = Estimator(case.algorithm, backend=case.backend, **case.params_dict)
    samples = []
    with threadpool_limits(limits=1):
        for index in range(repeats + 1):
            estimator = clone(template)
            started = time.perf_counter()
            estimator.fit(data.X_train, data.y_train)
            if index:
                samples.append(time.perf_counter() - started)
    return samples


ATTEMPTS = 3
"""Measurements of the runner against the direct call, each pair taken afresh: load from outside
the suite (other users of a shared machine) can hold the case process for all its 5 repeats.
A fit time that counts something it should not (process start, data loading, the warm-up) is
outside the bound in every attempt."""


@pytest.mark.alone   # under -n 4 on 2 cores its case process got a third of a core: 76 vs 26 ms
def test_runner_fit_time_agrees_with_a_direct_measurement(tmp_path):
    (case,) = load_spec_text(SPEC, "t.toml").cases
    # Same call, same data, same threads. On a shared, loaded machine other processes only
    # ever add time, so the fastest of several repeats is the stable estimate of the call's
    # own cost (medians here swing several-fold with the load). The runner's fastest repeat
    # must match the fastest direct one, measured just before and just after it, within a
    # factor of 1.5; counting process start (about a second), data loading or the warm-up in
    # "fit" would put it far outside.
    measured = []
    for _ in range(ATTEMPTS):
        before = direct_fit_samples(case, tmp_path)
        result, arrays = run(case, tmp_path)
        after = direct_fit_samples(case, tmp_path)
        assert result.ok, result.reason
        fit = result.timing("fit")
        assert fit.count == 5 and len(fit.warmup_samples) == 1
        direct_fastest = min(before + after)
        measured.append((round(direct_fastest, 4), round(fit.minimum, 4)))
        if direct_fastest / 1.5 <= fit.minimum <= direct_fastest * 1.5:
            break
    else:
        raise AssertionError(f"(direct fastest, runner fastest) of each attempt: {measured}")
    assert fit.minimum <= fit.median <= fit.maximum
    assert statistics.median(before + after) < result.timing("startup").median + 10
    assert result.timing("startup").median > 0 and result.timing("load").count == 1
    assert result.threads == 1 and result.environment.threads == 1
    assert result.score("accuracy") > 0.7
    assert result.prediction().digest in arrays
    assert len(result.repeat_prediction_digests) == 5
    assert result.peak_host_memory_bytes > 10 * 2**20


@pytest.mark.parametrize("change, failure, reason", [
    ("params = {max_iter = 300, C = 0.5}", "error", "InvalidParameterError: The 'solver' parameter"),
    ("time_limit = 120", "timeout", "exceeded its time limit of 0.5 s"),
    ("threads = 1", "memory", "over its memory limit of 40 MiB"),
])
def test_failures_are_recorded_with_their_reason(tmp_path, change, failure, reason):
    replacement = {
        # accelml passes solver names through; scikit-learn refuses this one when fitting
        "params = {max_iter = 300, C = 0.5}": 'params = {solver = "no-such-solver"}',
        "time_limit = 120": "time_limit = 0.5",
        "threads = 1": "threads = 1\nmemory_limit_mb = 40",
    }[change]
    (case,) = load_spec_text(SPEC.replace(change, replacement), "t.toml").cases
    result, arrays = run(case, tmp_path)
    assert result.status == "failed" and result.failure.value == failure
    assert reason in result.reason and "\n" not in result.reason
    assert arrays == {}


@pytest.mark.slow
@pytest.mark.parametrize("memory_limit", ["", "memory_limit_mb = 4000"])
def test_a_case_killed_at_its_time_limit_says_where_it_was(tmp_path, memory_limit):
    # A forest of many deep trees fits for minutes: at the limit the case is inside
    # scikit-learn's fit, and the failure's reason names the innermost frames. Every tree
    # tries all 40 features, so nearly all the time is in the tree builder, not in the
    # per-tree input checks (inspect, narwhals, array_api_compat) that may hold the stack.
    # The limit is 30 s, not 12: under make test's load (4 workers on 2 cores) a case
    # process was killed at 12 s with no stack to show, twice in one run (still starting).
    spec = SPEC.replace("time_limit = 120", f"time_limit = 30\n{memory_limit}").replace(
        'algorithm = "logistic_regression"', 'algorithm = "random_forest_classifier"').replace(
        "params = {max_iter = 300, C = 0.5}", "params = {n_estimators = 5000, max_features = 1.0, random_state = 0}")
    (case,) = load_spec_text(spec, "t.toml").cases
    result, _ = run(case, tmp_path)
    assert result.failure.value == "timeout" and "\n" not in result.reason
    assert "exceeded its time limit of 30 s; it was in " in result.reason, result.reason
    assert "sklearn/" in result.reason.split("it was in ")[1], result.reason


def test_a_launcher_past_its_time_limit_is_recorded_as_a_timeout(tmp_path):
    """The launcher of a keras case kills its ranks at the training's time limit (here 3 s,
    the case's 600 s): the case is a ``timeout``, as when the runner kills the case process
    at the case's limit. Where the two limits are equal (a spec's ``time_limit``), the
    launcher counts from its own start and the runner from the case process's, and the
    runner asks for stacks for a second before it kills: a launcher started within that
    second ended first, and its case was recorded as an ``error`` (seen in CI)."""
    case = Case("mlp", "keras", "cpu", DatasetSpec("digits", "shipped", (("name", "digits"),)),
                strategy="single", params=(("epochs", 500), ("time_limit_s", 3.0)))
    result, arrays = run(case, tmp_path)
    assert (result.status, result.failure.value) == ("failed", "timeout"), result.reason
    assert "passed its time limit of 3 s and was killed" in result.reason, result.reason
    assert arrays == {}
