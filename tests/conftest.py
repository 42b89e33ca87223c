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
