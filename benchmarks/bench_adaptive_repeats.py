"""Adaptive repeats vs a fixed 6-repeat harness: the same medians for less wall time?

Runs the four cases scikit-learn_bench's users run (KMeans 250k x 50, RandomForest 120k x 20,
LogisticRegression 250k x 50, KNN brute 60k x 20; sklearn vs sklearnex) through the real
pipeline (one process per case, dask LocalCluster, results store) under two policies, in
one run:

* fixed: one warm-up round, then 6 counted repeats, whatever the first run took;
* adaptive: at least 3 and at most 6 counted repeats, stopping once every phase's median has
  a confidence interval within +-5%; a phase whose first run takes ``--skip-warmup-after``
  seconds (2 by default, accelml's default) counts that run instead of throwing it away.

It prints, per case and phase, both medians with their confidence intervals and whether each
median lies inside the other's interval, then the wall time of each policy and their ratio.
Target (issue 17): adaptive wall time <= 0.6 x fixed, every median inside the other's interval.
The order of the policies alternates over ``--rounds`` so that drifting load favours neither.

Read "inside" against two yardsticks the script also prints:

* the control (``--rounds 2`` or more): how many of the fixed policy's own medians the fixed
  policy reproduces from one run to the next, by the same test;
* the expectation: if both intervals were exact 95% intervals of the same median, each
  median would fall inside the other's interval with probability P(|Z| <= 1.96 / sqrt 2) =
  0.83, so all 16 of one round only about 5% of the time (phases independent); "overlap",
  the test of a significant difference, fails 0.6% of the time per phase.

    python benchmarks/bench_host_drift.py     # how much this host's speed moves over a minute

    python benchmarks/bench_adaptive_repeats.py                   # full size: long on 2 cores
    python benchmarks/bench_adaptive_repeats.py --scale 0.05 --skip-warmup-after 0.2   # a check
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SPEC = """
name = "bench_adaptive_repeats_{label}"
reference = "sklearn"
repeats = {repeats}
warmup = 1
time_limit = 7200
threads = {threads}

