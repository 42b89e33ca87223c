"""``python -m accelml compare [SPEC]``: run a comparison and print the table.

Without SPEC it runs the embedded default spec (sklearn vs sklearnex vs xgboost, about a
minute on 2 cores). Every case runs in its own process, one at a time unless ``--jobs``
says otherwise; each finished case is stored at once in ``--results-dir``, so an interrupted
run loses nothing and ``--resume RUN_ID`` runs only the cases it lacks (``--retry-failed``:
and those that failed for a reason that may not recur). Exit code 0 when every case
succeeded, 1 when any failed (the table says which and why), 2 for a bad spec (more ranks
than this machine has cores, unless the case says ``oversubscribe = true``, included).
With ``--only-available``, cases this machine cannot run (GPU cases on a CPU-only runner,
more ranks than its cores) are listed as skipped, the others run, and they do not make it
1 (:mod:`accelml.cli.availability`).
SIGINT, SIGTERM and SIGHUP stop the run as Ctrl-C does: it is marked interrupted, the
cases running here end with their launchers and ranks, and it exits 128 + the signal.
Another accelml run active on this machine is warned about (the timings share its cores).

After the table comes the agreement matrix (:func:`accelml.agreement.matrix.agreement_matrix`):
run-to-run identity of each case's repeats, and agreement across backends, devices and
worker counts, each with whether bitwise identity was expected and why; with ``--json`` it
is the document's ``agreement_matrix`` key. ``--deterministic`` (or ``deterministic = true``
in the spec) runs in deterministic mode (:mod:`accelml.runner.determinism`).
"""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from accelml.cases import Experiment
from accelml.cli.availability import add_only_available, progress_line, split_unavailable
from accelml.cli.output import print_table, stderr_console, stdout_console, table_width
from accelml.comparison import Comparison
from accelml.errors import Interrupted, SpecError, interrupt_on
from accelml.executors import ensure_available, ensure_scale, submits_jobs
from accelml.executors.arguments import (
    add_cluster_arguments,
    progress_for,
    settings_from_args,
)
from accelml.orchestration import RESUME_SETTINGS_NOTE, plan_run, run_experiment, stored_experiment
from accelml.report.crossover import crossovers
from accelml.report.table import fit_table, json_clean, legend, row_styles, to_json
from accelml.report.terminal import crossover_text
from accelml.results.records import CaseResult, RunRecord
from accelml.results.store import ResultsStore
from accelml.runner.fingerprint import other_runs
from accelml.spec.load import load_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", default=None,
                        help="experiment spec (TOML); default: the embedded default spec, "
                             "or with --resume the spec stored with that run")
    parser.add_argument("--results-dir", default=None, metavar="DIR",
                        help="results store directory (default: ./accelml-results)")
    parser.add_argument("--resume", default=None, metavar="RUN_ID",
                        help="finish an interrupted run: run only the cases it has no result for")
    parser.add_argument("--retry-failed", action="store_true",
                        help="with --resume: also run again the cases that failed for a reason "
                             "that may not recur (lost worker, time limit, killed)")
    parser.add_argument("--json", action="store_true",
                        help="print machine-readable results (JSON) instead of the table; "
                             "in pandas: pd.json_normalize(document['rows']) "
                             "(accelml.report.frame.JSON_RECIPE)")
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
    parser.add_argument("--allow-pickle-data", action="store_true",
                        help="let cases read pickled data (CIFAR batches) outside Keras's own "
                             "cache (~/.keras/datasets); unpickling a file can run its code")
    add_only_available(parser)
    add_cluster_arguments(parser)   # --cluster, --jobs, --cluster-config and job resources


def _experiment(args: argparse.Namespace) -> tuple[Experiment, RunRecord | None]:
    """The spec to run (with ``--resume`` and no SPEC: the one stored with the run, checked,
    without its ``[cluster]`` table: :func:`accelml.orchestration.stored_experiment`), and the run
    being resumed."""
    if args.resume is None:
        return load_spec(args.spec), None
    store = ResultsStore(args.results_dir, read_only=True)
    run = store.get_run(args.resume)
    with store.run_lock(run.run_id):   # a run another process is running: one line, now
        pass
    if args.spec is not None:
        return load_spec(args.spec), run
    base = Path(run.spec_path).resolve().parent if run.spec_path and not run.spec_path.startswith("<") \
        else Path.cwd()
    experiment = stored_experiment(run, base)
    stderr_console().print(f"accelml compare: resuming run {run.run_id} from its stored spec; "
                           f"{RESUME_SETTINGS_NOTE}", markup=False)
    files = [f"{spec.name}: {spec.option('path')}" for spec in experiment.datasets
             if spec.option("path")]
    if files:    # resolved against the directory of the first run's spec, shown before use
        stderr_console().print(f"accelml compare: its data files (relative to {base}): "
                               + ", ".join(files), markup=False)
    return experiment, run


