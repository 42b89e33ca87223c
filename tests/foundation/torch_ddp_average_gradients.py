"""A tiny Keras 3 program on the torch backend, trained data-parallel with torch.distributed (gloo).

First a plain check of the all-reduce: each rank contributes a tensor filled with its rank,
``all_reduce(SUM) / world_size`` must give the mean of the ranks on every rank. Then each rank
sees different data and trains two models side by side in the same process, each from its own
initial weights: the ``averaged`` one wrapped in DDP, which broadcasts rank 0's weights when it
wraps the model and averages the gradients in its buckets during ``backward()``; the
``not_averaged`` one not wrapped (no broadcast, no gradient all-reduce: the negative control),
so its ranks must end with different weights. Each rank writes the all-reduced value and the
SHA-256 of each model's initial and final weights to OUT_DIR/rank<R>.json.

    torchrun --standalone --nproc-per-node 2 torch_ddp_average_gradients.py OUT_DIR
"""

import gc
import hashlib
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"

from accelml.dl.common import seed_keras, skipped_imports  # noqa: E402
from accelml.dl.rank import UNUSED_IN_A_RANK  # noqa: E402

with skipped_imports(UNUSED_IN_A_RANK):   # what Keras imports where installed, unused here
    import keras
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def main(out_dir: str) -> None:
    dist.init_process_group(backend="gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    assert keras.backend.backend() == "torch", keras.backend.backend()

    mine = torch.full((3,), float(rank), dtype=torch.float32)
    dist.all_reduce(mine, op=dist.ReduceOp.SUM)
    averaged = mine / size
    expected = (size - 1) / 2
    assert torch.allclose(averaged, torch.full((3,), expected)), (averaged, expected)

    rng = np.random.default_rng(rank)
    features = torch.from_numpy(rng.normal(size=(64, 8)).astype("float32"))
    targets = torch.from_numpy(rng.normal(size=(64, 1)).astype("float32"))
    record = {"rank": rank, "size": size, "allreduce_average": averaged.tolist()}
    for label, average in (("averaged", True), ("not_averaged", False)):
        record[label] = train(features, targets, average, rank)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
        json.dump(record, handle)
    dist.destroy_process_group()


def train(features: torch.Tensor, targets: torch.Tensor, average: bool, rank: int) -> dict:
    """Five steps, the model in DDP when ``average``; the SHA-256 of the initial and the final
    weights (initial: once DDP has wrapped the model)."""
    seed_keras(keras, 100 + rank)   # no TensorFlow
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    # A Keras 3 model on the torch backend is a torch.nn.Module: DDP broadcasts its parameters
    # from rank 0 and all-reduces (averages) their gradients during backward().
    step_model = DistributedDataParallel(model) if average else model
    optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    optimizer.build(model.trainable_variables)
    initial = weights_sha256(model)
    for _ in range(5):
        model.zero_grad()
        loss = torch.mean(torch.square(step_model(features, training=True) - targets))
        loss.backward()
        gradients = [variable.value.grad for variable in model.trainable_variables]
        with torch.no_grad():
            optimizer.apply(gradients, model.trainable_variables)
    # Freed here, before destroy_process_group(). DDP's Reducer holds the process group, and
    # freeing the Reducer does not release the GIL: were it the last holder, ~ProcessGroupGloo
    # would join gloo's worker thread while that thread waits for the GIL to free a finished
    # all-reduce's Python state -- a deadlock after the work is done (seen here about 1 run in
    # 10 on 2 busy cores; pytorch issue 56297). Freed first, the DDP wrapper leaves the group
    # to destroy_process_group(), which releases the GIL while the group shuts down.
    del step_model
    gc.collect()
    return {"initial_weights_sha256": initial, "weights_sha256": weights_sha256(model),
            "loss": float(loss.detach())}


def weights_sha256(model: "keras.Model") -> str:
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


if __name__ == "__main__":
    main(sys.argv[1])
