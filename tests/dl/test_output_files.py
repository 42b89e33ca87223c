"""What the tf.distribute and JAX strategies write under ``output_dir``: the chief's files only."""

from __future__ import annotations

import pytest

from accelml.dl import TrainingConfig, launch

WRITES_EVERYTHING = TrainingConfig(model="mlp", dataset="digits", batch_size=32, epochs=2,
                                   learning_rate=0.05, seed=1, train_samples=512, test_samples=64,
                                   checkpoints=True, tensorboard=True, save_model=True,
                                   time_limit_s=240)
EXPECTED = {"training_log.csv", "model.keras", "checkpoints/epoch-001.weights.h5",
            "checkpoints/epoch-002.weights.h5"}


def _written(files: tuple[str, ...]) -> set[str]:
    """The files, with TensorBoard's (named by host and time) as their folder."""
    return {name.split("/")[0] if name.startswith("tensorboard/") else name for name in files}


@pytest.mark.slow
def test_single_writes_log_checkpoints_tensorboard_and_model(tmp_path):
    result = launch(WRITES_EVERYTHING.replace(output_dir=str(tmp_path / "out")))
    assert _written(result.files) == EXPECTED | {"tensorboard"}
    assert (tmp_path / "out" / "training_log.csv").read_text().count("\n") == 3


@pytest.mark.slow
def test_multiworker_chief_writes_and_the_other_worker_leaves_nothing(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = launch(WRITES_EVERYTHING.replace(strategy="multiworker", output_dir=str(tmp_path / "out")),
                    ranks=2, launcher="local-processes", extra_env={"TMPDIR": str(scratch)})
    assert _written(result.files) == EXPECTED | {"tensorboard"}
    assert list(scratch.iterdir()) == []


@pytest.mark.slow
def test_jax_writes_log_checkpoints_tensorboard_and_model(tmp_path):
    pytest.importorskip("jax", reason="jax is not installed (pip install jax)")
    result = launch(WRITES_EVERYTHING.replace(strategy="jax-pmean", output_dir=str(tmp_path / "out")),
                    ranks=2)
    assert _written(result.files) == EXPECTED | {"tensorboard"}
    assert (tmp_path / "out" / "training_log.csv").read_text().count("\n") == 3
