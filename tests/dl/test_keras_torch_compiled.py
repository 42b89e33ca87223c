"""Keras 3 on PyTorch, ``step_capture = "compiled"``: the forward pass, loss and update compiled by
Inductor (on CPUs here: C++ kernels; no CUDA graph) train as the eager steps do.

Fused kernels round differently from Keras's one-op-at-a-time kernels, so the weights agree
within a tolerance, not bit for bit (measured on this model: ~1e-7 apart after 2 epochs);
dropout draws the same masks (Inductor's ``fallback_random``). Where compiling fails (here: a
C++ compiler that does not exist, with Inductor's caches off), the run trains with eager kernels
and says why, ending with exactly the eager run's weights. What Dynamo could not trace in
Keras's layers (BatchNorm's tracked reduction axes, ZeroPadding2D's per-call operation) is
made traceable without changing what the model computes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from accelml.dl import TrainingConfig, launch
from tests.dl.checks import largest_difference, saved_model_weights

# find_spec, not importorskip: every xdist worker collects this module, and importing torch
# there costs each of them seconds of CPU before any test runs
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch)")


BASE = TrainingConfig(model="mlp", model_options={"hidden": (16,), "dropout": 0.25},
                      dataset="digits", strategy="torch-ddp", keras_backend="torch",
                      batch_size=32, epochs=2, learning_rate=0.05, deterministic=True, seed=7,
                      save_model=True, time_limit_s=600)
TOLERANCE = 1e-5
"""Largest difference allowed between a compiled run's weights and the eager run's."""


def _run(tmp_path_factory, name: str, ranks: int = 1, **changes):
    root = tmp_path_factory.mktemp(name)
    config = BASE.replace(ranks=ranks, output_dir=str(root / "out"), **changes)
    result = launch(config, ranks=ranks, work_dir=str(root / "work"))
    return result, saved_model_weights(root / "out")


@pytest.fixture(scope="session")
def eager_one(tmp_path_factory):
    return _run(tmp_path_factory, "eager-1", step_capture="none")


def _assert_close(compiled, eager) -> None:
    (result, weights), (eager_result, eager_weights) = compiled, eager
    largest = largest_difference(weights, eager_weights)
    assert largest <= TOLERANCE, f"compiled weights {largest:.2e} from eager"
    assert [e.loss for e in result.epochs] == pytest.approx([e.loss for e in eager_result.epochs],
                                                            rel=1e-5)
    assert result.epochs[-1].loss < result.epochs[0].loss


@pytest.mark.torch_ddp
@pytest.mark.slow
def test_compiled_step_on_two_ddp_ranks_trains_to_the_eager_weights(tmp_path_factory):
    """The claims a one-rank compiled run made (the step compiled; the eager weights within the
    tolerance) made by two DistributedDataParallel ranks, which also stay identical: one
    compiled run (Inductor's costliest part here) instead of two."""
    eager = _run(tmp_path_factory, "eager-2", ranks=2, step_capture="none")
    compiled = _run(tmp_path_factory, "compiled-2", ranks=2, step_capture="compiled")
    result, _ = compiled
    assert result.path.startswith("Inductor-compiled forward and loss + update (asked: ")
    assert result.path.endswith("not captured (CUDA graphs need a GPU)")
    assert len(result.rank_digests) == 2 and len(set(result.rank_digests)) == 1
    _assert_close(compiled, eager)


@pytest.mark.torch_ddp
@pytest.mark.slow
def test_a_step_that_cannot_compile_trains_eagerly_and_says_why(tmp_path_factory, eager_one,
                                                                 monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")              # what the ranks inherit
    monkeypatch.setenv("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor")))
    result, _ = _run(tmp_path_factory, "fallback-1", step_capture="compiled")
    assert result.path.startswith("eager kernels (asked: compiling failed: ")
    assert result.weights_digest == eager_one[0].weights_digest


TRACED = """
import json
import keras, numpy as np, torch
from accelml.dl.strategies._torch_compile import graph_breaks, prepare_for_inductor

layers = keras.layers
inputs = keras.Input((2, 2, 1))     # small: one BatchNorm, two ZeroPadding2D, no conv
x = layers.BatchNormalization()(layers.ZeroPadding2D(1)(inputs))
x = layers.ZeroPadding2D(((1, 0), (0, 1)))(x)
model = keras.Model(inputs, layers.Dense(4, activation="softmax")(layers.Flatten()(x)))
loss = keras.losses.SparseCategoricalCrossentropy()
images, labels = torch.rand(2, 2, 2, 1), torch.tensor([0, 3])

def step(x, y):
    return loss(y, model(x, training=True))

as_built = graph_breaks(torch, step, images, labels)
before = model(images, training=False).detach().numpy()
changed = prepare_for_inductor(model)
same = bool(np.array_equal(model(images, training=False).detach().numpy(), before))
torch._dynamo.reset()
print(json.dumps({"as_built": as_built, "changed": changed, "same": same,
                  "prepared": graph_breaks(torch, step, images, labels)}))
"""


@pytest.mark.slow
def test_keras_layers_that_broke_dynamos_graph_trace_whole_and_compute_the_same():
    done = subprocess.run([sys.executable, "-c", TRACED], capture_output=True, text=True,
                          timeout=600, check=False, env={**os.environ, "KERAS_BACKEND": "torch"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    breaks, reasons = found["as_built"]
    assert breaks >= 2, reasons
    assert any("Failed to convert args/kwargs to proxy" in r for r in reasons)   # BatchNorm
    assert any("mapping proxy affected by dictionary mutation" in r for r in reasons)  # pad
    assert found["changed"] == 3                    # one BatchNorm, two ZeroPadding2D
    assert found["same"]                            # inference output unchanged
    assert found["prepared"] == [0, []]
