"""``run_training(config)``: one process's part of a training run (one rank, or all devices)."""

from __future__ import annotations

import importlib
import os
import sys

from accelml.dl.common import Clock
from accelml.dl.config import TrainingConfig, TrainingResult
from accelml.dl.data import load_image_data
from accelml.dl.strategies import STRATEGY_MODULES
from accelml.errors import AccelmlError, SpecError


def _prepare_environment(config: TrainingConfig) -> None:
    """Pick the Keras backend (and legacy Keras for multiworker) before anything imports them."""
    if (config.checkpoints or config.tensorboard or config.save_model) and not config.output_dir:
        raise SpecError("training checkpoints, tensorboard and save_model need output_dir")
    wanted = config.keras_backend
    if "keras" in sys.modules:
        have = sys.modules["keras"].backend.backend()
        if have != wanted:
            raise AccelmlError(f"strategy {config.strategy!r} needs Keras on {wanted}, but this "
                               f"process already runs Keras on {have}; use accelml.dl.launch()")
    else:
        os.environ["KERAS_BACKEND"] = wanted
    if config.strategy == "multiworker" and os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        if "tensorflow" in sys.modules:
            raise AccelmlError("strategy 'multiworker' runs on tf_keras and needs "
                               "TF_USE_LEGACY_KERAS=1 before TensorFlow is imported; "
                               "use accelml.dl.launch()")
        os.environ["TF_USE_LEGACY_KERAS"] = "1"


def run_training(config: TrainingConfig) -> TrainingResult:
    """Train as this process's share of ``config`` and return what it measured.

    For ``horovod`` and ``multiworker`` every rank calls this (``accelml.dl.launch`` starts
    them); the other strategies run whole in one process.

    >>> from accelml.dl import TrainingConfig, run_training
    >>> result = run_training(TrainingConfig(model="mlp", dataset="digits", epochs=2))
    >>> result.global_batch, len(result.epochs), result.final_accuracy > 0.5
    (32, 2, True)
    """
    _prepare_environment(config)
    clock = Clock()
    data = load_image_data(config.dataset, config.data_path, config.train_samples,
                           config.test_samples, config.image_size, config.seed)
    data_s = clock.seconds()
    module = importlib.import_module(STRATEGY_MODULES[config.strategy])
    return module.train(config, data).replace(data_s=data_s)