[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = {n_kmeans}
n_features = 50
centers = 10
seed = 0

[datasets.forest]
source = "generated"
generator = "classification"
n_samples = {n_forest}
n_features = 20
n_classes = 2
seed = 0

[datasets.logistic]
source = "generated"
generator = "classification"
n_samples = {n_logistic}
n_features = 50
n_classes = 2
seed = 0

[datasets.neighbours]
source = "generated"
generator = "classification"
n_samples = {n_knn}
n_features = 20
n_classes = 2
seed = 0

[[cases]]
algorithm = "kmeans"
backend = ["sklearn", "sklearnex"]
dataset = "blobs"
params = {{n_clusters = 10, n_init = 1, random_state = 42}}

[[cases]]
algorithm = "random_forest_classifier"
backend = ["sklearn", "sklearnex"]
dataset = "forest"
params = {{n_estimators = 100, random_state = 0}}

[[cases]]
algorithm = "logistic_regression"
backend = ["sklearn", "sklearnex"]
dataset = "logistic"

[[cases]]
algorithm = "knn_classifier"
backend = ["sklearn", "sklearnex"]
dataset = "neighbours"
params = {{neighbor_search = "brute"}}
"""

#: The rows of each case's data at --scale 1 (issue 17's sizes).
ROWS = {"n_kmeans": 250_000, "n_forest": 120_000, "n_logistic": 250_000, "n_knn": 60_000}

FIXED = "{min = 6, max = 6, skip_warmup_after = false}"
ADAPTIVE = "{{min = 3, max = 6, target = 0.05, skip_warmup_after = {skip}}}"


def run_policy(label: str, repeats: str, scale: float, threads: int, results: Path, cache: Path):
    from accelml.comparison import Comparison
    from accelml.orchestration import run_experiment
    from accelml.results.store import ResultsStore
    from accelml.spec.load import load_spec_text

    sizes = {name: max(200, int(rows * scale)) for name, rows in ROWS.items()}
    text = SPEC.format(label=label, repeats=repeats, threads=threads, **sizes)
    experiment = load_spec_text(text, f"<{label}>")
    store = ResultsStore(results)
    started = time.perf_counter()
    run = run_experiment(experiment, store, cache_dir=str(cache))
    wall = time.perf_counter() - started
    return wall, Comparison.from_store(store, run.run_id)


def inside(value: float, timing) -> bool:
    return timing.ci_low <= value <= timing.ci_high


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="data size factor (1: 250k/120k/250k/60k rows, issue 17's cases)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of each policy, order alternating (default 1)")
    parser.add_argument("--threads", type=int, default=2, help="threads per case (default 2)")
    parser.add_argument("--skip-warmup-after", type=float, default=2.0,
                        help="adaptive policy: seconds after which a first run counts (default 2)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="accelml-bench-"))
    walls: dict[str, list[float]] = {"fixed": [], "adaptive": []}
    comparisons: dict[str, list] = {"fixed": [], "adaptive": []}
    adaptive = ADAPTIVE.format(skip=args.skip_warmup_after)
    for round_index in range(args.rounds):
        order = ("fixed", "adaptive") if round_index % 2 == 0 else ("adaptive", "fixed")
        for label in order:
            wall, comparison = run_policy(label, FIXED if label == "fixed" else adaptive,
                                          args.scale, args.threads, directory / "results",
                                          directory / "cache")
            failed = [f"{r.algorithm}/{r.backend}: {r.reason}" for r in comparison.failed]
            if failed:
                print("failed cases:", *failed, sep="\n  ")
                return 1
            walls[label].append(wall)
            comparisons[label].append(comparison)
            print(f"round {round_index + 1}: {label:8s} policy {wall:8.1f} s wall", flush=True)

    print(f"\nscale {args.scale}, {args.threads} thread(s) per case; medians with their "
          "confidence intervals; 'inside': each median lies in the other policy's interval")
    print(f"{'case':34s} {'phase':7s} {'fixed median (CI) n':>30s} {'adaptive median (CI) n':>31s}"
          f" {'inside':>7s}  warm-up of the adaptive policy")
    inside_count = overlap_count = total = 0
    for index in range(args.rounds):
        fixed = {(r.algorithm, r.backend): r for r in comparisons["fixed"][index].results}
        for result in comparisons["adaptive"][index].results:
            reference = fixed[(result.algorithm, result.backend)]
            for phase in ("fit", "predict"):
                a, f = result.timing(phase), reference.timing(phase)
                if a is None or f is None:
                    continue
                both = inside(a.median, f) and inside(f.median, a)
                inside_count += both
                overlap_count += a.ci_low <= f.ci_high and f.ci_low <= a.ci_high
                total += 1
                warmup = "first run counted" if phase in result.warmup_note.split(":")[0] \
                    else f"{len(a.warmup_samples)} warm-up run(s)"
                print(f"r{index + 1} {result.algorithm[:22] + ' ' + result.backend:31s} {phase:7s} "
                      f"{f.median:9.4f} s ({f.ci_low:.4f}-{f.ci_high:.4f}) n={f.count} "
                      f"{a.median:9.4f} s ({a.ci_low:.4f}-{a.ci_high:.4f}) n={a.count}"
                      f"{'~' if a.noisy else ' '} {'yes' if both else 'NO':>6s}  {warmup}")
    if args.rounds > 1:
        # the control: does the fixed policy reproduce its own medians from one run to the next?
        again = control_total = 0
        first = {(r.algorithm, r.backend): r for r in comparisons["fixed"][0].results}
        for result in comparisons["fixed"][1].results:
            for phase in ("fit", "predict"):
                a, f = result.timing(phase), first[(result.algorithm, result.backend)].timing(phase)
                if a is not None and f is not None:
                    again += inside(a.median, f) and inside(f.median, a)
                    control_total += 1
        print(f"control: fixed round 2 vs fixed round 1, medians inside each other's interval: "
              f"{again}/{control_total}")
    fixed_wall, adaptive_wall = sum(walls["fixed"]), sum(walls["adaptive"])
    fixed_fits = sum(len(r.timing("fit").samples) + len(r.timing("fit").warmup_samples)
                     for c in comparisons["fixed"] for r in c.results)
    adaptive_fits = sum(len(r.timing("fit").samples) + len(r.timing("fit").warmup_samples)
                        for c in comparisons["adaptive"] for r in c.results)
    print()
    print(f"medians inside the other policy's interval: {inside_count}/{total} (exact 95% intervals: "
          f"{0.834 * total:.1f} expected); intervals overlapping: {overlap_count}/{total}")
    print(f"fits run (counted + warm-up): fixed {fixed_fits}, adaptive {adaptive_fits}")
    ratio = adaptive_wall / fixed_wall
    print(f"wall time: fixed {fixed_wall:.1f} s, adaptive {adaptive_wall:.1f} s = {ratio:.2f} x fixed "
          f"(target <= 0.60: {'met' if ratio <= 0.6 else 'NOT met'})")
    print(f"results store: {directory / 'results'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
