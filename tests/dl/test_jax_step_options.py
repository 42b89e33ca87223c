"""The gradient reductions of ``jax-pmean`` on two XLA host devices: every device ends with the
same weights, and the same weights as the plain float32 all-reduce (bfloat16 on the wire
within its rounding); without any reduction the devices drift apart (the negative control)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dl.conftest import quick_xla_environment

SCRIPT = Path(__file__).with_name("jax_step_variants.py")


def run_on_two_host_devices(script: str, *args: str) -> dict:
    """Run one of this folder's scripts on two XLA host devices (compiled with the tests'
    quick XLA flags); what it printed last, as JSON."""
    pytest.importorskip("jax", reason="jax is not installed (pip install jax)")
    base = quick_xla_environment()
    env = {**base, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"{base['XLA_FLAGS']} --xla_force_host_platform_device_count=2",
           "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(SCRIPT.with_name(script)), *args], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_gradient_reductions_keep_devices_identical_and_match_the_all_reduce():
    # buckets/bfloat16 is no variant of its own: buckets/float32 splits and reassembles the
    # buckets (to float32 rounding), reduce-scatter/bfloat16 sends bfloat16 bucket by bucket
    # (buckets sized by the bfloat16 item), allreduce/bfloat16 without buckets
    variants = ["buckets/float32", "reduce-scatter/float32", "allreduce/bfloat16",
                "reduce-scatter/bfloat16", "allreduce/float32/each", "none/float32"]
    out = run_on_two_host_devices(SCRIPT.name, *variants)
    for variant in variants[:-1]:
        found = out[variant]
        assert found["devices_agree"], variant
        # float32 sums in another grouping agree to rounding; bfloat16 to its 8-bit mantissa
        tolerance = 1e-6 if "float32" in variant else 0.01 * found["max_update"]
        assert found["max_difference"] <= tolerance, (variant, found)
    unreduced = out["none/float32"]
    assert not unreduced["devices_agree"]
    assert unreduced["max_difference"] > 0.1 * unreduced["max_update"]


@pytest.mark.slow
def test_several_steps_per_dispatch_train_the_same_steps():
    """``steps_per_execution`` runs K steps in one dispatch (a loop on the devices, the last
    dispatch shorter where K does not divide the epoch): the same batches, so the same losses
    to float rounding, every device identical; the path says what ran."""
    out = run_on_two_host_devices("jax_steps_per_dispatch.py", "1", "4")
    one, four = out["1"], out["4"]
    assert one["steps"] == four["steps"] and four["steps"] % 4 != 0     # a shorter last dispatch
    assert one["path"].startswith("1 step per dispatch (asked)")
    assert four["path"].startswith("4 steps per dispatch (asked)")
    assert one["ranks_agree"] and four["ranks_agree"]
    assert one["images"] == four["images"]
    for a, b in zip(one["losses"], four["losses"], strict=True):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (one["losses"], four["losses"])
    assert one["losses"][-1] < one["losses"][0]
