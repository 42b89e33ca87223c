"""Run cases on batch-system worker jobs (SLURM, PBS, any :class:`~accelml.executors.cluster_settings.JobQueue`)
through dask-jobqueue.

One dask scheduler runs in the client process (the login node); worker jobs connect to it.
Cases are grouped by what they need (:class:`~accelml.executors.resources.CaseNeeds`) into
*pools*; each pool's jobs request exactly that (cores, memory, GPUs, ranks) and advertise a
dask resource only that pool's cases ask for, so a case never lands on a worker without the
GPUs it needs, and each worker runs one case at a time. Everything specific to one batch
system comes from its scheduler record (commands, directives, queue states); the parts of
dask-jobqueue used beyond its public API are behind :mod:`accelml.executors.jobqueue_adapter`.

Faults: a worker lost while running a case (process killed, job cancelled with ``scancel``,
node failure) is replaced by a new job; the scheduler re-runs the case, at most
``retries`` extra times, after which the case is returned as failed with the reason.
A job that cannot be submitted fails its pool's cases with the reason: the submit
command's own message when it refused the job, else the error that stopped it (a script
that could not be written, a submit command that could not be run). Results are yielded
as each case finishes, so a caller that stores them one by one loses nothing when the run
is interrupted. Leaving the ``with`` block (normally, by an exception, Ctrl-C or SIGTERM)
cancels every job of the run and waits until the queue no longer lists them.

Security: the scheduler listens with mutual TLS by default (temporary certificates in a
0700 directory, see :mod:`accelml.executors.tls`); neither it nor the workers keep an HTTP
listener unless ``dashboard = true`` (:mod:`accelml.executors.dashboard`). A run's folder
(certificates, logs) left by a client killed with SIGKILL is removed, and its jobs
cancelled, by the next run.

Example (needs a SLURM cluster)::

    settings = load_cluster_settings({"kind": "slurm", "jobs": 4})
    with JobQueueExecutor(settings) as executor:
        for outcome in executor.map(run_case, cases):
            store.add(outcome)
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import inspect
import logging
import queue
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Self, cast

from accelml.errors import UnavailableError, interrupt_on
from accelml.executors.cluster_settings import ClusterSettings
from accelml.executors.dashboard import close_cluster_http, dashboard_url
from accelml.executors.interface import (
    CaseOutcome,
    FanOutProgress,
    Item,
    ProgressCallback,
    Result,
)
from accelml.executors.jobqueue_adapter import WorkerJobs, task_facts
from accelml.executors.resources import CaseNeeds, Resources
from accelml.executors.scripts import job_options
from accelml.executors.tls import TemporaryCredentials
from accelml.scratch import claim, owner_alive, sweep

if TYPE_CHECKING:  # annotations only: distributed is imported when a cluster starts
    from distributed import Client, Future
    from distributed.security import Security

logger = logging.getLogger(__name__)

DEFAULT_MAX_JOBS = 4
"""Worker jobs when ``jobs`` is not set: one per case, at most this many."""
RESULT_GATHER_S = 120.0
"""How long a finished case's result may take to come back from its worker. A worker lost
between finishing a case and handing its result over leaves the result nowhere, and dask then
waits for a recomputation that no worker of the run may ever take (seen: a hung suite)."""
JOB_NAME_PREFIX = "accelml-"
"""Every run's worker jobs and its folder under the shared directory are named this + 6 hex digits."""


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


def _pool_tag(worker_name: str) -> str:
    return worker_name.rsplit("-", 1)[0]


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


