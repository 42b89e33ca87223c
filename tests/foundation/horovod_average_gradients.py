"""A tiny Keras 3 program trained data-parallel with horovod.tensorflow primitives.

Each rank starts from different weights and sees different data; rank 0's weights are
broadcast, gradients are averaged with ``grouped_allreduce`` every step. Each rank writes
the SHA-256 of its final weights to OUT_DIR/rank<R>.json. With ``--no-average`` the
allreduce is skipped, so the ranks must end with different weights (the negative control).

    horovodrun -np 2 -H localhost:2 --gloo python horovod_average_gradients.py OUT_DIR
"""

import hashlib
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import horovod.tensorflow as hvd  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main(out_dir: str, average: bool) -> None:
    hvd.init()
    keras.utils.set_random_seed(100 + hvd.rank())
    rng = np.random.default_rng(hvd.rank())
    features = rng.normal(size=(64, 8)).astype("float32")
    targets = rng.normal(size=(64, 1)).astype("float32")
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    optimizer.build(model.trainable_variables)
    # Keras 3 variables wrap a tf.Variable (``.value``); Horovod broadcasts the tf.Variables.
    hvd.broadcast_variables([v.value for v in model.variables + optimizer.variables], root_rank=0)
    for _ in range(5):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(features, training=True) - targets))
        gradients = tape.gradient(loss, model.trainable_variables)
        if average:
            gradients = hvd.grouped_allreduce(gradients, op=hvd.Average)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    with open(os.path.join(out_dir, f"rank{hvd.rank()}.json"), "w") as handle:
        json.dump({"rank": hvd.rank(), "size": hvd.size(), "weights_sha256": digest.hexdigest()}, handle)


if __name__ == "__main__":
    main(sys.argv[1], average="--no-average" not in sys.argv[2:])
