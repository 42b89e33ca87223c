"""Checks shared by the tests of rank-per-process training runs (horovod on either engine,
torch-ddp)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from accelml.dl import TrainingConfig, TrainingResult, warmup_learning_rate


def assert_learning_rates_follow_warmup(result: TrainingResult, config: TrainingConfig) -> None:
    """Each epoch's recorded learning rate (at its last step) is the warm-up formula's."""
    steps = result.steps_per_epoch
    for record in result.epochs:
        expected = warmup_learning_rate(result.learning_rate, result.ranks,
                                        config.warmup_epochs, record.epoch, steps - 1, steps)
        assert record.learning_rate == pytest.approx(expected, rel=1e-6)
    assert result.epochs[0].learning_rate < result.epochs[-1].learning_rate


def assert_only_rank_zero_wrote(result: TrainingResult, config: TrainingConfig,
                                root: Path) -> None:
    """Under ``root``: ``out`` holds one checkpoint per epoch, one TensorBoard events file (every
    summary writer makes its own), the CSV log and the final model; rank 1 of ``work`` listed
    no files of its own."""
    out = root / "out"
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert checkpoints == [f"epoch-{e:03d}.weights.h5" for e in range(1, config.epochs + 1)]
    assert len(list((out / "tensorboard").rglob("events.out.tfevents.*"))) == 1
    rows = (out / "training_log.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + config.epochs
    assert (out / "model.keras").exists()
    rank1 = json.loads((root / "work" / "ranks" / "rank-1.json").read_text())
    assert rank1["ok"] and rank1["result"]["files"] == [] and result.files


def saved_model_weights(output_dir: Path) -> list[np.ndarray]:
    """The weights of the model a run saved (``save_model``), read from its ``.keras`` archive
    (an HDF5 file inside), in the archive's order."""
    import h5py

    with zipfile.ZipFile(output_dir / "model.keras") as archive:
        data = archive.read("model.weights.h5")
    arrays: list[np.ndarray] = []
    with h5py.File(io.BytesIO(data), "r") as weights:
        weights.visititems(lambda name, item: arrays.append(np.array(item))
                           if isinstance(item, h5py.Dataset) else None)
    return arrays


def largest_difference(weights: list[np.ndarray], others: list[np.ndarray]) -> float:
    """The largest element-wise difference between two runs' weights (same model)."""
    assert len(weights) == len(others) > 0
    return max(float(np.max(np.abs(a - b))) for a, b in zip(weights, others, strict=True))