class JobQueueExecutor:
    """Cases on the worker jobs of the batch system ``settings.kind`` names (``slurm``, ``pbs``, ...).

    ``progress`` is called with a :class:`FanOutProgress` whenever the counts change.
    ``poll_interval`` is how often (seconds) the queue is read while cases run.
    """

    def __init__(self, settings: ClusterSettings, *, progress: ProgressCallback | None = None,
                 poll_interval: float = 0.5):
        self.settings = settings
        self.scheduler = settings.scheduler
        self.queue = self.scheduler.queue()
        self.progress = progress
        self.poll_interval = poll_interval
        # at most 15 characters: older PBS (Torque) cuts job names there
        self.job_name = f"{JOB_NAME_PREFIX}{secrets.token_hex(3)}"
        self.run_directory = settings.shared_path / self.job_name
        self.jobs: WorkerJobs | None = None
        self.client: Client | None = None
        self._credentials: TemporaryCredentials | None = None
        self._signals = contextlib.ExitStack()
        self._pools: dict[str, _Pool] = {}
        self._last_progress: FanOutProgress | None = None
        self._keep_logs = False

    # -- life cycle -------------------------------------------------------------------------

    def __enter__(self) -> Self:
        reason = self.queue.unavailable()
        if reason is not None:
            raise UnavailableError(f"--cluster {self.scheduler.name}: {reason}")
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _start(self) -> None:
        from distributed import Client

        self._sweep_dead_runs()
        self.run_directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.run_directory.chmod(0o700)
        claim(self.run_directory)
        if self.settings.tls:
            self._credentials = TemporaryCredentials.create(self.run_directory)
        # scancel of a batch job that runs the comparison sends SIGTERM: clean up as for Ctrl-C
        self._signals.enter_context(interrupt_on(signal.SIGTERM))
        self.jobs = WorkerJobs(self.queue, self.settings, job_name=self.job_name,
                               log_directory=str(self.run_directory / "logs"),
                               shared_directory=str(self.run_directory), security=self.security)
        self.client = Client(self.jobs.cluster, security=self.security, set_as_default=False)
        if self.settings.dashboard:
            logger.warning("dask dashboard (this machine only): %s", dashboard_url(self.client))
        else:
            close_cluster_http(self.client, workers=False)   # worker jobs close theirs (preload)

    def _sweep_dead_runs(self) -> None:
        """Cancel the jobs of runs whose client died on this host without cleaning up (SIGKILL),
        then remove their folders (TLS credentials, logs); a run's folder is named as its jobs."""
        parent = self.settings.shared_path
        try:
            stale = [entry for entry in parent.iterdir()
                     if entry.name.startswith(JOB_NAME_PREFIX) and owner_alive(entry) is False]
        except OSError:
            return
        for entry in stale:
            try:
                jobs = self.queue.read_queue(entry.name, ())
            except (OSError, subprocess.SubprocessError):
                continue   # the queue cannot be read now: leave it to the next run
            if jobs:
                subprocess.run([self.queue.cancel, *jobs], capture_output=True, timeout=30, check=False)
        sweep(parent, (JOB_NAME_PREFIX,))

    @property
    def address(self) -> str | None:
        return self.jobs.address if self.jobs is not None else None

    @property
    def security(self) -> Security | None:
        return self._credentials.security() if self._credentials is not None else None

    def submitted_job_scripts(self) -> dict[str, str]:
        """The script of every worker job submitted and not yet cancelled, by worker name."""
        return self.jobs.job_scripts() if self.jobs is not None else {}

    def close(self) -> None:
        """Cancel every job of this run, wait until the queue no longer lists them, clean up."""
        submitted = tuple(self.jobs.job_ids().values()) if self.jobs is not None else ()
        try:
            if self.client is not None:
                try:
                    self.client.close(timeout=20)
                except Exception as error:  # closing must go on to cancel the jobs
                    logger.warning("closing the dask client: %s", error)
            if self.jobs is not None:
                try:
                    self.jobs.close(timeout=30)
                except Exception as error:
                    logger.warning("closing the job-queue cluster: %s", error)
            self._cancel_leftover_jobs(submitted)
        finally:
            self.client = None
            self.jobs = None
            if self._credentials is not None:
                self._credentials.remove()
                self._credentials = None
            self._signals.close()
            if not self._keep_logs:
                shutil.rmtree(self.run_directory, ignore_errors=True)

    def _cancel_leftover_jobs(self, submitted: tuple[str, ...], timeout: float = 60.0) -> None:
        """Cancel what the queue still lists of this run (by its job name, or the ``submitted``
        job ids, as the scheduler's ``read_queue`` finds them); wait until it is gone."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.job_states(submitted)
            if states is None and time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            if not states:
                return
            active = [job for job, (state, _) in states.items() if state not in self.queue.ending_states]
            if active:
                subprocess.run([self.queue.cancel, *active], capture_output=True, text=True, timeout=30,
                               check=False)
            if time.monotonic() > deadline:
                logger.warning("jobs %s are still in the queue after %.0f s", sorted(states), timeout)
                return
            time.sleep(0.5)

    # -- queue state ------------------------------------------------------------------------

    def job_states(self, job_ids: tuple[str, ...] | None = None) -> dict[str, tuple[str, str]] | None:
        """``{job id: (state, reason)}`` of this run's jobs that the queue still lists;
        ``None`` when the queue cannot be read just now (a busy controller)."""
        if job_ids is None:
            job_ids = tuple(self.jobs.job_ids().values()) if self.jobs is not None else ()
        try:
            return self.queue.read_queue(self.job_name, job_ids)
        except (OSError, subprocess.SubprocessError) as error:
            detail = getattr(error, "stderr", None) or ""
            logger.warning("cannot read the queue with %s: %s %s", self.queue.status, error, detail.strip())
            return None

    # -- running cases ----------------------------------------------------------------------

    def map(self, function: Callable[[Item], Result], items: Iterable[Item],
            needs: Sequence[CaseNeeds] | None = None) -> Iterator[CaseOutcome[Item, Result]]:
        """Run ``function(item)`` for every item on worker jobs; yield outcomes as they finish.

        ``needs`` (one per item) defaults to :meth:`CaseNeeds.of_case` of each item.
        ``function`` must be importable on the workers (or defined in ``__main__``).
        A case is handed to the scheduler only when a worker of its pool is free, so a
        worker never holds a case it is not running (and a lost worker costs only the
        case it was running one of its retries).
        """
        if self.client is None:
            raise RuntimeError("use the executor inside a 'with' block")
        run: _Run[Item, Result] = _Run(_shippable(function), list(items))
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

    def _report_final(self, run: _Run[Item, Result]) -> None:
        if self.progress is None or self._last_progress is None:
            return
        final = dataclasses.replace(self._last_progress, cases_running=0, cases_waiting=0,
                                    cases_done=run.done, cases_failed=run.failed)
        if final != self._last_progress:
            self._last_progress = final
            self.progress(final)

    def _submit_ready(self, run: _Run[Item, Result]) -> None:
        assert self.client is not None
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

    def _finish(self, run: _Run[Item, Result], future: Future[Result]) -> CaseOutcome[Item, Result]:
        from distributed import KilledWorker

        assert self.client is not None
        index, tag = run.pending.pop(future)
        run.in_flight[tag] -= 1
        lost, worker = self.client.run_on_scheduler(task_facts, key=future.key)
        run.done += 1
        if future.status == "finished":
            try:
                result = future.result(timeout=RESULT_GATHER_S)
            except TimeoutError:
                run.failed += 1
                self._keep_logs = True
                future.release()
                return self._lost(run, index, lost, worker, last_worker=worker,
                                  after=f" (after the case ended: its result did not come back in "
                                        f"{RESULT_GATHER_S:.0f} s)")
            future.release()  # a retired worker must not take a finished case with it (dask would re-run it)
            return CaseOutcome(index, run.items[index], result=result, lost_workers=lost, worker=worker)
        run.failed += 1
        self._keep_logs = True
        error = future.exception()
        future.release()
        if isinstance(error, KilledWorker):
            return self._lost(run, index, lost, worker,
                              last_worker=getattr(error.last_worker, "name", error.last_worker))
        return CaseOutcome(index, run.items[index], lost_workers=lost, worker=worker,
                           error=f"{type(error).__name__}: {error}".strip())

    def _lost(self, run: _Run[Item, Result], index: int, lost: int, worker: str | None,
              last_worker: object, after: str = "") -> CaseOutcome[Item, Result]:
        """The outcome of a case whose worker was lost once too often (``after``: when)."""
        return CaseOutcome(index, run.items[index], lost_workers=max(lost, self.settings.retries + 1),
                           worker=worker,
                           error=(f"its worker was lost {self.settings.retries + 1} times (killed "
                                  f"process, cancelled job or node failure); last on {last_worker}; "
                                  f"job logs in {self.run_directory / 'logs'}{after}"))

    def _fail_pool(self, run: _Run[Item, Result], tag: str, reason: str) -> list[CaseOutcome[Item, Result]]:
        outcomes: list[CaseOutcome[Item, Result]] = []
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
        """Ask for each live pool's jobs; a job that cannot be written or submitted fails its pool."""
        assert self.jobs is not None
        for pool in self._pools.values():
            if pool.retired or pool.failure:
                continue
            pool.names = [f"{pool.tag}-{number}" for number in range(pool.jobs)]
            try:
                options = job_options(self.queue, pool.resources, self.settings, job_name=self.job_name,
                                      log_directory=str(self.run_directory / "logs"), security=self.security)
                for name in pool.names:
                    self.jobs.want(name, options)
            except Exception as error:  # the scheduler's directive mapping or job class failed
                pool.failure = (f"could not write the worker job script ({pool.resources.describe()}): "
                                f"{type(error).__name__}: {error}")
                for name in pool.names:
                    self.jobs.drop(name)
                continue
            pool.waiting_since = pool.waiting_since or time.monotonic()
        self._submit()

    def _submit(self) -> None:
        """Make the queue match the wanted jobs; a job that could not be submitted fails its pool."""
        assert self.jobs is not None
        for failure in self.jobs.submit():
            pool = self._pools.get(_pool_tag(failure.name))
            if pool is not None and pool.failure is None:
                what = (f"{self.queue.submit} refused the worker job" if failure.refused
                        else "could not submit the worker job")
                pool.failure = f"{what} ({pool.resources.describe()}): {failure.reason}"

    def _watch(self, run: _Run[Item, Result]) -> list[CaseOutcome[Item, Result]]:
        """One look at queue and scheduler: replace lost jobs, fail what cannot run, report."""
        assert self.client is not None and self.jobs is not None
        states = self.job_states()
        queue_known = states is not None
        states = states or {}
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        names = {address: worker["name"] for address, worker in info.items()}
        run.connected = set(names.values())
        running_keys = {key for keys in self.client.processing().values() for key in keys}

        if queue_known:  # a job that left the queue without (or no longer) running a worker
            self.jobs.forget_departed(set(states), run.connected)
        missing = self.jobs.unstaffed()
        for name in missing:
            pool = self._pools.get(_pool_tag(name))
            if pool is not None:
                pool.lost_jobs += 1
        now = time.monotonic()
        for pool in self._pools.values():
            if any(name in run.connected for name in pool.names):
                pool.waiting_since = 0.0
            elif not pool.retired and not pool.waiting_since:
                pool.waiting_since = now
        if missing:
            self._submit()  # a new job for each lost one, under the same worker name

        outcomes: list[CaseOutcome[Item, Result]] = []
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
                           if state in self.queue.pending_states]
                reason = (f"no worker job started within {self.settings.worker_start_timeout:.0f} s "
                          f"({pool.resources.describe()})" + (f"; queue: {', '.join(waiting)}" if waiting else ""))
            if reason is not None:
                pool.failure = reason
                outcomes.extend(self._fail_pool(run, tag, reason))

        if self.progress is not None:
            queued = sum(state in self.queue.pending_states for state, _ in states.values())
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

    def _retire_finished_pools(self, run: _Run[Item, Result]) -> None:
        """Cancel the jobs of pools whose cases are all done (frees GPUs for the others)."""
        assert self.jobs is not None
        retired = False
        for tag, waiting in run.waiting.items():
            pool = self._pools[tag]
            if not waiting and not run.in_flight[tag] and not pool.retired:
                pool.retired = True
                pool.waiting_since = 0.0
                for name in pool.names:
                    self.jobs.drop(name)
                retired = True
        if retired:
            self._submit()


