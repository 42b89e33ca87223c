"""Interleaved vs isolated measurement: do the speed-ups repeat from one run to the next?

Runs issue 17's four cases (KMeans 250k x 50, RandomForest 120k x 20, LogisticRegression
250k x 50, KNN brute 60k x 20; sklearn vs sklearnex, ``bench_adaptive_repeats.py``'s spec)
through the real pipeline twice under each of two measurements, with the same adaptive
repeat policy (3 to 6 rounds, +-5% target, a first run of 2 s or more counted):

* interleaved (accelml's default): the sklearn case and the sklearnex case of each algorithm
  keep their own warm processes and take timed rounds in turn; the speed-up is the median
  of the per-round ratios, its interval that of the paired ratios;
* isolated (the control, the policy before issue 29): each case runs alone, all its rounds
  back to back; the speed-up is the ratio of the medians, its interval from the medians'.

The runs alternate: interleaved, isolated, isolated, interleaved, so a slow stretch of the
host favours neither. For each case and phase it prints run 1's and run 2's speed-up with its
interval, whether run 2's speed-up lies inside run 1's interval and the interval's half-width;
then the counts and the wall time of each measurement.
Targets (issue 29): run 2's speed-ups inside run 1's intervals for all but one phase, every
interval within +-10%, wall time at most the isolated policy's.

    python benchmarks/bench_interleaved.py                 # full size: ~10 minutes on 2 cores
    python benchmarks/bench_interleaved.py --scale 0.05    # a check in a minute or two
    python benchmarks/bench_interleaved.py --only interleaved --max-rounds 12   # one policy, twice
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_adaptive_repeats import ADAPTIVE, ROWS, SPEC  # noqa: E402

MEASUREMENTS = ("interleaved", "isolated")
ORDER = (("interleaved", 0), ("isolated", 0), ("isolated", 1), ("interleaved", 1))
PHASES = ("fit", "predict")


def run_once(measurement: str, index: int, scale: float, threads: int, skip: float,
             directory: Path, max_rounds: int = 6):
    from accelml.comparison import Comparison
    from accelml.orchestration import run_experiment
    from accelml.results.store import ResultsStore
    from accelml.spec.load import load_spec_text

    sizes = {name: max(200, int(rows * scale)) for name, rows in ROWS.items()}
    repeats = ADAPTIVE.format(skip=skip).replace("max = 6", f"max = {max_rounds}")
    text = SPEC.format(label=f"{measurement}_{index + 1}", repeats=repeats,
                       threads=threads, **sizes)
    text = text.replace("warmup = 1\n", f'warmup = 1\nmeasurement = "{measurement}"\n', 1)
    store = ResultsStore(directory / "results")
    started = time.perf_counter()
    run = run_experiment(load_spec_text(text, f"<{measurement} {index + 1}>"), store,
                         cache_dir=str(directory / "cache"))
    return time.perf_counter() - started, Comparison.from_store(store, run.run_id)


def phase_speedups(comparison) -> dict[tuple[str, str], object]:
    """(algorithm, phase) -> the sklearnex case's Speedup over the sklearn case."""
    from accelml.report.speed import speedups

    by_id = {result.case_id: result for result in comparison.results}
    found = {}
    for phase in PHASES:
        for case_id, value in speedups(comparison.results, "sklearn", phase).items():
            if value.reference_case_id != case_id:
                found[(by_id[case_id].algorithm, phase)] = value
    return found


def halfwidth(value) -> float:
    return max(value.value - value.low, value.high - value.value) / value.value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="data size factor (1: 250k/120k/250k/60k rows, issue 17's cases)")
    parser.add_argument("--threads", type=int, default=2, help="threads per case (default 2)")
    parser.add_argument("--skip-warmup-after", type=float, default=2.0,
                        help="seconds after which a first run counts (default 2)")
    parser.add_argument("--max-rounds", type=int, default=6,
                        help="most timed rounds per case (default 6, the adaptive policy's)")
    parser.add_argument("--only", choices=MEASUREMENTS,
                        help="run one measurement only (twice); no wall-time comparison")
    args = parser.parse_args()
    measurements = (args.only,) if args.only else MEASUREMENTS
    directory = Path(tempfile.mkdtemp(prefix="accelml-bench-"))
    walls: dict[str, list[float]] = {name: [0.0, 0.0] for name in MEASUREMENTS}
    found: dict[str, list[dict]] = {name: [{}, {}] for name in MEASUREMENTS}
    for measurement, index in ORDER:
        if measurement not in measurements:
            continue
        wall, comparison = run_once(measurement, index, args.scale, args.threads,
                                    args.skip_warmup_after, directory, args.max_rounds)
        failed = [f"{r.algorithm}/{r.backend}: {r.reason}" for r in comparison.failed]
        if failed:
            print("failed cases:", *failed, sep="\n  ")
            return 1
        walls[measurement][index] = wall
        found[measurement][index] = phase_speedups(comparison)
        rounds = sorted({r.repeats for r in comparison.results})
        print(f"run {index + 1} {measurement:11s} {wall:7.1f} s wall, rounds per case {rounds}: "
              + ", ".join(f"{algorithm} {phase} {value.value:.2f}x +-{halfwidth(value):.0%}"
                          for (algorithm, phase), value in sorted(found[measurement][index].items())),
              flush=True)
    print(f"\nscale {args.scale}, {args.threads} thread(s) per case, 3-{args.max_rounds} rounds; "
          "sklearnex speed-up over sklearn (interval); 'inside': run 2's speed-up in run 1's interval; +-: the larger "
          "half-width of run 1's / run 2's interval")
    for measurement in measurements:
        first, second = found[measurement]
        inside = narrow = total = 0
        print(f"\n{measurement}")
        for key in sorted(first):
            if key not in second:
                continue
            a, b = first[key], second[key]
            ok = a.low <= b.value <= a.high
            widths = halfwidth(a), halfwidth(b)
            inside += ok
            narrow += sum(width <= 0.10 for width in widths)
            total += 1
            print(f"  {key[0]:26s} {key[1]:7s} run 1 {a.value:6.2f}x ({a.low:.2f}-{a.high:.2f}) "
                  f"run 2 {b.value:6.2f}x ({b.low:.2f}-{b.high:.2f})  "
                  f"{'inside' if ok else 'OUTSIDE':7s} +-{widths[0]:.1%} / +-{widths[1]:.1%}")
        print(f"  run 2 inside run 1's interval: {inside}/{total}; intervals within +-10%: "
              f"{narrow}/{2 * total}; wall {walls[measurement][0]:.1f} + "
              f"{walls[measurement][1]:.1f} = {sum(walls[measurement]):.1f} s")
    if args.only:
        print(f"results store: {directory / 'results'}")
        return 0
    ratio = sum(walls["interleaved"]) / sum(walls["isolated"])
    print(f"\nwall time: interleaved / isolated = {ratio:.2f} (target <= 1: "
          f"{'met' if ratio <= 1 else 'NOT met'})")
    print(f"results store: {directory / 'results'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
