"""A killed rank is ``killed``, with its signal, and retried (issue 30, item 2).

A ``kill -9`` of one rank was recorded as ``error``, so ``--retry-failed`` left it failed;
its reason named a logs folder under /tmp that no longer existed. Now: the case is
``killed`` by SIGKILL, its reason names the logs folder in the run's store (which exists
and holds the launcher's log), shows no library start-up noise, and is run again at once,
like the case of a lost dask worker (``--retries``, default 2): a Horovod rank killed, then
``horovodrun``, the case ends ok, and its record keeps the killed attempts. With
``--retries 0`` the kill (of a torch-ddp rank) stays recorded and ``--resume --retry-failed``
runs it again (attempt 2), where a kill of rank 0 is recorded as killed too. Either way the
other ranks and the launcher end with the killed one, and the scratch folders go. Real
Horovod and torch-ddp ranks, 2 local processes.
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
WORK_UNIT = "tests/faults: killed ranks"
"""A serial chain of its own in the fault suite (tests/conftest.py's work units), beside
test_rank_cleanup's: their faults hit running ranks, not a client starting up."""

DDP_SPEC = HOROVOD_SPEC.format(time_limit=600).replace(
    'strategy = "horovod"', 'strategy = "torch-ddp"\nkeras_backend = "torch"')


def kill_one_rank(faults, client, which=lambda ranks: ranks[-1], earlier=frozenset()) -> frozenset[int]:
    """Once two ranks not among the processes ``earlier`` (an earlier attempt's) run, SIGKILL
    the process that ``which`` picks from them; return the ids of the processes running then."""
    def ranks():
        return [rank for rank in ranks_of(faults.tag) if rank.pid not in earlier]

    wait_for(lambda: len(ranks()) >= 2 or client.poll() is not None, "two ranks")
    assert client.poll() is None, client.communicate()
    running = frozenset(process.pid for process in leftovers(faults.tag))
    which(ranks()).send_signal(signal.SIGKILL)
    return running


def rank_zero(ranks):
    return next(rank for rank in ranks if rank.environ().get("ACCELML_RANK") == "0")


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
    assert gone(faults.tag) == []             # the other rank and the launcher went with it
    assert faults.scratch_left() == []
    run, result = the_result(faults)
    assert result.failure.value == "killed", result.reason
    assert "killed by SIGKILL" in result.reason, result.reason
    assert not re.search(r"I0000|W0000|E0000|absl|oneDNN", result.reason), result.reason
    logs = Path(re.search(r"\(logs: ([^)]+)\)", result.reason).group(1))
    assert logs.is_dir() and logs.is_relative_to(faults.results / "logs" / run.run_id), logs
    assert any(logs.glob("launcher-*.log"))

    again = faults.client("--resume", run.run_id, "--retry-failed", "--retries", "0")
    kill_one_rank(faults, again, rank_zero)   # it runs again: kill it once more, at rank 0 this time
    _, err = again.communicate(timeout=300)
    assert "1 case(s) to run of 1" in err, err
    _, result = the_result(faults)
    assert result.failure.value == "killed" and result.attempts == 2, result
    assert "killed by SIGKILL" in result.reason, result.reason
    assert gone(faults.tag) == []


def horovodrun_of(faults, earlier):
    """Picks the launcher (horovodrun) of the attempt whose ranks it is given."""
    return lambda ranks: next(process for process in leftovers(faults.tag) if process.pid not in earlier
                              and "accelml.dl.loopback_horovodrun" in " ".join(process.cmdline()))


@pytest.mark.horovod
def test_a_kill_is_retried_at_once_and_kept_in_the_record(faults, tmp_path):
    """A Horovod rank killed in the first attempt, ``horovodrun`` in the second: each kill is run
    again at once, the third attempt ends ok, and the record keeps both killed attempts. (A kill
    of torch-ddp's rank 0 is recorded as killed by SIGKILL, which is what makes a kill run again:
    test_a_rank_killed_with_sigkill_is_killed_and_retried's second kill.)"""
    spec = tmp_path / "killed.toml"
    spec.write_text(HOROVOD_SPEC.format(time_limit=600).replace("epochs = 500", "epochs = 1"))
    client = faults.client(str(spec))
    first = kill_one_rank(faults, client)
    kill_one_rank(faults, client, horovodrun_of(faults, first), earlier=first)
    _, err = client.communicate(timeout=600)   # a whole attempt still to run: generous
    assert client.returncode == 0, err
    assert gone(faults.tag) == []
    run, result = the_result(faults)
    assert result.ok and result.attempts == 3, (result.status, result.reason, result.earlier_attempts)
    assert len(result.earlier_attempts) == 2, result.earlier_attempts
    for attempt, killed in enumerate(result.earlier_attempts, start=1):
        assert killed.startswith(f"attempt {attempt}: killed: ") and "SIGKILL" in killed, killed
        logs = Path(re.search(r"\(logs: ([^)]+)\)", killed).group(1))
        assert logs.is_dir() and logs.is_relative_to(faults.results / "logs" / run.run_id), logs
    assert result.dl is not None and result.dl.ranks_identical, result.dl
    assert faults.scratch_left() == []
