"""Where a case hangs: the Python stacks of the case process and of its dask workers.

Before the runner kills a case at its time limit it sends :data:`STACKS_SIGNAL` to the case
process, whose ``faulthandler`` writes every thread's stack to the case's stderr, and to each
dask worker the case started: a worker loads this module as a dask preload
(:data:`PRELOAD`), which, where :data:`STACKS_DIR_VARIABLE` names a folder, registers the
same signal to write its stacks into ``worker-<host>-<pid>.txt`` there; the file's name
tells the runner which processes of its host to ask. The failure's reason then ends with the
innermost frames of the case's current thread and of each worker's busiest thread:
``...; it was in distributed/utils.py:441 wait < ...; its dask workers were in
xgboost/core.py:2255 update < ... | ...``.

>>> dump = "\\n".join([
...     'Thread 0x1 (most recent call first):',
...     '  File "/site/xgboost/core.py", line 7 in update',
...     '  File "/usr/lib/python3/concurrent/futures/thread.py", line 59 in run', '',
...     'Current thread 0x2 (most recent call first):',
...     '  File "/usr/lib/python3/selectors.py", line 468 in select'])
>>> hung_at(dump)
'lib/python3/selectors.py:468 select'
>>> busiest_thread(dump)
'site/xgboost/core.py:7 update < concurrent/futures/thread.py:59 run'
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import socket
import sysconfig
from pathlib import Path
from typing import IO, Any

STACKS_SIGNAL = signal.SIGUSR1
"""Asks a case process (or one of its dask workers) for every thread's Python stack."""
STACKS_DIR_VARIABLE = "ACCELML_STACKS_DIR"
"""The folder where a case's dask workers write their stacks when asked."""
PRELOAD = "accelml.runner.stacks"
"""Dask preload that makes a worker answer :data:`STACKS_SIGNAL` (``dask_setup`` below)."""
HUNG_FRAMES = 3
IDLE_FRAMES = ("threading.py", "selectors.py", "queue.py", "concurrent/futures/thread.py",
               "asyncio/base_events.py", "multiprocessing/connection.py")
"""Files whose frame, innermost in a thread, means the thread is waiting, not working."""

_FRAME = re.compile(r'File "(.+)", line (\d+) in (\S+)')
_STDLIB = sysconfig.get_paths()["stdlib"]
_answering: list[IO[str]] = []


