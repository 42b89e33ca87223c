"""Tables that fit a terminal: columns with priorities, compact forms and abbreviations.

A table is a list of :class:`Column` records and the rows they read; :func:`fit` lays it out
for a width (``None``: its natural width, for output that is not a terminal). When the
natural table is too wide, :func:`fit` applies, in rank order, what each column allows
until it fits: a compact form of a column (``1.61ms`` for ``1.61ms (1.58-1.63) n=2``),
abbreviating an identifying column's values (with a legend: ``gb_cl…`` is never ambiguous,
and ``sklearn`` and ``sklearnex`` never print alike), dropping a column of low priority
(named in the legend), and last narrowing a free-text column that wraps. Columns that must
never disappear (what a row is, its speed-up, its status) have no drop rank.

Adding a column is adding a record to a list (:func:`accelml.report.table.table_columns`):
nothing here knows what the columns are.

>>> rows = [("gradient_boosting_classifier", "1.5x"), ("kmeans", "0.7x")]
>>> columns = [Column((Form("algorithm", lambda r: r[0]),), abbreviate_rank=10, min_width=6),
...            Column((Form("speedup", lambda r: r[1]),), justify="right")]
>>> fit(columns, rows, None).widths
(28, 7)
>>> narrow = fit(columns, rows, 24)
>>> narrow.cells, narrow.legend
((('gradient_boost…', '1.5x'), ('kmeans', '0.7x')), ('algorithm: gradient_boost… = gradient_boosting_classifier',))
"""

from __future__ import annotations

import html
import io
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from rich.table import Table

RowT = TypeVar("RowT")

GAP = 2
"""Characters between two columns (:func:`rich_table` draws them so)."""
ELLIPSIS = "…"


@dataclass(frozen=True)
class Form(Generic[RowT]):
    """One way to show a column: its heading and the text of a row's cell."""

    heading: str
    cell: Callable[[RowT], str]


@dataclass(frozen=True)
class Column(Generic[RowT]):
    """A column of a fitted table.

    ``forms``: the widest first; the others are compact forms, used from ``compact_rank``
    on (one rank step each). ``applies(rows)``: whether the table has the column at all.
    ``constant_rank``: from when a column whose cells are all the same is lifted into the
    legend (``device: cpu (every row)``; None: never). ``drop_rank``: when the column is
    left out (None: never).
    ``abbreviate_rank``: from when its values are abbreviated (no shorter than
    ``min_width``), with a legend line per abbreviated value (None: never). ``wrap``: a
    free-text column whose cells wrap instead, narrowed at its ``abbreviate_rank`` and, if
    the table is still too wide, last (down to ``last_width``, default ``min_width``).
    Lower ranks are applied first.
    """

    forms: tuple[Form[RowT], ...]
    justify: str = "left"
    compact_rank: int | None = None
    drop_rank: int | None = None
    abbreviate_rank: int | None = None
    min_width: int = 3
    wrap: bool = False
    last_width: int | None = None
    applies: Callable[[Sequence[RowT]], bool] = lambda rows: True
    constant_rank: int | None = None

    @property
    def name(self) -> str:
        return self.forms[0].heading


@dataclass(frozen=True)
class Layout:
    """A table laid out for a width: headings, cell texts, column widths, and the legend
    (abbreviations and left-out columns) that goes under it."""

    headings: tuple[str, ...]
    justify: tuple[str, ...]
    wrap: tuple[bool, ...]
    widths: tuple[int, ...]
    cells: tuple[tuple[str, ...], ...]
    legend: tuple[str, ...] = ()

    @property
    def width(self) -> int:
        return sum(self.widths) + GAP * max(0, len(self.widths) - 1)


def _words(value: str) -> list[str]:
    return [word for word in re.split(r"[_\-\s./]+", value) if word]


def _candidates(value: str, width: int) -> list[str]:
    """Shorter forms of ``value`` that fit ``width``, the most readable first: its head, its
    words cut alike, head…tail (which keeps a distinguishing end), its initials.

    >>> _candidates("sklearnex", 6)
    ['sklea…', 'skl…ex', 'skle…x', 'sk…nex', 's…rnex']
    >>> _candidates("gradient_boosting_classifier", 12)[:3]
    ['gradient_bo…', 'gra_boo_cla', 'gradient_…er']
    """
    if len(value) <= width:
        return [value]
    found = [value[: width - 1] + ELLIPSIS] if width >= 2 else []
    words = _words(value)
    if len(words) > 1:
        for keep in range(max(len(word) for word in words), 0, -1):
            text = "_".join(word[:keep] for word in words)
            if len(text) <= width:
                found.append(text)
                break
    for tail in (2, 1, *range(3, width)):
        if 1 <= width - 1 - tail and tail < len(value):
            found.append(value[: width - 1 - tail] + ELLIPSIS + value[-tail:])
    if len(words) > 1 and len(words) <= width:
        found.append("".join(word[0] for word in words))
    return list(dict.fromkeys(found)) or [value[:width]]


