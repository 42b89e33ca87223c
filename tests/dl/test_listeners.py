"""No rank of a one-host run listens where another machine can reach it (issue 30).

Each multi-process strategy runs with 2 real ranks while ``ss -ltnp`` is read over and over
(every 0.25 s: the run's listeners live as long as its ranks, and each read costs ~20 CPU-ms);
every listening socket of a process of the run (the launcher, ``horovodrun`` and the ranks)
must be on a loopback address. ``multiworker``'s ranks (TensorFlow's gRPC server binds every
interface) run in a private network namespace: the host lists no socket of theirs at all,
and they are in another network namespace than this process. The case record says what
listened (``TrainingResult.listeners``), and whether it was authenticated.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import psutil
import pytest

from accelml.dl import TrainingConfig, launch
from accelml.dl.common import free_ports
from accelml.dl.strategies import torch_ddp

SMALL = TrainingConfig(model="mlp", dataset="digits", batch_size=32, epochs=2,
                       learning_rate=0.05, seed=1, time_limit_s=240)
USERS = re.compile(r'\("[^"]*",pid=(\d+),fd=\d+\)')


def ss_tool() -> str:
    found = shutil.which("ss") or next((path for path in ("/usr/sbin/ss", "/sbin/ss")
                                        if os.path.exists(path)), None)
    if found is None:
        pytest.fail("ss is missing: install iproute2 (bash make/install-test-tools.sh does)")
    return found


def listening(tool: str) -> list[tuple[str, int]]:
    """(local address, pid) of every listening TCP socket ``ss`` shows with its process."""
    found = []
    for line in subprocess.run([tool, "-ltnpH"], capture_output=True, text=True).stdout.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        address = fields[3].rpartition(":")[0].strip("[]").split("%")[0]
        found.extend((address, int(pid)) for pid in USERS.findall(line))
    return found


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def run_watched(config: TrainingConfig, launcher: str):
    """Launch ``config`` on 2 ranks; meanwhile read ``ss`` every 0.25 s and note every
    listener of a process of the run, and the network namespaces of its processes."""
    tool = ss_tool()
    me = psutil.Process()
    seen: set[tuple[str, int, str]] = set()
    namespaces: set[str] = set()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = launch(config, ranks=2, launcher=launcher)
        except BaseException as error:  # noqa: BLE001 (reported below)
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    while thread.is_alive():
        family = {}
        for child in me.children(recursive=True):
            try:
                family[child.pid] = " ".join(child.cmdline()[:4])
                namespaces.add(os.readlink(f"/proc/{child.pid}/ns/net"))
            except (psutil.Error, OSError):
                continue
        for address, pid in listening(tool):
            if pid in family:
                seen.add((address, pid, family[pid]))
        time.sleep(0.25)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"], seen, namespaces


@pytest.mark.slow
@pytest.mark.parametrize("strategy, launcher, extra", [
    pytest.param("horovod", "horovodrun", {}, marks=pytest.mark.horovod),
    ("torch-ddp", "local-processes", {"keras_backend": "torch"}),
])
def test_one_host_ranks_listen_on_loopback_only(strategy, launcher, extra, request):
    if strategy == "horovod":
        request.getfixturevalue("horovod_ready")
    # one epoch: the listeners are there from the rendezvous on
    result, seen, _ = run_watched(SMALL.replace(strategy=strategy, epochs=1, **extra), launcher)
    assert seen, f"{strategy}: no listener of the run was seen at all (is ss working?)"
    exposed = sorted(entry for entry in seen if not is_loopback(entry[0]))
    assert not exposed, f"{strategy} listens beyond loopback: {exposed}"
    assert result.listeners.startswith("loopback only") and result.listeners_authenticated


@pytest.mark.slow
def test_multiworker_ranks_have_a_network_of_their_own():
    """multiworker's two local processes run in a network namespace of their own, and train
    there: the same weights on both, a global batch of two ranks', 3 epochs that learn (one
    run for both checks: each starts TensorFlow in every rank)."""
    result, seen, namespaces = run_watched(SMALL.replace(strategy="multiworker", epochs=3),
                                           "local-processes")
    assert not [entry for entry in seen if not is_loopback(entry[0])], seen
    mine = os.readlink("/proc/self/ns/net")
    assert namespaces - {mine}, "no rank ran in a private network namespace"
    assert result.listeners.startswith("a private network namespace")
    assert result.listeners_authenticated and result.ranks_agree
    assert result.ranks == 2 and result.global_batch == 64 and len(result.rank_digests) == 2
    assert result.backend == "tensorflow (tf_keras)"
    assert result.test_accuracy > 0.8
    assert len(result.epochs) == 3 and result.mean_epoch_s is not None


RANK_ON_THE_JOB_INTERFACE = """
import sys, torch
from accelml.dl import TrainingConfig
from accelml.dl.strategies.torch_ddp import connect
collectives = connect(TrainingConfig(strategy="torch-ddp", ranks=2, time_limit_s=120))
total = collectives.total(torch.ones(1))
print("ready", float(total[0]), flush=True)
sys.stdin.read()
"""


def job_interface() -> tuple[str, str] | None:
    """(name, IPv4 address) of a non-loopback interface of this machine that is up."""
    stats = psutil.net_if_stats()
    for name, addresses in psutil.net_if_addrs().items():
        for address in addresses:
            if (address.family.name == "AF_INET" and not is_loopback(address.address)
                    and name in stats and stats[name].isup):
                return name, address.address
    return None


def address_note(where: str) -> bool:
    return "MASTER_ADDR" in where and "unauthenticated" in where


@pytest.mark.slow
def test_torch_ddp_ranks_of_a_job_listen_on_its_interface_only():
    """Under ``srun`` the ranks meet at MASTER_ADDR on the job's interface: rank 0's TCPStore
    (which binds every interface by itself) and the gloo sockets listen on that address
    only, unauthenticated as the record says (torch.distributed has no authentication)."""
    found = job_interface()
    if found is None:
        pytest.skip("this machine has no non-loopback IPv4 interface")
    name, address = found
    tool = ss_tool()
    port = str(free_ports(1)[0])
    ranks = [subprocess.Popen(
        [sys.executable, "-c", RANK_ON_THE_JOB_INTERFACE], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": address,
             "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": name}) for rank in range(2)]
    try:
        assert [rank.stdout.readline().split() for rank in ranks] == [["ready", "2.0"]] * 2
        pids = {rank.pid for rank in ranks}
        seen = sorted({where for where, pid in listening(tool) if pid in pids})
    finally:
        for rank in ranks:
            rank.communicate("")
    assert seen == [address], f"the ranks listen on {seen}, not on {address} only"
    listener = torch_ddp.listeners("srun")
    assert not listener.authenticated and address_note(listener.where), listener.where
