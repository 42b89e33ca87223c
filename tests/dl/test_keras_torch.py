"""Keras 3 on PyTorch: ``torch-ddp`` and ``horovod`` with ``keras_backend = "torch"``, real ranks.

Each strategy runs once on 2 CPU ranks over gloo (session fixtures), with warm-up, every file
rank 0 writes, and a model with BatchNorm (whose moving averages must agree across ranks); each
test checks one claim about such a run. The negative controls are the same strategies with
gradient averaging taken out of their collectives, installed as a third party would install
a strategy, so that they run through the very same launcher, loop and digest check.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from accelml.dl import TrainingConfig, launch
from accelml.errors import AccelmlError
from tests.dl.checks import assert_learning_rates_follow_warmup, assert_only_rank_zero_wrote

# find_spec, not importorskip: every xdist worker collects this module, and importing torch
# there costs each of them seconds of CPU before any test runs
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install torch)")

BASE = TrainingConfig(model="small_resnet", model_options={"blocks": 1, "width": 4},
                      dataset="digits", strategy="torch-ddp", keras_backend="torch",
                      batch_size=32, epochs=3,
                      learning_rate=0.05, deterministic=True, seed=3, time_limit_s=300)

NOT_AVERAGING = '''
    """{strategy} with its ranks' gradients left as they are: a negative control."""

    import dataclasses

    from accelml.dl.strategies import {record}, {collectives}
    from accelml.dl.strategies.torch_loop import train_on_torch


    def connect(config):
        return dataclasses.replace({collectives}.connect(config), average=lambda tensors: tensors,
                                   averaging_model=None)


    def train(config, data):
        return train_on_torch(config, data, connect)


    STRATEGY = dataclasses.replace({record}.STRATEGY, name="{strategy}-not-averaging",
                                   keras_backends=("torch",), train=train)
