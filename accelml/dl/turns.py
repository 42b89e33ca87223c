"""Epochs in turn: a training's epochs as the timed rounds of an interleaved comparison group.

In an interleaved group (:mod:`accelml.runner.interleave`) every case takes one timed round
in turn. A training's round is one epoch after its first (the warm-up epoch): its ranks stay
warm between turns, each waiting at the start of its next epoch until the case process says
go. The case process and its ranks talk through files in a folder (any launcher passes the
environment variable that names it, and ranks on other hosts see it on a shared file system):

* ``done-E.PID``: the process ``PID`` of a rank ended epoch ``E``; it holds the epoch's
  seconds (epoch 0's files say the ranks are warm and waiting);
* ``go-E``: start epoch ``E`` now; ``free``: the rounds are over, run the rest untimed by turns.

A rank reads the folder from :data:`TURNS_VARIABLE` (:meth:`EpochGate.from_environment`);
without it the gate does nothing. The case process runs :class:`EpochRelay` on a thread beside
the launch: it tells the group's coordinator when the ranks are warm, starts each epoch when
the coordinator gives the case its turn and reports the epoch's seconds.

>>> import tempfile, threading
>>> folder = tempfile.mkdtemp()
>>> gate = EpochGate(folder)
>>> gate.end(0, 1.5)                          # the warm-up epoch
>>> relay = EpochRelay(folder, ranks=1)
>>> relay.wait_done(0, threading.Event())
1.5
>>> relay.start_epoch(1); gate.begin(1)       # returns at once: its go is there
>>> gate.end(1, 0.5); relay.wait_done(1, threading.Event())
0.5
"""

from __future__ import annotations

import glob
import os
import threading
import time
from collections.abc import Mapping

TURNS_VARIABLE = "ACCELML_EPOCH_TURNS"
"""The folder through which a training's ranks take their epochs in turn (unset: freely)."""
POLL_S = 0.002
"""How often a waiting rank, or the relay, looks for its next file."""
FREE = "free"


def _write(path: str, text: str) -> None:
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w") as handle:
        handle.write(text)
    os.replace(partial, path)


class EpochGate:
    """A rank's side: wait for the turn before each epoch after the first, say when it ended."""

    def __init__(self, folder: str | None):
        self.folder = folder

    @classmethod
    def from_environment(cls, environment: Mapping[str, str] = os.environ) -> EpochGate:
        return cls(environment.get(TURNS_VARIABLE) or None)

    def begin(self, epoch: int) -> None:
        """Wait (before the epoch's clock starts) until epoch ``epoch`` may run."""
        if self.folder is None or epoch == 0:
            return
        go, free = os.path.join(self.folder, f"go-{epoch}"), os.path.join(self.folder, FREE)
        while not (os.path.exists(go) or os.path.exists(free)):
            if not os.path.isdir(self.folder):   # the case process is gone: nobody to wait for
                return
            time.sleep(POLL_S)

    def end(self, epoch: int, seconds: float) -> None:
        """Say that this process ended epoch ``epoch``, which took ``seconds``."""
        if self.folder is not None:
            _write(os.path.join(self.folder, f"done-{epoch}.{os.getpid()}"), repr(seconds))


class EpochRelay:
    """The case process's side: ``ranks`` processes train; see the module docstring."""

    def __init__(self, folder: str, ranks: int):
        self.folder, self.ranks = folder, ranks

    def wait_done(self, epoch: int, stopped: threading.Event) -> float | None:
        """The longest of the ranks' seconds of epoch ``epoch`` once every rank ended it;
        None when ``stopped`` is set first (the training ended or failed)."""
        pattern = os.path.join(self.folder, f"done-{epoch}.*[0-9]")
        while not stopped.is_set():
            found = glob.glob(pattern)
            if len(found) >= self.ranks:
                seconds = []
                for path in found:
                    with open(path) as handle:
                        seconds.append(float(handle.read()))
                return max(seconds)
            time.sleep(POLL_S)
        return None

    def start_epoch(self, epoch: int) -> None:
        _write(os.path.join(self.folder, f"go-{epoch}"), "")

    def free(self) -> None:
        """Let every remaining epoch run without waiting for a turn."""
        _write(os.path.join(self.folder, FREE), "")
