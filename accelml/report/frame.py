"""Runs as tidy tables for pandas: one row per case (``to_frame``), or one row per timed
repeat (``samples=True``), from one run or many (``python -m accelml export``).

Units are in the column names: times in seconds (``fit_median_s``), memory in bytes
(``peak_host_memory_bytes``); ``speedup`` is a ratio (reference median / case median) and
``efficiency`` a fraction. Each row carries its run (``run_id``, ``spec``, ``started``) so
the tables of several runs stack into one.

In Python: ``accelml.compare(...).to_frame()``; from the CLI: ``python -m accelml export
--all --csv runs.csv`` (or ``--parquet``). ``compare --json`` is one JSON document, not a
table: read its ``rows`` with pandas as :data:`JSON_RECIPE` shows.

>>> from accelml.results.records import CaseResult, PhaseTiming
>>> case = CaseResult("r", "c", "kmeans", "sklearn", "cpu", "blobs", "ok",
...                   timings=(PhaseTiming.from_samples("fit", [0.5, 0.7]),))
>>> [(s["phase"], s["repeat"], s["seconds"]) for s in sample_records(case)]
[('fit', 0, 0.5), ('fit', 1, 0.7)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from accelml.report.export import COLUMNS, table_records
from accelml.report.speed import PHASES
from accelml.report.table import Row, build_rows
from accelml.results.records import CaseResult, RunRecord
from accelml.results.store import ResultsStore

if TYPE_CHECKING:
    import pandas as pd

JSON_RECIPE = """\
import json
import pandas as pd

with open("results.json") as handle:          # python -m accelml compare --json > results.json
    document = json.load(handle)
table = pd.json_normalize(document["rows"])    # one row per case: fit.median, agreement.value, ...
cases = pd.json_normalize(document["cases"])   # every stored field of every case
"""
"""How to read ``compare --json`` with pandas (``pd.read_json`` cannot: the document holds
the run, the rows, the cases and the agreement matrix side by side)."""

TIME_PARTS = ("median", "q1", "q3")
RUN_COLUMNS = ("run_id", "spec", "started")
IDENTITY = ("case_id", "algorithm", "dataset", "backend", "device", "ranks", "strategy",
            "params")


def _unit(name: str) -> str:
    """The table column ``name`` with its unit: ``fit_median`` -> ``fit_median_s``."""
    phase, _, part = name.rpartition("_")
    return f"{name}_s" if phase in PHASES and part in TIME_PARTS else name


FRAME_COLUMNS: tuple[str, ...] = (
    *RUN_COLUMNS, *(_unit(name) for name, _ in COLUMNS[:7]), "strategy",
    *(_unit(name) for name, _ in COLUMNS[7:]), "peak_host_memory_bytes",
    "peak_gpu_memory_bytes")
"""The columns of :func:`case_records`, in order."""

SAMPLE_COLUMNS: tuple[str, ...] = (*RUN_COLUMNS, *IDENTITY, "phase", "repeat", "seconds",
                                   "warmup")
"""The columns of :func:`sample_records`, in order (one row per timed repeat)."""


def _run_fields(run: RunRecord) -> dict[str, str]:
    return {"run_id": run.run_id, "spec": run.spec_name, "started": run.created_at}


def case_records(run: RunRecord, rows: Sequence[Row], results: Sequence[CaseResult]
                 ) -> list[dict[str, Any]]:
    """One flat record per case: the run, the comparison table's fields (with units), the
    strategy and peak memory."""
    by_id = {result.case_id: result for result in results}
    records = []
    for row, record in zip(rows, table_records(rows), strict=True):
        result = by_id[row.case_id]
        flat = {_unit(name): value for name, value in record.items()}
        flat.update(_run_fields(run), strategy=row.strategy,
                    peak_host_memory_bytes=result.peak_host_memory_bytes,
                    peak_gpu_memory_bytes=result.peak_gpu_memory_bytes)
        records.append({name: flat.get(name) for name in FRAME_COLUMNS})
    return records


def sample_records(result: CaseResult, run: RunRecord | None = None) -> list[dict[str, Any]]:
    """One record per timed repeat of one case: warm-up runs first (``warmup`` true, not
    counted), then the counted repeats, numbered from 0 in each group."""
    identity = {"case_id": result.case_id, "algorithm": result.algorithm,
                "dataset": result.dataset, "backend": result.backend, "device": result.device,
                "ranks": result.ranks, "strategy": result.strategy,
                "params": ",".join(f"{key}={value}" for key, value in result.params)}
    run_fields: dict[str, str | None] = (
        dict(_run_fields(run)) if run is not None
        else {"run_id": result.run_id, "spec": None, "started": None})
    records = []
    for timing in result.timings:
        for warmup, samples in ((True, timing.warmup_samples), (False, timing.samples)):
            records += [{**run_fields, **identity, "phase": timing.phase, "repeat": index,
                         "seconds": seconds, "warmup": warmup}
                        for index, seconds in enumerate(samples)]
    return [{name: record[name] for name in SAMPLE_COLUMNS} for record in records]


INTEGER_COLUMNS = frozenset({*(_unit(name) for name, kind in COLUMNS if kind is int),
                             "peak_host_memory_bytes", "peak_gpu_memory_bytes", "repeat"})
"""Columns of whole numbers (iterations, repeat counts, bytes): pandas' nullable ``Int64``,
so that a column with an empty cell is not written as floats (``2.0``)."""


def frame(records: Iterable[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """Records as a pandas DataFrame with exactly ``columns`` (empty when there is none);
    whole-number columns (:data:`INTEGER_COLUMNS`) stay whole numbers where cells are empty.

    >>> frame([{"iterations": 2}, {"iterations": None}], ["iterations"])["iterations"].tolist()
    [2, <NA>]
    """
    import pandas as pd

    table = pd.DataFrame.from_records(list(records), columns=list(columns))
    for name in table.columns:
        if name in INTEGER_COLUMNS:
            table[name] = table[name].astype("Int64")
    return table


def runs_frame(store: ResultsStore, runs: Sequence[RunRecord], *, samples: bool = False,
               reference: str | None = None) -> pd.DataFrame:
    """The cases (or, with ``samples``, the timed repeats) of ``runs``, stacked: each run's
    speed-ups against ``reference`` (default: that run's own reference backend)."""
    records: list[dict[str, Any]] = []
    for run in runs:
        results = store.case_results(run.run_id)
        if samples:
            records += [record for result in results for record in sample_records(result, run)]
        else:
            rows = build_rows(store, results, reference or run.reference_backend)
            records += case_records(run, rows, results)
    return frame(records, SAMPLE_COLUMNS if samples else FRAME_COLUMNS)