'''


def _run_with_files(strategy: str, root, **changes) -> tuple:
    config = BASE.replace(strategy=strategy, output_dir=str(root / "out"), checkpoints=True,
                          tensorboard=True, histogram_freq=1, save_model=True, warmup_epochs=2,
                          **changes)
    return launch(config, ranks=2, work_dir=str(root / "work")), config, root


@pytest.fixture(scope="session")
def ddp_run(tmp_path_factory):
    return _run_with_files("torch-ddp", tmp_path_factory.mktemp("ddp"))


@pytest.fixture(scope="session")
def horovod_run(horovod_torch_ready, tmp_path_factory):
    root = tmp_path_factory.mktemp("horovod-torch")
    return _run_with_files("horovod", root, horovod_timeline=str(root / "timeline.json"))


@pytest.fixture(params=["ddp_run", "horovod_run"])
def two_ranks(request):
    return request.getfixturevalue(request.param)


@pytest.mark.slow
def test_both_ranks_end_with_identical_weights(two_ranks):
    result, _, _ = two_ranks
    assert result.backend == "torch" and result.devices == ("cpu",)
    assert len(result.rank_digests) == 2
    assert result.rank_digests[0] == result.rank_digests[1] == result.weights_digest
    assert result.global_batch == 64 and result.epochs[-1].images == 64 * result.steps_per_epoch
    assert result.epochs[-1].loss < result.epochs[0].loss


def test_recorded_learning_rates_follow_the_warmup_formula(two_ranks):
    result, config, _ = two_ranks
    assert_learning_rates_follow_warmup(result, config)


def test_only_rank_zero_writes_files(two_ranks):
    assert_only_rank_zero_wrote(*two_ranks)


@pytest.mark.slow
def test_backends_show_the_torch_engine_and_each_horovod_binding(horovod_torch_ready):
    from accelml.dl.strategies import strategy_availability

    rows = {row.name: row for row in strategy_availability()}
    assert rows["torch"].available and rows["torch"].summary == "PyTorch, an engine of Keras"
    assert rows["strategy torch-ddp"].available
    assert rows["strategy torch-ddp"].detail.startswith("backends: gloo")
    horovod = rows["strategy horovod"]
    assert horovod.available and "tensorflow: built with gloo" in horovod.detail
    assert "torch: built with gloo" in horovod.detail


def test_horovod_on_torch_writes_its_timeline(horovod_run):
    _, _, root = horovod_run
    assert "allreduce" in (root / "timeline.json").read_text().lower()


@pytest.mark.slow
def test_deterministic_mode_repeats_bitwise(two_ranks, tmp_path):
    first, config, _ = two_ranks
    again = launch(config.replace(output_dir=str(tmp_path / "out"), horovod_timeline=None),
                   ranks=2)
    assert again.weights_digest == first.weights_digest


@pytest.mark.slow
@pytest.mark.slurm
def test_torch_ddp_under_srun_meets_where_the_launcher_said(slurm_available):
    config = BASE.replace(model="mlp", model_options={}, epochs=1, deterministic=False)
    result = launch(config, ranks=2, launcher="srun")
    assert len(result.rank_digests) == 2 and result.ranks_agree and result.ranks == 2


@pytest.mark.slow
@pytest.mark.parametrize("strategy, record, collectives", [
    ("torch-ddp", "torch_ddp", "torch_ddp"),
    ("horovod", "horovod", "_horovod_torch"),
])
def test_without_gradient_averaging_the_ranks_drift_apart(strategy, record, collectives,
                                                          install_plugin, request):
    if strategy == "horovod":
        request.getfixturevalue("horovod_torch_ready")
    name = f"{strategy}-not-averaging"
    module = name.replace("-", "_")
    install_plugin(name, {f"{module}.py": NOT_AVERAGING.format(
        strategy=strategy, record=record, collectives=collectives)},
        {"accelml.strategies": {name: f"{module}:STRATEGY"}})
    config = BASE.replace(strategy=name, model="mlp", model_options={}, epochs=1)
    with pytest.raises(AccelmlError, match=r"final weights differ between ranks/devices "
                                           r"\(0: (\w+), 1: (?!\1)\w+\)"):
        launch(config, ranks=2)


SPEC = """
name = "keras-on-torch"
reference = "keras"
repeats = 1
warmup = 0
threads = 1
deterministic = true
time_limit = 300

[datasets.digits]
source = "shipped"
name = "digits"

[[cases]]
algorithm = "mlp"
backend = "keras"
strategy = "torch-ddp"
keras_backend = "torch"
ranks = [1, 2]
dataset = "digits"
epochs = 3
batch_size = 32
learning_rate = 0.05
"""


@pytest.mark.slow
def test_compare_runs_keras_on_torch_on_one_and_two_ranks(tmp_path):
    """The command's path end to end, with one strategy: horovod on torch trains through the same
    ``launch`` (the fixtures above), and the pairing of each strategy with its own one-rank case
    is test_cross_scale_pairs_each_strategy_with_its_own_one_worker_case's."""
    from accelml.agreement.matrix import agreement_matrix
    from accelml.results.store import ResultsStore

    spec = tmp_path / "torch.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "accelml", "compare", str(spec),
                           "--results-dir", str(results), "--no-progress"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    store = ResultsStore(results, create=False)
    run = store.latest_run()
    found = {(r.strategy, r.ranks): r for r in store.case_results(run.run_id)}
    assert sorted(found) == [("torch-ddp", 1), ("torch-ddp", 2)]
    for result in found.values():
        assert result.ok, result.reason
        assert result.dl.ranks_identical is (None if result.ranks == 1 else True)
        assert result.dl.test_accuracy > 0.85
    (pair,) = agreement_matrix(store, run.run_id).cross_scale
    assert (pair.a.case_id, pair.b.case_id) == (found["torch-ddp", 1].case_id,
                                                found["torch-ddp", 2].case_id)
    assert done.stdout.count("cross-scale") == 1
