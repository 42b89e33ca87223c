"""Executors: where cases run. One small interface, a local dask cluster by default.

An executor is a context manager with one method::

    with make_executor(settings) as executor:
        for outcome in executor.map(function, items, needs=None):
            ...   # outcomes arrive as cases finish, in any order

``function(item)`` runs on a worker (it must be importable there); ``items`` are
:class:`accelml.runner.process.CaseTask` objects (they carry ``device``, ``ranks``,
``strategy``, ``threads``, ``memory_limit_mb`` and ``time_limit_s`` as attributes, which is
what :meth:`accelml.executors.resources.CaseNeeds.of_case` reads). Each outcome
(:class:`CaseOutcome`) has ``index`` (position in ``items``), ``item``, ``result`` (what
``function`` returned) and ``error`` (``None``, or one line saying why there is no result,
e.g. a lost worker); ``ok`` is ``error is None``; ``failure`` is ``"unavailable"`` for an
item the executor never started because its machine cannot give what it needs (e.g.
GPUs), else ``None``.

``settings.kind`` names a scheduler record (:data:`accelml.executors.cluster_settings.SCHEDULERS`):
``local`` (:class:`accelml.executors.local_cluster.LocalExecutor`, a dask LocalCluster running
``jobs`` cases at once, one by default so timings never share cores), ``slurm`` and ``pbs``
(:class:`accelml.executors.jobqueue.JobQueueExecutor`, dask-jobqueue), or a third party's.
A new kind is one module in :mod:`accelml.executors.schedulers` (or an entry point).

>>> from accelml.executors.cluster_settings import SCHEDULERS, ClusterSettings
>>> type(make_executor(ClusterSettings(kind="local", jobs=2))).__name__
'LocalExecutor'
"""

from __future__ import annotations

from collections.abc import Sequence

from accelml.cases import Case
from accelml.errors import SpecError, UnavailableError
from accelml.executors.cluster_settings import SCHEDULERS, ClusterSettings
from accelml.executors.interface import CaseOutcome, Executor, FanOutProgress, ProgressCallback
from accelml.executors.jobqueue_adapter import installed_versions, version_problem
from accelml.executors.resources import CaseNeeds


def make_executor(settings: ClusterSettings | None = None,
                  progress: ProgressCallback | None = None) -> Executor:
    """The executor of the scheduler ``settings.kind`` names (``None``: one local case at a time)."""
    settings = settings or ClusterSettings()
    return SCHEDULERS.get(settings.kind).executor(settings, progress=progress)


def ensure_available(settings: ClusterSettings | None) -> None:
    """Raise :class:`UnavailableError` (one line) when ``settings``' scheduler cannot run
    cases from this machine (its submit command is not on PATH, its controller does not
    answer, dask-jobqueue is another version than accelml's adapter was written for): call
    it before writing anything."""
    scheduler = SCHEDULERS.get((settings or ClusterSettings()).kind)
    reason = scheduler.unavailable()
    if reason is None and scheduler.job_queue is not None:
        reason = version_problem(installed_versions())
    if reason is not None:
        raise UnavailableError(f"--cluster {scheduler.name}: {reason}")


def ensure_scale(cases: Sequence[Case], settings: ClusterSettings | None, *,
                 only_available: bool = False) -> dict[str, str]:
    """Raise :class:`SpecError` (one line, naming the case) for the first case beyond what
    ``settings``' scheduler can give (e.g. more ranks than this machine has cores, for
    ``--cluster local``): call it before anything runs or is written. With
    ``only_available`` (``--only-available``) nothing is raised. The answer is case_id -> why,
    for the cases to record as unavailable, never started, while the others run: those beyond
    the scheduler (with ``only_available``) and, always, those needing what the machine that
    runs them lacks (more GPUs than it has), so that no comparison group waits on them.

    >>> from accelml.cases import DatasetSpec
    >>> case = Case("mlp", "keras", "cpu", DatasetSpec("d", "shipped"), ranks=10**6,
    ...             strategy="horovod")
    >>> ensure_scale([case], None)
    Traceback (most recent call last):
    ...
    accelml.errors.SpecError: case mlp/keras/cpu x1000000 [horovod] on d: 1000000 ranks on this machine, ...
    >>> list(ensure_scale([case], None, only_available=True).values())
    ['1000000 ranks on this machine, which has ... core(s): set oversubscribe = true ...']
    """
    scheduler = SCHEDULERS.get((settings or ClusterSettings()).kind)
    problems = {}
    for case in cases:
        needs = CaseNeeds.of_case(case)
        shortfall = scheduler.shortfall(needs)
        if shortfall is not None:
            problems[case.case_id] = shortfall
            continue
        problem = scheduler.scale_problem(needs)
        if problem is not None and not only_available:
            raise SpecError(f"case {case.label}: {problem}")
        if problem is not None:
            problems[case.case_id] = problem
    return problems


def submits_jobs(settings: ClusterSettings | None) -> bool:
    """Whether cases run in batch jobs (each with the cores of its job) rather than on this machine."""
    return settings is not None and SCHEDULERS.get(settings.kind).job_queue is not None


__all__ = ["CaseOutcome", "Executor", "FanOutProgress", "ProgressCallback", "ensure_available",
           "ensure_scale", "make_executor", "submits_jobs"]
