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

import sys
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console

from accelml.report.layout import Layout, render, rich_table

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
