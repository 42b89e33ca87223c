"""Where commands print: consoles that fit a terminal and never hard-wrap anything else.

On a terminal, tables are fitted to its width (``COLUMNS`` or the window size) and long
lines wrap at word boundaries. Anywhere else (a pipe, a file, a SLURM log) nothing is
wrapped: a line is as long as it is, so ``grep`` finds a path whole, and a table is printed
at its natural width.

>>> import io
>>> console = stdout_console(io.StringIO())
>>> table_width(console) is None, console.soft_wrap
(True, True)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO, TypeVar

from rich.console import Console

from accelml.errors import AccelmlError
from accelml.report.layout import Layout, render, rich_table

T = TypeVar("T")

UNBOUNDED = 100_000
"""The width of a console that is not a terminal: wider than any line printed."""


def _console(file: TextIO) -> Console:
    if Console(file=file).is_terminal:
        return Console(file=file, highlight=False)
    return Console(file=file, highlight=False, soft_wrap=True, width=UNBOUNDED)


def stdout_console(file: TextIO | None = None) -> Console:
    """The console for a command's output (``file``: standard output by default)."""
    return _console(file if file is not None else sys.stdout)


def stderr_console() -> Console:
    """The console for progress and messages, on standard error."""
    return _console(sys.stderr)


def table_width(console: Console) -> int | None:
    """The width to fit tables to: the terminal's, or None (natural width) elsewhere."""
    return console.width if console.is_terminal else None


def print_table(console: Console, layout: Layout, title: str = "",
                row_styles: Sequence[str | None] = ()) -> None:
    """A fitted table: in colour on a terminal, as plain text (no trailing blanks) elsewhere."""
    if console.is_terminal:
        console.print(rich_table(layout, title, row_styles))
    else:
        console.print(render(layout, title), markup=False)


def ensure_writable(path: str, what: str, directory: bool = False) -> None:
    """Refuse, before anything is written, an output the user cannot get: a file path that
    is a directory (or a directory path that is a file), or one under no writable directory."""
    target = Path(path)
    if target.is_dir() != directory and target.exists():
        kind = "a directory" if target.is_dir() else "a file"
        raise AccelmlError(f"{what} {path}: is {kind}; give a {'directory' if directory else 'file'} path")
    ancestor = target if directory and target.is_dir() else target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise AccelmlError(f"{what} {path}: cannot write there ({ancestor} is not a writable directory)")


def write_or_fail(what: str, path: str | Path, write: Callable[[], T]) -> T:
    """``write()``, with a failure to write (a full disk, a lost mount) as one line."""
    try:
        return write()
    except OSError as error:
        raise AccelmlError(f"{what} {path}: cannot write: {error.strerror or error}") from None