def abbreviations(values: Sequence[str], width: int) -> dict[str, str]:
    """value -> its text at most ``width`` wide, distinct for distinct values (a value that
    fits stays as it is; a shorter form never equals another value's text).

    >>> abbreviations(["sklearn", "sklearnex", "xgboost"], 6)
    {'sklearn': 'skl…rn', 'sklearnex': 'skl…ex', 'xgboost': 'xgboo…'}
    """
    distinct = list(dict.fromkeys(values))
    options = {value: _candidates(value, width) for value in distinct}
    level = dict.fromkeys(distinct, 0)
    for _ in range(width * 4 + 4):
        chosen = {value: options[value][min(level[value], len(options[value]) - 1)]
                  for value in distinct}
        groups: dict[str, list[str]] = {}
        for value, text in chosen.items():
            groups.setdefault(text, []).append(value)
            head = text.removesuffix(ELLIPSIS)
            if head != text and any(other != value and other.startswith(head)
                                    for other in distinct):
                groups.setdefault(text, []).append(value)   # a bare head would read as both
        clashes = [group for group in groups.values() if len(group) > 1]
        if not clashes:
            return chosen
        moved = False
        for group in clashes:
            for value in dict.fromkeys(group):
                if chosen[value] == value:
                    continue  # a value shown whole keeps its text; the others move on
                if level[value] + 1 < len(options[value]):
                    level[value] += 1
                    moved = True
        if not moved:
            break
    # Nothing distinct fits: number the clashing values (still explained by the legend).
    counts: dict[str, int] = {}
    result = {}
    for value in distinct:
        text = options[value][min(level[value], len(options[value]) - 1)]
        counts[text] = counts.get(text, 0) + 1
        suffix = str(counts[text]) if counts[text] > 1 else ""
        result[value] = (text[: max(1, width - len(suffix))] + suffix) if suffix else text
    return result


@dataclass
class _State(Generic[RowT]):
    column: Column[RowT]
    form: int = 0
    dropped: bool = False
    lifted: bool = False
    limit: int | None = None      # abbreviation width
    wrap_width: int | None = None
    heading_limit: int | None = None

    def texts(self, rows: Sequence[RowT]) -> list[str]:
        cell = self.column.forms[self.form].cell
        return [cell(row) for row in rows]

    def heading(self) -> str:
        return self.column.forms[self.form].heading

    def natural(self, rows: Sequence[RowT]) -> int:
        texts = self.texts(rows)
        widest = max((len(text) for text in texts), default=0)
        if self.limit is not None:
            widest = min(widest, self.limit)
        if self.wrap_width is not None:
            widest = min(widest, self.wrap_width)
        heading = len(self.heading())
        if self.column.wrap or self.limit is not None:
            heading = min(heading, max(widest, self.column.min_width))
        if self.heading_limit is not None:
            heading = min(heading, self.heading_limit)
        return max(widest, heading)

    def cells_width(self, rows: Sequence[RowT]) -> int:
        """The widest cell as it is shown now (heading aside)."""
        saved = self.heading_limit
        self.heading_limit = 0
        try:
            return self.natural(rows)
        finally:
            self.heading_limit = saved


def _actions(columns: Sequence[Column[RowT]]) -> list[tuple[int, int, str, int]]:
    """(rank, order, what, column index) in the order they are tried."""
    found: list[tuple[int, int, str, int]] = []
    for index, column in enumerate(columns):
        if column.compact_rank is not None:
            found += [(column.compact_rank + step, 0, "compact", index)
                      for step in range(len(column.forms) - 1)]
        if column.abbreviate_rank is not None:
            found.append((column.abbreviate_rank, 1, "abbreviate", index))
        if column.drop_rank is not None:
            found.append((column.drop_rank, 2, "drop", index))
        if column.constant_rank is not None:
            found.append((column.constant_rank, 3, "lift", index))
    return sorted(found)


def fit(columns: Sequence[Column[RowT]], rows: Sequence[RowT], width: int | None) -> Layout:
    """Lay the table out at most ``width`` wide (None: as wide as it naturally is)."""
    states = [_State(column) for column in columns if column.applies(rows)]
    columns = [state.column for state in states]

    def total() -> int:
        shown = [state.natural(rows) for state in states if not state.dropped]
        return sum(shown) + GAP * max(0, len(shown) - 1)

    if width is not None:
        for _, _, what, index in _actions(columns):
            excess = total() - width
            if excess <= 0:
                break
            state = states[index]
            if what == "compact":
                state.form = min(state.form + 1, len(state.column.forms) - 1)
            elif what == "lift":
                state.lifted = state.dropped = len(set(state.texts(rows))) == 1 and bool(rows)
            elif what == "drop":
                state.dropped = True
            elif state.column.wrap:
                state.wrap_width = max(state.column.min_width, state.natural(rows) - excess)
            else:
                current = state.natural(rows)
                state.limit = max(state.column.min_width, current - excess)
        for state in reversed(states):   # give back what a later drop made room for
            slack = width - total()
            if state.limit is not None and slack > 0:
                state.limit += slack
        for state in states:   # free text wraps in what is left
            excess = total() - width
            if excess > 0 and state.column.wrap and not state.dropped:
                floor = state.column.last_width or state.column.min_width
                state.wrap_width = max(floor, state.natural(rows) - excess)
        # last resort: headings wider than their cells are cut ("work…")
        for state in sorted(states, key=lambda s: s.cells_width(rows) - s.natural(rows)):
            excess = total() - width
            if excess > 0 and not state.dropped:
                cells = max(state.cells_width(rows), 3)
                state.heading_limit = max(cells, len(state.heading()) - excess)
    return _layout(states, rows)


