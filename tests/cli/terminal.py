"""Run ``python -m accelml`` as a user's terminal would: through a real pseudo-terminal of a
given size (``COLUMNS`` and the window size both set), or piped; or run its ``main`` in this
process, for tests about what a command prints rather than about its process (a fresh
``python -m accelml`` process costs seconds of CPU: ``runs`` and ``compare`` import
scikit-learn through accelml.report)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass

import pytest

from accelml.cli import main

COMMAND_LIMIT_S = 900
"""Seconds a command may run before it counts as hung: a smoke compare takes about 30 CPU-s,
but the other xdist workers' tests share the cores (one took over 300 s under a load of 11
on 2 cores)."""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@dataclass(frozen=True)
class Printed:
    returncode: int
    text: str            # what the terminal showed, colour codes removed

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def widest(self) -> int:
        return max((len(line.rstrip()) for line in self.lines), default=0)


def in_terminal(*args: str, columns: int, env: dict[str, str] | None = None,
                timeout: float = COMMAND_LIMIT_S) -> Printed:
    """Run ``python -m accelml ARGS`` with stdout and stderr on a pty ``columns`` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environment = dict(os.environ if env is None else env, COLUMNS=str(columns), TERM="xterm")
    environment.pop("NO_COLOR", None)
    process = subprocess.Popen([sys.executable, "-m", "accelml", *args], stdin=follower,
                               stdout=follower, stderr=follower, env=environment,
                               close_fds=True)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:     # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
        if time.monotonic() > deadline:
            process.kill()
            raise TimeoutError(f"accelml {' '.join(args)} ran past {timeout}s")
    os.close(leader)
    code = process.wait()
    text = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r\n", "\n")
    return Printed(code, text)


def piped(*args: str, env: dict[str, str] | None = None,
          timeout: float = COMMAND_LIMIT_S) -> subprocess.CompletedProcess[str]:
    """Run ``python -m accelml ARGS`` with stdout and stderr on pipes."""
    return subprocess.run([sys.executable, "-m", "accelml", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``accelml.cli.main(ARGS)`` in this process, its output captured as a pipe would take it
    (not a terminal: nothing fitted or wrapped): the exit code, stdout and stderr."""
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, captured.out, captured.err)
