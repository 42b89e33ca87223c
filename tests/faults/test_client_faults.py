"""The fault suite's client and case-process faults (issue 16): real `accelml compare`
clients on a real local cluster, killed at several points (SIGKILL, SIGTERM, SIGINT,
SIGHUP), their case processes killed (SIGKILL, SIGTERM), cases past their time limit. After
each fault and at the end: no finished result lost or changed, none stored twice, no
process of the test left, no scratch folder left once the next run swept it."""

from __future__ import annotations

import signal
import sqlite3
import time
from contextlib import closing

import pytest

from accelml.results.store import ResultsStore

from .conftest import case_processes, gone, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.slow]

CASES_SPEC = """
repeats = 1
warmup = 0
threads = 1
[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 300
n_features = 3
[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {{n_init = 1, random_state = 0}}
grid = {{n_clusters = [{clusters}]}}
"""

SLOW_CASES = """
[[cases]]
algorithm = "random_forest_classifier"
backend = "sklearn"
dataset = "blobs"
params = {random_state = 0}
grid = {n_estimators = [100000, 100001, 100002]}
time_limit = 2
"""

CLIENT_FAULTS = [(signum, point) for point in ("starting", "mid-case", "between-cases")
                 for signum in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)] \
    + [(signal.SIGHUP, "mid-case")]
"""(signal sent to the client, when): ten client faults, one after the other on one run."""


def spec_with(tmp_path, cases: int, extra: str = "") -> str:
    path = tmp_path / "faults.toml"
    path.write_text(CASES_SPEC.format(clusters=", ".join(str(n) for n in range(2, 2 + cases))) + extra)
    return str(path)


def stored(faults, run_id: str) -> dict[str, object]:
    """case id -> stored result; fails on a case stored twice."""
    with closing(sqlite3.connect(faults.results / "results.sqlite")) as connection:
        ids = [row[0] for row in connection.execute("SELECT case_id FROM cases WHERE run_id=?", (run_id,))]
    assert len(ids) == len(set(ids)), "a case stored twice"
    return {result.case_id: result for result in ResultsStore(faults.results).case_results(run_id)}


def wait_for_point(faults, client, point: str, run_id: str | None) -> None:
    if point == "starting":
        time.sleep(0.5)
        return
    if point == "mid-case":
        wait_for(lambda: case_processes(faults.tag) or client.poll() is not None, "a case process")
        return
    before = len(stored(faults, run_id)) if run_id else 0

    def one_more() -> bool:
        if not (faults.results / "results.sqlite").exists():
            return client.poll() is not None
        runs = ResultsStore(faults.results).list_runs()
        return (bool(runs) and len(stored(faults, runs[0].run_id)) > before) or client.poll() is not None

    wait_for(one_more, "one more stored result")


def test_client_faults_lose_nothing_and_leave_nothing(faults, tmp_path):
    # Five cases: a fault between cases stores one (three such faults: it is sent as that
    # one is stored, while the next case process is starting), one mid-case none (its case is
    # killed as its process appears, seconds before it could end), so the last fault (SIGHUP
    # mid-case) finds one of two cases running, with room for one stored late. Each case more
    # is a case process more for the final resume (~5 CPU-s; 14 cases: 86 of this test's 193 s).
    spec = spec_with(tmp_path, cases=5)
    run_id: str | None = None
    kept: dict[str, object] = {}
    injected = 0
    for signum, point in CLIENT_FAULTS:
        client = faults.client(*(["--resume", run_id] if run_id else [spec]))
        wait_for_point(faults, client, point, run_id)
        assert client.poll() is None, f"the client ended before the fault ({point}): {client.communicate()}"
        client.send_signal(signum)
        injected += 1
        _, err = client.communicate(timeout=120)
        assert gone(faults.tag) == [], f"{signum.name} {point}"
        if not (faults.results / "results.sqlite").exists():
            continue        # killed before it stored anything: nothing to lose
        runs = ResultsStore(faults.results).list_runs()
        if not runs:
            continue
        (run,) = runs
        run_id = run.run_id
        now = stored(faults, run_id)
        assert {case_id: now.get(case_id) for case_id in kept} == kept, f"lost after {signum.name} {point}"
        kept = now
        if signum != signal.SIGKILL and point != "starting":
            assert client.returncode == 128 + signum, err
            assert run.status == "interrupted"
            assert faults.scratch_left() == []
    assert injected == len(CLIENT_FAULTS)
    assert run_id is not None
    final = faults.run("--resume", run_id)
    assert final.returncode == 0, final.stderr
    results = stored(faults, run_id)
    assert sorted(results) == sorted(ResultsStore(faults.results).get_run(run_id).case_ids)
    assert {case_id: results[case_id] for case_id in kept} == kept
    assert all(result.ok and result.attempts == 1 for result in results.values())
    assert gone(faults.tag) == [] and faults.scratch_left() == []


def test_case_process_faults_and_time_limits_are_recorded_then_retried(faults, tmp_path):
    # three quick cases: the first two killed as they start (SIGKILL, then SIGTERM: the case
    # after a kill still runs), the third ends; then the three slow ones reach their time
    # limit. Each kill more was a case process more run to its end by the resume (~5 CPU-s),
    # proving again what the first of its signal proves; a slow case costs its 2 s.
    spec = spec_with(tmp_path, cases=3, extra=SLOW_CASES)
    client = faults.client(spec, "--retries", "0")    # each kill kept (run again at once otherwise)
    plan = [signal.SIGKILL, signal.SIGTERM]
    killed: dict[int, signal.Signals] = {}
    seen: set[int] = set()
    while client.poll() is None and len(killed) < len(plan):
        for process in case_processes(faults.tag):
            if process.pid not in seen:
                seen.add(process.pid)
                signum = plan[len(killed)]
                process.send_signal(signum)
                killed[process.pid] = signum
                break
        time.sleep(0.05)
    _, err = client.communicate(timeout=300)
    assert client.returncode == 1, err
    assert len(killed) == len(plan)
    assert gone(faults.tag) == [] and faults.scratch_left() == []
    (run,) = ResultsStore(faults.results).list_runs()
    first = stored(faults, run.run_id)
    failures = sorted((r.failure.value, r.reason.split(";")[0]) for r in first.values() if not r.ok)
    assert failures == sorted(
        [("killed", "killed by SIGKILL from outside the case (a user, the batch system or the kernel)")]
        + [("killed", "killed by SIGTERM")] + [("timeout", "exceeded its time limit of 2 s")] * 3)
    finished = {case_id: result for case_id, result in first.items() if result.ok}
    assert len(finished) == 1

    again = faults.run("--resume", run.run_id, "--retry-failed")
    assert again.returncode == 1, again.stderr          # the time limits are hit again
    assert "5 case(s) to run of 6" in again.stderr
    results = stored(faults, run.run_id)
    assert len(results) == 6
    assert {case_id: results[case_id] for case_id in finished} == finished
    assert sorted(r.attempts for r in results.values()) == [1] + [2] * 5
    assert sum(r.ok for r in results.values()) == 3
    assert gone(faults.tag) == [] and faults.scratch_left() == []
