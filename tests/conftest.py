"""Shared test set-up: markers, and the real one-node SLURM from slurm/local/."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SLURM_START = REPO / "slurm" / "local" / "start.sh"
CANNOT_RUN_HERE = 3


def pytest_configure(config):
    # A test run started as a background job of a non-interactive shell (`make test &` in a
    # script) inherits SIGINT ignored, under nohup SIGHUP too, and so would every client it
    # starts, which then rightly keeps them ignored: the tests of those signals (the
    # executors', the fault suite's) need them delivered, as in a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    for line in (
        "slurm: needs the local one-node SLURM (slurm/local/start.sh); skipped only where it cannot start",
        "horovod: runs real multi-process Horovod (horovodrun --gloo)",
        "torch_ddp: runs real multi-process torch.distributed (torchrun, gloo)",
        "gpu: needs an NVIDIA GPU; skipped with the reason where there is none",
        "slow: takes more than a few seconds",
        "faults: the fault suite (tests/faults): real faults injected into real runs",
    ):
        config.addinivalue_line("markers", line)


SHARED_SCOPES = ("module", "class", "package")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (pyproject.toml's addopts run ``-n 4 --dist loadgroup``): the tests of
    a module that share a module- (or class-) scoped fixture, such as one real comparison that
    several tests read, go to one worker together, so that the fixture is built once; every
    other test goes on its own to whichever worker is free, those marked ``slow`` first (a long
    test started last would leave the other workers idle). The fault suite (marked ``faults``)
    runs on one worker, one test at a time: its tests time signals against process start-up
    (a Ctrl-C 0.5 s after the start, a case process that must die within 0.5 s of its
    client), which four at once on 2 cores would make miss. Other tests may share the machine: each
    worker has its own tmp_path root, and tests name their SLURM jobs, fault tags and ports
    uniquely."""
    if not hasattr(config, "workerinput"):     # not an xdist worker: collection order as is
        return
    for item in items:
        if item.get_closest_marker("faults"):
            item.add_marker(pytest.mark.xdist_group("faults"))
        elif _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _shares_a_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(definitions[-1].scope in SHARED_SCOPES
               for name, definitions in info.name2fixturedefs.items() if definitions)


@pytest.fixture(scope="session")
def slurm_available() -> str:
    """Start (or find) the local SLURM; skip only where it cannot run here (not root, not Debian).

    Returns the partition name. A SLURM that should start here but does not is a test
    failure, not a skip.
    """
    result = subprocess.run(["bash", str(SLURM_START), "start"], capture_output=True, text=True)
    if result.returncode == CANNOT_RUN_HERE:
        pytest.skip(f"local SLURM unavailable: {result.stdout.strip()}")
    if result.returncode != 0:
        pytest.fail(f"local SLURM did not start: {result.stderr.strip() or result.stdout.strip()}")
    return "debug"


@pytest.fixture(scope="session")
def gpus():
    """The NVIDIA GPUs here; skips the test with the reason where there are none."""
    from accelml.probe import list_gpus

    found, reason = list_gpus()
    if not found:
        pytest.skip(f"no GPU: {reason}")
    return found
