"""Scratch directories and process trees that must not outlive the process that made them.

:func:`make_scratch` creates a directory and writes into it who owns it (this host, the
owning process id and its start time). A process killed with SIGKILL runs no clean-up, so
:func:`sweep` (called when the next run starts) removes the directories under a parent whose
owner on this host is gone; a directory without an owner file, or owned on another host, is
left alone.

:func:`kill_tree` ends a process and every process it started, including those in other
sessions or process groups (``horovodrun`` and the ranks it starts through its own
middlemen), which ``os.killpg`` alone does not reach.

>>> import tempfile, os
>>> parent = tempfile.mkdtemp()
>>> mine = make_scratch("accelml-case-", parent)
>>> sweep(parent, ("accelml-case-",)), os.path.isdir(mine), owner_alive(mine)
([], True, True)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

OWNER_FILE = ".accelml-owner"
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True) if os.name == "posix" else None


def make_scratch(prefix: str, parent: str | os.PathLike[str] | None = None) -> str:
    """A new directory ``parent/prefixXXXX`` (``parent``: the system temporary directory)
    owned by this process (see :func:`owner_alive`)."""
    directory = tempfile.mkdtemp(prefix=prefix, dir=parent)
    claim(directory)
    return directory


def claim(directory: str | os.PathLike[str]) -> None:
    """Record this process as the owner of ``directory``."""
    me = psutil.Process()
    owner = {"host": socket.gethostname(), "pid": me.pid, "started": me.create_time()}
    Path(directory, OWNER_FILE).write_text(json.dumps(owner))


def owner_alive(directory: str | os.PathLike[str]) -> bool | None:
    """Whether the process that owns ``directory`` still runs; None when that cannot be told
    (no owner file, an unreadable one, or an owner on another host)."""
    try:
        owner = json.loads(Path(directory, OWNER_FILE).read_text())
        host, pid, started = str(owner["host"]), int(owner["pid"]), float(owner["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host != socket.gethostname():
        return None
    try:
        return abs(psutil.Process(pid).create_time() - started) < 1.0
    except psutil.Error:
        return False


def sweep(parent: str | os.PathLike[str] | None, prefixes: Iterable[str]) -> list[str]:
    """Remove the directories ``parent/PREFIX*`` whose owner on this host is gone; return them."""
    base = Path(parent if parent is not None else tempfile.gettempdir())
    prefixes = tuple(prefixes)
    removed = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.name.startswith(prefixes) and entry.is_dir() and owner_alive(entry) is False:
            shutil.rmtree(entry, ignore_errors=True)
            if not entry.exists():
                removed.append(str(entry))
    return removed


def descendants(pid: int) -> list[psutil.Process]:
    """Every process ``pid`` started, directly or not, that still runs."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def kill_tree(pid: int, *, include_self: bool = True) -> None:
    """SIGKILL ``pid`` (unless ``include_self`` is false), its process group where it leads
    one, and every process it started: the tree is read first, then each member is killed,
    so none escapes by being re-parented meanwhile."""
    members = descendants(pid)
    groups = {pid} if include_self else set()
    for member in members:
        with contextlib.suppress(psutil.Error, ProcessLookupError):   # ended since it was read
            if os.getpgid(member.pid) == member.pid:
                groups.add(member.pid)
    for group in groups:
        if group == os.getpgrp():
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(group) == group:
                os.killpg(group, signal.SIGKILL)
    for member in members:
        with contextlib.suppress(psutil.Error):
            member.kill()
    if include_self:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def die_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the kernel SIGKILLs the child when this
    process dies (Linux ``PR_SET_PDEATHSIG``, kept across exec), so a launcher never
    outlives a case process killed with SIGKILL."""
    parent = os.getpid()

    def arm() -> None:
        if _LIBC is not None and hasattr(_LIBC, "prctl"):
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)

    return arm
