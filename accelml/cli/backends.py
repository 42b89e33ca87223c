"""``python -m accelml backends``: what this machine can run, and why not the rest.

One row per backend and device (from the backend records, third parties' included), then
Keras and its engines, each deep-learning strategy, the tools, and any third-party plug-in
that failed to load with the reason. By default nothing is imported: libraries are found
through package metadata and GPUs through NVML (:func:`accelml.machine.list_installed`), so
it answers at once and prints no TensorFlow log lines; ``--import`` imports each library
and asks each engine for its devices (:func:`accelml.machine.probe_all`, seconds). The
table fits the terminal: the description goes first, then the version; the reason of an
unavailable row wraps.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from accelml.cli.output import print_table, stdout_console, table_width
from accelml.machine import LISTED_NOTE, list_installed, probe_all
from accelml.probe import Availability
from accelml.report.layout import Column, Form, fit

COLUMNS: tuple[Column[Availability], ...] = (
    Column((Form("backend", lambda row: row.name),), abbreviate_rank=50, min_width=9),
    Column((Form("device", lambda row: row.device),)),
    Column((Form("status", lambda row: "available" if row.available else "unavailable"),
            Form("ok", lambda row: "yes" if row.available else "NO")), compact_rank=30),
    Column((Form("version", lambda row: row.version or "-"),), wrap=True, min_width=10,
           abbreviate_rank=20, drop_rank=40),
    Column((Form("detail", lambda row: row.detail or "-"),), wrap=True, min_width=24,
           abbreviate_rank=5, last_width=16),
    Column((Form("summary", lambda row: row.summary or "-"),), wrap=True, min_width=30,
           abbreviate_rank=4, drop_rank=10),
)
"""The table's columns: name, device and status always; the description goes first."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--import", dest="imports", action="store_true",
                        help="import each library to check that it loads and ask each "
                             "engine for its devices (seconds; TensorFlow may log)")


def run(args: argparse.Namespace) -> int:
    rows = probe_all() if args.imports else list_installed()
    if args.json:
        print(json.dumps([dataclasses.asdict(row) | {"status": row.status} for row in rows], indent=2))
        return 0
    out = stdout_console()
    layout = fit(COLUMNS, rows, table_width(out))
    styles = [None if row.available else "red" for row in rows]
    print_table(out, layout, "accelml backends on this machine", styles)
    for line in layout.legend if args.imports else (*layout.legend, LISTED_NOTE):
        out.print(line, markup=False)
    return 0
