"""Errors a user can cause. The CLI prints them as one line, never a traceback."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class AccelmlError(Exception):
    """A problem the user can fix: bad input, a missing dependency, a bad choice.

    ``exit_code`` is what the CLI exits with when this reaches it: 2, as for every error a
    user can cause (1 is kept for "it ran, and something failed or drifted").
    """

    exit_code = 2


class SpecError(AccelmlError):
    """An experiment spec (or command-line equivalent) that does not parse or validate."""

    exit_code = 2


class UnavailableError(AccelmlError):
    """A backend, device or tool that this machine cannot provide (the message says why)."""

    exit_code = 2


class StoreError(AccelmlError):
    """A results store that is missing, unreadable or corrupt, or a run it does not hold: the
    message names the file and what is wrong with it."""


class ProcessKilled(AccelmlError):
    """A process a case started (a rank, a launcher) was ended by ``signum`` from outside:
    the case is recorded as ``killed`` with the signal, and ``--retry-failed`` runs it again,
    as after a lost worker."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


class TimeLimitExceeded(AccelmlError):
    """A process a case started (a launcher and its ranks) ran past the case's time limit and
    was killed: the case is recorded as ``timeout``, as when the runner kills the case
    process itself at that limit (whichever of the two clocks ends first)."""


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal (Ctrl-C's SIGINT, or SIGTERM / SIGHUP from ``kill``, a batch
    system or a closed terminal): raised in the main thread so that clean-up runs as for
    Ctrl-C. ``signum`` is the signal; ``exit_code`` the shell's 128 + signal.

    >>> import signal, os
    >>> try:
    ...     with interrupt_on(signal.SIGTERM):
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ... except Interrupted as stop:
    ...     stop.signum, stop.exit_code
    (15, 143)
    """

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def interrupt_on(*signals: int) -> Iterator[None]:
    """Within the block, each of ``signals`` raises :class:`Interrupted` in the main thread
    (a signal whose handler someone else already set is left to it; nothing is done outside
    the main thread, where Python cannot set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    for number in signals:
        if signal.getsignal(number) in (signal.SIG_DFL, signal.default_int_handler):
            previous[number] = signal.signal(number, interrupt)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
