"""The keras backend: a keras case becomes a TrainingConfig, its result becomes records."""

import pytest

from accelml.estimators import get_backend
from accelml.estimators.keras import measure_keras, measurements_from_training, training_config_dict
from accelml.spec.load import load_spec_text

dl_config = pytest.importorskip("accelml.dl.config")

SPEC = """
reference = "keras"
[datasets.fashion]
source = "keras"
name = "fashion_mnist"
train_samples = 512
[[cases]]
algorithm = "mlp"
backend = "keras"
dataset = "fashion"
ranks = 2
strategy = "horovod"
epochs = 3
batch_size = 16
learning_rate = 0.02
lr_scaling = "linear"
"""


def test_keras_case_becomes_a_training_config():
    (case,) = load_spec_text(SPEC, "dl.toml").cases
    config = dl_config.TrainingConfig.from_dict(training_config_dict(case))
    assert (config.model, config.dataset, config.strategy, config.ranks) == (
        "mlp", "fashion_mnist", "horovod", 2)
    assert (config.batch_size, config.global_batch_size, config.epochs) == (16, 32, 3)
    assert config.scaled_learning_rate == pytest.approx(0.04)
    assert config.train_samples == 512
    assert get_backend("keras").measurer is measure_keras and get_backend("sklearn").measurer is None


def test_training_result_becomes_epoch_timings_without_the_first_epoch():
    epochs = tuple(dl_config.EpochRecord(epoch=i, seconds=s, loss=1.0 / (i + 1), accuracy=0.5 + i / 10,
                                         learning_rate=0.04, images=512)
                   for i, s in enumerate([5.0, 1.0, 1.1]))
    result = dl_config.TrainingResult(
        strategy="horovod", model="mlp", dataset="fashion_mnist", ranks=2, batch_per_rank=16,
        global_batch=32, learning_rate=0.04, parameters=100, train_samples=512, test_samples=128,
        steps_per_epoch=16, epochs=epochs, test_loss=0.7, test_accuracy=0.6, weights_digest="w",
        rank_digests=("w", "w"), setup_s=1.0, data_s=0.2, backend="tensorflow", versions=())
    measured = measurements_from_training(result, dl_config.TrainingConfig(
        model="mlp", strategy="horovod", ranks=2, batch_size=16))
    (epoch,) = [t for t in measured.timings if t.phase == "epoch"]
    assert epoch.samples == (1.0, 1.1) and epoch.warmup_samples == (5.0,)
    assert measured.dl.global_batch_size == 32 and measured.dl.ranks_identical
    assert measured.dl.images_per_second == pytest.approx(1024 / 2.1)
    assert [e.seconds for e in measured.dl.epochs] == [5.0, 1.0, 1.1]
    assert dict((s.name, s.value) for s in measured.scores)["accuracy"] == 0.6