def _layout(states: Sequence[_State[RowT]], rows: Sequence[RowT]) -> Layout:
    kept = [state for state in states if not state.dropped]
    columns_cells: list[list[str]] = []
    legend: list[str] = []
    for state in kept:
        texts = state.texts(rows)
        if state.limit is not None:
            short = abbreviations(texts, state.limit)
            changed = [(short[text], text) for text in dict.fromkeys(texts) if short[text] != text]
            if changed:
                legend.append(f"{state.heading()}: " + "; ".join(
                    f"{abbreviation} = {text}" for abbreviation, text in changed))
            texts = [short[text] for text in texts]
        columns_cells.append(texts)
    lifted = [f"{state.column.name}: {state.texts(rows)[0]}" for state in states if state.lifted]
    if lifted:
        legend.insert(0, ", ".join(lifted) + " (every row)")
    dropped = [state.column.name for state in states if state.dropped and not state.lifted]
    if dropped:
        legend.append(f"left out at this width: {', '.join(dropped)} (a wider terminal or "
                      "--json shows them)")
    widths = []
    headings = []
    for state in kept:
        width = state.natural(rows)
        heading = state.heading()
        if len(heading) > width:
            heading = heading[: width - 1] + ELLIPSIS
        headings.append(heading)
        widths.append(width)
    cells = tuple(tuple(column[row] for column in columns_cells) for row in range(len(rows)))
    return Layout(tuple(headings), tuple(state.column.justify for state in kept),
                  tuple(state.column.wrap for state in kept), tuple(widths), cells,
                  tuple(legend))


def rich_table(layout: Layout, title: str = "", row_styles: Sequence[str | None] = ()) -> Table:
    """The layout as a rich ``Table`` of exactly its widths (colour on a terminal)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title or None, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 1, 0, 0), header_style="bold", title_justify="left",
                  collapse_padding=False)
    for heading, justify, wrap, width in zip(layout.headings, layout.justify, layout.wrap,
                                             layout.widths, strict=True):
        table.add_column(escape(heading), justify="right" if justify == "right" else "left",
                         width=width, no_wrap=not wrap, overflow="fold" if wrap else "ellipsis")
    styles = list(row_styles) + [None] * (len(layout.cells) - len(row_styles))
    for cells, style in zip(layout.cells, styles, strict=True):
        table.add_row(*(escape(cell) for cell in cells), style=style)
    return table


def render(layout: Layout, title: str = "") -> str:
    """The layout as plain text (no colour); its legend is the caller's to print.

    >>> column = Column((Form("name", str),))
    >>> print(render(fit([column], ["a", "bb"], None)))
    name
    ────
    a
    bb
    """
    from rich.console import Console

    console = Console(width=max(layout.width, len(title), 20), record=True, color_system=None,
                      file=io.StringIO(), soft_wrap=False)
    console.print(rich_table(layout, title))
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def html_table(layout: Layout, title: str = "", notes: Sequence[str] = ()) -> str:
    """The layout as an HTML table (a notebook shows it), ``notes`` as lines under it.

    >>> page = html_table(fit([Column((Form("name", str),))], ["a<b"], None), notes=["n"])
    >>> page.startswith("<table><thead><tr><th"), "a&lt;b</td>" in page
    (True, True)
    >>> page.endswith("</table><small>n</small>")
    True
    """
    caption = f"<caption>{html.escape(title)}</caption>" if title else ""
    head = "".join(f'<th style="text-align:{justify}">{html.escape(heading)}</th>'
                   for heading, justify in zip(layout.headings, layout.justify, strict=True))
    body = "".join(
        "<tr>" + "".join(f'<td style="text-align:{justify}">{html.escape(cell)}</td>'
                         for cell, justify in zip(cells, layout.justify, strict=True)) + "</tr>"
        for cells in layout.cells)
    table = f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    lines = "".join(f"<br>{html.escape(line)}" for line in notes)
    return table + (f"<small>{lines[4:]}</small>" if lines else "")


def wrap_lines(lines: Sequence[str], width: int | None) -> list[str]:
    """Text lines wrapped at word boundaries to ``width`` (None: as they are); a wrapped line
    goes on indented like its first line, plus two.

    >>> wrap_lines(["  - a long reason here"], 12)
    ['  - a long', '    reason', '    here']
    """
    if width is None:
        return list(lines)
    wrapped: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()))
        wrapped += textwrap.wrap(line, width, subsequent_indent=indent + "  ",
                                 break_on_hyphens=False) or [""]
    return wrapped
