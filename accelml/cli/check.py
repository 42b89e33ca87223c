"""``python -m accelml check SPEC --baseline FILE``: the reproducibility gate for CI.

It runs the spec (as ``compare`` does, into ``--results-dir``), or reads a stored run with
``--run RUN_ID``, and compares every case with the baseline file: scores, predictions
(label agreement, max |diff|), deep-learning loss/accuracy and rank agreement, and whether
repeats that should be bitwise identical were. Exit codes:

  0  every case is within tolerance of the baseline (with ``--only-available``: every case
     this machine can run; the others are listed as skipped)
  1  something drifted: a table names the case, the metric and by how much (a case that
     failed, also one whose backend or device is unavailable here unless ``--only-available``)
  2  bad input: a spec or baseline that does not parse, an unknown run, missing arguments

``--junit FILE`` also writes the outcome as JUnit XML for the CI's test report: one test per
baseline case, a failure per drifted metric, skipped for a case unavailable here.

``--update-baseline`` writes the baseline from the run instead (keeping the tolerances an
existing baseline file has), and exits 0. The baseline is indented JSON, for review in a PR.

    python -m accelml check experiments/smoke.toml --baseline repro-baseline.json --update-baseline
    python -m accelml check experiments/smoke.toml --baseline repro-baseline.json
    python -m accelml check --run 20261126T051502-3fa9c1 --baseline repro-baseline.json

``--deterministic`` runs the spec in deterministic mode, as the spec's ``deterministic =
true`` does (``run_experiment(deterministic=True)``, :func:`accelml.orchestration.plan_run`): a
seed is filled in wherever a case leaves ``random_state`` unset (which changes those cases'
ids), keras cases train with TF op determinism, every case process gets ``PYTHONHASHSEED``,
the TF/cuDNN/XLA determinism variables and ``HOROVOD_FUSION_THRESHOLD=0``, and the run is
stored as deterministic. This process's own environment is left as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from accelml.agreement.baseline import DEFAULT_INLINE_LIMIT, Baseline, make_baseline
from accelml.agreement.check import check_run
from accelml.cases import Experiment
from accelml.cli.availability import add_only_available, progress_line
from accelml.cli.output import ensure_writable, write_or_fail
from accelml.errors import SpecError
from accelml.executors.arguments import non_negative_int, positive_int
from accelml.executors.cluster_settings import ClusterSettings
from accelml.orchestration import run_experiment
from accelml.report.runs import resolve_run
from accelml.results.records import CaseResult
from accelml.results.store import ResultsStore
from accelml.spec.load import load_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", default=None,
                        help="experiment spec (TOML) to run; leave out with --run")
    parser.add_argument("--baseline", required=True, metavar="FILE",
                        help="baseline file (JSON) to compare with, or to write with --update-baseline")
    parser.add_argument("--run", dest="run_id", default=None, metavar="RUN_ID",
                        help="check this stored run (an id, a unique prefix or 'latest') "
                             "instead of running the spec")
    parser.add_argument("--results-dir", default=None, metavar="DIR",
                        help="results store directory (default: ./accelml-results)")
    parser.add_argument("--update-baseline", action="store_true",
                        help="write the baseline from this run (keeps an existing file's tolerances)")
    parser.add_argument("--inline-limit", type=non_negative_int, default=None, metavar="N",
                        help="arrays of up to N elements are kept in the baseline file "
                             "(default 20000); larger ones keep a digest and a summary")
    parser.add_argument("--deterministic", action="store_true",
                        help="run the spec in deterministic mode: seeds filled in where unset, "
                             "TF op determinism, Horovod fusion off, PYTHONHASHSEED "
                             "(see accelml.runner.determinism)")
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="cases at once when running the spec (default 1)")
    parser.add_argument("--cache-dir", default=None, metavar="DIR", help="dataset cache directory")
    parser.add_argument("--json", action="store_true",
                        help="print the check's outcome as JSON instead of the table")
    add_ci_arguments(parser)


def add_ci_arguments(parser: argparse.ArgumentParser) -> None:
    """``--junit FILE`` and ``--only-available``."""
    parser.add_argument("--junit", default=None, metavar="FILE",
                        help="also write the outcome as JUnit XML (one test per baseline case)")
    add_only_available(parser)


def _run_spec(args: argparse.Namespace, experiment: Experiment, store: ResultsStore) -> str:
    settings = None if args.jobs is None else ClusterSettings(kind="local", jobs=args.jobs)

    def on_result(result: CaseResult, done: int, total: int) -> None:
        print(progress_line(result, done, total), file=sys.stderr)

    run = run_experiment(experiment, store, settings=settings, cache_dir=args.cache_dir,
                         on_result=on_result, deterministic=args.deterministic,
                         only_available=args.only_available)
    print(f"accelml check: ran {run.planned_cases} case(s) as run {run.run_id} "
          f"in {store.directory}", file=sys.stderr)
    return run.run_id


def run(args: argparse.Namespace) -> int:
    if (args.spec is None) == (args.run_id is None):
        raise SpecError("give either SPEC (to run it) or --run RUN_ID (a stored run), not "
                        + ("both" if args.spec else "neither"))
    if args.deterministic and args.spec is None:
        raise SpecError("--deterministic applies to running a SPEC, not to a stored --run")
    if args.junit:
        ensure_writable(args.junit, "--junit")      # before a spec runs
    baseline_path = Path(args.baseline)
    # Read before anything runs: a file that is not a baseline is a SpecError (exit 2).
    against = None if args.update_baseline else Baseline.read(baseline_path)
    previous = Baseline.read(baseline_path) if args.update_baseline and baseline_path.exists() \
        else None          # --update-baseline keeps an existing file's tolerances
    if args.run_id is not None:
        store = ResultsStore(args.results_dir, read_only=True)
        run_id = resolve_run(store, args.run_id).run_id
    else:
        experiment = load_spec(args.spec)      # a bad spec stops here: nothing is written
        store = ResultsStore(args.results_dir)
        run_id = _run_spec(args, experiment, store)
    if against is None:
        limit = args.inline_limit if args.inline_limit is not None else (
            previous.inline_limit if previous is not None else DEFAULT_INLINE_LIMIT)
        made = make_baseline(store, run_id, inline_limit=limit, previous=previous)
        made.write(baseline_path)
        failed = [case for case in made.cases if case.data["status"] != "ok"]
        print(f"accelml check: wrote {baseline_path} from run {run_id}: {len(made.cases)} case(s)"
              + (f", {len(failed)} of them failed (they are kept as failed)" if failed else ""))
        return 0
    report = check_run(store, run_id, against, skip_unavailable=args.only_available)
    if args.junit:
        write_or_fail("--junit", args.junit, lambda: _write_junit(Path(args.junit), report.to_junit()))
    if args.json:
        print(json.dumps(report.to_dict(), indent=1, default=str))
    else:
        print(report.format())
    return report.exit_code


def _write_junit(path: Path, text: str) -> None:
    """Write ``--junit``'s XML, making missing parent folders as ``--html`` and ``--json`` do."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
