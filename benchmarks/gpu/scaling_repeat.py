"""Does a scaling efficiency repeat? Compare two runs' speed-ups and efficiencies.

Reads the latest run of each results directory (``compare --results-dir``), and prints, for
each case on several ranks, its speed-up over the 1-rank case with the interval (paired
when the two took their epochs in turn), its efficiency, and how far run 2's efficiency is
from run 1's. Target (issue 29, the GPU pair jax-pmean 1 vs 4 GPUs): within +-0.02.

    python benchmarks/gpu/scaling_repeat.py RESULTS_1 RESULTS_2 [--within 0.02]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def latest_scalings(directory: str):
    from accelml.report.speed import scaling
    from accelml.results.store import ResultsStore

    store = ResultsStore(directory, read_only=True)
    run = store.latest_run()
    if run is None:
        raise SystemExit(f"{directory}: no run in this results directory")
    results = store.case_results(run.run_id)
    by_id = {result.case_id: result for result in results}
    return run.run_id, {case_id: (by_id[case_id], value) for case_id, value in scaling(results).items()
                        if by_id[case_id].ranks > 1}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--within", type=float, default=0.02, help="efficiency target (+-)")
    args = parser.parse_args()
    runs = [latest_scalings(directory) for directory in (args.first, args.second)]
    met = True
    for case_id, (result, one) in sorted(runs[0][1].items()):
        found = runs[1][1].get(case_id)
        if found is None:
            print(f"{case_id}: not in run 2")
            met = False
            continue
        two = found[1]
        gap = abs(two.efficiency - one.efficiency)
        met = met and gap <= args.within
        texts = []
        for value in (one, two):
            low, high = value.efficiency_interval
            texts.append(f"speed-up {value.speedup:.3f}x ({value.low:.3f}-{value.high:.3f} "
                         f"{value.measurement}), efficiency {value.efficiency:.3f} "
                         f"({low:.3f}-{high:.3f})")
        print(f"{result.strategy} x{result.ranks} on {result.device}, {result.algorithm}: "
              f"run 1 {texts[0]}; run 2 {texts[1]}; |efficiency 2 - 1| = {gap:.3f} "
              f"({'within' if gap <= args.within else 'NOT within'} +-{args.within})")
    print(f"runs {runs[0][0]} and {runs[1][0]}: efficiency repeats within +-{args.within}: "
          f"{'yes' if met and runs[0][1] else 'no'}")
    return 0 if met and runs[0][1] else 1


if __name__ == "__main__":
    sys.exit(main())
