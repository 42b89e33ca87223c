"""``python -m accelml backends``: what this machine can run, and why not the rest.

One row per backend and device (from the backend records, third parties' included), then
what the deep-learning strategies need, the tools, and any third-party plug-in that failed
to load with the reason (:func:`accelml.machine.probe_all`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelml.machine import probe_all

HELP = "show which backends, devices and launchers this machine can run, with versions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")


def run(args: argparse.Namespace) -> int:
    rows = probe_all()
    if args.json:
        print(json.dumps([dataclasses.asdict(row) | {"status": row.status} for row in rows], indent=2))
        return 0
    table = Table(title="accelml backends on this machine")
    for column in ("backend", "device", "version", "status", "summary", "detail"):
        table.add_column(column)
    for row in rows:
        status = "[green]available[/]" if row.available else "[red]unavailable[/]"
        table.add_row(row.name, row.device, escape(row.version or "-"), status,
                      escape(row.summary), escape(row.detail))
    Console(width=160).print(table)
    return 0
