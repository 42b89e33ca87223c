"""One GPU's training step of Keras 3 on PyTorch, three ways: eager, CUDA graph, Inductor-compiled.

For each model (the workshop CNN at batch 64 on 28x28 images; ResNet50V2 at 128 px, bf16 mixed
precision, batch 256), trains ``torch-ddp`` on one rank through :func:`accelml.dl.launch` (the
very loop a case runs) with each ``step_capture``: ``none`` (eager), ``cuda-graph`` (the
default on GPUs today: eager kernels replayed from a CUDA graph) and ``compiled`` (forward and
loss compiled by Inductor, backward through AOTAutograd, the step replayed from a CUDA graph).
Prints ms per step and images/s (median of the epochs after the first, which holds warm-up,
compiling and recording), the set-up seconds before the first epoch and the first epoch's
seconds (where compiling shows) and the path the run recorded, which names the graphs Dynamo
traced the compiled step into: 2 under torch-ddp means no break inside the model (Dynamo
always splits at DistributedDataParallel's forward: the loop's frame, and the model's frame
under DDP). ``--explain`` then counts the graph breaks ``torch._dynamo.explain`` finds in each
model's forward and loss as built and after ``prepare_for_inductor`` (ResNet50V2 as built
takes minutes to explain: every break recompiles).

    python benchmarks/bench_keras_torch_step.py                      # GPU, ~3 minutes on an H100
    python benchmarks/bench_keras_torch_step.py --explain --models fashion_mnist_cnn
    python benchmarks/bench_keras_torch_step.py --device cpu --tiny  # tries the script out

``--tiny`` swaps ResNet50V2 for ``small_resnet`` and cuts batches and steps. Needs Keras 3 and
PyTorch (no TensorFlow). Figures name the card.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ["KERAS_BACKEND"] = "torch"

from accelml.dl import TrainingConfig, launch  # noqa: E402
from accelml.errors import AccelmlError  # noqa: E402

CAPTURES = ("none", "cuda-graph", "compiled")
warnings.filterwarnings("ignore", message="Dynamo detected a call to a `functools.lru_cache`")


@dataclass(frozen=True)
class Workload:
    name: str
    model: str
    image_size: int
    batch: int
    steps: int
    precision: str
    options: tuple[tuple[str, object], ...] = ()


FULL = (Workload("workshop CNN", "fashion_mnist_cnn", 28, 64, 150, "float32"),
        Workload("ResNet50V2", "resnet50v2", 128, 256, 16, "mixed_bfloat16"))
TINY = (Workload("workshop CNN", "fashion_mnist_cnn", 28, 16, 4, "float32"),
        Workload("small_resnet", "small_resnet", 16, 8, 3, "mixed_bfloat16",
                 (("blocks", 1), ("width", 4))))


def config_of(work: Workload, device: str, capture: str, epochs: int) -> TrainingConfig:
    return TrainingConfig(model=work.model, dataset="generated", image_size=work.image_size,
                          train_samples=work.batch * work.steps, test_samples=work.batch,
                          strategy="torch-ddp", keras_backend="torch", device=device,
                          batch_size=work.batch, epochs=epochs, learning_rate=0.01,
                          precision=work.precision, batchnorm_momentum=0.9,
                          step_capture=capture, model_options=work.options, seed=0,
                          time_limit_s=600)


def measure(work: Workload, device: str, capture: str, epochs: int) -> str:
    """One row: the run's figures, or why it could not run."""
    started = time.perf_counter()
    try:
        result = launch(config_of(work, device, capture, epochs))
    except AccelmlError as error:
        return f"{work.name:<13} {capture:<11} unavailable: {str(error).splitlines()[0]}"
    wall = time.perf_counter() - started
    step_ms = 1000 * statistics.median(result.steady_epoch_times_s) / result.steps_per_epoch
    return (f"{work.name:<13} {capture:<11} {step_ms:>8.2f} {result.images_per_s or 0:>9.0f} "
            f"{result.setup_s:>7.1f} {result.first_epoch_s:>8.1f} {wall:>6.0f}  {result.path}")


def graph_breaks_row(work: Workload, device: str) -> str:
    """The graph breaks of the model's forward and loss, as the loop compiles them."""
    import keras
    import torch

    from accelml.dl.models import build_model
    from accelml.dl.strategies._torch_compile import graph_breaks, prepare_for_inductor

    keras.mixed_precision.set_global_policy(work.precision)
    target = "cuda" if device == "gpu" else "cpu"
    rows = []
    for prepared in (False, True):
        torch._dynamo.reset()
        model = build_model(work.model, keras, (work.image_size, work.image_size, 3), 10,
                            **dict(work.options))
        if prepared:
            prepare_for_inductor(model)
        loss = keras.losses.SparseCategoricalCrossentropy()
        images = torch.rand(8, work.image_size, work.image_size, 3, device=target)
        labels = torch.randint(0, 10, (8,), device=target)
        started = time.perf_counter()
        count, reasons = graph_breaks(torch, _forward_and_loss(model, loss), images, labels)
        rows.append(f"{work.name:<13} {'prepared' if prepared else 'as built':<9} {count:>6} "
                    f"{time.perf_counter() - started:>5.0f}s  " + "; ".join(reasons[:3]))
    return "\n".join(rows)


def _forward_and_loss(model: Any, loss: Any) -> Any:
    """The loop's compiled function: the training-mode forward pass and the loss."""
    return lambda images, labels: loss(labels, model(images, training=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--tiny", action="store_true", help="small models, few steps")
    parser.add_argument("--captures", nargs="+", choices=CAPTURES, default=list(CAPTURES))
    parser.add_argument("--models", nargs="+", help="names of the workloads (default: both)")
    parser.add_argument("--epochs", type=int, default=3, help="the first is warm-up")
    parser.add_argument("--explain", action="store_true",
                        help="also count graph breaks with torch._dynamo.explain")
    args = parser.parse_args(argv)
    workloads = [w for w in (TINY if args.tiny else FULL)
                 if not args.models or w.model in args.models or w.name in args.models]
    print(f"{'model':<13} {'capture':<11} {'ms/step':>8} {'img/s':>9} {'setup s':>7} "
          f"{'epoch0 s':>8} {'wall':>6}  path", flush=True)
    for work in workloads:
        for capture in args.captures:
            print(measure(work, args.device, capture, args.epochs), flush=True)
    if args.explain:
        print(f"\n{'model':<13} {'model is':<9} {'breaks':>6} {'took':>6}  reasons", flush=True)
        for work in workloads:
            print(graph_breaks_row(work, args.device), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
