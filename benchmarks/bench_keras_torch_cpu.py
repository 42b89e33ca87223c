"""CPU step time of Keras 3 data-parallel paths: horovod on TensorFlow, horovod on torch, torch-ddp.

Each path trains the same tiny model through :func:`accelml.dl.launch` (real ranks: horovodrun
--gloo for Horovod, local processes on gloo for torch-ddp) with the same per-rank batch. The
figure is the median epoch time after the first epoch divided by the steps per epoch, i.e.
what one step costs every rank, all-reduce included. A path that cannot run here prints why.

    .venv/bin/python benchmarks/bench_keras_torch_cpu.py --ranks 1 2
    .venv/bin/python benchmarks/bench_keras_torch_cpu.py --model mnist_cnn --dataset generated \\
        --image-size 28 --learning-rate 0.01
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from accelml.dl import TrainingConfig, launch  # noqa: E402
from accelml.errors import AccelmlError  # noqa: E402

PATHS = (("horovod", "tensorflow"), ("horovod", "torch"), ("torch-ddp", "torch"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    args = parser.parse_args(argv)
    print(f"{'strategy':<10} {'engine':<11} {'ranks':>7} {'ms/step':>8} {'img/s':>8} "
          f"{'steps':>5} {'test acc':>8}")
    for strategy, engine in PATHS:
        for ranks in args.ranks:
            config = TrainingConfig(model=args.model, dataset=args.dataset, strategy=strategy,
                                    keras_backend=engine, ranks=ranks,
                                    batch_size=args.batch_size, epochs=args.epochs,
                                    image_size=args.image_size,
                                    learning_rate=args.learning_rate, seed=0,
                                    time_limit_s=600)
            try:
                result = launch(config)
            except AccelmlError as error:
                print(f"{strategy:<10} {engine:<11} {ranks:>7} unavailable: {error}")
                continue
            step_ms = 1000 * statistics.median(result.steady_epoch_times_s) / result.steps_per_epoch
            print(f"{strategy:<10} {engine:<11} {ranks:>7} {step_ms:>8.2f} "
                  f"{result.images_per_s or 0:>8.0f} {result.steps_per_epoch:>5} "
                  f"{result.test_accuracy or 0:>8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
