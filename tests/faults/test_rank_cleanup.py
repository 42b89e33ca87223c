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

from .conftest import case_processes, gone, ranks_of, wait_for
from .test_client_faults import spec_with

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
    wait_for(lambda: len(ranks_of(faults.tag)) >= 2 or client.poll() is not None, "two horovod ranks")
    assert client.poll() is None, client.communicate()
    return client


def only_run(faults):
    (run,) = ResultsStore(faults.results).list_runs()
    return run


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_ranks_die_with_their_client(faults, tmp_path, signum):
    """SIGKILL: the client cleans nothing up; SIGTERM: the client's clean-up on a signal, the
    same as on SIGINT (its :class:`Interrupted` is a KeyboardInterrupt; the client's SIGINT is
    test_client_faults_lose_nothing_and_leave_nothing's, mid-case among others). A killed rank:
    test_killed_ranks.py."""
    client = start_with_ranks(faults, tmp_path)
    client.send_signal(signum)
    _, err = client.communicate(timeout=120)
    assert gone(faults.tag) == []
    run = only_run(faults)
    if signum == signal.SIGKILL:
        assert run.status == "running"               # it had no chance to say otherwise
        # the next run on this machine sweeps the scratch folders the killed client left
        assert faults.scratch_left()
        assert faults.run(spec_with(tmp_path, cases=1)).returncode == 0
    else:
        assert client.returncode == 128 + signum, err
        assert run.status == "interrupted"
        assert f"--resume {run.run_id}" in err
    assert faults.scratch_left() == []


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_ranks_die_with_their_killed_case_process(faults, tmp_path, signum):
    client = start_with_ranks(faults, tmp_path, "--retries", "0")   # kept killed, not run again
    (case,) = case_processes(faults.tag)
    case.send_signal(signum)
    _, err = client.communicate(timeout=120)
    assert client.returncode == 1, err
    assert gone(faults.tag) == []
    (result,) = ResultsStore(faults.results).case_results(only_run(faults).run_id)
    assert result.failure.value == "killed"
    assert result.reason.startswith(f"killed by {signum.name}")
    assert "peak memory" in result.reason and "out of memory" not in result.reason
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
