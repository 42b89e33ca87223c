"""No HTTP listener beside the dask scheduler and workers unless a dashboard is asked for
(issue 16, item 2): distributed starts an unauthenticated HTTP server (dashboard, identity
JSON, call stacks, metrics) on every scheduler and worker; accelml closes it."""

from __future__ import annotations

import socket

import cloudpickle
import psutil
import pytest

from accelml.executors.cluster_settings import ClusterSettings, load_cluster_settings
from accelml.executors.jobqueue import JobQueueExecutor
from accelml.executors.local_cluster import LocalExecutor
from accelml.executors.resources import CaseNeeds

from . import casefunctions

cloudpickle.register_pickle_by_value(casefunctions)


def listening() -> set[tuple[str, int]]:
    return {(c.laddr.ip, c.laddr.port) for c in psutil.Process().net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN}


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return True
    return False


def test_a_local_cluster_listens_on_no_http_port():
    before = listening()
    with LocalExecutor(ClusterSettings()) as executor:
        assert [o.result for o in executor.map(abs, [-3])] == [3]
        opened = listening() - before
        scheduler = executor.cluster.scheduler
        (worker,) = executor.cluster.workers.values()
        ports = [scheduler.http_server.port, worker.http_server.port]
    assert opened == set()
    assert all(refused(port) for port in ports)


def test_a_dashboard_asked_for_listens_on_localhost_only():
    before = listening()
    with LocalExecutor(ClusterSettings(dashboard=True)) as executor:
        opened = listening() - before
        port = executor.cluster.scheduler.http_server.port
        assert not refused(port)
    assert opened and {ip for ip, _ in opened} == {"127.0.0.1"}


def test_the_dashboard_url_printed_is_where_it_answers(caplog):
    """issue 30: --dashboard printed a URL on the external address; it serves 127.0.0.1 only."""
    import urllib.request

    with caplog.at_level("WARNING"), LocalExecutor(ClusterSettings(dashboard=True)) as executor:
        port = executor.cluster.scheduler.http_server.port
        (line,) = [r.getMessage() for r in caplog.records if "dask dashboard" in r.getMessage()]
        url = line.rpartition(" ")[2]
        assert url == f"http://127.0.0.1:{port}/status", line
        with urllib.request.urlopen(url, timeout=30) as answer:
            assert answer.status == 200


def test_the_dashboard_setting_is_checked():
    from accelml.errors import SpecError

    with pytest.raises(SpecError, match="cluster.dashboard = 'yes': expected true or false"):
        load_cluster_settings(spec_table={"dashboard": "yes"})


@pytest.mark.slurm
def test_a_slurm_cluster_listens_on_no_http_port(slurm_available, tmp_path):
    settings = load_cluster_settings(spec_table={"kind": "slurm", "jobs": 1, "worker-start-timeout": 300,
                                                 "shared-directory": str(tmp_path / "jobs")})
    before = listening()
    with JobQueueExecutor(settings) as executor:
        (outcome,) = list(executor.map(casefunctions.http_listeners, [0], needs=[CaseNeeds()]))
        opened = listening() - before
        scheduler_port = executor.jobs.cluster.scheduler.http_server.port
        comm_port = int(executor.address.rsplit(":", 1)[1])
    assert outcome.ok, outcome.error
    assert outcome.result == {"other_listeners": [], "http_accepts": False}
    assert {port for _, port in opened} <= {comm_port}     # the TLS scheduler, nothing else
    assert refused(scheduler_port)
