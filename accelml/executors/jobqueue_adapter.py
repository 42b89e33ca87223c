"""Everything accelml uses of dask-jobqueue and distributed beyond their public API, in one place.

dask-jobqueue's public API runs one kind of worker job, scaled by count
(``cluster.scale(n)``). accelml runs several kinds at once (one *pool* per resource
request), names each job itself so that a lost one is replaced under the same name, and
reports why each refused submission was refused. That needs the cluster's private parts,
used only here (:class:`WorkerJobs`):

* ``cluster.worker_spec[name] = {"cls": ..., "options": ...}`` / ``.pop(name)``: the jobs wanted;
* ``cluster.workers``: the jobs submitted (name -> ``Job`` with ``job_id``); a job that left
  the queue is dropped from it so that the next correction submits a new one;
* ``cluster._correct_state()``: submit what is wanted and missing, cancel what is no longer wanted;
* ``Job.start`` wrapped to keep each job's own submission error (and mark the job failed,
  which closing the cluster checks), with the record's ``submit`` / ``cancel`` commands;
* ``TaskState.suspicious`` on the scheduler: how often a task lost its worker (:func:`task_facts`).

It was written for (and is tested with) the versions in :data:`WRITTEN_FOR`; other versions
are refused with one line (:func:`version_problem`) rather than failing half-way through a run.

>>> version_problem({"dask-jobqueue": "0.9.0", "distributed": "2026.8.0"}) is None
True
>>> print(version_problem({"dask-jobqueue": "0.10.0", "distributed": "2026.8.0"}))  # doctest: +NORMALIZE_WHITESPACE
accelml's job-queue executor is written for dask-jobqueue 0.9.* and distributed 2026.8.*;
this environment has dask-jobqueue 0.10.0 (pip install 'dask-jobqueue==0.9.*')
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import re
import signal
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from accelml.errors import UnavailableError
from accelml.executors.cluster_settings import ClusterSettings, JobOptions, JobQueue
from accelml.executors.dashboard import LOCAL_ONLY

if TYPE_CHECKING:  # annotations only: distributed is imported when a cluster starts
    from distributed.core import Status
    from distributed.scheduler import Scheduler as DaskScheduler
    from distributed.security import Security

logger = logging.getLogger(__name__)

WRITTEN_FOR = {"dask-jobqueue": "0.9", "distributed": "2026.8"}
"""distribution -> the release series (``major.minor``) this module was written and tested for."""

_REFUSED = re.compile(r"^Command exited with non-zero exit code\.", re.MULTILINE)


class SubmittedJob(Protocol):
    """What accelml reads of a dask-jobqueue ``Job``."""

    job_id: str | None

    def job_script(self) -> str: ...


class _SubmittingJob(Protocol):
    """What the wrapped ``Job.start`` sets on a job whose submission failed."""

    submit_error: BaseException | None
    status: Status


@dataclass(frozen=True)
class SubmitFailure:
    """A worker job that could not be submitted. ``refused``: the submit command ran and
    said no (``reason`` is its own message); otherwise ``reason`` names the other error."""

    name: str
    refused: bool
    reason: str


def version_problem(installed: Mapping[str, str]) -> str | None:
    """One line saying which installed version is outside :data:`WRITTEN_FOR`, or None."""
    off = {name: installed.get(name) for name, series in WRITTEN_FOR.items()
           if installed.get(name) is None or not f"{installed[name]}.".startswith(f"{series}.")}
    if not off:
        return None
    wanted = " and ".join(f"{name} {series}.*" for name, series in WRITTEN_FOR.items())
    have = ", ".join(f"{name} {version}" if version else f"no {name}" for name, version in off.items())
    fix = " ".join(f"'{name}=={WRITTEN_FOR[name]}.*'" for name in off)
    return f"accelml's job-queue executor is written for {wanted}; this environment has {have} (pip install {fix})"


def installed_versions() -> dict[str, str]:
    """The installed version of each distribution of :data:`WRITTEN_FOR` (absent: not installed)."""
    found = {}
    for name in WRITTEN_FOR:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def import_jobqueue() -> ModuleType:
    """``dask_jobqueue``, imported without the SIGINT handler it installs on import.

    dask_jobqueue.runner replaces Ctrl-C's KeyboardInterrupt with ``sys.exit()`` (exit
    status 0) for the whole process; accelml keeps Python's own handler so that an
    interrupted comparison cancels its jobs and exits with 130.
    """
    if threading.current_thread() is not threading.main_thread():
        return importlib.import_module("dask_jobqueue")
    previous = signal.getsignal(signal.SIGINT)
    try:
        return importlib.import_module("dask_jobqueue")
    finally:
        signal.signal(signal.SIGINT, previous)


def load_class(path: str) -> type[Any]:
    """The class a ``"module:Class"`` string names (dask-jobqueue imported SIGINT-safely first);
    dask-jobqueue's classes are untyped.

    >>> load_class("collections:OrderedDict").__name__
    'OrderedDict'
    """
    module_name, _, name = path.partition(":")
    if module_name.split(".")[0] == "dask_jobqueue":
        import_jobqueue()
    loaded = getattr(importlib.import_module(module_name), name)
    if not isinstance(loaded, type):
        raise TypeError(f"{path} is not a class")
    return loaded


def job_script(queue: JobQueue, address: str, name: str, options: JobOptions) -> str:
    """The text of one worker job script: ``queue.job_class(address, name=name, **options)``
    (dask-jobqueue's public ``Job.job_script()``)."""
    job: SubmittedJob = load_class(queue.job_class)(address, name=name, **options)
    return job.job_script()


def _submitting_class(queue: JobQueue) -> type:
    """``queue.job_class``, submitting and cancelling with the record's commands and keeping
    the error of a failed submission on the job (``submit_error``), marked failed so that
    closing the cluster does not take it for a job still starting."""
    from distributed.core import Status

    base = load_class(queue.job_class)

    async def start(self: _SubmittingJob) -> None:
        try:
            await base.start(self)
        except Exception as error:
            self.submit_error = error
            self.status = Status.failed
            raise

    return type(base.__name__, (base,), {"start": start, "submit_command": queue.submit,
                                         "cancel_command": queue.cancel, "submit_error": None})


def _failure(name: str, error: BaseException, submit: str) -> SubmitFailure:
    text = str(error)
    if isinstance(error, RuntimeError) and _REFUSED.search(text):
        # dask-jobqueue's message: exit code, command, "stdout:\n...", "stderr:\n..."
        stderr = text.split("\nstderr:\n", 1)[-1] if "\nstderr:\n" in text else ""
        stdout = text.split("\nstdout:\n", 1)[-1].split("\nstderr:\n", 1)[0] if "\nstdout:\n" in text else ""
        lines = [line.strip() for line in (stderr or stdout).splitlines() if line.strip()]
        return SubmitFailure(name, True, lines[-1] if lines else "no message")
    if isinstance(error, OSError):
        return SubmitFailure(name, False, f"cannot run {submit!r}: {error.strerror or error}")
    first = text.strip().splitlines()
    return SubmitFailure(name, False, f"{type(error).__name__}: {first[0] if first else ''}".rstrip(": "))


class WorkerJobs:
    """A dask-jobqueue cluster whose worker jobs accelml names and shapes one by one.

    ``want(name, options)`` asks for a job, ``drop(name)`` for its end; ``submit()`` makes
    the queue match and returns the jobs that could not be submitted, and why.
    """

    def __init__(self, queue: JobQueue, settings: ClusterSettings, *, job_name: str,
                 log_directory: str, shared_directory: str, security: Security | None):
        problem = version_problem(installed_versions())
        if problem is not None:
            raise UnavailableError(problem)
        self.queue = queue
        self._job_class = _submitting_class(queue)
        self._cluster = load_class(queue.cluster_class)(
            n_workers=0,
            cores=settings.resources.cores,
            memory=settings.resources.memory,
            processes=1,
            security=security,
            protocol="tls://" if security else "tcp://",
            interface=settings.interface,
            scheduler_options={"dashboard_address": LOCAL_ONLY, "allowed_failures": settings.retries},
            job_name=job_name,
            log_directory=log_directory,
            shared_temp_directory=shared_directory,
            python=settings.python,
            silence_logs="error",
        )

    @property
    def address(self) -> str:
        """The dask scheduler's address, which the worker jobs connect to."""
        return str(self._cluster.scheduler_address)

    @property
    def cluster(self) -> object:
        """The dask-jobqueue cluster (for ``distributed.Client(cluster)``)."""
        return self._cluster

    def want(self, name: str, options: JobOptions) -> None:
        """Ask for a job called ``name``; submitted by the next :meth:`submit`. Its script is
        written first, so that options the job class refuses raise here, for this job alone."""
        job_script(self.queue, self.address, name, options)
        self._cluster.worker_spec[name] = {"cls": self._job_class, "options": dict(options)}

    def drop(self, name: str) -> None:
        """No longer want ``name``; the next :meth:`submit` cancels its job."""
        self._cluster.worker_spec.pop(name, None)

    def unstaffed(self) -> set[str]:
        """Names wanted that have no job (never submitted, or lost)."""
        return set(self._cluster.worker_spec) - set(self._cluster.workers)

    def submit(self) -> list[SubmitFailure]:
        """Submit a job for every wanted name without one, cancel those no longer wanted.

        A job that could not be submitted is forgotten (not retried) and returned with why.
        """
        unstaffed = self.unstaffed()
        raised: Exception | None = None
        try:
            self._cluster.sync(self._cluster._correct_state)
        except Exception as error:  # reported per job below, from the error each job kept
            raised = error
        failures = [_failure(name, job.submit_error, self.queue.submit)
                    for name, job in self._cluster.workers.items()
                    if job.job_id is None and getattr(job, "submit_error", None) is not None]
        if raised is not None and not failures:
            # no job was even built (or cancelling failed): every job this call was to submit failed
            failures = [_failure(name, raised, self.queue.submit) for name in sorted(unstaffed)
                        if name in self._cluster.worker_spec and name not in self._cluster.workers]
            if not failures:
                logger.warning("adjusting the worker jobs: %s", raised)
        for failure in failures:
            self._cluster.workers.pop(failure.name, None)
            self._cluster.worker_spec.pop(failure.name, None)
        return failures

    def forget_departed(self, listed: Collection[str], connected: Collection[str]) -> list[str]:
        """Forget the jobs the queue no longer lists (``listed``: job ids) whose worker is not
        connected (``connected``: worker names); the next :meth:`submit` replaces them under
        the same name. Returns their names."""
        gone = [name for name, job in self._cluster.workers.items()
                if job.job_id and job.job_id not in listed and name not in connected]
        for name in gone:
            self._cluster.workers.pop(name, None)
        return gone

    def job_ids(self) -> dict[str, str]:
        """Worker name -> job id of every job submitted and not yet forgotten."""
        return {name: job.job_id for name, job in self._cluster.workers.items() if job.job_id}

    def job_scripts(self) -> dict[str, str]:
        """Worker name -> the script submitted for it."""
        return {name: job.job_script() for name, job in self._cluster.workers.items() if job.job_id}

    def close(self, timeout: float) -> None:
        """Cancel every job and stop the scheduler."""
        self._cluster.close(timeout=timeout)


def task_facts(key: str, dask_scheduler: DaskScheduler | None = None) -> tuple[int, str | None]:
    """Run on the scheduler (``client.run_on_scheduler(task_facts, key=...)``): how often
    ``key`` lost its worker, and which worker holds its result."""
    task = dask_scheduler.tasks.get(key) if dask_scheduler is not None else None
    if task is None:
        return 0, None
    holders = [str(worker.name) for worker in (task.who_has or ())]
    return int(task.suspicious), (holders[0] if holders else None)


__all__ = [
    "WRITTEN_FOR",
    "SubmitFailure",
    "WorkerJobs",
    "import_jobqueue",
    "installed_versions",
    "job_script",
    "load_class",
    "task_facts",
    "version_problem",
]
