"""Run cases on SLURM or PBS worker jobs through dask-jobqueue.

One dask scheduler runs in the client process (the login node); worker jobs connect to it.
Cases are grouped by what they need (:class:`~accelml.executors.resources.CaseNeeds`) into
*pools*; each pool's jobs request exactly that (cores, memory, GPUs, ranks) and advertise a
dask resource only that pool's cases ask for, so a case never lands on a worker without the
GPUs it needs, and each worker runs one case at a time.

Faults: a worker lost while running a case (process killed, job cancelled with ``scancel``,
node failure) is replaced by a new job; the scheduler re-runs the case, at most
``retries`` extra times, after which the case is returned as failed with the reason.
Results are yielded as each case finishes, so a caller that stores them one by one
loses nothing when the run is interrupted. Leaving the ``with`` block (normally, by an
exception, Ctrl-C or SIGTERM) cancels every job of the run and waits until the queue no
longer lists them.

Security: the scheduler listens with mutual TLS by default (temporary certificates in a
0700 directory, see :mod:`accelml.executors.tls`).

Example (needs a SLURM cluster)::

    settings = load_cluster_settings({"kind": "slurm", "jobs": 4})
    with JobQueueExecutor(settings) as executor:
        for outcome in executor.map(run_case, cases):
            store.add(outcome)
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import os
import queue
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelml.errors import UnavailableError
from accelml.executors import CaseOutcome
from accelml.executors.config import ClusterSettings
from accelml.executors.resources import CaseNeeds, Resources
from accelml.executors.scripts import import_jobqueue, job_class, pool_job_options

logger = logging.getLogger(__name__)

DEFAULT_MAX_JOBS = 4
"""Worker jobs when ``jobs`` is not set: one per case, at most this many."""
_PENDING_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD", "Q", "H", "W", "T", "S"}
_QUEUE_COMMANDS = {"slurm": ("sbatch", "squeue", "scancel"), "pbs": ("qsub", "qstat", "qdel")}


@dataclass(frozen=True)
class FanOutProgress:
    """A snapshot for progress displays while jobs wait in the queue or run."""

    jobs_queued: int
    jobs_running: int
    workers_up: int
    cases_running: int
    cases_waiting: int
    cases_done: int
    cases_failed: int
    cases_total: int
    workers_lost: int = 0

    def line(self) -> str:
        """ "jobs: 1 queued, 2 running | workers up: 2 | cases: 2 running, 3 waiting, 4/9 done" """
        text = (f"jobs: {self.jobs_queued} queued, {self.jobs_running} running | "
                f"workers up: {self.workers_up} | cases: {self.cases_running} running, "
                f"{self.cases_waiting} waiting, {self.cases_done}/{self.cases_total} done")
        if self.cases_failed:
            text += f", {self.cases_failed} failed"
        if self.workers_lost:
            text += f" | workers lost: {self.workers_lost}"
        return text


@dataclass
class _Pool:
    """One resource request: its jobs, its cases, and what happened to its jobs so far."""

    tag: str
    resources: Resources
    jobs: int
    indices: list[int]
    names: list[str] = field(default_factory=list)
    waiting_since: float = 0.0
    lost_jobs: int = 0
    failure: str | None = None
    retired: bool = False


def plan_pools(needs: Sequence[CaseNeeds], base: Resources, jobs: int | None) -> list[tuple[Resources, int, list[int]]]:
    """Group cases by the job they need and share ``jobs`` worker jobs among the groups.

    Every group gets at least one job (so the total may exceed ``jobs`` when cases need
    more kinds of jobs than that), and never more jobs than it has cases; the rest go to
    the groups with the most cases per job.

    >>> plan = plan_pools([CaseNeeds()] * 5 + [CaseNeeds(gpus=1)], Resources(), jobs=3)
    >>> [(r.gpus, n, len(indices)) for r, n, indices in plan]
    [(0, 2, 5), (1, 1, 1)]
    """
    groups: dict[str, tuple[Resources, list[int]]] = {}
    for index, need in enumerate(needs):
        resources = base.for_case(need)
        groups.setdefault(resources.pool_tag, (resources, []))[1].append(index)
    total = jobs if jobs is not None else min(len(needs), DEFAULT_MAX_JOBS)
    counts = {tag: 1 for tag in groups}
    spare = total - len(groups)
    while spare > 0:
        open_groups = [tag for tag in groups if counts[tag] < len(groups[tag][1])]
        if not open_groups:
            break
        busiest = max(open_groups, key=lambda tag: len(groups[tag][1]) / counts[tag])
        counts[busiest] += 1
        spare -= 1
    return [(resources, counts[tag], indices) for tag, (resources, indices) in groups.items()]


def _sbatch_reason(error: BaseException) -> str:
    """The useful line of a failed sbatch/qsub (dask-jobqueue puts stderr in the message)."""
    text = str(error)
    if "stderr:" in text:
        lines = [line.strip() for line in text.split("stderr:", 1)[1].splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return text.strip().splitlines()[-1] if text.strip() else type(error).__name__


class JobQueueExecutor:
    """Cases on SLURM (``kind="slurm"``) or PBS (``kind="pbs"``) worker jobs.

    ``progress`` is called with a :class:`FanOutProgress` whenever the counts change.
    ``poll_interval`` is how often (seconds) the queue is read while cases run.
    """

    def __init__(self, settings: ClusterSettings, *, progress: Callable[[FanOutProgress], None] | None = None,
                 poll_interval: float = 0.5):
        if settings.kind not in _QUEUE_COMMANDS:
            raise ValueError(f"JobQueueExecutor runs on slurm or pbs, not {settings.kind!r}")
        self.settings = settings
        self.kind = settings.kind
        self.progress = progress
        self.poll_interval = poll_interval
        # at most 15 characters: older PBS (Torque) cuts job names there
        self.job_name = f"accelml-{secrets.token_hex(3)}"
        self.run_directory = settings.shared_path / self.job_name
        self.cluster = None
        self.client = None
        self._credentials = None
        self._previous_sigterm = None
        self._pools: dict[str, _Pool] = {}
        self._last_progress: FanOutProgress | None = None
        self._keep_logs = False

    # -- life cycle -------------------------------------------------------------------------

    def __enter__(self) -> JobQueueExecutor:
        submit, _, _ = _QUEUE_COMMANDS[self.kind]
        if shutil.which(submit) is None:
            raise UnavailableError(f"--cluster {self.kind}: '{submit}' is not on PATH on this machine")
        if self.kind == "slurm":
            from accelml.probe import probe_slurm

            slurm = probe_slurm()
            if not slurm.available:
                raise UnavailableError(f"--cluster slurm: {slurm.detail}")
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _start(self) -> None:
        from distributed import Client

        self.run_directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.run_directory, 0o700)
        security = None
        if self.settings.tls:
            from accelml.executors.tls import TemporaryCredentials

            self._credentials = TemporaryCredentials.create(self.run_directory)
            security = self._credentials.security()
        self._install_sigterm_handler()
        cluster_class = self._cluster_class()
        self.cluster = cluster_class(
            n_workers=0,
            cores=self.settings.resources.cores,
            memory=self.settings.resources.memory,
            processes=1,
            security=security,
            protocol="tls://" if security else "tcp://",
            interface=self.settings.interface,
            scheduler_options={"dashboard_address": None, "allowed_failures": self.settings.retries},
            job_name=self.job_name,
            log_directory=str(self.run_directory / "logs"),
            shared_temp_directory=str(self.run_directory),
            python=self.settings.python,
            silence_logs="error",
        )
        self.client = Client(self.cluster, security=security, set_as_default=False)

    def _cluster_class(self):
        jobqueue = import_jobqueue()
        return jobqueue.SLURMCluster if self.kind == "slurm" else jobqueue.PBSCluster

    def _install_sigterm_handler(self) -> None:
        """``scancel`` of a batch job that runs the comparison sends SIGTERM: clean up as for Ctrl-C."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def interrupt(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")

        self._previous_sigterm = signal.signal(signal.SIGTERM, interrupt)

    @property
    def address(self) -> str | None:
        return self.cluster.scheduler_address if self.cluster is not None else None

    @property
    def security(self):
        return self._credentials.security() if self._credentials is not None else None

    def submitted_job_scripts(self) -> dict[str, str]:
        """The script of every worker job submitted and not yet cancelled, by worker name."""
        if self.cluster is None:
            return {}
        return {name: job.job_script() for name, job in self.cluster.workers.items() if job.job_id}

    def close(self) -> None:
        """Cancel every job of this run, wait until the queue no longer lists them, clean up."""
        try:
            if self.client is not None:
                try:
                    self.client.close(timeout=20)
                except Exception as error:  # closing must go on to cancel the jobs
                    logger.warning("closing the dask client: %s", error)
            if self.cluster is not None:
                try:
                    self.cluster.close(timeout=30)
                except Exception as error:
                    logger.warning("closing the job-queue cluster: %s", error)
            self._cancel_leftover_jobs()
        finally:
            self.client = None
            self.cluster = None
            if self._credentials is not None:
                self._credentials.remove()
                self._credentials = None
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
                self._previous_sigterm = None
            if not self._keep_logs:
                shutil.rmtree(self.run_directory, ignore_errors=True)

    def _cancel_leftover_jobs(self, timeout: float = 60.0) -> None:
        """Cancel what is still queued under this run's job name; wait until it is gone."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.job_states()
            if states is None and time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            if not states:
                return
            cancel = _QUEUE_COMMANDS[self.kind][2]
            active = [job for job, (state, _) in states.items() if state not in {"COMPLETING", "CG", "E"}]
            if active:
                subprocess.run([cancel, *active], capture_output=True, text=True, timeout=30)
            if time.monotonic() > deadline:
                logger.warning("jobs %s are still in the queue after %.0f s", sorted(states), timeout)
                return
            time.sleep(0.5)

    # -- queue state ------------------------------------------------------------------------

    def job_states(self) -> dict[str, tuple[str, str]] | None:
        """``{job id: (state, reason)}`` of this run's jobs that the queue still lists;
        ``None`` when the queue cannot be read just now (a busy controller)."""
        try:
            if self.kind == "slurm":
                out = subprocess.run(
                    ["squeue", "--noheader", f"--name={self.job_name}", "--format=%i|%T|%R"],
                    capture_output=True, text=True, timeout=60,
                )
                if out.returncode != 0:
                    logger.warning("squeue failed: %s", out.stderr.strip())
                    return None
                return parse_squeue(out.stdout)
            ids = [job.job_id for job in (self.cluster.workers.values() if self.cluster else []) if job.job_id]
            if not ids:
                return {}
            # qstat exits non-zero when one of the jobs has already left; the others are listed
            out = subprocess.run(["qstat", *ids], capture_output=True, text=True, timeout=60)
            if out.returncode != 0 and not out.stdout.strip() and "Unknown Job" not in out.stderr:
                logger.warning("qstat failed: %s", out.stderr.strip())
                return None
            return parse_qstat(out.stdout)
        except (OSError, subprocess.TimeoutExpired) as error:
            logger.warning("cannot read the queue: %s", error)
            return None

    # -- running cases ----------------------------------------------------------------------

    def map(self, function: Callable[[Any], Any], items: Iterable[Any],
            needs: Sequence[CaseNeeds] | None = None) -> Iterator[CaseOutcome]:
        """Run ``function(item)`` for every item on worker jobs; yield outcomes as they finish.

        ``needs`` (one per item) defaults to :meth:`CaseNeeds.of_case` of each item.
        ``function`` must be importable on the workers (or defined in ``__main__``).
        A case is handed to the scheduler only when a worker of its pool is free, so a
        worker never holds a case it is not running (and a lost worker costs only the
        case it was running one of its retries).
        """
        if self.client is None:
            raise RuntimeError("use the executor inside a 'with' block")
        run = _Run(_shippable(function), list(items))
        needs = [CaseNeeds.of_case(item) for item in run.items] if needs is None else list(needs)
        if len(needs) != len(run.items):
            raise ValueError("one CaseNeeds per item")
        for resources, jobs, indices in plan_pools(needs, self.settings.resources, self.settings.jobs):
            pool = self._pools.get(resources.pool_tag)
            if pool is None:
                pool = self._pools[resources.pool_tag] = _Pool(resources.pool_tag, resources, jobs, [])
            pool.indices = list(indices)
            pool.jobs = max(pool.jobs, jobs)
            pool.retired = False
            pool.failure = None
            pool.lost_jobs = 0
            pool.waiting_since = 0.0
            run.waiting[pool.tag] = collections.deque(indices)
            run.in_flight[pool.tag] = 0
        self._scale_pools()
        next_watch = time.monotonic()
        try:
            while run.waiting_count or run.pending:
                wait = max(0.0, next_watch - time.monotonic())
                outcomes = [self._finish(run, future) for future in run.next_finished(wait)]
                self._submit_ready(run)  # a freed worker gets its next case before anything else
                if time.monotonic() >= next_watch:
                    outcomes += self._watch(run)
                    self._submit_ready(run)
                    self._retire_finished_pools(run)
                    next_watch = time.monotonic() + self.poll_interval
                yield from outcomes
            self._report_final(run)
        finally:
            for future in run.pending:
                future.cancel()

    def _report_final(self, run: _Run) -> None:
        if self.progress is None or self._last_progress is None:
            return
        final = dataclasses.replace(self._last_progress, cases_running=0, cases_waiting=0,
                                    cases_done=run.done, cases_failed=run.failed)
        if final != self._last_progress:
            self._last_progress = final
            self.progress(final)

    def _submit_ready(self, run: _Run) -> None:
        for tag, waiting in run.waiting.items():
            pool = self._pools[tag]
            free = sum(name in run.connected for name in pool.names) - run.in_flight[tag]
            while waiting and free > 0:
                index = waiting.popleft()
                future = self.client.submit(
                    run.function, run.items[index], key=f"{self.job_name}-case-{index}-{secrets.token_hex(3)}",
                    resources=pool.resources.worker_resources(), pure=False,
                )
                run.pending[future] = (index, tag)
                future.add_done_callback(run.finished.put)
                run.in_flight[tag] += 1
                free -= 1

    def _finish(self, run: _Run, future) -> CaseOutcome:
        from distributed import KilledWorker

        index, tag = run.pending.pop(future)
        run.in_flight[tag] -= 1
        lost, worker = self.client.run_on_scheduler(_task_facts, key=future.key)
        run.done += 1
        if future.status == "finished":
            result = future.result()
            future.release()  # a retired worker must not take a finished case with it (dask would re-run it)
            return CaseOutcome(index, run.items[index], result=result, lost_workers=lost, worker=worker)
        run.failed += 1
        self._keep_logs = True
        error = future.exception()
        future.release()
        if isinstance(error, KilledWorker):
            return CaseOutcome(
                index, run.items[index], lost_workers=max(lost, self.settings.retries + 1), worker=worker,
                error=(f"its worker was lost {self.settings.retries + 1} times (killed process, "
                       f"cancelled job or node failure); last on "
                       f"{getattr(error.last_worker, 'name', error.last_worker)}; "
                       f"job logs in {self.run_directory / 'logs'}"),
            )
        return CaseOutcome(index, run.items[index], lost_workers=lost, worker=worker,
                           error=f"{type(error).__name__}: {error}".strip())

    def _fail_pool(self, run: _Run, tag: str, reason: str) -> list[CaseOutcome]:
        outcomes = []
        self._keep_logs = True
        for future, (index, future_tag) in list(run.pending.items()):
            if future_tag == tag:
                future.cancel()
                del run.pending[future]
                run.in_flight[tag] -= 1
                outcomes.append(CaseOutcome(index, run.items[index], error=reason))
        while run.waiting[tag]:
            index = run.waiting[tag].popleft()
            outcomes.append(CaseOutcome(index, run.items[index], error=reason))
        run.done += len(outcomes)
        run.failed += len(outcomes)
        return outcomes

    # -- keeping the pools staffed ----------------------------------------------------------

    def _scale_pools(self) -> None:
        """Ask for each live pool's jobs; a refused submission fails that pool with the reason."""
        job_cls = job_class(self.kind)
        security = self.cluster._job_kwargs.get("security")
        for pool in self._pools.values():
            if pool.retired or pool.failure:
                continue
            options = pool_job_options(self.kind, pool.resources, self.settings, job_name=self.job_name,
                                       log_directory=str(self.run_directory / "logs"), security=security)
            pool.names = [f"{pool.tag}-{number}" for number in range(pool.jobs)]
            for name in pool.names:
                self.cluster.worker_spec[name] = {"cls": job_cls, "options": options}
            pool.waiting_since = pool.waiting_since or time.monotonic()
        self._correct_state()

    def _correct_state(self) -> None:
        try:
            self.cluster.sync(self.cluster._correct_state)
        except Exception as error:  # sbatch/qsub refused a job: fail the pool it belongs to
            reason = _sbatch_reason(error)
            submit = _QUEUE_COMMANDS[self.kind][0]
            for name, job in list(self.cluster.workers.items()):
                if job.job_id is None:
                    self.cluster.workers.pop(name, None)
                    self.cluster.worker_spec.pop(name, None)
                    pool = self._pools.get(name.rsplit("-", 1)[0])
                    if pool is not None and pool.failure is None:
                        pool.failure = f"{submit} refused the worker job ({pool.resources.describe()}): {reason}"

    def _watch(self, run: _Run) -> list[CaseOutcome]:
        """One look at queue and scheduler: replace lost jobs, fail what cannot run, report."""
        states = self.job_states()
        queue_known = states is not None
        states = states or {}
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        names = {address: worker["name"] for address, worker in info.items()}
        run.connected = set(names.values())
        running_keys = {key for keys in self.client.processing().values() for key in keys}

        for name, job in list(self.cluster.workers.items()):
            if queue_known and job.job_id and job.job_id not in states and name not in run.connected:
                # the job left the queue without (or no longer) running a worker
                self.cluster.workers.pop(name, None)
        missing = set(self.cluster.worker_spec) - set(self.cluster.workers)
        for name in missing:
            pool = self._pools.get(name.rsplit("-", 1)[0])
            if pool is not None:
                pool.lost_jobs += 1
        now = time.monotonic()
        for pool in self._pools.values():
            if any(name in run.connected for name in pool.names):
                pool.waiting_since = 0.0
            elif not pool.retired and not pool.waiting_since:
                pool.waiting_since = now
        if missing:
            self._correct_state()  # a new job for each lost one, under the same worker name

        outcomes = []
        for tag in run.waiting:
            pool = self._pools[tag]
            if pool.retired:
                continue
            reason = pool.failure
            if reason is None and pool.lost_jobs > pool.jobs * (self.settings.retries + 2):
                reason = (f"{pool.lost_jobs} worker jobs ended before they could run cases "
                          f"({pool.resources.describe()}); job logs in {self.run_directory / 'logs'}")
            if (reason is None and pool.waiting_since
                    and now - pool.waiting_since > self.settings.worker_start_timeout):
                waiting = [f"job {job} {state} {why}".strip() for job, (state, why) in states.items()
                           if state in _PENDING_STATES]
                reason = (f"no worker job started within {self.settings.worker_start_timeout:.0f} s "
                          f"({pool.resources.describe()})" + (f"; queue: {', '.join(waiting)}" if waiting else ""))
            if reason is not None:
                pool.failure = reason
                outcomes.extend(self._fail_pool(run, tag, reason))

        if self.progress is not None:
            queued = sum(state in _PENDING_STATES for state, _ in states.values())
            running_cases = sum(future.key in running_keys for future in run.pending)
            snapshot = FanOutProgress(
                jobs_queued=queued, jobs_running=len(states) - queued, workers_up=len(run.connected),
                cases_running=running_cases, cases_waiting=run.waiting_count + len(run.pending) - running_cases,
                cases_done=run.done, cases_failed=run.failed, cases_total=len(run.items),
                workers_lost=sum(pool.lost_jobs for pool in self._pools.values()),
            )
            if snapshot != self._last_progress:
                self._last_progress = snapshot
                self.progress(snapshot)
        return outcomes

    def _retire_finished_pools(self, run: _Run) -> None:
        """Cancel the jobs of pools whose cases are all done (frees GPUs for the others)."""
        retired = False
        for tag, waiting in run.waiting.items():
            pool = self._pools[tag]
            if not waiting and not run.in_flight[tag] and not pool.retired:
                pool.retired = True
                pool.waiting_since = 0.0
                for name in pool.names:
                    self.cluster.worker_spec.pop(name, None)
                retired = True
        if retired:
            self._correct_state()


