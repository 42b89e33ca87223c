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
    ("ranks", int), ("params", str),
    *((f"{phase}_{part}", int if part == "n" else float)
      for phase in PHASES for part in ("median", "q1", "q3", "n")),
    ("speedup", float), ("speedup_low", float), ("speedup_high", float), ("efficiency", float),
    ("images_per_second_per_rank", float), ("main_phase", str),
    *((f"{phase}_speedup{part}", float) for phase in PHASES for part in ("", "_low", "_high")),
    ("iterations", int), ("reference_iterations", int), ("seconds_per_iteration", float),
    ("reference_seconds_per_iteration", float), ("per_iteration_speedup", float),
    ("objective", str), ("objective_value", float), ("reference_objective_value", float),
    ("different_optimum", bool), ("optimum_reason", str),
    ("ranks_identical", bool), ("ranks_differing", str),
    ("score_name", str), ("score", float), ("agreement_kind", str), ("agreement", float),
    ("is_reference", bool), ("noisy", bool), ("warmup_note", str), ("status", str),
    ("reason", str),
)
"""The columns of the exported table, in order, with their types (times in seconds;
``params`` is canonical JSON; empty cells / ``null`` where a value does not apply).
``speedup`` is the main phase's (``main_phase``); ``<phase>_speedup`` with ``_low`` /
``_high`` (its interval) is every phase's; ``iterations`` and the per-iteration figures are
for iterative fits; ``different_optimum`` is true when the fit's ``objective`` differs from
the reference's beyond its tolerance (``optimum_reason`` says by how much and why);
``ranks_identical`` / ``ranks_differing`` (e.g. "1 3") for data-parallel cases;
``images_per_second_per_rank``: a deep-learning case's images/s per rank (per GPU).
``ranks`` was ``workers``, and ``images_per_second_per_rank`` was
``images_per_second_per_worker``, before accelml named data-parallel processes ranks."""


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
            "backend": row.backend, "device": row.device, "ranks": row.ranks,
            "params": canonical_json(row.params),
        }
        for phase in PHASES:
            cell = getattr(row, phase)
            for part in ("median", "q1", "q3"):
                record[f"{phase}_{part}"] = None if cell is None else _finite(getattr(cell, part))
            record[f"{phase}_n"] = None if cell is None else cell.count
        by_phase = {value.phase: value for value in row.phase_speedups}
        for phase in PHASES:
            found = by_phase.get(phase)
            for part, attribute in (("", "value"), ("_low", "low"), ("_high", "high")):
                record[f"{phase}_speedup{part}"] = (
                    None if found is None else _finite(getattr(found, attribute)))
        iterations, optimum = row.iterations, row.optimum
        record.update(
            main_phase=row.main_phase,
            iterations=None if iterations is None else iterations.iterations,
            reference_iterations=None if iterations is None else iterations.reference_iterations,
            seconds_per_iteration=None if iterations is None else iterations.seconds_per_iteration,
            reference_seconds_per_iteration=(
                None if iterations is None else iterations.reference_seconds_per_iteration),
            per_iteration_speedup=(
                None if iterations is None else _finite(iterations.per_iteration_speedup)),
            objective=None if optimum is None else optimum.objective,
            objective_value=None if optimum is None else _finite(optimum.value),
            reference_objective_value=None if optimum is None else _finite(optimum.reference_value),
            different_optimum=None if optimum is None else optimum.differs,
            optimum_reason=None if optimum is None else optimum.reason or None,
            ranks_identical=row.ranks_identical,
            ranks_differing=" ".join(str(rank) for rank in row.ranks_differing) or None,
            warmup_note=row.warmup_note or None,
            speedup=_finite(row.speedup), speedup_low=_finite(row.speedup_low),
            speedup_high=_finite(row.speedup_high), efficiency=_finite(row.efficiency),
            images_per_second_per_rank=_finite(row.images_per_rank),
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
