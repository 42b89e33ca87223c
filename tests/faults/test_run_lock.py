"""One process runs a run's cases at a time (issue 30, item 6): two ``compare --resume`` of
one run at once both ran every missing case, and one set of results was silently dropped.
Now the run is locked while a client runs it: a second resume (or a resume of a run still
running) is refused with one line and exit 2; the lock goes with its holder, even a holder
killed with SIGKILL, and each case is stored once."""

from __future__ import annotations

import signal
import sqlite3
from contextlib import closing

import pytest

from accelml.results.store import ResultsStore

from .conftest import case_processes, gone, wait_for
from .test_client_faults import SLOW_CASES, spec_with, stored

ONE_SLOW_CASE = SLOW_CASES.replace("[100000, 100001, 100002]", "[100000]").replace(
    "time_limit = 2", "time_limit = 300")
"""A case that runs until its time limit: the first client is still at it while the others try."""

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def running_slow_case(faults, client) -> str:
    """The run id of ``client`` once its fast cases are stored and its slow one runs."""
    def slow_case_running() -> bool:
        try:      # the store may still be being made
            with closing(sqlite3.connect(faults.results / "results.sqlite")) as connection:
                done = connection.execute("SELECT count(*) FROM cases").fetchone()[0]
        except sqlite3.Error:
            done = 0
        return client.poll() is not None or (done == 2 and bool(case_processes(faults.tag)))

    wait_for(slow_case_running, "the slow case")
    assert client.poll() is None, client.communicate()
    (run,) = ResultsStore(faults.results).list_runs()
    return run.run_id


def test_a_second_resumer_is_refused_while_the_first_runs(faults, tmp_path):
    spec = spec_with(tmp_path, cases=2, extra=ONE_SLOW_CASE)
    first = faults.client(spec)
    run_id = running_slow_case(faults, first)
    for argv in (("--resume", run_id), ("--resume", run_id, "--retry-failed"),
                 (spec, "--resume", run_id)):
        second = faults.run(*argv)
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 2, second.stderr
        assert len(lines) == 1 and "is being run by another process (pid" in lines[0], lines
        assert second.stdout == ""
    assert first.poll() is None, "the refused resume disturbed the running one"
    first.send_signal(signal.SIGKILL)           # the kernel drops its lock with it
    first.communicate(timeout=60)
    assert gone(faults.tag) == []
    store = ResultsStore(faults.results)
    with store.run_lock(run_id):                # free again: a resume would run now
        assert len(stored(faults, run_id)) == 2  # each finished case once
