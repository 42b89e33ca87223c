"""Run cases on a dask LocalCluster on this machine.

``jobs`` cases run at once (default 1, so that no two timed cases share cores); every case
still runs in its own process (:func:`accelml.runner.process.execute_case`), the dask worker
thread only starts and watches it.

A case that needs more GPUs than this machine has (``device = "cuda"``, one per worker;
:meth:`accelml.executors.resources.CaseNeeds.of_case`) is not started: its outcome says
why (``needs 1 GPU(s); this machine has 0 (no NVIDIA driver found ...)``, or ``needs 4
GPU(s); this machine has 2: set oversubscribe = true ...``) with ``failure="unavailable"``,
and the other cases run.

>>> with LocalExecutor(jobs=1) as executor:
...     [outcome.result for outcome in executor.map(abs, [-1, -2])]
[1, 2]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Self

from accelml.executors.cluster_settings import ClusterSettings
from accelml.executors.dashboard import LOCAL_ONLY, close_cluster_http, dashboard_url
from accelml.executors.interface import CaseOutcome, Item, ProgressCallback, Result
from accelml.executors.resources import CaseNeeds
from accelml.probe import list_gpus, usable_cores

if TYPE_CHECKING:  # annotations only: distributed is imported when the cluster starts
    from dask.config import set as DaskConfig
    from distributed import Client, Future, LocalCluster


QUIET_DASK = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "200ms",
}


class LocalExecutor:
    """A dask LocalCluster (threads in this process) that runs ``jobs`` items at a time."""

    def __init__(self, settings: ClusterSettings | None = None, *, jobs: int | None = None,
                 progress: ProgressCallback | None = None):
        self.jobs = int(jobs or (settings.jobs if settings is not None else None) or 1)
        self.dashboard = settings is not None and settings.dashboard
        self.progress = progress
        self.cluster: LocalCluster | None = None
        self.client: Client | None = None
        self._config: DaskConfig | None = None

    def __enter__(self) -> Self:
        import dask
        from distributed import Client, LocalCluster

        # The scheduler and worker live in this process, beside the timed case processes:
        # no stack profiling every 10 ms and slower housekeeping (a third of the idle CPU).
        self._config = dask.config.set(QUIET_DASK)
        self._config.__enter__()
        self.cluster = LocalCluster(n_workers=1, threads_per_worker=self.jobs, processes=False,
                                    dashboard_address=LOCAL_ONLY, worker_dashboard_address=LOCAL_ONLY,
                                    silence_logs=logging.ERROR)
        self.client = Client(self.cluster)
        if self.dashboard:
            logging.getLogger(__name__).warning("dask dashboard (this machine only): %s",
                                                dashboard_url(self.client))
        else:
            close_cluster_http(self.client)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None
        if self._config is not None:
            self._config.__exit__(None, None, None)
            self._config = None

    def map(self, function: Callable[[Item], Result], items: Iterable[Item],
            needs: Sequence[CaseNeeds] | None = None) -> Iterator[CaseOutcome[Item, Result]]:
        """Run ``function(item)`` for every item, in order, ``jobs`` at a time; yield as they finish.

        ``needs`` (one :class:`~accelml.executors.resources.CaseNeeds` per item) defaults to
        ``CaseNeeds.of_case(item)``; items needing more GPUs than this machine has come back
        first, unstarted, as unavailable.
        """
        from distributed import as_completed

        if self.client is None:
            raise RuntimeError("use the executor inside a 'with' block")
        items = list(items)
        needs = [CaseNeeds.of_case(item) for item in items] if needs is None else list(needs)
        if len(needs) != len(items):
            raise ValueError("one CaseNeeds per item")
        missing = gpu_shortfall(needs)
        for index, reason in missing.items():
            yield CaseOutcome(index, items[index], error=reason, failure="unavailable")
        futures: dict[Future[Result], int] = {}
        for index, item in enumerate(items):
            if index in missing:
                continue
            future = self.client.submit(function, item, pure=False, priority=-index)
            futures[future] = index
        try:
            for future in as_completed(list(futures)):
                index = futures[future]
                if future.status == "finished":
                    yield CaseOutcome(index, items[index], result=future.result())
                else:
                    error = future.exception()
                    yield CaseOutcome(index, items[index],
                                      error=f"{type(error).__name__}: {error}".strip())
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()


def scale_problem(needs: CaseNeeds) -> str | None:
    """Why this machine should not run a case with ``needs``: more ranks than it has cores,
    unless the case allows it (``oversubscribe = true``); else None. A case asking for more
    GPUs than this machine has is not refused here, whatever its ranks: :func:`gpu_shortfall`
    records it as unavailable and the other cases run (a 1/2/4-GPU spec on a 2-GPU machine
    runs 1 and 2, and its CPU cases on a machine without GPUs).

    >>> scale_problem(CaseNeeds(ranks=1)) is None
    True
    >>> scale_problem(CaseNeeds(ranks=10**6))
    '1000000 ranks on this machine, which has ... core(s): set oversubscribe = true ...'
    >>> scale_problem(CaseNeeds(ranks=10**6, oversubscribe=True)) is None
    True
    """
    if needs.oversubscribe or machine_shortfall(needs):
        return None         # more GPUs than here: recorded unavailable, whatever its ranks
    cores = usable_cores()
    if needs.ranks > cores:
        return (f"{needs.ranks} ranks on this machine, which has {cores} core(s): "
                "set oversubscribe = true in the case to run more ranks than cores")
    return None


def machine_shortfall(needs: CaseNeeds) -> str | None:
    """Why this machine cannot run a case with ``needs`` (more GPUs than it has), or None.

    >>> machine_shortfall(CaseNeeds(gpus=0)) is None
    True
    """
    return gpu_shortfall([needs]).get(0)


def gpu_shortfall(needs: Sequence[CaseNeeds]) -> dict[int, str]:
    """index -> why this machine cannot run it, for every need asking for more GPUs than
    :func:`accelml.probe.list_gpus` finds (NVML is asked only when some need has GPUs). A
    need that allows oversubscription shares the GPUs there are, if there is at least one.

    >>> from accelml.executors.resources import CaseNeeds
    >>> gpu_shortfall([CaseNeeds(gpus=0)])
    {}
    """
    wanted = {index: need.gpus for index, need in enumerate(needs)}
    if not any(wanted.values()):
        return {}
    gpus, why = list_gpus()
    have = f"this machine has {len(gpus)}" + (f" ({why})" if why else "")
    share = ": set oversubscribe = true in the case to share them between ranks" if gpus else ""
    return {index: f"needs {count} GPU(s); {have}{share}"
            for index, count in wanted.items()
            if count > len(gpus) and not (gpus and needs[index].oversubscribe)}
