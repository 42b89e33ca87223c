"""Trainings in an interleaved group: each epoch after the first is one round, taken in turn
with the training's 1-rank case, its ranks held warm between turns (real processes)."""

import pytest

from accelml.cases import INTERLEAVED
from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult
from accelml.estimators.keras import measurements_from_training
from accelml.orchestration import run_experiment
from accelml.report.speed import scaling
from accelml.results.store import ResultsStore
from accelml.spec.load import load_spec_text

SPEC = """
name = "epochs_in_turn"
reference = "keras"
time_limit = 400
threads = 1
[datasets.digits]
source = "shipped"
name = "digits"
[[cases]]
algorithm = "mlp"
backend = "keras"
device = "cpu"
strategy = "{strategy}"
ranks = [1, 2]
dataset = "digits"
epochs = 5
batch_size = 32
learning_rate = 0.05
"""


def _scaling_in_turns(tmp_path, strategy: str):
    experiment = load_spec_text(SPEC.format(strategy=strategy), "turns.toml")
    store = ResultsStore(tmp_path / "results")
    run = run_experiment(experiment, store, cache_dir=str(tmp_path / "cache"))
    results = store.case_results(run.run_id)
    assert all(result.ok for result in results), [result.reason for result in results]
    one, two = sorted(results, key=lambda result: result.ranks)
    ids = (one.case_id, two.case_id)
    assert one.measurement == two.measurement == INTERLEAVED, two.measurement_note
    assert one.turn_group == two.turn_group == ids       # the 1-rank case first
    for result in (one, two):
        epoch = result.timing("epoch")
        assert epoch is not None and len(epoch.samples) == 4 and len(epoch.warmup_samples) == 1
        assert result.stopped_because == "epochs" and result.repeats == 4
        assert [record.seconds for record in result.dl.epochs[1:]] == list(epoch.samples)
    found = scaling(results)[two.case_id]
    assert found.measurement == INTERLEAVED and found.baseline_case_id == one.case_id
    assert found.low <= found.speedup <= found.high
    assert found.efficiency == pytest.approx(found.speedup / 2)
    return two


@pytest.mark.slow
def test_jax_pmean_on_two_cpu_devices_takes_its_epochs_in_turn_with_one_device(tmp_path):
    pytest.importorskip("jax", reason="jax is not installed (pip install jax)")
    _scaling_in_turns(tmp_path, "jax-pmean")


@pytest.mark.slow
def test_two_ranks_held_warm_take_their_epochs_in_turn_with_one_rank(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    two = _scaling_in_turns(tmp_path, "torch-ddp")
    assert len(two.dl.rank_weight_digests) == 2 and two.dl.ranks_identical


def test_epochs_after_the_rounds_ended_stay_out_of_the_paired_phase():
    epochs = tuple(EpochRecord(i, seconds, 1.0, 0.5, 0.05, 64)
                   for i, seconds in enumerate([3.0, 1.0, 1.1, 0.9, 1.2]))
    result = TrainingResult(
        strategy="single", model="mlp", dataset="digits", ranks=1, batch_per_rank=32,
        global_batch=32, learning_rate=0.05, parameters=10, train_samples=64, test_samples=0,
        steps_per_epoch=2, epochs=epochs, test_loss=None, test_accuracy=None,
        weights_digest="w", rank_digests=("w",), setup_s=0.0, data_s=0.0, backend="jax",
        versions=())
    measured = measurements_from_training(result, TrainingConfig(model="mlp", epochs=5),
                                          in_turn=(1, 2), ended="epochs")
    (epoch,) = [timing for timing in measured.timings if timing.phase == "epoch"]
    assert epoch.samples == (1.0, 1.1) and epoch.warmup_samples == (3.0,)
    assert measured.repeats == 2 and len(measured.dl.epochs) == 5
    assert "epochs 4-5 ran after its group's rounds ended (epochs), alone" in measured.warmup_note
