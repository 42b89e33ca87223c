"""Data-parallel scaling of a spec's keras cases: epoch time, images/s, speedup, efficiency.

Runs every keras case of the spec (default: experiments/dl_cpu_scaling.toml) with
``accelml.dl.launch`` and prints, per strategy and number of ranks, the first epoch (apart),
the median of the other epochs, images/s over the other epochs, speedup and efficiency
(speedup / ranks) against the 1-rank case of the same strategy, the final test accuracy
and whether every rank ended with the same weights.

    .venv/bin/python benchmarks/bench_dl_scaling.py [SPEC] [--strategy horovod]
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", default=os.path.join(ROOT, "experiments",
                                                                "dl_cpu_scaling.toml"))
    parser.add_argument("--strategy", action="append", help="only these strategies")
    parser.add_argument("--epochs", type=int, help="override the spec's epochs")
    args = parser.parse_args()

    from accelml.dl import TrainingConfig, launch
    from accelml.dl.config import training_config_dict
    from accelml.errors import AccelmlError
    from accelml.spec.load import load_spec

    experiment = load_spec(args.spec)
    cases = [c for c in experiment.cases if c.backend == "keras"
             and (not args.strategy or c.strategy in args.strategy)]
    print(f"{args.spec}: {len(cases)} keras case(s); {os.cpu_count()} CPU cores on this machine")
    header = (f"{'strategy':<17}{'ranks':>7}{'global batch':>13}{'first s':>9}"
              f"{'median s':>9}{'images/s':>10}{'speedup':>8}{'effic.':>7}{'test acc':>9}"
              f"{'ranks agree':>12}")
    print(header)
    baseline: dict[str, float] = {}
    for case in sorted(cases, key=lambda c: (c.strategy or "", c.ranks)):
        config = TrainingConfig.from_dict(training_config_dict(case))
        if args.epochs:
            config = config.replace(epochs=args.epochs)
        try:
            result = launch(config)
        except AccelmlError as error:
            print(f"{case.strategy:<17}{case.ranks:>7}  failed: {error}")
            continue
        rate = result.images_per_s
        if case.ranks == 1:
            baseline[case.strategy] = rate
        speedup = rate / baseline[case.strategy] if case.strategy in baseline else float("nan")
        print(f"{result.strategy:<17}{result.ranks:>7}{result.global_batch:>13}"
              f"{result.first_epoch_s:>9.2f}{result.median_epoch_s:>9.3f}{rate:>10.0f}"
              f"{speedup:>8.2f}{speedup / result.ranks:>7.2f}{result.test_accuracy:>9.3f}"
              f"{str(result.ranks_agree):>12}", flush=True)


if __name__ == "__main__":
    main()
