"""``python -m accelml runs``: the runs of a results store, newest last.

One row per run: its id (what ``report``, ``export`` and ``compare --resume`` take), the
spec, when it started, its status, how many of its planned cases are stored, how many
failed and how many were skipped (unavailable on the machine that ran them: never run),
and its reference backend. ``--json`` prints the same as a list of objects.
Exit code 0; 1 when the store does not exist.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from accelml.cli.output import print_table, stdout_console, table_width
from accelml.report.layout import Column, Form, fit
from accelml.report.runs import open_store


@dataclass(frozen=True)
class RunLine:
    """One run as listed."""

    run_id: str
    spec: str
    started: str
    status: str
    stored: int
    planned: int
    failed: int
    reference: str
    deterministic: bool
    skipped: int = 0


COLUMNS: tuple[Column[RunLine], ...] = (
    Column((Form("run", lambda run: run.run_id),)),
    Column((Form("spec", lambda run: run.spec),), abbreviate_rank=30, min_width=8),
    Column((Form("started (UTC)", lambda run: run.started[:19].replace("T", " ")),
            Form("started", lambda run: run.started[:10])), compact_rank=20),
    Column((Form("status", lambda run: run.status),)),
    Column((Form("cases", lambda run: f"{run.stored}/{run.planned}"),), justify="right"),
    Column((Form("failed", lambda run: str(run.failed)),), justify="right"),
    Column((Form("skipped", lambda run: str(run.skipped)),), justify="right", drop_rank=8,
           applies=lambda runs: any(run.skipped for run in runs)),
    Column((Form("reference", lambda run: run.reference or "-"),), drop_rank=10),
    Column((Form("deterministic", lambda run: "yes" if run.deterministic else "no"),),
           drop_rank=5),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results-dir", default=None, metavar="DIR",
                        help="results store directory (default: ./accelml-results)")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")


def run(args: argparse.Namespace) -> int:
    store = open_store(args.results_dir)
    lines = []
    for record in store.list_runs():
        results = store.case_results(record.run_id)
        lines.append(RunLine(record.run_id, record.spec_name, record.created_at, record.status,
                             len(results), record.planned_cases,
                             sum(not result.ok and not result.skipped for result in results),
                             record.reference_backend or "", record.deterministic,
                             sum(result.skipped for result in results)))
    if args.json:
        print(json.dumps([line.__dict__ for line in lines], indent=1))
        return 0
    out = stdout_console()
    if not lines:
        out.print(f"no runs in {store.database} yet", markup=False)
        return 0
    layout = fit(COLUMNS, lines, table_width(out))
    print_table(out, layout, f"runs in {store.directory}",
                [None if line.failed == 0 and line.status == "finished" else "yellow"
                 for line in lines])
    for note in layout.legend:
        out.print(note, markup=False)
    return 0
