"""``python -m accelml backends``: what this machine can run, and why not the rest."""

from __future__ import annotations

import dataclasses
import json

HELP = "show which backends, devices and launchers this machine can run, with versions"


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")


def run(args) -> int:
    from accelml.probe import probe_all

    rows = probe_all()
    if args.json:
        print(json.dumps([dataclasses.asdict(row) | {"status": row.status} for row in rows], indent=2))
        return 0

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="accelml backends on this machine")
    for column in ("backend", "device", "version", "status", "detail"):
        table.add_column(column)
    for row in rows:
        status = "[green]available[/]" if row.available else "[red]unavailable[/]"
        table.add_row(row.name, row.device, escape(row.version or "-"), status, escape(row.detail))
    Console(width=160).print(table)
    return 0
