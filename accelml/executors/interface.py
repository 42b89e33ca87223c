"""What every executor offers and hands back: :class:`Executor`, :class:`CaseOutcome`,
:class:`FanOutProgress`. The lowest module of :mod:`accelml.executors`; the scheduler
records (:mod:`accelml.executors.cluster_settings`) and every executor import it.

>>> outcome = CaseOutcome(0, "case-a", result=42)
>>> outcome.ok, outcome.result
(True, 42)
>>> CaseOutcome(1, "case-b", error="its worker was lost 3 times").ok
False
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, Self, TypeVar

from accelml.executors.resources import CaseNeeds

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class CaseOutcome(Generic[Item, Result]):
    """What became of one submitted item: its result, or why it has none.

    ``failure`` says why when the executor knows: ``"unavailable"`` for an item it never
    started because no machine of it can give what the item needs (e.g. GPUs).
    """

    index: int
    item: Item
    result: Result | None = None
    error: str | None = None
    lost_workers: int = 0
    worker: str | None = None
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class FanOutProgress:
    """A snapshot for progress displays while jobs wait in the queue or run.

    >>> FanOutProgress(jobs_queued=1, jobs_running=2, workers_up=2, cases_running=2,
    ...                cases_waiting=3, cases_done=4, cases_failed=0, cases_total=9).line()
    'jobs: 1 queued, 2 running | workers up: 2 | cases: 2 running, 3 waiting, 4/9 done'
    """

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
        text = (f"jobs: {self.jobs_queued} queued, {self.jobs_running} running | "
                f"workers up: {self.workers_up} | cases: {self.cases_running} running, "
                f"{self.cases_waiting} waiting, {self.cases_done}/{self.cases_total} done")
        if self.cases_failed:
            text += f", {self.cases_failed} failed"
        if self.workers_lost:
            text += f" | workers lost: {self.workers_lost}"
        return text


ProgressCallback = Callable[[FanOutProgress], None]
"""Called with a :class:`FanOutProgress` whenever a job-queue executor's counts change."""


class Executor(Protocol):
    """A context manager with one method (see :mod:`accelml.executors`)."""

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def map(self, function: Callable[[Item], Result], items: Iterable[Item],
            needs: Sequence[CaseNeeds] | None = None) -> Iterator[CaseOutcome[Item, Result]]: ...
