"""Fan-out efficiency on SLURM: K equal cases on W worker jobs.

For each W it starts a fresh job-queue executor (TLS on, as by default), runs K equal cases
and measures:

- worker start-up latency: from the first ``sbatch`` to each worker registering with the
  scheduler (the scheduler's own "add-worker" events), first and last of the W;
- the case time, measured inside each case;
- wall time of the whole fan-out (first sbatch to last result), against the ideal
  ``last worker up + ceil(K / W) x case time`` (and the looser ``K / W x case time``);
- the dispatch gap: on one worker, from the end of a case to the start of the next.

Cases are ``sleep`` by default, so that the figures measure the executor and not the
machine's cores (on 2 shared cores, W CPU-bound cases cannot run side by side);
``--case spin`` busy-loops instead (CPU-bound), ``--case digits`` fits a real classifier.

    python benchmarks/bench_fanout.py --cases 8 --workers 1,2,4 --case-seconds 2

Needs a SLURM cluster (``slurm/local/start.sh start`` gives a one-node one on Debian).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelml.executors.cluster_settings import load_cluster_settings  # noqa: E402
from accelml.executors.jobqueue import JobQueueExecutor  # noqa: E402
from accelml.executors.resources import CaseNeeds  # noqa: E402


def equal_case(args):
    """One case of fixed work; returns when it started and ended (wall clock) and where."""
    import os
    import time

    kind, seconds = args
    started = time.time()
    if kind == "sleep":
        time.sleep(seconds)
    elif kind == "spin":
        deadline = time.process_time() + seconds
        while time.process_time() < deadline:
            pass
    else:
        from sklearn.datasets import load_digits
        from sklearn.linear_model import LogisticRegression

        X, y = load_digits(return_X_y=True)
        LogisticRegression(max_iter=300).fit(X, y)
    return {"start": started, "end": time.time(), "job": os.environ.get("SLURM_JOB_ID"),
            "pid": os.getpid()}


def measure(workers: int, cases: int, kind: str, seconds: float, shared: str) -> dict:
    settings = load_cluster_settings(spec_table={"kind": "slurm", "jobs": workers, "retries": 0,
                                                 "shared-directory": shared,
                                                 "worker-start-timeout": 600})
    with JobQueueExecutor(settings, poll_interval=0.2) as executor:
        submitted = time.time()
        outcomes = list(executor.map(equal_case, [(kind, seconds)] * cases, needs=[CaseNeeds()] * cases))
        finished = time.time()
        events = executor.client.get_events("all")
    failed = [outcome.error for outcome in outcomes if not outcome.ok]
    if failed:
        raise SystemExit(f"bench_fanout: {len(failed)} case(s) failed: {failed[0]}")
    added = sorted(stamp for stamp, event in events
                   if isinstance(event, dict) and event.get("action") == "add-worker")
    startup = [stamp - submitted for stamp in added[:workers]]
    results = [outcome.result for outcome in outcomes]
    case_time = statistics.median(result["end"] - result["start"] for result in results)
    gaps = []
    by_job: dict[str, list[dict]] = {}
    for result in results:
        by_job.setdefault(result["job"], []).append(result)
    for runs in by_job.values():
        runs.sort(key=lambda result: result["start"])
        gaps += [later["start"] - earlier["end"] for earlier, later in zip(runs, runs[1:], strict=False)]
    wall = finished - submitted
    ideal = startup[-1] + math.ceil(cases / workers) * case_time
    return {
        "workers": workers, "cases": cases, "startup_first": startup[0], "startup_last": startup[-1],
        "case_time": case_time, "wall": wall, "ideal": ideal, "ideal_no_startup": cases / workers * case_time,
        "efficiency": ideal / wall, "gap": statistics.median(gaps) if gaps else float("nan"),
        "jobs_used": len(by_job),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=8, help="K equal cases (default 8)")
    parser.add_argument("--workers", default="1,2,4", help="W values, comma-separated (default 1,2,4)")
    parser.add_argument("--case", choices=("sleep", "spin", "digits"), default="sleep")
    parser.add_argument("--case-seconds", type=float, default=2.0)
    args = parser.parse_args(argv)
    from accelml.probe import probe_slurm

    slurm = probe_slurm()
    if not slurm.available:
        print(f"bench_fanout: SLURM unavailable: {slurm.detail}", file=sys.stderr)
        return 2
    print(f"bench_fanout: {args.cases} x {args.case} case(s) of {args.case_seconds:g} s, SLURM {slurm.version} "
          f"({slurm.detail}); TLS on")
    header = (f"{'W':>3} {'jobs':>4} {'start-up first/last':>20} {'case':>7} {'wall':>7} {'ideal':>7} "
              f"{'K/W x case':>10} {'efficiency':>10} {'dispatch gap':>12}")
    print(header)
    with tempfile.TemporaryDirectory(prefix="accelml-bench-") as shared:
        for workers in (int(text) for text in args.workers.split(",")):
            row = measure(workers, args.cases, args.case, args.case_seconds, shared)
            print(f"{row['workers']:>3} {row['jobs_used']:>4} "
                  f"{row['startup_first']:>9.2f}s/{row['startup_last']:>6.2f}s "
                  f"{row['case_time']:>6.2f}s {row['wall']:>6.2f}s {row['ideal']:>6.2f}s "
                  f"{row['ideal_no_startup']:>9.2f}s {row['efficiency']:>9.0%} {row['gap']:>11.3f}s",
                  flush=True)
    print("ideal = last worker up + ceil(K/W) x case time; efficiency = ideal / wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
