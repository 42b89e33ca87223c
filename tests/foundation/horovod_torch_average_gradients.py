"""A tiny Keras 3 program on the torch backend, trained data-parallel with horovod.torch primitives.

First a plain check of the all-reduce: each rank contributes a tensor filled with its rank,
``hvd.allreduce(op=hvd.Average)`` must give the mean of the ranks on every rank. Then each rank
starts from different weights and sees different data; rank 0's weights and optimizer state are
broadcast, gradients are averaged with ``grouped_allreduce`` every step. Each rank writes the
all-reduced value and the SHA-256 of its final weights to OUT_DIR/rank<R>.json. With
``--no-average`` the gradient all-reduce is skipped, so the ranks must end with different
weights (the negative control).

    horovodrun -np 2 -H localhost:2 --gloo python horovod_torch_average_gradients.py OUT_DIR
"""

import hashlib
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"

import horovod.torch as hvd  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def main(out_dir: str, average: bool) -> None:
    hvd.init()
    torch.set_num_threads(1)
    assert keras.backend.backend() == "torch", keras.backend.backend()

    mine = torch.full((3,), float(hvd.rank()), dtype=torch.float32)
    averaged = hvd.allreduce(mine, op=hvd.Average, name="rank_mean")
    expected = (hvd.size() - 1) / 2
    assert torch.allclose(averaged, torch.full((3,), expected)), (averaged, expected)

    keras.utils.set_random_seed(100 + hvd.rank())
    rng = np.random.default_rng(hvd.rank())
    features = torch.from_numpy(rng.normal(size=(64, 8)).astype("float32"))
    targets = torch.from_numpy(rng.normal(size=(64, 1)).astype("float32"))
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    optimizer.build(model.trainable_variables)
    # Keras 3 variables on torch wrap a torch Parameter/Tensor (``.value``); broadcast in place.
    for index, variable in enumerate(model.variables + optimizer.variables):
        variable.assign(hvd.broadcast(variable.value, root_rank=0, name=f"init.{index}"))
    digest_before = weights_sha256(model)
    for _ in range(5):
        model.zero_grad()
        loss = torch.mean(torch.square(model(features, training=True) - targets))
        loss.backward()
        gradients = [variable.value.grad for variable in model.trainable_variables]
        if average:
            gradients = hvd.grouped_allreduce(gradients, op=hvd.Average, name="gradients")
        with torch.no_grad():
            optimizer.apply(gradients, model.trainable_variables)
    record = {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "allreduce_average": averaged.tolist(),
        "initial_weights_sha256": digest_before,
        "weights_sha256": weights_sha256(model),
        "loss": float(loss.detach()),
    }
    with open(os.path.join(out_dir, f"rank{hvd.rank()}.json"), "w") as handle:
        json.dump(record, handle)


def weights_sha256(model: "keras.Model") -> str:
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


if __name__ == "__main__":
    main(sys.argv[1], average="--no-average" not in sys.argv[2:])