@dataclass
class _Run:
    """The book-keeping of one :meth:`JobQueueExecutor.map` call."""

    function: Callable[[Any], Any]
    items: list
    waiting: dict[str, collections.deque] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    pending: dict[Any, tuple[int, str]] = field(default_factory=dict)
    finished: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    connected: set[str] = field(default_factory=set)
    done: int = 0
    failed: int = 0

    @property
    def waiting_count(self) -> int:
        return sum(len(waiting) for waiting in self.waiting.values())

    def next_finished(self, timeout: float) -> list:
        """The futures that finished, waiting up to ``timeout`` seconds for the first one."""
        finished = []
        try:
            finished.append(self.finished.get(timeout=timeout))
            while True:
                finished.append(self.finished.get_nowait())
        except queue.Empty:
            pass
        return [future for future in finished if future in self.pending]


def _shippable(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``function``, or a by-value copy of it where its module asks to travel by value.

    dask pickles a task's function by reference unless the function itself is in
    ``__main__``; a module registered with ``cloudpickle.register_pickle_by_value`` (code
    the worker jobs cannot import) is honoured here too.
    """
    import inspect

    import cloudpickle

    module = getattr(inspect.getmodule(function), "__name__", None)
    if module is None or module not in cloudpickle.list_registry_pickle_by_value():
        return function
    return functools.partial(_call_by_value, cloudpickle.dumps(function))


def _call_by_value(pickled_function: bytes, item: Any) -> Any:
    import cloudpickle

    return cloudpickle.loads(pickled_function)(item)


def _task_facts(key: str, dask_scheduler=None) -> tuple[int, str | None]:
    """Run on the scheduler: how often ``key`` lost its worker, and which worker holds its result."""
    task = dask_scheduler.tasks.get(key)
    if task is None:
        return 0, None
    holders = [str(worker.name) for worker in (task.who_has or ())]
    return int(task.suspicious), (holders[0] if holders else None)


def parse_squeue(text: str) -> dict[str, tuple[str, str]]:
    """``squeue --format=%i|%T|%R`` lines -> ``{job id: (state, reason)}``.

    >>> parse_squeue("12|PENDING|(Resources)\\n13|RUNNING|node1\\n")
    {'12': ('PENDING', '(Resources)'), '13': ('RUNNING', 'node1')}
    """
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and parts[0]:
            states[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return states


def parse_qstat(text: str) -> dict[str, tuple[str, str]]:
    """Plain ``qstat JOBID...`` output (PBS Pro / Torque) -> ``{job id: (state letter, queue)}``.

    >>> sample = '''Job id            Name             User              Time Use S Queue
    ... ----------------  ---------------- ----------------  -------- - -----
    ... 1234.pbs01        accelml-1a2b     alice             00:00:01 R workq
    ... 1235.pbs01        accelml-1a2b     alice                    0 Q workq
    ... '''
    >>> parse_qstat(sample)
    {'1234.pbs01': ('R', 'workq'), '1235.pbs01': ('Q', 'workq')}
    """
    states = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and not line.startswith(("Job", "---")) and len(parts[-2]) == 1:
            states[parts[0]] = (parts[-2], parts[-1])
    return states


__all__ = ["CaseOutcome", "FanOutProgress", "JobQueueExecutor", "plan_pools", "parse_squeue",
           "parse_qstat"]
