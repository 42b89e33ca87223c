"""A tiny Keras 3 program trained data-parallel with horovod.tensorflow primitives.

First a plain check of the all-reduce: each rank contributes a tensor filled with its rank,
``hvd.allreduce(op=hvd.Average)`` must give the mean of the ranks on every rank. Then each rank
sees different data and trains two models side by side in the same process, both
started from rank 0's weights (broadcast): the ``averaged`` one averages its gradients with
``grouped_allreduce`` every step, the ``not_averaged`` one skips the allreduce (the negative
control), so its ranks must end with different weights. Each rank writes the SHA-256 of each
model's initial and final weights and the all-reduced value to OUT_DIR/rank<R>.json.

    horovodrun -np 2 -H localhost:2 --gloo python horovod_average_gradients.py OUT_DIR
"""

import hashlib
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from accelml.dl.common import seed_keras, skipped_imports  # noqa: E402
from accelml.dl.rank import UNUSED_IN_A_RANK  # noqa: E402

with skipped_imports(UNUSED_IN_A_RANK):   # what Keras imports where installed, unused here
    import horovod.tensorflow as hvd
    import keras
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main(out_dir: str) -> None:
    hvd.init()
    mine = tf.fill((3,), float(hvd.rank()))
    averaged = hvd.allreduce(mine, op=hvd.Average, name="rank_mean")
    expected = (hvd.size() - 1) / 2
    assert np.allclose(averaged.numpy(), expected), (averaged, expected)

    rng = np.random.default_rng(hvd.rank())
    features = rng.normal(size=(64, 8)).astype("float32")
    targets = rng.normal(size=(64, 1)).astype("float32")
    record = {"rank": hvd.rank(), "size": hvd.size(), "allreduce_average": averaged.numpy().tolist()}
    for label, average in (("averaged", True), ("not_averaged", False)):
        record[label] = train(features, targets, average)
    with open(os.path.join(out_dir, f"rank{hvd.rank()}.json"), "w") as handle:
        json.dump(record, handle)


def train(features: np.ndarray, targets: np.ndarray, average: bool) -> dict[str, str]:
    """Five steps from rank 0's weights; the SHA-256 of the initial and the final weights."""
    seed_keras(keras, 100 + hvd.rank())
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    optimizer.build(model.trainable_variables)
    # Keras 3 variables wrap a tf.Variable (``.value``); Horovod broadcasts the tf.Variables.
    hvd.broadcast_variables([v.value for v in model.variables + optimizer.variables], root_rank=0)
    initial = weights_sha256(model)
    for _ in range(5):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(features, training=True) - targets))
        gradients = tape.gradient(loss, model.trainable_variables)
        if average:
            gradients = hvd.grouped_allreduce(gradients, op=hvd.Average)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    return {"initial_weights_sha256": initial, "weights_sha256": weights_sha256(model)}


def weights_sha256(model: "keras.Model") -> str:
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


if __name__ == "__main__":
    main(sys.argv[1])
