"""How much this host's speed moves while nothing changes: one fit, back to back, for a minute.

Fits the same stock scikit-learn KMeans (200k x 50, 10 clusters, one init, fixed seed, the
cases' default of 2 threads) again and again in one process and prints, per run, wall time,
process CPU time and the host's CPU steal. Then the medians of every 6 consecutive runs
(what a 6-repeat policy would report, started at that moment) with the interval each
would give, and how many of those windows' medians fall outside the first window's
interval. On a shared VM the fit's speed moves in regimes of several seconds (on the 2-core
VM of issue 17: 0.19 s for ~5 s, then 0.155 s, CPU time moving with it, no steal), so
intervals taken within a few seconds cannot cover a rerun a minute later.

    python benchmarks/bench_host_drift.py --seconds 60
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _steal_ticks() -> int:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) if len(fields) > 8 else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to keep fitting")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()

    from sklearn.cluster import KMeans
    from sklearn.datasets import make_blobs
    from threadpoolctl import threadpool_limits

    from accelml.results.records import PhaseTiming

    features, _ = make_blobs(n_samples=args.rows, n_features=50, centers=10, random_state=0)
    walls: list[float] = []
    started = time.perf_counter()
    with threadpool_limits(args.threads):
        KMeans(n_clusters=10, n_init=1, random_state=42).fit(features)   # warm-up
        while time.perf_counter() - started < args.seconds:
            steal, cpu, wall = _steal_ticks(), time.process_time(), time.perf_counter()
            KMeans(n_clusters=10, n_init=1, random_state=42).fit(features)
            walls.append(time.perf_counter() - wall)
            print(f"{time.perf_counter() - started:6.1f} s  wall {walls[-1]:.4f}  cpu "
                  f"{time.process_time() - cpu:.4f}  steal ticks {_steal_ticks() - steal}")
    windows = [PhaseTiming.from_samples("fit", walls[i:i + 6]) for i in range(len(walls) - 5)]
    if not windows:
        print("too few runs for a 6-run window: give more --seconds")
        return 1
    first = windows[0]
    outside = sum(not first.ci_low <= w.median <= first.ci_high for w in windows[6:])
    medians = [w.median for w in windows]
    print(f"\n{len(walls)} fits: median {statistics.median(walls):.4f} s, "
          f"min {min(walls):.4f}, max {max(walls):.4f}")
    print(f"6-run windows: medians {min(medians):.4f}-{max(medians):.4f} s "
          f"({max(medians) / min(medians) - 1:.0%} apart); typical interval half-width "
          f"{statistics.median(w.ci_halfwidth_rel for w in windows):.1%}")
    print(f"medians of later windows (not overlapping the first) outside the first window's "
          f"interval ({first.ci_low:.4f}-{first.ci_high:.4f} s): {outside}/{max(0, len(windows) - 6)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
