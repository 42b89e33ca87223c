"""Answers worked out from files, kept until one of those files changes.

An answer is stored as ``KIND/KEY`` under ``$XDG_CACHE_HOME/accelml`` (default
``~/.cache/accelml``), where KEY hashes the files' paths, modes, sizes and modification
times: changing, adding or removing a file gives a new key, so a stale answer is never read.
Answers that take seconds to work out use it: an image's content digest, whether the
installed Horovod was built with Gloo.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> _ = (folder / "lib.so").write_text("v1")
>>> calls = []
>>> def work() -> str:
...     calls.append(1)
...     return "yes"
>>> key = listing_key(folder, [file_entry(folder, "lib.so")])
>>> [cached_answer("demo", key, work, str(folder)) for _ in range(2)], len(calls)
(['yes', 'yes'], 1)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

Entry = tuple[str, int, int, int]
"""A file as a key sees it: (path relative to its root, mode, size, modification time in ns)."""


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/accelml``, or ``~/.cache/accelml``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "accelml"


def file_entry(root: Path, relative: str) -> Entry:
    """The :data:`Entry` of ``root / relative`` (of the link itself, for a symbolic link)."""
    info = (root / relative).lstat()
    return (relative, info.st_mode, info.st_size, info.st_mtime_ns)


def listing_key(root: Path, listing: Sequence[Entry]) -> str:
    """The hex key of ``listing``'s files under ``root`` (its absolute path included)."""
    return hashlib.sha256(json.dumps([str(root.resolve()), list(listing)]).encode()).hexdigest()


def cached_answer(kind: str, key: str, compute: Callable[[], str | None],
                  cache_dir: str | None = None) -> str | None:
    """The answer stored under ``kind/key``, else ``compute()``'s, stored when it is not None.

    ``cache_dir`` replaces ``cache_home()/kind``. A cache that cannot be written (read-only
    home, full disk) costs only the time: the answer is computed and returned."""
    cache = Path(cache_dir).expanduser() if cache_dir else cache_home() / kind
    stored = cache / key
    if stored.is_file():
        return stored.read_text().strip()
    answer = compute()
    if answer is not None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            partial = cache / f".{key}.{os.getpid()}.partial"
            partial.write_text(answer)
            os.replace(partial, stored)
        except OSError:
            pass
    return answer
