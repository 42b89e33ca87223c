"""Adaptive repeats vs a fixed 6-repeat harness: same figures, less wall time?

Runs one comparison (KMeans, RandomForest, LogisticRegression, KNN; sklearn vs sklearnex;
50k-200k rows) twice through the real pipeline (one process per case, dask LocalCluster,
results store): once with a fixed count of 6 counted repeats, once with adaptive repeats
(at least 3, at most 6, stop when the median's confidence interval is within +-5%). Both
use one warm-up round. The order of the two harnesses alternates over ``--rounds`` so that
drifting machine load does not favour either.

It prints, per case: both medians with their spread, the repeats the adaptive harness used,
whether the adaptive median lies within the fixed harness's spread (min-max), and the
sklearnex speedup each harness reports; then the wall time of each harness.

    python benchmarks/bench_adaptive_repeats.py            # about 5-10 minutes on 2 cores
    python benchmarks/bench_adaptive_repeats.py --scale 0.25 --rounds 1   # quick look
"""

from __future__ import annotations

import argparse
import statistics
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
time_limit = 1800
threads = {threads}

[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = {n_blobs}
n_features = 20
centers = 8
seed = 0

[datasets.classification]
source = "generated"
generator = "classification"
n_samples = {n_classification}
n_features = 20
n_classes = 2
seed = 0

[datasets.classification_small]
source = "generated"
generator = "classification"
n_samples = {n_small}
n_features = 20
n_classes = 2
seed = 1

[[cases]]
algorithm = "kmeans"
backend = ["sklearn", "sklearnex"]
dataset = "blobs"
params = {{n_clusters = 8, n_init = 1, max_iter = 30, tol = 0.0, random_state = 0}}

[[cases]]
algorithm = "random_forest_classifier"
backend = ["sklearn", "sklearnex"]
dataset = "classification_small"
params = {{n_estimators = 20, max_depth = 10, random_state = 0}}

[[cases]]
algorithm = "logistic_regression"
backend = ["sklearn", "sklearnex"]
dataset = "classification"
params = {{max_iter = 100, tol = 1e-8}}

[[cases]]
algorithm = "knn_classifier"
backend = ["sklearn", "sklearnex"]
dataset = "classification_small"
params = {{n_neighbors = 5}}
"""

FIXED = "6"
ADAPTIVE = "{min = 3, max = 6, target = 0.05}"


def run_harness(label: str, repeats: str, scale: float, threads: int, results: Path,
                cache: Path):
    from accelml.compare import Comparison, run_experiment
    from accelml.results.store import ResultsStore
    from accelml.spec.load import load_spec_text

    text = SPEC.format(label=label, repeats=repeats, threads=threads,
                       n_blobs=int(200_000 * scale), n_classification=int(200_000 * scale),
                       n_small=int(50_000 * scale))
    experiment = load_spec_text(text, f"<{label}>")
    store = ResultsStore(results)
    started = time.perf_counter()
    run = run_experiment(experiment, store, cache_dir=str(cache))
    wall = time.perf_counter() - started
    return wall, Comparison.from_store(store, run.run_id)


def key(result) -> tuple[str, str]:
    return result.algorithm, result.backend


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="data size factor (1: 50k-200k rows)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each harness, order alternating (default 2: AB then BA)")
    parser.add_argument("--threads", type=int, default=1, help="threads per case")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="accelml-bench-"))
    cache = directory / "cache"
    walls = {"fixed": [], "adaptive": []}
    comparisons = {"fixed": [], "adaptive": []}
    for round_index in range(args.rounds):
        order = ("fixed", "adaptive") if round_index % 2 == 0 else ("adaptive", "fixed")
        for label in order:
            wall, comparison = run_harness(label, FIXED if label == "fixed" else ADAPTIVE,
                                           args.scale, args.threads, directory / "results", cache)
            failed = [f"{r.algorithm}/{r.backend}: {r.reason}" for r in comparison.failed]
            if failed:
                print("failed cases:", *failed, sep="\n  ")
                return 1
            walls[label].append(wall)
            comparisons[label].append(comparison)
            print(f"round {round_index + 1}: {label:8s} harness {wall:7.1f} s wall", flush=True)

    print()
    print(f"{'case':38s} {'fixed median (min-max) n':>30s} {'adaptive median (CI) n':>32s}"
          f" {'within':>7s} {'speedup fixed':>14s} {'adaptive':>9s}")
    from accelml.report.speed import speedups

    inside = total = 0
    for index in range(args.rounds):
        fixed, adaptive = comparisons["fixed"][index], comparisons["adaptive"][index]
        fixed_by = {key(r): r for r in fixed.results}
        speed_fixed = {key(r): s.value for r in fixed.results
                       for cid, s in speedups(fixed.results, "sklearn").items() if cid == r.case_id}
        speed_adaptive = {key(r): s.value for r in adaptive.results
                          for cid, s in speedups(adaptive.results, "sklearn").items()
                          if cid == r.case_id}
        for result in adaptive.results:
            reference = fixed_by[key(result)]
            a, f = result.timing("fit"), reference.timing("fit")
            within = f.minimum <= a.median <= f.maximum
            inside += within
            total += 1
            sf, sa = speed_fixed.get(key(result)), speed_adaptive.get(key(result))
            print(f"r{index + 1} {result.algorithm[:24] + ' ' + result.backend:35s} "
                  f"{f.median:8.3f} s ({f.minimum:.3f}-{f.maximum:.3f}) n={f.count} "
                  f"{a.median:8.3f} s ({a.ci_low:.3f}-{a.ci_high:.3f}) n={a.count}"
                  f"{'~' if a.noisy else ' '} {'yes' if within else 'NO':>5s}"
                  f" {_fmt(sf):>14s} {_fmt(sa):>9s}")
    fixed_wall, adaptive_wall = sum(walls["fixed"]), sum(walls["adaptive"])
    fixed_rounds = sum(r.repeats + r.warmup for c in comparisons["fixed"] for r in c.results)
    adaptive_rounds = sum(r.repeats + r.warmup for c in comparisons["adaptive"] for r in c.results)
    print()
    print(f"fit medians of the adaptive harness inside the fixed harness's min-max: {inside}/{total}")
    if args.rounds >= 2:
        # The noise floor: how well does the fixed harness reproduce itself on this machine?
        first = {key(r): r.timing("fit") for r in comparisons["fixed"][0].results}
        second = {key(r): r.timing("fit") for r in comparisons["fixed"][1].results}
        same = sum(first[k].minimum <= second[k].median <= first[k].maximum for k in first)
        print(f"noise floor: fixed round-2 medians inside fixed round-1 min-max: {same}/{len(first)}")
    noisy = sum(r.noisy for c in comparisons["adaptive"] for r in c.results)
    stopped_early = sum(r.stopped_because == "converged" for c in comparisons["adaptive"]
                        for r in c.results)
    print(f"adaptive cases that converged to +-5% before the maximum: {stopped_early}/{total}; "
          f"flagged noisy: {noisy}/{total}")
    print(f"timed rounds (incl. warm-up): fixed {fixed_rounds}, adaptive {adaptive_rounds}")
    print(f"wall time: fixed {fixed_wall:.1f} s, adaptive {adaptive_wall:.1f} s "
          f"({adaptive_wall / fixed_wall:.0%} of fixed; per round: fixed "
          f"{statistics.mean(walls['fixed']):.1f} s, adaptive {statistics.mean(walls['adaptive']):.1f} s)")
    print(f"results store: {directory / 'results'}")
    return 0


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
