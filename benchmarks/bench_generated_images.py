"""Test accuracy of a model on accelml's generated images (the workshop's shape by default).

Trains ``fashion_mnist_cnn`` on generated 28x28x3 images, 60,000 for training and 10,000 for
test, per-GPU batch 64, SGD with momentum 0.9 at learning rate 0.01, 3 epochs, through
``accelml.dl.launch`` (strategy ``keras-fit``, Keras on JAX, one device) and prints the test
accuracy after every run. The generator promises a band: above chance (0.1) by far, at most
``1 - IMAGE_LABEL_NOISE`` (0.92) whatever the model (see
:func:`accelml.datasets.loaders.generated_images`); the shipped DL specs should land in
0.6-0.95 on one GPU.

    .venv/bin/python benchmarks/bench_generated_images.py [--samples 60000] [--epochs 3]
        [--size 28] [--model fashion_mnist_cnn] [--seed 0] [--engine jax]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fashion_mnist_cnn")
    parser.add_argument("--samples", type=int, default=60_000, help="training images")
    parser.add_argument("--test-samples", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=28, help="image height and width")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--seed", type=int, action="append", help="data and model seed(s)")
    parser.add_argument("--engine", default="jax", help="Keras backend: jax, torch, tensorflow")
    args = parser.parse_args()

    from accelml.datasets.loaders import IMAGE_LABEL_NOISE, generated_images
    from accelml.dl import TrainingConfig, launch

    started = time.perf_counter()
    generated_images(args.samples, args.test_samples, size=args.size, seed=0)
    print(f"drawing {args.samples + args.test_samples:,} images of {args.size}x{args.size}x3: "
          f"{time.perf_counter() - started:.1f} s; accuracy ceiling {1 - IMAGE_LABEL_NOISE:.2f}, "
          f"chance 0.10")
    print(f"{'model':<20}{'size':>5}{'train':>8}{'test':>7}{'epochs':>7}{'seed':>5}"
          f"{'train acc':>10}{'test acc':>9}{'seconds':>9}")
    for seed in args.seed or [0]:
        config = TrainingConfig(model=args.model, dataset="generated", strategy="keras-fit",
                                keras_backend=args.engine, image_size=args.size,
                                train_samples=args.samples, test_samples=args.test_samples,
                                batch_size=args.batch, epochs=args.epochs,
                                learning_rate=args.learning_rate, optimizer="sgd", momentum=0.9,
                                seed=seed, time_limit_s=3600)
        started = time.perf_counter()
        result = launch(config)
        print(f"{args.model:<20}{args.size:>5}{args.samples:>8}{args.test_samples:>7}"
              f"{args.epochs:>7}{seed:>5}{result.final_accuracy:>10.3f}"
              f"{result.test_accuracy:>9.3f}{time.perf_counter() - started:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
