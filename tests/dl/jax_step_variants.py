"""The ``jax-pmean`` step of :func:`accelml.dl.strategies.jax_steps.build_device_step` under
each gradient reduction, on XLA host devices (set XLA_FLAGS before running).

From one seed, each variant trains a small_resnet without residual blocks (a convolution,
BatchNorm, the classifier: what compiling each variant's step costs grows with the layers) for
a few steps, each device on its own images, then averages the moving statistics as an epoch's
end does. Prints one JSON object: per variant, whether every device holds the same weights,
the largest difference of any weight from the plain float32 all-reduce, and the largest change
of any weight.

    XLA_FLAGS=--xla_force_host_platform_device_count=2 JAX_PLATFORMS=cpu KERAS_BACKEND=jax \\
        python tests/dl/jax_step_variants.py allreduce/float32 buckets/bfloat16 none/float32
"""

import json
import sys

import jax
import keras
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from accelml.dl.models import build_model
from accelml.dl.strategies.jax_steps import StepOptions, build_device_step, make_preprocess

STEPS, BATCH, SIZE = 3, 8, 16


def train(options: StepOptions) -> tuple[bool, list[np.ndarray], list[np.ndarray]]:
    """Whether all devices agree, the trained weights (trainable, then moving statistics)
    and the initial ones."""
    devices = jax.devices()
    ranks = len(devices)
    mesh = Mesh(np.array(devices), ("batch",))
    split, replicated = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
    keras.utils.set_random_seed(0)
    model = build_model("small_resnet", keras, (SIZE, SIZE, 3), 10, width=4, blocks=0)
    initial = [np.asarray(v.value) for v in model.weights]
    program = build_device_step(
        model, lambda: keras.optimizers.SGD(0.05, momentum=0.9),
        keras.losses.SparseCategoricalCrossentropy(), mesh, BATCH, make_preprocess(None),
        options)
    rng = np.random.default_rng(1)
    x = jax.device_put(rng.integers(0, 256, (ranks, STEPS * BATCH, SIZE, SIZE, 3),
                                    dtype=np.uint8), split)
    y = jax.device_put(rng.integers(0, 10, (ranks, STEPS * BATCH), dtype=np.int32), split)
    order = jax.device_put(np.stack([np.arange(STEPS * BATCH)] * ranks).astype(np.int32),
                           split)
    totals = jax.device_put(np.zeros((ranks, 3), np.float32), split)
    state = program.state
    for step in range(STEPS):
        state, totals = program.step(state, totals, x, y, order,
                                     jax.device_put(np.int32(step), replicated))
        jax.block_until_ready(totals)
    state = program.average_moving(state)
    # each device's own copy of every variable, one row per device
    trainable, stacked, _ = program.device_copies(state)
    rows = [np.asarray(v) for v in trainable + stacked]
    agree = all(np.array_equal(row[0], row[d]) for row in rows for d in range(ranks))
    trained = [row[0] for row in rows]
    by_id = {id(v): i for i, v in enumerate(model.trainable_variables + model.non_trainable_variables)}
    initial_in_order = [initial[[id(w) for w in model.weights].index(i)] for i in by_id]
    # the shared state rebuilds the optimizer's own variables: a sharded slot must come back
    # in its variable's shape
    shared = program.shared(state)
    assert [tuple(np.shape(v)) for v in shared[2]] == [tuple(v.shape)
                                                       for v in program.optimizer.variables]
    return agree, trained, initial_in_order


def main(variants: list[str]) -> None:
    _, reference, initial = train(StepOptions())
    update = max(float(np.max(np.abs(r - i))) for r, i in zip(reference, initial, strict=True))
    out = {}
    for variant in variants:
        reduction, dtype, *each_step = variant.split("/")
        agree, trained, _ = train(StepOptions(reduction, dtype, bucket_mb=0.001,
                                              moving_each_step=bool(each_step)))
        difference = max(float(np.max(np.abs(t - r))) for t, r in zip(trained, reference,
                                                                       strict=True))
        out[variant] = {"devices_agree": agree, "max_difference": difference,
                        "max_update": update}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