def _threads(dump: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """``(header, frames)`` of each thread of every ``faulthandler`` dump in ``dump``, in order."""
    blocks = dump.split("(most recent call first):")
    headers = [block.rstrip().splitlines()[-1] if block.strip() else "" for block in blocks[:-1]]
    return [(header, _FRAME.findall(body)) for header, body in zip(headers, blocks[1:], strict=True)]


def _in_standard_library(path: str) -> bool:
    return path.startswith(_STDLIB) and "site-packages" not in path


def _frames_text(frames: list[tuple[str, str, str]]) -> str:
    """:data:`HUNG_FRAMES` frames, innermost first, from the innermost one outside Python's
    standard library where there is one: ``inspect.py`` or ``threading.py`` frames say less
    than the library call that entered them. Where those frames are all in one package, the
    innermost frame of another package that led there follows (`` < ... < ``): a forest's
    fit caught inside a helper library's type checks names the scikit-learn call too.

    >>> _frames_text([("/s/site-packages/narwhals/a.py", "9", "check"),
    ...               ("/s/site-packages/narwhals/b.py", "3", "is_series"),
    ...               ("/s/site-packages/sklearn/utils/validation.py", "7", "check_array")])
    'narwhals/a.py:9 check < narwhals/b.py:3 is_series < sklearn/utils/validation.py:7 check_array'
    >>> _frames_text([("/s/site-packages/narwhals/a.py", "9", "check")] * 3
    ...              + [("/s/site-packages/sklearn/ensemble/_forest.py", "5", "fit")])
    'narwhals/a.py:9 check < narwhals/a.py:9 check < narwhals/a.py:9 check < ... < sklearn/ensemble/_forest.py:5 fit'
    """
    outside = next((index for index, (path, _, _) in enumerate(frames)
                    if not _in_standard_library(path)), 0)
    shown = frames[outside:outside + HUNG_FRAMES]
    text = " < ".join(_frame_text(frame) for frame in shown)
    packages = {_package(path) for path, _, _ in shown}
    if len(packages) == 1:
        caller = next((frame for frame in frames[outside + HUNG_FRAMES:]
                       if _package(frame[0]) not in packages
                       and not _in_standard_library(frame[0])), None)
        if caller is not None:
            text += f" < ... < {_frame_text(caller)}"
    return text


def _frame_text(frame: tuple[str, str, str]) -> str:
    path, number, function = frame
    return f"{_short(path)}:{number} {function}"


def _package(path: str) -> str:
    """The top-level package (or folder) :func:`_short` names ``path`` from."""
    return _short(path).split("/", 1)[0]


def _short(path: str) -> str:
    """``path`` from its package on (after ``site-packages/``), else its last three parts.

    >>> _short("/venv/lib/site-packages/sklearn/externals/array_api_compat/_internal.py")
    'sklearn/externals/array_api_compat/_internal.py'
    >>> _short("/repo/accelml/runner/run_case.py")
    'accelml/runner/run_case.py'
    """
    if "site-packages/" in path:
        return path.rsplit("site-packages/", 1)[1]
    return "/".join(path.split("/")[-3:])


def hung_at(dump: str) -> str:
    """The innermost frames (:func:`_frames_text`) of the current thread of the last dump
    in ``dump``, innermost first, as ``file:line function`` joined by `` < ``; '' if there
    is no dump."""
    threads = _threads(dump)
    if not threads:
        return ""
    current = [frames for header, frames in threads if header.startswith("Current thread")]
    return _frames_text(current[-1] if current else threads[-1][1])


def busiest_thread(dump: str) -> str:
    """The innermost frames of the first thread in ``dump`` that is not waiting (its
    innermost frame outside :data:`IDLE_FRAMES`), else of the current thread."""
    for _, frames in _threads(dump):
        if frames and not any(idle in frames[0][0] for idle in IDLE_FRAMES):
            return _frames_text(frames)
    return hung_at(dump)


def worker_stack_files(stacks_dir: str | Path) -> list[Path]:
    """The stack files of the workers that answer :data:`STACKS_SIGNAL`, oldest first."""
    folder = Path(stacks_dir)
    return sorted(folder.glob("worker-*.txt"), key=lambda path: path.stat().st_mtime) \
        if folder.is_dir() else []


def ask_workers(stacks_dir: str | Path) -> int:
    """Send :data:`STACKS_SIGNAL` to every worker of this host with a stack file in
    ``stacks_dir`` that is still the process that wrote it (same stacks folder in its
    environment: a pid reused by another process is left alone); how many were asked."""
    import psutil

    asked, here = 0, socket.gethostname()
    for path in worker_stack_files(stacks_dir):
        host, _, pid = path.stem.removeprefix("worker-").rpartition("-")
        if host != here or not pid.isdigit():
            continue
        try:
            if psutil.Process(int(pid)).environ().get(STACKS_DIR_VARIABLE) != str(stacks_dir):
                continue
            os.kill(int(pid), STACKS_SIGNAL)
            asked += 1
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return asked


def workers_hung_at(stacks_dir: str | Path) -> str:
    """Each answering worker's busiest thread (:func:`busiest_thread`), joined by `` | ``."""
    places = [busiest_thread(path.read_text(errors="replace"))
              for path in worker_stack_files(stacks_dir)]
    return " | ".join(place for place in places if place)


def answer_stacks(stacks_dir: str) -> None:
    """Make this process write every thread's stack into ``stacks_dir/worker-<host>-<pid>.txt``
    when it receives :data:`STACKS_SIGNAL`. The folder is made inside the case's scratch
    folder, never the scratch folder itself: one that was swept (its runner is gone) stays
    gone, and the worker answers nothing."""
    try:
        os.mkdir(stacks_dir)
    except FileExistsError:
        pass
    except FileNotFoundError:
        return
    name = f"worker-{socket.gethostname()}-{os.getpid()}.txt"
    handle = open(os.path.join(stacks_dir, name), "w")  # noqa: SIM115
    _answering.append(handle)       # open for the process's life: faulthandler writes to its fd
    faulthandler.register(STACKS_SIGNAL, file=handle, all_threads=True)


def dask_setup(worker: Any) -> None:
    """Dask preload hook: a worker of a case answers :data:`STACKS_SIGNAL` (see module)."""
    stacks_dir = os.environ.get(STACKS_DIR_VARIABLE)
    if stacks_dir:
        answer_stacks(stacks_dir)
