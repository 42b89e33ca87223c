"""Per-step cost of accelml's Horovod path against a plain horovod.tensorflow loop.

Both train the same Keras 3 model on the same generated images with the same per-rank
batch, on the same number of ranks (``horovodrun --gloo``). The plain loop is the Horovod
TF2 example: ``hvd.DistributedGradientTape`` (on the tf.Variables under the Keras 3 ones),
broadcast after the first step, tf.data
``shard -> cache -> shuffle -> batch -> prefetch``. accelml's path adds per-step metric
accumulation, the warm-up schedule, the per-epoch metric all-reduce and BatchNorm averaging.
The figure is the median epoch time (first epoch excluded) divided by the steps per epoch.

    .venv/bin/python benchmarks/bench_horovod_overhead.py --ranks 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def plain_rank(args) -> None:
    """One rank of the plain loop (run by horovodrun)."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(
        max(1, (os.cpu_count() or 1) // hvd.local_size()))
    import keras

    from accelml.dl.data import load_image_data
    from accelml.dl.models import build_model

    data = load_image_data("generated", train_samples=args.samples, test_samples=16,
                           image_size=args.image_size, seed=0)
    keras.utils.set_random_seed(0)
    model = build_model(args.model, keras, data.image_shape, data.classes)
    optimizer = keras.optimizers.SGD(0.01 * hvd.size(), momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    dataset = (tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
               .shard(hvd.size(), hvd.rank())
               .map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y))
               .cache().shuffle(args.samples).batch(args.batch_size, drop_remainder=True)
               .take(args.steps).prefetch(tf.data.AUTOTUNE))

    @tf.function
    def step(images, labels, first):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        # the tape wants tf.Variables (it calls .ref()); Keras 3 keeps them in .value
        grads = tape.gradient(loss, [v.value for v in model.trainable_variables])
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=False))
        if first:
            hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)
            hvd.broadcast_variables([v.value for v in optimizer.variables], root_rank=0)
        return loss

    times = []
    first = True
    for _ in range(args.epochs):
        start = time.perf_counter()
        for images, labels in dataset:
            loss = step(images, labels, first)
            first = False
        float(hvd.allreduce(loss))      # one sync point per epoch, like accelml's metrics
        times.append(time.perf_counter() - start)
    if hvd.rank() == 0:
        with open(args.out, "w") as handle:
            json.dump({"epoch_times_s": times, "steps": args.steps}, handle)


def run_plain(args, ranks: int) -> dict:
    horovodrun = shutil.which("horovodrun", path=os.path.dirname(sys.executable))
    out = tempfile.mktemp(suffix=".json")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
           "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": "tensorflow"}
    command = [horovodrun, "-np", str(ranks), "-H", f"localhost:{ranks}", "--gloo",
               sys.executable, os.path.abspath(__file__), "--plain-rank", "--out", out,
               "--model", args.model, "--samples", str(args.samples), "--image-size",
               str(args.image_size), "--batch-size", str(args.batch_size), "--steps",
               str(args.steps), "--epochs", str(args.epochs)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"plain horovod loop failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    with open(out) as handle:
        result = json.load(handle)
    os.remove(out)
    return result


def run_accelml(args, ranks: int) -> dict:
    from accelml.dl import TrainingConfig, launch

    config = TrainingConfig(model=args.model, dataset="generated", strategy="horovod",
                            train_samples=args.samples, test_samples=16,
                            image_size=args.image_size, batch_size=args.batch_size,
                            epochs=args.epochs, steps_per_epoch=args.steps,
                            learning_rate=0.01, warmup_epochs=1, time_limit_s=900)
    result = launch(config, ranks=ranks, launcher="horovodrun")
    return {"epoch_times_s": list(result.epoch_times_s), "steps": result.steps_per_epoch}


def per_step_ms(result: dict) -> float:
    return statistics.median(result["epoch_times_s"][1:]) / result["steps"] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--model", default="mnist_cnn")
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--image-size", type=int, default=28)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plain-rank", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_rank:
        plain_rank(args)
        return
    print(f"model {args.model}, generated {args.image_size}x{args.image_size}x3 images, batch "
          f"{args.batch_size} per rank, {args.steps} steps/epoch, {args.epochs} epochs "
          f"(first excluded); {os.cpu_count()} CPU cores")
    print(f"rounds: {args.rounds}, plain and accelml alternating (shared machines drift); "
          "figures are medians over rounds")
    print(f"{'ranks':>5} {'plain ms/step':>14} {'accelml ms/step':>16} {'overhead':>9}  rounds")
    for ranks in args.ranks:
        plain, ours = [], []
        for round_index in range(args.rounds):
            runs = [("plain", run_plain), ("ours", run_accelml)]
            for name, run in runs if round_index % 2 == 0 else runs[::-1]:
                (plain if name == "plain" else ours).append(per_step_ms(run(args, ranks)))
        p, o = statistics.median(plain), statistics.median(ours)
        detail = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(plain, ours, strict=False))
        print(f"{ranks:>5} {p:>14.2f} {o:>16.2f} {o / p - 1:>+8.1%}  {detail}", flush=True)


if __name__ == "__main__":
    main()
