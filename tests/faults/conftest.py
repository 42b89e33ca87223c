"""Helpers of the fault suite: real clients started, real faults injected, every process they
started found afterwards by a tag in its environment (inherited by every descendant, batch
jobs included, since sbatch exports the submitter's environment)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
TAG = "ACCELML_FAULT_TAG"
ONE_WORKER = True
"""The fault suite runs one test at a time per chain (tests/conftest.py's work units): its tests
time signals against process start-up (a Ctrl-C 0.5 s after the start, a case process that must
die within 0.5 s of its client), which several at once on 2 cores make miss. The modules whose
faults hit running ranks or SLURM jobs rather than a client starting up say ``WORK_UNIT``: each
such unit is a chain of its own, on a worker of its own."""


def _carries(pid: int, tag: str) -> bool:
    """Whether process ``pid``'s environment holds ``TAG=tag``, read as the bytes of
    /proc/PID/environ: psutil's ``environ()`` parses every variable of every process into a
    dict, 7-16 ms of CPU a scan of the host, and the suite scans every 0.1 s while it waits."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return f"{TAG}={tag}".encode() in file.read().split(b"\0")
    except OSError:
        return False


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def tagged(process: psutil.Process, tag: str) -> bool:
    return _running(process) and _carries(process.pid, tag)


def leftovers(tag: str) -> list[psutil.Process]:
    """Running processes whose environment carries ``tag``."""
    found = []
    for pid in psutil.pids():
        if pid != os.getpid() and _carries(pid, tag):
            try:
                process = psutil.Process(pid)
            except psutil.Error:
                continue
            if _running(process):
                found.append(process)
    return found


def wait_for(condition, what: str, timeout: float = 300.0, step: float = 0.1):
    """Poll ``condition`` until it holds (its value) or ``timeout`` passes (a failure): generous,
    since ranks importing TensorFlow under CI load took near 180 s to appear."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)
    return found


def gone(tag: str, timeout: float = 20.0) -> list[str]:
    """Wait up to ``timeout`` for every tagged process to end; describe those that did not."""
    deadline = time.monotonic() + timeout
    while (left := leftovers(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    described = []
    for process in left:
        try:
            described.append(f"{process.pid} {' '.join(process.cmdline())[:160]}")
        except psutil.Error:
            continue
    return described


def ranks_of(tag: str) -> list[psutil.Process]:
    """The rank processes (``python -m accelml.dl.rank``), not horovodrun (whose command
    line holds the ranks' command) nor the helpers it forks."""
    return [p for p in leftovers(tag) if "accelml.dl.rank" in (command := _cmdline(p))
            and "accelml.dl.loopback_horovodrun" not in command]


def case_processes(tag: str) -> list[psutil.Process]:
    return [p for p in leftovers(tag) if "run-case" in _cmdline(p)]


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


class Faults:
    """One test's clients: its tag, scratch TMPDIR, results directory; kills what is left."""

    def __init__(self, tmp_path: Path):
        self.tag = uuid.uuid4().hex
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.results = tmp_path / "results"
        self.env = {**os.environ, TAG: self.tag, "TMPDIR": str(self.tmp),
                    "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                    "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}

    def client(self, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        """``python -m accelml compare ARGS --results-dir ... --no-progress``, started now."""
        return subprocess.Popen([sys.executable, "-m", "accelml", "compare", *args,
                                 "--results-dir", str(self.results), "--no-progress"],
                                cwd=cwd or REPO, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        process = self.client(*args, cwd=cwd)
        out, err = process.communicate(timeout=timeout)
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def scratch_left(self) -> list[str]:
        return sorted(p.name for p in self.tmp.iterdir() if p.name.startswith("accelml-"))

    def kill_leftovers(self) -> None:
        for process in leftovers(self.tag):
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass


@pytest.fixture
def faults(tmp_path):
    found = Faults(tmp_path)
    yield found
    found.kill_leftovers()
