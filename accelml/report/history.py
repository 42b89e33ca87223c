"""One spec's runs over time: the speed-up and agreement of each case, run by run.

``python -m accelml report --history SPEC_NAME`` prints it; with ``--html FILE`` it is a
self-contained page (inline CSS and SVG, no script, the report's Content-Security-Policy)
with a chart of each case's speed-up over the runs and a table of speed-up and agreement
per case and run. Cases are matched across runs by their case id (the hash of what defines
them), so a case whose definition changed starts a new line.

>>> import tempfile
>>> from accelml.results.store import ResultsStore
>>> spec_history(ResultsStore(tempfile.mkdtemp()), "smoke")  # doctest: +ELLIPSIS
Traceback (most recent call last):
accelml.errors.AccelmlError: no run of spec 'smoke' in ...; specs with runs: none
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelml import __version__
from accelml.cases import case_label
from accelml.errors import AccelmlError
from accelml.report import plots
from accelml.report.html import CONTENT_SECURITY_POLICY, page_template
from accelml.report.labels import varying_params
from accelml.report.table import build_rows
from accelml.results.records import CaseResult, RunRecord
from accelml.results.store import ResultsStore

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class HistoryCell:
    """One case in one run: its speed-up against the reference (None: none), its agreement
    with the reference case, and its status."""

    speedup: float | None
    agreement: str
    status: str
    reference: bool = False


@dataclass(frozen=True)
class History:
    """Every run of one spec, oldest first, and each case's cell in each run."""

    spec_name: str
    description: str
    runs: tuple[RunRecord, ...]
    cases: tuple[tuple[str, str], ...]                   # (case id, label), first seen first
    cells: tuple[tuple[str, str, HistoryCell], ...]      # (case id, run id, cell)

    def cell(self, case_id: str, run_id: str) -> HistoryCell | None:
        for case, run, found in self.cells:
            if case == case_id and run == run_id:
                return found
        return None

    def text(self) -> str:
        """The table as plain text: a row per case, a column per run."""
        header = ["case", *(run.run_id for run in self.runs)]
        rows = [header]
        for case_id, label in self.cases:
            row = [label]
            for run in self.runs:
                cell = self.cell(case_id, run.run_id)
                row.append("–" if cell is None else _cell_text(cell))
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [f"{self.spec_name}: {len(self.runs)} run(s), speed-up | agreement per case"]
        lines += ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows]
        return "\n".join(lines)


def _cell_text(cell: HistoryCell) -> str:
    if cell.status != "ok":
        return cell.status
    if cell.reference:
        return "reference"
    speedup = plots.format_speedup(cell.speedup) or "–"
    return f"{speedup} | {cell.agreement}"


def spec_history(store: ResultsStore, spec_name: str, reference: str | None = None) -> History:
    """Every stored run of ``spec_name`` with each case's speed-up and agreement."""
    every = store.list_runs()
    runs = sorted((run for run in every if run.spec_name == spec_name), key=lambda r: (r.created_at, r.run_id))
    if not runs:
        names = sorted({run.spec_name for run in every})
        raise AccelmlError(f"no run of spec {spec_name!r} in {store.database}; specs with runs: "
                           + (", ".join(names) or "none"))
    results: dict[str, CaseResult] = {}
    cells = []
    for run in runs:
        stored = store.case_results(run.run_id)
        for result in stored:
            results.setdefault(result.case_id, result)
        for row in build_rows(store, stored, reference or run.reference_backend):
            cells.append((row.case_id, run.run_id, HistoryCell(
                row.speedup, row.agreement.text if row.agreement else "–", row.status,
                row.is_reference)))
    shown = varying_params(results.values())
    cases = tuple((case_id, case_label(result, result.dataset, params=shown)) for case_id, result in results.items())
    return History(spec_name, runs[-1].description, tuple(runs), cases, tuple(cells))


def history_figure(history: History) -> Figure:
    """Each case's speed-up over the runs (oldest left), one line per case."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    with rc_context(plots.STYLE):
        figure = Figure(figsize=(11, 4.2), layout="constrained")
        ax = figure.subplots()
        x = list(range(len(history.runs)))
        drawn = 0
        for index, (case_id, label) in enumerate(history.cases):
            points = [(position, cell.speedup) for position, run in zip(x, history.runs, strict=True)
                      if (cell := history.cell(case_id, run.run_id)) is not None and cell.speedup is not None
                      and not cell.reference]
            if not points:
                continue
            drawn += 1
            ax.plot([p for p, _ in points], [s for _, s in points], marker="o", color=plots.colour_for(index),
                    label=plots.plain(label, plots.LEGEND_LIMIT))
        ax.axhline(1.0, color="#555555", linestyle="--", linewidth=1, label="as fast as the reference")
        ax.set_xticks(x, [plots.plain(f"{run.created_at[:16] or run.run_id}", 20) for run in history.runs],
                      rotation=20, ha="right")
        ax.set_ylabel("speed-up against the reference (×)")
        ax.set_title(plots.plain(f"{history.spec_name}: speed-up per case over {len(history.runs)} run(s)", 90))
        if drawn:
            ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return figure


def render_history_html(history: History) -> str:
    """The history page as one string."""
    from markupsafe import Markup

    template, css = page_template("history.html")
    rows: list[dict[str, Any]] = []
    for case_id, label in history.cases:
        cells = []
        for run in history.runs:
            cell = history.cell(case_id, run.run_id)
            cells.append(None if cell is None else {
                "speedup": "reference" if cell.reference else (plots.format_speedup(cell.speedup) or "–"),
                "agreement": "" if cell.reference else cell.agreement, "ok": cell.status == "ok",
                "status": cell.status,
                "faster": cell.speedup is not None and cell.speedup >= 1 and not cell.reference})
        rows.append({"case_id": case_id, "label": label, "cells": cells})
    return template.render(
        css=Markup(css), csp=CONTENT_SECURITY_POLICY, version=__version__,
        title=f"accelml history: {history.spec_name}",
        generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), history=history, rows=rows,
        figure=Markup(plots.figure_svg(history_figure(history))))


def write_history_html(history: History, path: str | os.PathLike[str]) -> Path:
    """Write the history page to ``path`` (its folder is made when missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_history_html(history), encoding="utf-8")
    return path
