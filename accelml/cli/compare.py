"""``python -m accelml compare [SPEC]``: run a comparison and print the table.

Without SPEC it runs the embedded default spec (sklearn vs sklearnex vs xgboost, about a
minute on 2 cores). Every case runs in its own process, one at a time unless ``--jobs``
says otherwise; each finished case is stored at once in ``--results-dir``, so an interrupted
run loses nothing and ``--resume RUN_ID`` runs only the cases it lacks. Exit code 0 when
every case succeeded, 1 when any failed (the table says which and why), 2 for a bad spec.
With ``--only-available``, cases this machine cannot run (GPU cases on a CPU-only runner)
are listed as skipped and do not make it 1 (:mod:`accelml.cli.availability`).

After the table comes the agreement matrix (:func:`accelml.report.repro.agreement_matrix`):
run-to-run identity of each case's repeats, and agreement across backends, devices and
worker counts, each with whether bitwise identity was expected and why; with ``--json`` it
is the document's ``agreement_matrix`` key. ``--deterministic`` (or ``deterministic = true``
in the spec) runs in deterministic mode (:mod:`accelml.runner.determinism`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from accelml.cases import Experiment
from accelml.cli.availability import add_only_available, split_unavailable
from accelml.compare import Comparison, plan_run, run_experiment
from accelml.executors import ensure_available
from accelml.executors.arguments import (
    add_cluster_arguments,
    progress_for,
    settings_from_args,
)
from accelml.report.table import json_clean, legend, rich_table, to_json
from accelml.results.records import CaseResult, RunRecord
from accelml.results.store import ResultsStore
from accelml.spec.load import load_spec, load_spec_text

HELP = "run an experiment spec (default: the embedded one) and print the comparison table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", default=None,
                        help="experiment spec (TOML); default: the embedded default spec, "
                             "or with --resume the spec stored with that run")
    parser.add_argument("--results-dir", default=None, metavar="DIR",
                        help="results store directory (default: ./accelml-results)")
    parser.add_argument("--resume", default=None, metavar="RUN_ID",
                        help="finish an interrupted run: run only the cases it has no result for")
    parser.add_argument("--json", action="store_true",
                        help="print machine-readable results (JSON) instead of the table")
    parser.add_argument("--reference", default=None, metavar="BACKEND",
                        help="backend that speedup and agreement are measured against "
                             "(default: the spec's reference)")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="dataset cache (default: $ACCELML_CACHE_DIR or ~/.cache/accelml/datasets)")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate the spec and list its cases with their ids; run nothing")
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
    parser.add_argument("--deterministic", action="store_true",
                        help="run in deterministic mode: seeds filled in where unset (changes "
                             "those case ids), TF op determinism, Horovod fusion off, "
                             "PYTHONHASHSEED (as the spec's deterministic = true)")
    add_only_available(parser)
    add_cluster_arguments(parser)   # --cluster, --jobs, --cluster-config and job resources


def _experiment(args: argparse.Namespace) -> tuple[Experiment, RunRecord | None]:
    """The spec to run (with ``--resume`` and no SPEC: the one stored with the run), and the
    run being resumed."""
    if args.resume is None:
        return load_spec(args.spec), None
    run = ResultsStore(args.results_dir, create=False).get_run(args.resume)
    if args.spec is not None:
        return load_spec(args.spec), run
    base = Path(run.spec_path).resolve().parent if run.spec_path and not run.spec_path.startswith("<") \
        else Path.cwd()
    return load_spec_text(run.spec_text, run.spec_path or f"<run {run.run_id}>", base), run


def _print_plan(experiment: Experiment) -> None:
    print(f"{experiment.path}: {len(experiment.cases)} case(s), reference "
          f"{experiment.reference or '-'}")
    for case in experiment.cases:
        print(f"  {case.case_id}  {case.label}")


def run(args: argparse.Namespace) -> int:
    experiment, resumed = _experiment(args)
    settings = settings_from_args(args, experiment)
    if args.dry_run:
        # The cases as run_experiment would run them (seeded in deterministic mode).
        _print_plan(plan_run(experiment, deterministic=args.deterministic, resumed=resumed).experiment)
        return 0
    ensure_available(settings)   # before anything is written
    err = Console(stderr=True, highlight=False)
    store = ResultsStore(args.results_dir)
    progress_bar: Progress | None = None
    task_id: TaskID | None = None
    show_progress = not args.no_progress and err.is_terminal
    state: dict[str, RunRecord] = {}

    def on_plan(run: RunRecord, pending: int) -> None:
        nonlocal progress_bar, task_id
        state["run"] = run
        verb = "resuming" if args.resume else "run"
        err.print(f"accelml compare: {verb} {run.run_id}: {pending} case(s) to run "
                  f"of {run.planned_cases}; results in {store.directory}")
        if show_progress and pending:
            progress_bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                    MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                    transient=True)
            progress_bar.start()
            task_id = progress_bar.add_task("cases", total=pending)

    def on_result(result: CaseResult, done: int, total: int) -> None:
        status = "ok" if result.ok else f"FAILED ({result.failure.value}): {result.reason}"
        line = (f"[{done}/{total}] {result.algorithm} {result.backend}/{result.device}"
                f" on {result.dataset}: {status}")
        if progress_bar is not None and task_id is not None:
            progress_bar.update(task_id, advance=1)
            progress_bar.console.print(line)
        elif not args.no_progress:
            err.print(line)

    try:
        cluster_progress = None if args.no_progress else progress_for(settings)
        run_record = run_experiment(experiment, store, settings=settings, resume=args.resume,
                                    cache_dir=args.cache_dir, on_plan=on_plan, on_result=on_result,
                                    progress=cluster_progress, deterministic=args.deterministic)
    except KeyboardInterrupt:
        if "run" in state:
            err.print(f"accelml compare: interrupted; finish it with "
                      f"--resume {state['run'].run_id} --results-dir {store.directory}")
        raise
    finally:
        if progress_bar is not None:
            progress_bar.stop()
    comparison = Comparison.from_store(store, run_record.run_id)
    reference = args.reference or experiment.reference
    rows = comparison.rows(reference)
    matrix = comparison.agreement_matrix(reference)
    if args.json:
        document = to_json(comparison.run, list(comparison.results), rows)
        document["agreement_matrix"] = json_clean(matrix.to_dict())
        print(json.dumps(document, indent=1, default=str))
    else:
        out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
        out.print(rich_table(rows, title=f"{experiment.name}: run {run_record.run_id}"))
        out.print(legend(rows))
        out.print()
        out.print(escape(matrix.format()), soft_wrap=True)
    failed, skipped = split_unavailable(comparison.results, only_available=args.only_available)
    if skipped:
        err.print(f"accelml compare: {len(skipped)} case(s) skipped, unavailable on this machine "
                  "(--only-available): " + ", ".join(f"{r.backend}/{r.device}" for r in skipped))
    if failed:
        err.print(f"accelml compare: {len(failed)} of {len(comparison.results)} case(s) failed:")
        for result in failed:
            err.print(f"  {result.case_id} {result.algorithm} {result.backend}/{result.device} "
                      f"on {result.dataset}: {result.failure.value}: {result.reason}")
        return 1
    return 0
