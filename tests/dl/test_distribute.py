"""tf.distribute (mirrored on 2 logical CPUs, multi-worker under srun; multi-worker with 2 local
processes: test_listeners.py) and JAX."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from accelml.dl import TrainingConfig, launch
from tests.dl.conftest import quick_xla_environment

SMALL = TrainingConfig(model="mlp", dataset="digits", batch_size=32, epochs=3,
                       learning_rate=0.05, seed=1, time_limit_s=240)


# multiworker with two local processes: test_listeners.py's
# test_multiworker_ranks_have_a_network_of_their_own trains it (and watches its listeners)


@pytest.mark.slow
def test_mirrored_on_two_logical_cpu_devices():
    # small_resnet: BatchNorm moving statistics must agree across replicas too
    config = SMALL.replace(strategy="mirrored", model="small_resnet", epochs=1,
                           model_options={"blocks": 1, "width": 4})
    result = launch(config, ranks=2)
    assert result.devices == ("/cpu:0", "/cpu:1")
    assert len(result.rank_digests) == 2 and result.ranks_agree
    assert result.global_batch == 64 and result.epochs[-1].images == 64 * result.steps_per_epoch


JAX_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])          # a 'tensorflow' that fails to import
    from accelml.dl import TrainingConfig, run_training
    out = {}
    for strategy in ("jax-pmean", "jax-dataparallel"):
        config = TrainingConfig(model="mlp", dataset="digits", strategy=strategy,
                                batch_size=32, epochs=3, learning_rate=0.05, seed=1)
        result = run_training(config)
        out[strategy] = result.to_dict()
    out["tensorflow_imported"] = "tensorflow" in sys.modules
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_jax_strategies_on_one_cpu_device_without_tensorflow(tmp_path):
    pytest.importorskip("jax", reason="jax is not installed (pip install jax)")
    blocker = tmp_path / "blocker" / "tensorflow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no TensorFlow on this machine')\n")
    env = {**quick_xla_environment(), "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", JAX_SCRIPT, str(blocker.parent)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["tensorflow_imported"] is False
    for strategy in ("jax-pmean", "jax-dataparallel"):
        result = out[strategy]
        assert result["backend"] == "jax" and result["ranks"] == 1
        assert len(result["epochs"]) == 3
        assert result["epochs"][-1]["loss"] < result["epochs"][0]["loss"]
        assert result["test_accuracy"] > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("strategy, reduction", [
    ("jax-dataparallel", {}),
    ("jax-pmean", {"gradient_reduction": "reduce-scatter", "gradient_reduce_dtype": "bfloat16",
                   "gradient_bucket_mb": 0.01})])
def test_jax_strategies_on_two_cpu_devices_end_with_identical_weights(strategy, reduction, quick_xla):
    # small_resnet has BatchNorm: under jax-pmean each device keeps its own moving averages
    # through the epoch, and they must agree again once the epoch ends. Under reduce-scatter
    # each device updates its share of every weight, and the shares are gathered again.
    # (jax-pmean's default reduction, one all-reduce, ends with identical devices in
    # test_jax_step_options.py: in its step, against which each reduction is checked, and
    # through a whole two-device training, one and four steps per dispatch.)
    config = SMALL.replace(strategy=strategy, model="small_resnet", epochs=2,
                           model_options={"blocks": 1, "width": 4}, **reduction)
    result = launch(config, ranks=2)
    assert result.backend == "jax" and result.ranks == 2 and result.global_batch == 64
    assert len(result.rank_digests) == 2 and result.ranks_agree
    assert result.epochs[-1].images == 64 * result.steps_per_epoch
    assert result.epochs[-1].loss < result.epochs[0].loss


@pytest.mark.slurm
@pytest.mark.slow
def test_multiworker_under_srun_uses_the_slurm_cluster_resolver(slurm_available):
    result = launch(SMALL.replace(strategy="multiworker", epochs=1), ranks=2, launcher="srun")
    assert len(result.rank_digests) == 2 and result.ranks_agree
    assert result.global_batch == 64
