"""Executors: where cases run. One small interface, a local dask cluster by default.

An executor is a context manager with one method::

    with make_executor(settings) as executor:
        for outcome in executor.map(function, items, needs=None):
            ...   # outcomes arrive as cases finish, in any order

``function(item)`` runs on a worker (it must be importable there); ``items`` are
:class:`accelml.runner.process.CaseTask` objects (they carry ``device``, ``workers``,
``strategy``, ``threads``, ``memory_limit_mb`` and ``time_limit_s`` as attributes, which is
what :meth:`accelml.executors.resources.CaseNeeds.of_case` reads). Each outcome has
``index`` (position in ``items``), ``item``, ``result`` (what ``function`` returned) and
``error`` (``None``, or one line saying why there is no result, e.g. a lost worker);
``ok`` is ``error is None``; ``failure`` is ``"unavailable"`` for an item the executor
never started because its machine cannot give what it needs (e.g. GPUs), else ``None``.

Kinds: ``local`` (:class:`accelml.executors.local.LocalExecutor`, a dask LocalCluster
running ``jobs`` cases at once, one by default so timings never share cores), ``slurm`` and
``pbs`` (:class:`accelml.executors.jobqueue.JobQueueExecutor`, dask-jobqueue). A new kind is
one more entry in :data:`EXECUTOR_KINDS`: a factory taking the cluster settings and a
progress callback.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence


@dataclass(frozen=True)
class CaseOutcome:
    """What became of one submitted item: its result, or why it has none."""

    index: int
    item: Any
    result: Any = None
    error: str | None = None
    lost_workers: int = 0
    worker: str | None = None
    failure: str | None = None     # why, when the executor knows: "unavailable" (never started)

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(Protocol):
    """The interface every executor offers (see the module docstring)."""

    def __enter__(self) -> "Executor": ...

    def __exit__(self, *exc_info: object) -> None: ...

    def map(self, function: Callable[[Any], Any], items: Iterable[Any],
            needs: Sequence[Any] | None = None) -> Iterator[CaseOutcome]: ...


EXECUTOR_KINDS: Mapping[str, str] = MappingProxyType({
    "local": "accelml.executors.local:LocalExecutor",
    "slurm": "accelml.executors.jobqueue:JobQueueExecutor",
    "pbs": "accelml.executors.jobqueue:JobQueueExecutor",
})
"""kind -> "module:Factory"; the factory is called as ``Factory(settings, progress=...)``."""


def make_executor(settings: Any, progress: Callable[[Any], None] | None = None) -> Executor:
    """The executor for ``settings.kind`` (``ClusterSettings`` or anything with ``kind``/``jobs``)."""
    from accelml.errors import AccelmlError

    kind = getattr(settings, "kind", "local")
    target = EXECUTOR_KINDS.get(kind)
    if target is None:
        raise AccelmlError(f"unknown executor {kind!r}; allowed: {', '.join(EXECUTOR_KINDS)}")
    module, _, name = target.partition(":")
    factory = getattr(importlib.import_module(module), name)
    return factory(settings, progress=progress)


__all__ = ["CaseOutcome", "EXECUTOR_KINDS", "Executor", "make_executor"]
