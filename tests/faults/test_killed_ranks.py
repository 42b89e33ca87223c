"""A killed rank is ``killed``, with its signal, and retried (issue 30, item 2).

A ``kill -9`` of one rank was recorded as ``error``, so ``--retry-failed`` left it failed;
its reason named a logs folder under /tmp that no longer existed. Now: the case is
``killed`` by SIGKILL, its reason names the logs folder in the run's store (which exists
and holds the launcher's log), shows no library start-up noise, and is run again at once,
like the case of a lost dask worker (``--retries``, default 2): a rank, ``horovodrun`` or
rank 0 of torch-ddp killed once, the case ends ok, and its record keeps the killed attempt.
With ``--retries 0`` the kill stays recorded and ``--resume --retry-failed`` runs it again
(attempt 2). Real Horovod and torch-ddp ranks, 2 local processes.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from accelml.results.store import ResultsStore

from .conftest import gone, leftovers, ranks_of, wait_for
from .test_rank_cleanup import HOROVOD_SPEC

pytestmark = [pytest.mark.faults, pytest.mark.slow]
WORK_UNIT = "tests/faults: real ranks"
"""A serial chain of its own in the fault suite (tests/conftest.py's work units): test_killed_ranks
and test_rank_cleanup, whose faults hit running ranks, not a client starting up."""

DDP_SPEC = HOROVOD_SPEC.format(time_limit=600).replace(
    'strategy = "horovod"', 'strategy = "torch-ddp"\nkeras_backend = "torch"')


def kill_one_rank(faults, client, which=lambda ranks: ranks[-1]) -> None:
    wait_for(lambda: len(ranks_of(faults.tag)) >= 2 or client.poll() is not None, "two ranks")
    assert client.poll() is None, client.communicate()
    which(ranks_of(faults.tag)).send_signal(signal.SIGKILL)


def the_result(faults):
    (run,) = ResultsStore(faults.results).list_runs()
    (result,) = ResultsStore(faults.results).case_results(run.run_id)
    return run, result


def test_a_rank_killed_with_sigkill_is_killed_and_retried(faults, tmp_path):
    spec = tmp_path / "ddp.toml"
    spec.write_text(DDP_SPEC)
    client = faults.client(str(spec), "--retries", "0")
    kill_one_rank(faults, client)
    _, err = client.communicate(timeout=300)
    assert client.returncode == 1, err
    assert gone(faults.tag) == []
    run, result = the_result(faults)
    assert result.failure.value == "killed", result.reason
    assert "killed by SIGKILL" in result.reason, result.reason
    assert not re.search(r"I0000|W0000|E0000|absl|oneDNN", result.reason), result.reason
    logs = Path(re.search(r"\(logs: ([^)]+)\)", result.reason).group(1))
    assert logs.is_dir() and logs.is_relative_to(faults.results / "logs" / run.run_id), logs
    assert any(logs.glob("launcher-*.log"))

    again = faults.client("--resume", run.run_id, "--retry-failed", "--retries", "0")
    kill_one_rank(faults, again)              # it runs again: kill it once more
    _, err = again.communicate(timeout=300)
    assert "1 case(s) to run of 1" in err, err
    _, result = the_result(faults)
    assert result.failure.value == "killed" and result.attempts == 2, result
    assert gone(faults.tag) == []


SHORT = "epochs = 500"


def rank_zero(ranks):
    return next(rank for rank in ranks if rank.environ().get("ACCELML_RANK") == "0")


def horovodrun_of(faults):
    return lambda ranks: next(p for p in leftovers(faults.tag)
                              if "accelml.dl.loopback_horovodrun" in " ".join(p.cmdline()))


KILLS = {
    "horovod-rank": ('strategy = "horovod"', lambda faults: lambda ranks: ranks[-1]),
    "horovodrun": ('strategy = "horovod"', horovodrun_of),
    "torch-ddp-rank-0": ('strategy = "torch-ddp"\nkeras_backend = "torch"', lambda faults: rank_zero),
}


@pytest.mark.parametrize("kill", list(KILLS))
def test_a_kill_is_retried_at_once_and_kept_in_the_record(kill, faults, tmp_path):
    strategy, which = KILLS[kill]
    spec = tmp_path / "killed.toml"
    spec.write_text(HOROVOD_SPEC.format(time_limit=600).replace('strategy = "horovod"', strategy)
                    .replace(SHORT, "epochs = 3"))
    client = faults.client(str(spec))
    kill_one_rank(faults, client, which(faults))
    _, err = client.communicate(timeout=300)
    assert client.returncode == 0, err
    assert gone(faults.tag) == []
    run, result = the_result(faults)
    assert result.ok and result.attempts == 2, (result.status, result.reason, result.earlier_attempts)
    (killed,) = result.earlier_attempts
    assert killed.startswith("attempt 1: killed: ") and "SIGKILL" in killed, killed
    logs = Path(re.search(r"\(logs: ([^)]+)\)", killed).group(1))
    assert logs.is_dir() and logs.is_relative_to(faults.results / "logs" / run.run_id), logs
    assert result.dl is not None and result.dl.ranks_identical, result.dl
