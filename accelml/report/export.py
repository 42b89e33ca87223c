"""The comparison table as flat records: CSV and JSON exports of a report, and reading a CSV back.

>>> [name for name, _ in COLUMNS][:4]
['case_id', 'algorithm', 'dataset', 'backend']
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accelml.cases import canonical_json
from accelml.report.speed import PHASES
from accelml.report.table import Row

COLUMNS: tuple[tuple[str, type], ...] = (
    ("case_id", str), ("algorithm", str), ("dataset", str), ("backend", str), ("device", str),
    ("workers", int), ("params", str),
    *((f"{phase}_{part}", int if part == "n" else float)
      for phase in PHASES for part in ("median", "q1", "q3", "n")),
    ("speedup", float), ("speedup_low", float), ("speedup_high", float), ("efficiency", float),
    ("score_name", str), ("score", float), ("agreement_kind", str), ("agreement", float),
    ("is_reference", bool), ("noisy", bool), ("status", str), ("reason", str),
)
"""The columns of the exported table, in order, with their types (times in seconds;
``params`` is canonical JSON; empty cells / ``null`` where a value does not apply)."""


def _finite(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def table_records(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """The comparison table as flat records with the keys of :data:`COLUMNS`."""
    records = []
    for row in rows:
        record: dict[str, Any] = {
            "case_id": row.case_id, "algorithm": row.algorithm, "dataset": row.dataset,
            "backend": row.backend, "device": row.device, "workers": row.workers,
            "params": canonical_json(row.params),
        }
        for phase in PHASES:
            cell = getattr(row, phase)
            for part in ("median", "q1", "q3"):
                record[f"{phase}_{part}"] = None if cell is None else _finite(getattr(cell, part))
            record[f"{phase}_n"] = None if cell is None else cell.count
        record.update(
            speedup=_finite(row.speedup), speedup_low=_finite(row.speedup_low),
            speedup_high=_finite(row.speedup_high), efficiency=_finite(row.efficiency),
            score_name=row.score_name, score=_finite(row.score),
            agreement_kind=None if row.agreement is None else row.agreement.kind,
            agreement=None if row.agreement is None else _finite(row.agreement.value),
            is_reference=row.is_reference, noisy=row.noisy, status=row.status,
            reason=row.reason or None)
        records.append(record)
    return records


def write_csv(records: list[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write table records as CSV (header = :data:`COLUMNS`; empty cell for a missing value)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[name for name, _ in COLUMNS])
        writer.writeheader()
        for record in records:
            writer.writerow({key: "" if value is None else value for key, value in record.items()})
    return path


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a table written by :func:`write_csv` back into typed records."""
    types = dict(COLUMNS)

    def parse(name: str, text: str) -> Any:
        if text == "":
            return None
        kind = types.get(name, str)
        if kind is bool:
            return text == "True"
        return kind(text)

    with open(path, newline="", encoding="utf-8") as handle:
        return [{name: parse(name, text) for name, text in row.items()}
                for row in csv.DictReader(handle)]
