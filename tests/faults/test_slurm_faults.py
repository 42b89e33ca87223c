"""The fault suite on the real one-node SLURM (issue 16): a worker process killed and a
worker job cancelled while they run a case (the executor re-runs it; the result counts both
attempts), and the client killed with SIGKILL (its jobs are cancelled and its TLS folder
removed by the next run) or SIGTERM (it cancels them itself). Nothing finished is lost,
nothing stored twice, no process and no job of the test is left."""

from __future__ import annotations

import signal
import subprocess

import psutil
import pytest

from accelml.results.store import ResultsStore

from .conftest import case_processes, gone, wait_for
from .test_client_faults import spec_with, stored

pytestmark = [pytest.mark.faults, pytest.mark.slurm, pytest.mark.slow]
WORK_UNIT = "tests/faults: SLURM jobs"
"""A serial chain of its own in the fault suite (tests/conftest.py's work units): its faults hit
running jobs and workers, not a client starting up."""


def slurm_args(faults, *extra: str) -> list[str]:
    return ["--cluster", "slurm", "--cluster-config", str(faults.cluster_config), *extra]


@pytest.fixture
def slurm_faults(slurm_available, faults, tmp_path):
    faults.cluster_config = tmp_path / "cluster.yaml"
    faults.jobs_dir = tmp_path / "jobs"
    faults.cluster_config.write_text(f"accelml:\n  cluster:\n    shared-directory: {faults.jobs_dir}\n"
                                     "    worker-start-timeout: 300\n")
    yield faults
    names = [entry.name for entry in faults.jobs_dir.iterdir()] if faults.jobs_dir.exists() else []
    for name in names:
        subprocess.run(["scancel", f"--name={name}"], check=False)


def jobs_named(name: str) -> list[str]:
    out = subprocess.run(["squeue", "--noheader", f"--name={name}", "--format=%i"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def running_case(faults):
    return wait_for(lambda: case_processes(faults.tag), "a case process in a worker job")[0]


def test_lost_workers_are_survived_and_counted_as_attempts(slurm_faults, tmp_path):
    faults = slurm_faults
    client = faults.client(spec_with(tmp_path, cases=3), *slurm_args(faults, "--jobs", "1", "--retries", "2"))
    first = running_case(faults)
    psutil.Process(first.ppid()).kill()            # the dask worker running it
    second = wait_for(lambda: [p for p in case_processes(faults.tag) if p.pid != first.pid],
                      "the next case process")[0]
    subprocess.run(["scancel", second.environ()["SLURM_JOB_ID"]], check=True)   # its job
    _, err = client.communicate(timeout=600)
    assert client.returncode == 0, err
    (run,) = ResultsStore(faults.results).list_runs()
    results = stored(faults, run.run_id)
    assert len(results) == 3 and all(r.ok for r in results.values())
    assert sorted(r.attempts for r in results.values())[-1] >= 2
    assert sum(r.attempts for r in results.values()) == 3 + 2     # two workers lost
    assert gone(faults.tag, timeout=60) == []
    assert list(faults.jobs_dir.iterdir()) == []
    assert faults.scratch_left() == []     # the lost cases' folders swept, none made again


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_a_killed_client_leaves_no_job(slurm_faults, tmp_path, signum):
    faults = slurm_faults
    client = faults.client(spec_with(tmp_path, cases=2), *slurm_args(faults, "--jobs", "1"))
    running_case(faults)
    (job_name,) = [entry.name for entry in faults.jobs_dir.iterdir()]
    assert jobs_named(job_name)
    client.send_signal(signum)
    _, err = client.communicate(timeout=180)
    (run,) = ResultsStore(faults.results).list_runs()
    if signum == signal.SIGTERM:
        assert client.returncode == 143, err
        assert run.status == "interrupted"
    else:
        # nobody cancelled its job: the next run on this machine does, and removes its folder
        assert jobs_named(job_name)
        again = faults.run("--resume", run.run_id, *slurm_args(faults, "--jobs", "1"), timeout=600)
        assert again.returncode == 0, again.stderr
        assert len(stored(faults, run.run_id)) == 2
    assert jobs_named(job_name) == []
    assert not (faults.jobs_dir / job_name).exists()
    assert gone(faults.tag, timeout=60) == []
