"""Issue 16, item 1: a multi-rank case's launcher (horovodrun) and ranks die with the case,
however the case ends: client SIGKILL / SIGTERM (SIGINT takes SIGTERM's path), its case
process killed, its time limit, ``scancel`` of the SLURM job it runs in, one of its ranks
killed (test_killed_ranks.py). Real horovodrun --gloo with 2 ranks; no
process of the test may be left (psutil, by a tag in the environment), and scratch folders
are removed, or swept by the next run."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from accelml.results.store import ResultsStore

from .conftest import case_processes, gone, ranks_of, tagged, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.horovod, pytest.mark.slow]
WORK_UNIT = "tests/faults: rank cleanup"
"""A serial chain of its own in the fault suite (tests/conftest.py's work units), beside
test_killed_ranks': their faults hit running ranks, not a client starting up."""

HOROVOD_SPEC = """
reference = "keras"
time_limit = {time_limit}
[datasets.digits]
source = "shipped"
name = "digits"
[[cases]]
algorithm = "mlp"
backend = "keras"
device = "cpu"
strategy = "horovod"
ranks = 2
dataset = "digits"
epochs = 500
batch_size = 16
"""


def horovod_spec(tmp_path, time_limit=600):
    path = tmp_path / "horovod.toml"
    path.write_text(HOROVOD_SPEC.format(time_limit=time_limit))
    return str(path)


def start_with_ranks(faults, tmp_path, *extra, time_limit=600):
    client = faults.client(horovod_spec(tmp_path, time_limit), *extra)
    wait_for_ranks(faults, client)
    return client


def wait_for_ranks(faults, client, earlier=frozenset()):
    """Wait until two ranks not among the process ids ``earlier`` run under ``client``."""
    def ranks():
        return [rank for rank in ranks_of(faults.tag) if rank.pid not in earlier]

    wait_for(lambda: len(ranks()) >= 2 or client.poll() is not None, "two horovod ranks")
    assert client.poll() is None, client.communicate()


def only_run(faults):
    (run,) = ResultsStore(faults.results).list_runs()
    return run


def test_ranks_die_with_their_client(faults, tmp_path):
    """SIGKILL: the client cleans nothing up, and the next run (its resume) sweeps the scratch
    folders it left; SIGTERM, to that resume: the client's clean-up on a signal, the same as on
    SIGINT (its :class:`Interrupted` is a KeyboardInterrupt; the client's SIGINT is
    test_client_faults_lose_nothing_and_leave_nothing's, mid-case among others). A killed
    rank: test_killed_ranks.py. One run for both signals: the resume is the next run that
    sweeps, in place of a run of its own."""
    client = start_with_ranks(faults, tmp_path)
    client.send_signal(signal.SIGKILL)
    client.communicate(timeout=120)
    assert gone(faults.tag) == []
    run = only_run(faults)
    assert run.status == "running"                   # it had no chance to say otherwise
    left_by_the_kill = set(faults.scratch_left())
    assert left_by_the_kill

    client = faults.client("--resume", run.run_id)
    wait_for_ranks(faults, client)                   # its case started: the sweep came first
    assert not left_by_the_kill & set(faults.scratch_left()), "not swept by the next run"
    client.send_signal(signal.SIGTERM)
    _, err = client.communicate(timeout=120)
    assert gone(faults.tag) == []
    assert client.returncode == 128 + signal.SIGTERM, err
    assert only_run(faults).status == "interrupted"
    assert f"--resume {run.run_id}" in err
    assert faults.scratch_left() == []


SECOND_CASE = HOROVOD_SPEC[HOROVOD_SPEC.index("[[cases]]"):].replace("epochs = 500", "epochs = 501")
"""A second case beside HOROVOD_SPEC's (one more epoch: another case id)."""


def test_ranks_die_with_their_killed_case_process(faults, tmp_path):
    """Two cases in one run: the first's case process killed with SIGKILL, the second's with
    SIGTERM; each case's launcher and ranks end with it, and each kill is recorded."""
    path = tmp_path / "two.toml"
    path.write_text(HOROVOD_SPEC.format(time_limit=600) + SECOND_CASE)
    client = faults.client(str(path), "--retries", "0")   # kept killed, not run again
    earlier: frozenset[int] = frozenset()
    for signum in (signal.SIGKILL, signal.SIGTERM):
        wait_for_ranks(faults, client, earlier)
        (case,) = [process for process in case_processes(faults.tag) if process.pid not in earlier]
        its_tree = [case, *case.children(recursive=True)]      # horovodrun and the ranks
        case.send_signal(signum)
        wait_for(lambda tree=its_tree: not any(tagged(process, faults.tag) for process in tree),
                 f"the launcher and ranks of the case process killed with {signum.name} to end")
        earlier = earlier | {process.pid for process in its_tree}
    _, err = client.communicate(timeout=120)
    assert client.returncode == 1, err
    assert gone(faults.tag) == []
    results = ResultsStore(faults.results).case_results(only_run(faults).run_id)
    assert len(results) == 2
    assert all(result.failure.value == "killed" for result in results)
    assert sorted(next(name for name in ("SIGKILL", "SIGTERM") if result.reason.startswith(f"killed by {name}"))
                  for result in results) == ["SIGKILL", "SIGTERM"], [r.reason for r in results]
    assert all("peak memory" in result.reason and "out of memory" not in result.reason for result in results)
    assert faults.scratch_left() == []


def test_ranks_die_at_the_time_limit(faults, tmp_path):
    client = faults.client(horovod_spec(tmp_path, time_limit=20))
    _, err = client.communicate(timeout=300)
    assert client.returncode == 1, err
    assert gone(faults.tag) == []
    (result,) = ResultsStore(faults.results).case_results(only_run(faults).run_id)
    assert result.failure.value == "timeout", result.reason
    assert faults.scratch_left() == []


@pytest.mark.slurm
def test_ranks_die_when_their_slurm_job_is_cancelled(slurm_available, faults, tmp_path):
    client = start_with_ranks(faults, tmp_path, "--cluster", "slurm", "--retries", "0",
                              "--launcher", "mpirun")
    job = ranks_of(faults.tag)[0].environ()["SLURM_JOB_ID"]
    subprocess.run(["scancel", job], check=True)
    _, err = client.communicate(timeout=240)
    assert client.returncode == 1, err
    assert gone(faults.tag, timeout=60) == []
    assert subprocess.run(["squeue", "--noheader", "--jobs", job], capture_output=True,
                          text=True).stdout.strip() == ""
    (result,) = ResultsStore(faults.results).case_results(only_run(faults).run_id)
    assert result.status != "ok"


def test_more_ranks_than_cores_are_refused_before_anything_is_written(faults, tmp_path):
    path = tmp_path / "wide.toml"
    path.write_text(HOROVOD_SPEC.format(time_limit=60).replace("ranks = 2", "ranks = 1000000"))
    out = faults.run(str(path))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "set oversubscribe = true" in out.stderr
    assert not faults.results.exists()
    assert gone(faults.tag, timeout=1) == []


def test_oversubscription_asked_for_passes_the_check_and_is_flagged(faults, tmp_path):
    cores = len(os.sched_getaffinity(0))
    path = tmp_path / "over.toml"
    path.write_text(HOROVOD_SPEC.format(time_limit=300)
                    .replace("ranks = 2", f"ranks = {cores + 1}\noversubscribe = true")
                    .replace("epochs = 500", "epochs = 1"))
    out = faults.run(str(path), "--dry-run")
    assert out.returncode == 0, out.stderr
    from accelml.report.table import Row, legend, render_text

    row = Row(case_id="c", algorithm="mlp", dataset="d", backend="keras", device="cpu",
              ranks=cores + 1, params={"oversubscribe": True}, fit=None, predict=None,
              epoch=None, speedup=None, speedup_low=None, speedup_high=None, score_name=None,
              score=None, agreement=None, status="ok", reason="", noisy=False,
              is_reference=True, oversubscribed=True)
    assert "ok, oversubscribed" in render_text([row])
    assert "oversubscribed: more ranks than cores" in legend([row])