def others_text(pids: list[int]) -> str:
    """The warning about other accelml runs timing cases on this machine.

    >>> others_text([41])
    'another accelml run is active on this machine (pid 41): the timings of both runs share its cores'
    >>> others_text([41, 42, 43])
    '3 other accelml runs are active on this machine (pid 41, 42, 43): the timings of all 4 runs share its cores'
    """
    listed = ", ".join(map(str, pids))
    if len(pids) == 1:
        return (f"another accelml run is active on this machine (pid {listed}): the timings of "
                "both runs share its cores")
    return (f"{len(pids)} other accelml runs are active on this machine (pid {listed}): the "
            f"timings of all {len(pids) + 1} runs share its cores")


def _print_plan(experiment: Experiment) -> None:
    print(f"{experiment.path}: {len(experiment.cases)} case(s), reference "
          f"{experiment.reference or '-'}")
    for case in experiment.cases:
        print(f"  {case.case_id}  {case.label}")


def run(args: argparse.Namespace) -> int:
    if args.retry_failed and args.resume is None:
        raise SpecError("--retry-failed goes with --resume RUN_ID (it retries that run's failed cases)")
    experiment, resumed = _experiment(args)
    backends = sorted({case.backend for case in experiment.cases})
    if args.reference is not None and args.reference not in backends:
        raise SpecError(f"--reference {args.reference}: not a backend of this comparison; "
                        f"its backends: {', '.join(backends)}")
    settings = settings_from_args(args, experiment)
    # before anything runs or is written; with --only-available such cases are skipped
    ensure_scale(experiment.cases, settings, only_available=args.only_available)
    if args.dry_run:
        # The cases as run_experiment would run them (seeded in deterministic mode).
        _print_plan(plan_run(experiment, deterministic=args.deterministic, resumed=resumed).experiment)
        return 0
    ensure_available(settings)   # before anything is written
    err = stderr_console()
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
                  f"of {run.planned_cases}; results in {store.directory}", markup=False)
        others = other_runs() if pending and not submits_jobs(settings) else []
        if others:
            err.print(f"accelml compare: warning: {others_text(others)}", markup=False)
        if show_progress and pending:
            progress_bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                    MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                    transient=True)
            progress_bar.start()
            task_id = progress_bar.add_task("cases", total=pending)

    def on_result(result: CaseResult, done: int, total: int) -> None:
        line = progress_line(result, done, total)
        if progress_bar is not None and task_id is not None:
            progress_bar.update(task_id, advance=1)
            progress_bar.console.print(line, markup=False)
        elif not args.no_progress:
            err.print(line, markup=False)

    try:
        cluster_progress = None if args.no_progress else progress_for(settings)
        # kill, a batch system's cancel or a closed terminal: stop as for Ctrl-C (the run is
        # marked interrupted, its cases, launchers and ranks end, scratch folders go)
        with interrupt_on(signal.SIGTERM, signal.SIGHUP):
            run_record = run_experiment(experiment, store, settings=settings, resume=args.resume,
                                        cache_dir=args.cache_dir, on_plan=on_plan, on_result=on_result,
                                        progress=cluster_progress, deterministic=args.deterministic,
                                        retry_failed=args.retry_failed,
                                        allow_pickle=args.allow_pickle_data,
                                        only_available=args.only_available)
    except KeyboardInterrupt as stop:
        where = (f"; finish it with --resume {state['run'].run_id} --results-dir {store.directory}"
                 if "run" in state else "")
        err.print(f"accelml compare: interrupted{where}", markup=False)
        return stop.exit_code if isinstance(stop, Interrupted) else 130
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
        document["crossovers"] = json_clean([found.to_dict() for found in crossovers(comparison.results)])
        print(json.dumps(document, indent=1, default=str))
    else:
        out = stdout_console()
        width = table_width(out)
        print_table(out, fit_table(rows, width), f"{experiment.name}: run {run_record.run_id}",
                    row_styles(rows))
        out.print(legend(rows, width), markup=False)
        out.print()
        out.print(matrix.format(width), markup=False)
        notes = crossover_text(crossovers(comparison.results))
        if notes:
            out.print()
            out.print(notes, markup=False)
    failed, skipped = split_unavailable(comparison.results, only_available=args.only_available)
    if skipped:
        err.print(f"accelml compare: {len(skipped)} case(s) skipped, unavailable on this machine "
                  "(--only-available): " + "; ".join(r.label for r in skipped),
                  markup=False)
    if failed:
        err.print(f"accelml compare: {len(failed)} of {len(comparison.results)} case(s) failed:")
        for result in failed:
            err.print(f"  {result.case_id} {result.label}: {result.failure.value}: "
                      f"{result.reason}", markup=False)
        if any(result.skipped for result in failed):
            err.print("accelml compare: cases unavailable here were skipped; they count as "
                      "failures unless --only-available", markup=False)
        return 1
    return 0