@dataclass
class _Run(Generic[Item, Result]):
    """The book-keeping of one :meth:`JobQueueExecutor.map` call."""

    function: Callable[[Item], Result]
    items: list[Item]
    waiting: dict[str, collections.deque[int]] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    pending: dict[Future[Result], tuple[int, str]] = field(default_factory=dict)
    finished: queue.SimpleQueue[Future[Result]] = field(default_factory=queue.SimpleQueue)
    connected: set[str] = field(default_factory=set)
    done: int = 0
    failed: int = 0

    @property
    def waiting_count(self) -> int:
        return sum(len(waiting) for waiting in self.waiting.values())

    def next_finished(self, timeout: float) -> list[Future[Result]]:
        """The futures that finished, waiting up to ``timeout`` seconds for the first one."""
        finished = []
        try:
            finished.append(self.finished.get(timeout=timeout))
            while True:
                finished.append(self.finished.get_nowait())
        except queue.Empty:
            pass
        return [future for future in finished if future in self.pending]


def _shippable(function: Callable[[Item], Result]) -> Callable[[Item], Result]:
    """``function``, or a by-value copy of it where its module asks to travel by value.

    dask pickles a task's function by reference unless the function itself is in
    ``__main__``; a module registered with ``cloudpickle.register_pickle_by_value`` (code
    the worker jobs cannot import) is honoured here too.
    """
    import cloudpickle

    module = getattr(inspect.getmodule(function), "__name__", None)
    if module is None or module not in cloudpickle.list_registry_pickle_by_value():
        return function
    # the pickled copy is ``function`` itself, so it keeps its signature
    return cast("Callable[[Item], Result]", functools.partial(_call_by_value, cloudpickle.dumps(function)))


def _call_by_value(pickled_function: bytes, item: object) -> object:
    import cloudpickle

    function: Callable[[object], object] = cloudpickle.loads(pickled_function)
    return function(item)


__all__ = ["DEFAULT_MAX_JOBS", "CaseOutcome", "FanOutProgress", "JobQueueExecutor", "plan_pools"]
