"""The adapter over dask-jobqueue's private parts, against the real one-node SLURM: it submits
a named job, sees it lost when it leaves the queue, and leaves no job behind."""

from __future__ import annotations

import dataclasses
import subprocess
import time

import pytest

from accelml.errors import UnavailableError
from accelml.executors.cluster_settings import SCHEDULERS, load_cluster_settings
from accelml.executors.jobqueue_adapter import WRITTEN_FOR, WorkerJobs, installed_versions, version_problem
from accelml.executors.resources import Resources
from accelml.executors.scripts import job_options

SLURM = SCHEDULERS.get("slurm")


def test_the_installed_versions_are_the_ones_it_was_written_for():
    assert version_problem(installed_versions()) is None
    problem = version_problem({"dask-jobqueue": "0.10.1", "distributed": "2026.8.0"})
    assert problem is not None and "\n" not in problem
    assert "dask-jobqueue 0.10.1" in problem and "'dask-jobqueue==0.9.*'" in problem
    assert "distributed 2026.8.0" not in problem
    assert "no distributed" in version_problem({"dask-jobqueue": "0.9.0"})
    assert version_problem({"dask-jobqueue": "0.90.0", "distributed": "2026.8.3"}) is not None
    assert set(WRITTEN_FOR) == {"dask-jobqueue", "distributed"}


def queue_of(job_name):
    out = subprocess.run(["squeue", "--noheader", f"--name={job_name}", "--format=%i"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def wait_for(condition, what, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def worker_jobs(tmp_path):
    settings = load_cluster_settings(spec_table={"kind": "slurm", "tls": False})
    job_name = f"accelml-t{time.monotonic_ns() % 10**5:05d}"
    jobs = WorkerJobs(SLURM.queue(), settings, job_name=job_name, log_directory=str(tmp_path / "logs"),
                      shared_directory=str(tmp_path), security=None)
    options = job_options(SLURM.queue(), Resources(walltime="00:05:00"), settings, job_name=job_name)
    try:
        yield jobs, job_name, options
    finally:
        jobs.close(timeout=30)


@pytest.mark.slurm
def test_a_named_job_is_submitted_seen_lost_and_cancelled(slurm_available, worker_jobs):
    jobs, job_name, options = worker_jobs
    jobs.want("pool-a-0", options)
    assert jobs.unstaffed() == {"pool-a-0"}
    assert jobs.submit() == []
    job_id = jobs.job_ids()["pool-a-0"]
    assert job_id in queue_of(job_name) and jobs.unstaffed() == set()
    assert "#SBATCH -J " + job_name in jobs.job_scripts()["pool-a-0"]

    assert jobs.forget_departed(listed={job_id}, connected=set()) == []      # still queued: kept
    subprocess.run(["scancel", job_id], check=True)
    wait_for(lambda: job_id not in queue_of(job_name), f"job {job_id} to leave the queue")
    assert jobs.forget_departed(listed=queue_of(job_name), connected=set()) == ["pool-a-0"]
    assert jobs.unstaffed() == {"pool-a-0"}                                  # lost: to be replaced

    assert jobs.submit() == []                                               # replaced, same name
    replacement = jobs.job_ids()["pool-a-0"]
    assert replacement != job_id and replacement in queue_of(job_name)
    jobs.close(timeout=30)
    wait_for(lambda: not queue_of(job_name), "the queue to drop the run's jobs", timeout=60)


@pytest.mark.slurm
def test_submission_failures_say_whether_sbatch_refused(slurm_available, worker_jobs, tmp_path):
    jobs, job_name, options = worker_jobs
    jobs.want("pool-b-0", {**options, "queue": "no-such-partition"})
    [failure] = jobs.submit()
    assert failure.name == "pool-b-0" and failure.refused
    assert "invalid partition" in failure.reason.lower() and "\n" not in failure.reason
    assert jobs.unstaffed() == set() and jobs.job_ids() == {}                # not retried

    missing = dataclasses.replace(SLURM.queue(), submit=str(tmp_path / "no-sbatch"))
    other = WorkerJobs(missing, load_cluster_settings(spec_table={"kind": "slurm", "tls": False}),
                       job_name=job_name, log_directory=str(tmp_path / "logs"), shared_directory=str(tmp_path),
                       security=None)
    try:
        other.want("pool-c-0", options)
        [failure] = other.submit()
    finally:
        other.close(timeout=30)
    assert not failure.refused
    assert failure.reason == f"cannot run '{tmp_path / 'no-sbatch'}': No such file or directory"
    assert not queue_of(job_name)


def test_other_versions_are_refused_with_one_line(tmp_path, monkeypatch):
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "0.10.0" if name == "dask-jobqueue" else real(name))
    with pytest.raises(UnavailableError, match=r"^accelml's job-queue executor is written for dask-jobqueue 0\.9\.\*"):
        WorkerJobs(SLURM.queue(), load_cluster_settings(spec_table={"kind": "slurm"}), job_name="x",
                   log_directory=str(tmp_path), shared_directory=str(tmp_path), security=None)
