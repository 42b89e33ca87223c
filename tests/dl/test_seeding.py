"""Seeding Keras on JAX and torch loads no TensorFlow: ``keras.utils.set_random_seed`` imports
it wherever it is installed (~10 CPU-s and its memory in every JAX or torch rank here)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

SEEDED = """
import json, random, sys
import numpy as np, keras
from accelml.dl.common import seed_keras

def draws():
    engine = keras.ops.convert_to_numpy(keras.random.uniform((2,))).tolist()
    return [random.random(), float(np.random.rand()), engine]

seed_keras(keras, 3); first = draws()
seed_keras(keras, 3); again = draws()
own = None
if keras.backend.backend() == "torch":
    import torch
    seed_keras(keras, 3); seeded = torch.rand(2).tolist()
    torch.manual_seed(3); own = seeded == torch.rand(2).tolist()
print(json.dumps({"tensorflow": "tensorflow" in sys.modules, "repeats": first == again,
                  "torch_generator": own}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["jax", "torch"])
def test_seeding_keras_on_jax_or_torch_loads_no_tensorflow(engine):
    if importlib.util.find_spec(engine) is None:
        pytest.skip(f"{engine} is not installed")
    done = subprocess.run([sys.executable, "-c", SEEDED], capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, "KERAS_BACKEND": engine})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["tensorflow"] is False
    assert found["repeats"] is True                  # Python, NumPy and Keras's generator
    assert found["torch_generator"] is (True if engine == "torch" else None)
