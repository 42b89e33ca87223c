"""No HTTP server beside the dask scheduler and workers unless a dashboard is asked for.

distributed starts an HTTP server on every scheduler and worker (the dashboard,
``/json/identity.json`` with addresses and directories, live call stacks, health and
Prometheus metrics), without authentication, and has no option to leave it out. accelml
binds each to 127.0.0.1 on a free port (:data:`LOCAL_ONLY`) and, unless the settings ask
for the dashboard (``dashboard = true``, ``--dashboard``), closes it as soon as the server
has started: :func:`close_cluster_http` for a scheduler and the workers a client reaches,
and this module as a worker preload (:func:`worker_arguments`: its :func:`dask_setup` runs
in each worker job right after the worker started its server).

>>> worker_arguments(dashboard=False)
['--dashboard-address', '127.0.0.1:0', '--preload', 'accelml.executors.dashboard']
>>> worker_arguments(dashboard=True)
['--dashboard-address', '127.0.0.1:0']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: distributed is imported where a cluster starts
    from distributed import Client
    from distributed.node import ServerNode

LOCAL_ONLY = "127.0.0.1:0"
"""Where a scheduler's or worker's HTTP server listens while it is open: this machine only."""


def dashboard_url(client: Client) -> str:
    """Where the scheduler's dashboard is served: 127.0.0.1 (:data:`LOCAL_ONLY`), at the port
    it got; not ``client.dashboard_link``, which names the scheduler's own (external)
    address, where nothing answers."""
    port = client.scheduler_info().get("services", {}).get("dashboard")
    return f"http://{LOCAL_ONLY.rpartition(':')[0]}:{port}/status"


def close_http(server: ServerNode) -> None:
    """Stop ``server``'s HTTP listener (a scheduler or worker, on its own event loop)."""
    http = getattr(server, "http_server", None)
    if http is not None:
        http.stop()
    services: dict[str, object] = getattr(server, "services", {})
    services.pop("dashboard", None)


def _close_scheduler_http(dask_scheduler: ServerNode) -> None:
    close_http(dask_scheduler)


def _close_worker_http(dask_worker: ServerNode) -> None:
    close_http(dask_worker)


def close_cluster_http(client: Client, *, workers: bool = True) -> None:
    """Close the HTTP listener of ``client``'s scheduler and (``workers``) of its workers."""
    client.run_on_scheduler(_close_scheduler_http)
    if workers:
        client.run(_close_worker_http)


def dask_setup(worker: ServerNode) -> None:
    """Worker preload hook (``--preload accelml.executors.dashboard``): no HTTP listener."""
    close_http(worker)


def worker_arguments(dashboard: bool) -> list[str]:
    """``dask worker`` arguments: its HTTP server on 127.0.0.1, closed unless ``dashboard``."""
    arguments = ["--dashboard-address", LOCAL_ONLY]
    return arguments if dashboard else arguments + ["--preload", __name__]
