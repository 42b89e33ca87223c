"""How far apart the epoch losses of two correct Keras-on-torch runs lie on a GPU: eager, eager
with the learning rate changed by 1e-6, eager with another seed, eager without deterministic
kernels, compiled, compiled with the learning rate changed by 1e-6
(tests/dl/test_keras_torch_gpu.py's BASE: small_resnet
on digits, 3 epochs, one GPU). Its figures are in that file's FIRST_EPOCH_TOLERANCE.

    PYTHONPATH=/tmp/site:. python3 benchmarks/gpu/compiled_loss_spread.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from accelml.dl import launch  # noqa: E402
from tests.dl.test_keras_torch_gpu import BASE  # noqa: E402

NUDGED = BASE.learning_rate * (1 + 1e-6)
RUNS = {
    "eager": {"step_capture": "none"},
    "eager, learning rate +1e-6": {"step_capture": "none", "learning_rate": NUDGED},
    "eager, seed 6": {"step_capture": "none", "seed": 6},
    "compiled": {"step_capture": "compiled"},
    "compiled, learning rate +1e-6": {"step_capture": "compiled", "learning_rate": NUDGED},
    "eager, kernels not deterministic": {"step_capture": "none", "deterministic": False},
}

if __name__ == "__main__":
    for name, changes in RUNS.items():
        result = launch(BASE.replace(**changes), ranks=1, work_dir=tempfile.mkdtemp())
        losses = " / ".join(f"{epoch.loss:.4f}" for epoch in result.epochs)
        print(f"{name:34s} {losses}   {result.path[:60]}", flush=True)
