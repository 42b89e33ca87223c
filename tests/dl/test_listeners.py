"""No rank of a one-host run listens where another machine can reach it (issue 30).

Each multi-process strategy runs with 2 real ranks while ``ss -ltnp`` is read over and over;
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
import threading
import time

import psutil
import pytest

from accelml.dl import TrainingConfig, launch

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
    """Launch ``config`` on 2 ranks; meanwhile read ``ss`` every 0.1 s and note every
    listener of a process of the run, and the network namespaces of its processes."""
    tool = ss_tool()
    me = psutil.Process()
    seen: set[tuple[str, int, str]] = set()
    namespaces: set[str] = set()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = launch(config, workers=2, launcher=launcher)
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
        time.sleep(0.1)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"], seen, namespaces


@pytest.mark.parametrize("strategy, launcher, extra", [
    pytest.param("horovod", "horovodrun", {}, marks=pytest.mark.horovod),
    ("torch-ddp", "local-processes", {"keras_backend": "torch"}),
])
def test_one_host_ranks_listen_on_loopback_only(strategy, launcher, extra, request):
    if strategy == "horovod":
        request.getfixturevalue("horovod_ready")
    result, seen, _ = run_watched(SMALL.replace(strategy=strategy, **extra), launcher)
    assert seen, f"{strategy}: no listener of the run was seen at all (is ss working?)"
    exposed = sorted(entry for entry in seen if not is_loopback(entry[0]))
    assert not exposed, f"{strategy} listens beyond loopback: {exposed}"
    assert result.listeners.startswith("loopback only") and result.listeners_authenticated


def test_multiworker_ranks_have_a_network_of_their_own():
    result, seen, namespaces = run_watched(SMALL.replace(strategy="multiworker"),
                                           "local-processes")
    assert not [entry for entry in seen if not is_loopback(entry[0])], seen
    mine = os.readlink("/proc/self/ns/net")
    assert namespaces - {mine}, "no rank ran in a private network namespace"
    assert result.listeners.startswith("a private network namespace")
    assert result.listeners_authenticated and result.ranks_agree
