"""``python -m accelml export RUN_ID...|--all --csv FILE|--parquet FILE``: runs as one table.

One row per case of every run named (``--all``: every run of the store), with the run's id,
spec and start time on each row and units in the column names (times in seconds:
``fit_median_s``; :data:`accelml.report.frame.FRAME_COLUMNS`); ``--samples`` writes one row
per timed repeat instead (:data:`accelml.report.frame.SAMPLE_COLUMNS`). Read it back with
``pandas.read_csv`` / ``pandas.read_parquet``.

Exit code 0 when the file was written; 2 for a usage error or when Parquet cannot be
written here (no pyarrow or fastparquet: the message says so and nothing is written); 1
when a run cannot be found.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from accelml.cli.output import ensure_writable, stderr_console, write_or_fail
from accelml.errors import SpecError, UnavailableError
from accelml.report.frame import runs_frame
from accelml.report.runs import open_store, resolve_run

PARQUET_ENGINES = ("pyarrow", "fastparquet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_ids", nargs="*", metavar="RUN_ID",
                        help="run ids, unique prefixes or 'latest' (or --all)")
    parser.add_argument("--all", action="store_true", help="every run of the store")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", default=None, metavar="FILE", help="write CSV to FILE")
    target.add_argument("--parquet", default=None, metavar="FILE",
                        help="write Parquet to FILE (needs pyarrow or fastparquet)")
    parser.add_argument("--samples", action="store_true",
                        help="one row per timed repeat (warm-up runs marked) instead of per case")
    parser.add_argument("--reference", default=None, metavar="BACKEND",
                        help="backend speed-ups are measured against (default: each run's)")
    parser.add_argument("--results-dir", default=None, metavar="DIR",
                        help="results store directory (default: ./accelml-results)")


def parquet_engine() -> str:
    """The Parquet library pandas can use here; :class:`UnavailableError` saying why not."""
    for engine in PARQUET_ENGINES:
        if importlib.util.find_spec(engine) is not None:
            return engine
    raise UnavailableError("Parquet unavailable: neither pyarrow nor fastparquet is installed "
                           "(pip install pyarrow), or use --csv")


def run(args: argparse.Namespace) -> int:
    if bool(args.run_ids) == bool(args.all):
        raise SpecError("name the runs to export (RUN_ID ...) or --all, not both")
    engine = parquet_engine() if args.parquet else None
    what, target = ("--parquet", args.parquet) if args.parquet else ("--csv", args.csv)
    ensure_writable(target, what)
    store = open_store(args.results_dir)
    runs = store.list_runs() if args.all else [resolve_run(store, run_id)
                                               for run_id in args.run_ids]
    table = runs_frame(store, runs, samples=args.samples, reference=args.reference)
    path = Path(target)

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if engine is not None:
            table.to_parquet(path, engine=engine, index=False)
        else:
            table.to_csv(path, index=False)

    write_or_fail(what, path, write)
    what = "timed repeat(s)" if args.samples else "case(s)"
    stderr_console().print(f"accelml export: wrote {len(table)} {what} of {len(runs)} run(s) "
                           f"to {path}", markup=False)
    return 0
