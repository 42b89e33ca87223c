"""``run_training(config)``: one process's part of a training run (one rank, or all devices)."""

from __future__ import annotations

import os
import sys

from accelml.dl.common import Clock
from accelml.dl.config import TrainingConfig, TrainingResult
from accelml.dl.data import load_image_data
from accelml.errors import AccelmlError, SpecError


def prepare_environment(config: TrainingConfig) -> None:
    """Pick the Keras backend (and what the strategy needs set) before anything imports them."""
    if (config.checkpoints or config.tensorboard or config.save_model) and not config.output_dir:
        raise SpecError("training checkpoints, tensorboard and save_model need output_dir")
    strategy = config.strategy_record
    wanted = config.engine
    if "keras" in sys.modules:
        have = sys.modules["keras"].backend.backend()
        if have != wanted:
            raise AccelmlError(f"this {config.strategy!r} run needs Keras on {wanted}, but this "
                               f"process already runs Keras on {have}; use accelml.dl.launch()")
    else:
        os.environ["KERAS_BACKEND"] = wanted
    for name, value in strategy.environment_before_import:
        if os.environ.get(name) == value:
            continue
        loaded = [module for module in ("keras", *strategy.keras_backends) if module in sys.modules]
        if loaded:
            raise AccelmlError(f"strategy {config.strategy!r} needs {name}={value} before "
                               f"{', '.join(loaded)} is imported; use accelml.dl.launch()")
        os.environ[name] = value


def run_training(config: TrainingConfig) -> TrainingResult:
    """Train as this process's share of ``config`` and return what it measured.

    For multi-process strategies every rank calls this (``accelml.dl.launch`` starts them);
    the other strategies run whole in one process.

    >>> from accelml.dl import TrainingConfig, run_training
    >>> result = run_training(TrainingConfig(model="mlp", dataset="digits", epochs=2))
    >>> result.global_batch, len(result.epochs), result.final_accuracy > 0.5
    (32, 2, True)
    """
    prepare_environment(config)
    clock = Clock()
    data = load_image_data(config.dataset, config.data_path, config.train_samples,
                           config.test_samples, config.image_size, config.seed)
    data_s = clock.seconds()
    return config.strategy_record.train(config, data).replace(data_s=data_s)
