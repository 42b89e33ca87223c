"""The job-queue executor against the real one-node SLURM from slurm/local/.

Start-up of worker jobs is slow on a loaded machine: every wait has a generous deadline and
waits for a condition (a file, a queue state), never for a fixed time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import cloudpickle
import pytest

from accelml.executors.cluster_settings import SCHEDULERS, load_cluster_settings
from accelml.executors.jobqueue import JobQueueExecutor
from accelml.executors.resources import CaseNeeds
from accelml.executors.scripts import worker_job_script
from accelml.executors.tls import TemporaryCredentials

from . import casefunctions
from .casefunctions import hold_until_released, where_am_i

pytestmark = pytest.mark.slurm
cloudpickle.register_pickle_by_value(casefunctions)
REPO = Path(__file__).resolve().parents[2]


def settings_for(tmp_path, **table):
    table.setdefault("kind", "slurm")
    table.setdefault("worker-start-timeout", 300)
    table["shared-directory"] = str(tmp_path / "jobs")
    return load_cluster_settings(spec_table=table)


def queued_jobs(job_name):
    out = subprocess.run(["squeue", "--noheader", f"--name={job_name}", "--format=%i %T"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split("\n") if out.stdout.strip() else []


def wait_for(condition, what, timeout=240.0):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return found


def lose_worker_when_started(directory, lost, how="scancel"):
    """In a thread: once the first case starts, lose its worker (``scancel`` its job, or
    SIGKILL the worker process), then release every case."""

    def act():
        marker = wait_for(lambda: sorted(Path(directory).glob("started-*")), "a case to start")[0]
        _, _, job, pid = marker.name.split("-")
        if how == "scancel":
            subprocess.run(["scancel", job], check=True)
            wait_for(lambda: not subprocess.run(["squeue", "--noheader", "--jobs", job, "--states=RUNNING"],
                                                capture_output=True, text=True).stdout.strip(),
                     f"job {job} to leave the running state", timeout=60)
        else:
            os.kill(int(pid), signal.SIGKILL)
        lost.append((job, int(pid)))
        Path(directory, "release").touch()

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


def test_cases_go_to_workers_with_their_resources_and_no_job_is_left(slurm_available, tmp_path):
    settings = settings_for(tmp_path, jobs=3)
    progress = []
    with JobQueueExecutor(settings, progress=progress.append) as executor:
        needs = [CaseNeeds(cores=1), CaseNeeds(cores=1), CaseNeeds(cores=2)]
        outcomes = sorted(executor.map(where_am_i, ["a", "b", "wide"], needs=needs), key=lambda o: o.index)
        job_name = executor.job_name
    assert all(outcome.ok for outcome in outcomes), [outcome.error for outcome in outcomes]
    assert [outcome.result["cpus_per_task"] for outcome in outcomes] == ["1", "1", "2"]
    assert all(outcome.worker.startswith("pool-") for outcome in outcomes)
    assert outcomes[2].worker.rsplit("-", 1)[0] != outcomes[0].worker.rsplit("-", 1)[0]
    assert all(outcome.result["job"] for outcome in outcomes)
    assert progress and progress[-1].cases_done == 3
    assert any(snapshot.workers_up >= 1 for snapshot in progress)
    assert queued_jobs(job_name) == []
    assert not (tmp_path / "jobs" / job_name).exists()   # certificates and logs removed


@pytest.mark.slow
@pytest.mark.parametrize("how", ["scancel", "kill-worker-process"])
def test_a_worker_lost_mid_case_is_survived(slurm_available, tmp_path, how):
    """``scancel`` of the worker's job, or SIGKILL of the worker process, while a case runs:
    the case is re-run elsewhere and every case completes."""
    directory = tmp_path / "marks"
    directory.mkdir()
    lost: list[tuple[str, int]] = []
    settings = settings_for(tmp_path, jobs=2, retries=2)
    with JobQueueExecutor(settings) as executor:
        killer = lose_worker_when_started(directory, lost, how)
        outcomes = sorted(executor.map(hold_until_released, [(str(directory), i) for i in range(3)],
                                       needs=[CaseNeeds()] * 3), key=lambda o: o.index)
        killer.join(timeout=60)
        job_name = executor.job_name
    assert lost, "no worker was lost"
    assert all(outcome.ok for outcome in outcomes), [outcome.error for outcome in outcomes]
    job, pid = lost[0]
    hit = [outcome for outcome in outcomes if (directory / f"started-{outcome.index}-{job}-{pid}").exists()]
    assert len(hit) == 1
    assert hit[0].result["pid"] != pid                  # it finished in another worker process
    assert hit[0].lost_workers >= 1, (hit[0], lost, sorted(p.name for p in directory.iterdir()))
    assert queued_jobs(job_name) == []


def test_a_case_that_loses_its_worker_too_often_is_recorded_as_failed(slurm_available, tmp_path):
    directory = tmp_path / "marks"
    directory.mkdir()
    cancelled: list[str] = []
    with JobQueueExecutor(settings_for(tmp_path, jobs=1, retries=0)) as executor:
        killer = lose_worker_when_started(directory, cancelled)
        outcomes = list(executor.map(hold_until_released, [(str(directory), 0)], needs=[CaseNeeds()]))
        killer.join(timeout=60)
        job_name = executor.job_name
    assert len(outcomes) == 1 and not outcomes[0].ok
    assert "worker was lost 1 times" in outcomes[0].error
    assert queued_jobs(job_name) == []


def test_a_gpu_case_never_runs_on_a_worker_without_gpus(slurm_available, tmp_path):
    """This node has no GPUs: SLURM refuses the GPU job, the GPU case fails with SLURM's
    reason, and the CPU case still runs on its own worker."""
    with JobQueueExecutor(settings_for(tmp_path)) as executor:
        outcomes = sorted(executor.map(where_am_i, ["gpu", "cpu"], needs=[CaseNeeds(gpus=1), CaseNeeds()]),
                          key=lambda o: o.index)
        job_name = executor.job_name
    gpu, cpu = outcomes
    assert not gpu.ok and gpu.result is None
    assert "sbatch refused the worker job (1 task, 1 core(s)/rank, 2GiB/rank, 1 GPU(s)/node" in gpu.error
    assert cpu.ok and cpu.result["job"]
    assert queued_jobs(job_name) == []


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_interrupting_the_comparison_cancels_its_jobs(slurm_available, tmp_path, signal_name):
    """Ctrl-C, or scancel of the batch job that runs the comparison (SIGTERM), while two
    cases run: the executor cancels its worker jobs before the interrupt goes on."""
    directory = tmp_path / "marks"
    directory.mkdir()
    main_pid = os.getpid()

    def interrupt_once_two_cases_run():
        wait_for(lambda: len(list(directory.glob("started-*"))) >= 2, "two cases to start")
        os.kill(main_pid, getattr(signal, signal_name))

    with pytest.raises(KeyboardInterrupt):
        with JobQueueExecutor(settings_for(tmp_path, jobs=2)) as executor:
            job_name = executor.job_name
            threading.Thread(target=interrupt_once_two_cases_run, daemon=True).start()
            for _ in executor.map(hold_until_released, [(str(directory), i) for i in range(2)],
                                  needs=[CaseNeeds()] * 2):
                pass  # never reached: the cases wait for a release that does not come
    assert queued_jobs(job_name) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL   # handler restored


def test_the_scheduler_refuses_a_client_without_the_certificate(slurm_available, tmp_path):
    from distributed import Client

    submitted = {}
    with JobQueueExecutor(settings_for(tmp_path, jobs=1)) as executor:
        assert executor.address.startswith("tls://")
        stranger = TemporaryCredentials.create(tmp_path / "stranger")

        async def connect(address, security):
            async with Client(address, security=security, asynchronous=True, timeout=5) as client:
                return client.scheduler_info()["address"]

        with pytest.raises(OSError):
            asyncio.run(connect(executor.address, stranger.security()))
        with pytest.raises(OSError):
            asyncio.run(connect(executor.address.replace("tls://", "tcp://"), None))
        assert asyncio.run(connect(executor.address, executor.security)) == executor.address
        # the worker jobs got the certificate and run cases over TLS; what was submitted is
        # exactly what `accelml slurm-script` prints, with this run's address, name and files
        settings = executor.settings
        for outcome in executor.map(where_am_i, ["x", "y"], needs=[CaseNeeds()] * 2):
            assert outcome.ok
            submitted = submitted or executor.submitted_job_scripts()
        (name, script), = submitted.items()
        assert script == worker_job_script(
            SCHEDULERS.get("slurm"), settings.resources.for_case(CaseNeeds()), settings, address=executor.address,
            job_name=executor.job_name, worker_name=name, log_directory=str(executor.run_directory / "logs"),
            security=executor.security)


def test_a_multi_rank_case_starts_its_ranks_inside_its_worker_job(slurm_available, tmp_path):
    """One job holds both ranks; the case starts them with srun from inside the worker."""
    with JobQueueExecutor(settings_for(tmp_path)) as executor:
        outcome, = executor.map(casefunctions.start_ranks, [2], needs=[CaseNeeds(ranks=2)])
    assert outcome.ok, outcome.error
    assert outcome.result["launcher"] == "srun"
    assert outcome.result["ranks"] == ["0", "1"]
    assert len(set(outcome.result["jobs"])) == 1      # both ranks in the worker's own job


def test_a_job_that_never_starts_fails_its_cases_with_the_queue_reason(slurm_available, tmp_path):
    settings = settings_for(tmp_path, **{"worker-start-timeout": 5,
                                         "resources": {"directives": ["--begin=now+1hour"]}})
    with JobQueueExecutor(settings) as executor:
        outcome, = executor.map(where_am_i, ["never"], needs=[CaseNeeds()])
        job_name = executor.job_name
    assert not outcome.ok
    assert "no worker job started within 5 s" in outcome.error and "PENDING" in outcome.error
    assert "BeginTime" in outcome.error
    assert queued_jobs(job_name) == []


@pytest.mark.slow
def test_smoke_spec_through_slurm_gives_the_local_prediction_digests(slurm_available, tmp_path):
    from accelml.orchestration import run_experiment
    from accelml.results.store import ResultsStore
    from accelml.spec.load import load_spec

    experiment = load_spec(REPO / "experiments" / "smoke.toml")
    digests = {}
    for kind, jobs in (("local", 2), ("slurm", 2)):
        store = ResultsStore(tmp_path / f"results-{kind}")
        settings = settings_for(tmp_path, kind=kind, jobs=jobs)
        run = run_experiment(experiment, store, settings=settings, cache_dir=str(tmp_path / "cache"))
        results = store.case_results(run.run_id)
        assert len(results) == len(experiment.cases)
        problems = [f"{result.backend}: {result.reason}" for result in results if not result.ok]
        assert not problems, f"{kind}: {problems}"
        digests[kind] = {result.case_id: tuple(ref.digest for ref in result.predictions) for result in results}
        assert all(digests[kind].values())
        if kind == "slurm":
            assert all(result.environment.slurm_job_id for result in results)
    assert digests["slurm"] == digests["local"]
