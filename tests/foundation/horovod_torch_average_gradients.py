"""A tiny Keras 3 program on the torch backend, trained data-parallel with horovod.torch primitives.

First a plain check of the all-reduce: each rank contributes a tensor filled with its rank,
``hvd.allreduce(op=hvd.Average)`` must give the mean of the ranks on every rank. Then each rank
sees different data and trains two models side by side in the same process, both started from
rank 0's weights and optimizer state (broadcast): the ``averaged`` one averages its gradients
with ``grouped_allreduce`` every step, the ``not_averaged`` one skips that all-reduce (the
negative control), so its ranks must end with different weights. Each rank writes the
all-reduced value and the SHA-256 of each model's initial and final weights to
OUT_DIR/rank<R>.json.

    horovodrun -np 2 -H localhost:2 --gloo python horovod_torch_average_gradients.py OUT_DIR
"""

import hashlib
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"

from accelml.dl.common import seed_keras, skipped_imports  # noqa: E402
from accelml.dl.rank import UNUSED_IN_A_RANK  # noqa: E402

with skipped_imports(UNUSED_IN_A_RANK):   # what Keras imports where installed, unused here
    import horovod.torch as hvd
    import keras
import numpy as np  # noqa: E402
import torch  # noqa: E402


def main(out_dir: str) -> None:
    hvd.init()
    torch.set_num_threads(1)
    assert keras.backend.backend() == "torch", keras.backend.backend()

    mine = torch.full((3,), float(hvd.rank()), dtype=torch.float32)
    averaged = hvd.allreduce(mine, op=hvd.Average, name="rank_mean")
    expected = (hvd.size() - 1) / 2
    assert torch.allclose(averaged, torch.full((3,), expected)), (averaged, expected)

    rng = np.random.default_rng(hvd.rank())
    features = torch.from_numpy(rng.normal(size=(64, 8)).astype("float32"))
    targets = torch.from_numpy(rng.normal(size=(64, 1)).astype("float32"))
    record = {"rank": hvd.rank(), "size": hvd.size(), "allreduce_average": averaged.tolist()}
    for label, average in (("averaged", True), ("not_averaged", False)):
        record[label] = train(features, targets, average, label)
    with open(os.path.join(out_dir, f"rank{hvd.rank()}.json"), "w") as handle:
        json.dump(record, handle)


def train(features: torch.Tensor, targets: torch.Tensor, average: bool, label: str) -> dict:
    """Five steps from rank 0's weights; the SHA-256 of the initial and the final weights."""
    seed_keras(keras, 100 + hvd.rank())   # no TensorFlow
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    optimizer.build(model.trainable_variables)
    # Keras 3 variables on torch wrap a torch Parameter/Tensor (``.value``); broadcast in place.
    for index, variable in enumerate(model.variables + optimizer.variables):
        variable.assign(hvd.broadcast(variable.value, root_rank=0, name=f"{label}.init.{index}"))
    initial = weights_sha256(model)
    for _ in range(5):
        model.zero_grad()
        loss = torch.mean(torch.square(model(features, training=True) - targets))
        loss.backward()
        gradients = [variable.value.grad for variable in model.trainable_variables]
        if average:
            gradients = hvd.grouped_allreduce(gradients, op=hvd.Average, name=f"{label}.gradients")
        with torch.no_grad():
            optimizer.apply(gradients, model.trainable_variables)
    return {"initial_weights_sha256": initial, "weights_sha256": weights_sha256(model),
            "loss": float(loss.detach())}


def weights_sha256(model: "keras.Model") -> str:
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


if __name__ == "__main__":
    main(sys.argv[1])
