"""``python -m accelml report RUN_ID``: table, speedups, failures and environment of a stored run.

RUN_ID is a run id, a unique prefix of one, or ``latest``. Everything comes from the results
store; nothing is run. ``--html`` writes one self-contained page (inline SVG figures, no
script, nothing fetched), ``--plots DIR`` each figure as PNG (or SVG), ``--csv`` / ``--json``
the table, and ``--against OTHER_RUN`` puts a second run beside this one (the time ratio of
each case, and the environment fields that differ). ``--history SPEC_NAME`` shows every run of
one spec over time instead (:mod:`accelml.report.history`): each case's speed-up and
agreement per run, as text or, with ``--html``, as a page with a chart.

Exit code 0 when the report was written, 2 when a run cannot be found or its store read
(a damaged store is one line naming the file and what is wrong).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from accelml.cli.output import (
    ensure_writable,
    stderr_console,
    stdout_console,
    table_width,
    write_or_fail,
)
from accelml.report.history import spec_history, write_history_html
from accelml.report.html import write_html
from accelml.report.render import load_report
from accelml.report.runs import open_store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID",
                        help="run id, a unique prefix of one, or 'latest' (default)")
    parser.add_argument("--results-dir", default=None, metavar="DIR",
                        help="results store directory (default: ./accelml-results)")
    parser.add_argument("--reference", default=None, metavar="BACKEND",
                        help="backend speedups are measured against (default: the run's)")
    parser.add_argument("--against", default=None, metavar="OTHER_RUN",
                        help="a second run to compare with, case by case (id, prefix or 'latest')")
    parser.add_argument("--against-dir", default=None, metavar="DIR",
                        help="results store of OTHER_RUN when it is not in --results-dir "
                             "(e.g. copied from another machine)")
    parser.add_argument("--html", default=None, metavar="FILE",
                        help="write a self-contained HTML report (no network needed to open it)")
    parser.add_argument("--plots", default=None, metavar="DIR",
                        help="write each figure as a file into DIR")
    parser.add_argument("--plot-format", default="png", choices=("png", "svg"),
                        help="file format of --plots (default: png)")
    parser.add_argument("--csv", default=None, metavar="FILE", help="write the table as CSV")
    parser.add_argument("--json", default=None, metavar="FILE",
                        help="write the table, speedups, failures and --against as JSON "
                             "('-' for standard output)")
    parser.add_argument("--quiet", action="store_true",
                        help="print only the paths written, not the report")
    add_history_arguments(parser)


def add_history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", default=None, metavar="SPEC_NAME",
                        help="every run of this spec over time: speed-up and agreement per case "
                             "(text, or a page with --html)")


def _history(args: argparse.Namespace) -> int:
    history = spec_history(open_store(args.results_dir), args.history, args.reference)
    if args.html:
        path = write_history_html(history, args.html)
        stderr_console().print(f"accelml report: wrote history {path}", markup=False)
    if not args.quiet:
        print(history.text())
    return 0


def run(args: argparse.Namespace) -> int:
    outputs = [(args.html, "--html", False), (args.plots, "--plots", True), (args.csv, "--csv", False),
               (None if args.json == "-" else args.json, "--json", False)]
    for path, what, directory in outputs:
        if path:
            ensure_writable(path, what, directory)
    if args.history is not None:
        return _history(args)
    report = load_report(args.run_id, args.results_dir, reference=args.reference,
                         against=args.against, against_dir=args.against_dir)
    written: list[tuple[str, Path]] = []
    if args.html:
        written.append(("HTML report", write_or_fail("--html", args.html,
                                              lambda: write_html(report, args.html))))
    if args.plots:
        plots = write_or_fail("--plots", args.plots, lambda: report.write_plots(args.plots, args.plot_format))
        written.extend(("plot", path) for path in plots)
    if args.csv:
        written.append(("CSV table", write_or_fail("--csv", args.csv, lambda: report.write_csv(args.csv))))
    json_to_stdout = args.json == "-"
    if args.json and not json_to_stdout:
        written.append(("JSON", write_or_fail("--json", args.json, lambda: report.write_json(args.json))))

    if json_to_stdout:
        print(json.dumps(report.to_dict(), indent=1, allow_nan=False))
    elif not args.quiet:
        out = stdout_console()
        out.print(report.text(width=table_width(out)), markup=False)
    err = stderr_console()
    for what, path in written:
        err.print(f"accelml report: wrote {what} {path}", markup=False)
    return 0
