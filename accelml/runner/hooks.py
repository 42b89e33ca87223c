"""How a backend that is not a scikit-learn-style estimator plugs into the runner.

The runner measures classical backends itself (:mod:`accelml.runner.worker`). For a
backend whose record names a measurer (``Backend.measurer``, 'module:function') it instead
calls that function, inside the case's own process, and stores what it returns:

    measure(case: Case, context: MeasureContext) -> Measurements

``case`` is the validated :class:`~accelml.spec.schema.Case` (algorithm, backend, device,
workers, strategy, dataset, params, repeats, time limit, threads); ``context`` says where
the dataset cache is, a scratch directory for the case, and the deadline. The function
raises on failure (an :class:`~accelml.errors.UnavailableError` for a missing library or
device); the runner records the reason. A multi-rank case (``workers > 1``) launches its
ranks from inside this function (e.g. horovodrun or mpirun) and returns rank 0's view with
every rank's weight digest in ``dl.rank_weight_digests``.

The keras measurer below turns a case into :class:`accelml.dl.config.TrainingConfig`
(``algorithm`` is the model; ``params`` are training keys such as epochs, batch_size per
worker, learning_rate, lr_scaling), runs it with ``accelml.dl.launch`` (or
``accelml.dl.run_training`` for one process), and reports epoch times without the first
epoch, images/s, loss and accuracy per epoch and test accuracy.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelml.errors import UnavailableError
from accelml.estimators import get_backend
from accelml.results.records import (
    DatasetInfo,
    DLMeasurements,
    EpochRecord,
    PhaseTiming,
    Score,
)


@dataclass(frozen=True)
class MeasureContext:
    """Where a measurer may read and write, and by when it must be done."""

    cache_dir: str | None
    workdir: str
    deadline_monotonic: float | None
    threads: int | None


@dataclass(frozen=True)
class Measurements:
    """What a measurer returns; the runner adds identity, environment, memory and status."""

    timings: tuple[PhaseTiming, ...]
    repeats: int
    warmup: int
    scores: tuple[Score, ...] = ()
    arrays: tuple[tuple[str, np.ndarray], ...] = field(default=())   # (name, array) to keep
    repeat_prediction_digests: tuple[str, ...] = ()
    dataset_info: DatasetInfo | None = None
    dl: DLMeasurements | None = None
    stopped_because: str = ""
    task: str = ""          # classification, regression, clustering, decomposition


def measurer_for(backend: str) -> Callable[[Any, MeasureContext], Measurements] | None:
    """The measurer ``backend``'s record names (imported now), or None: the runner's own."""
    target = get_backend(backend).measurer
    if not target:
        return None
    module, _, name = target.partition(":")
    measurer: Callable[[Any, MeasureContext], Measurements] = getattr(importlib.import_module(module), name)
    return measurer


_DL_DEVICES = {"cpu": "cpu", "cuda": "gpu"}


def training_config_dict(case: Any) -> dict[str, Any]:
    """The ``TrainingConfig`` keys for a keras case (validated by ``TrainingConfig.from_dict``)."""
    options = dict(case.dataset.options)
    if case.dataset.source == "keras":
        dataset = options["name"]
    elif case.dataset.source == "shipped":
        dataset = options.get("name", case.dataset.name)
    elif options.get("generator") == "images":
        dataset = "generated"
        options.setdefault("train_samples", options.get("n_samples"))
    else:
        dataset = case.dataset.source
    config: dict[str, Any] = {
        "model": case.algorithm,
        "dataset": dataset,
        "strategy": case.strategy or "single",
        "workers": case.workers,
        "device": _DL_DEVICES.get(case.device, case.device),
        "seed": getattr(case, "seed", 0),
    }
    for key in ("train_samples", "test_samples", "image_size"):
        if key in options:
            config[key] = options[key]
    if "path" in options:
        config["data_path"] = options["path"]
    config.update(case.params_dict)
    if getattr(case, "time_limit_s", None):
        config.setdefault("time_limit_s", float(case.time_limit_s))
    return config


def measure_keras(case: Any, context: MeasureContext) -> Measurements:
    try:
        from accelml.dl.config import TrainingConfig
        import accelml.dl as dl
    except ImportError as error:
        raise UnavailableError(f"the keras backend needs accelml.dl: {error}") from None
    config = TrainingConfig.from_dict(training_config_dict(case))
    if config.output_dir is None and (config.checkpoints or config.tensorboard or config.save_model):
        config = config.replace(output_dir=str(Path(context.workdir) / "training"))
    launch = getattr(dl, "launch", None)
    if launch is not None:
        result = launch(config)
    elif config.multi_process:
        raise UnavailableError("accelml.dl has no launch() for multi-process strategies")
    else:
        result = dl.run_training(config)
    return measurements_from_training(result, config)


def measurements_from_training(result: Any, config: Any) -> Measurements:
    """Convert an ``accelml.dl`` TrainingResult into runner measurements (first epoch = warm-up)."""
    epochs = tuple(
        EpochRecord(epoch=e.epoch, seconds=e.seconds, loss=e.loss, accuracy=e.accuracy)
        for e in result.epochs
    )
    steady = [e.seconds for e in result.epochs[1:]]
    timings = []
    if steady:
        timings.append(PhaseTiming.from_samples("epoch", steady, [result.epochs[0].seconds]))
    else:
        timings.append(PhaseTiming.from_samples("epoch", [result.epochs[0].seconds]))
    if getattr(result, "data_s", None) is not None:
        timings.append(PhaseTiming.from_samples("load", [result.data_s]))
    scores = []
    if result.test_accuracy is not None:
        scores.append(Score("accuracy", float(result.test_accuracy), True))
    if result.test_loss is not None:
        scores.append(Score("log_loss", float(result.test_loss), False))
    scores.append(Score("final_train_loss", float(result.final_loss), False))
    images_per_second = result.images_per_s if result.images_per_s is not None else math.nan
    dl = DLMeasurements(
        model=result.model,
        epochs=epochs,
        per_worker_batch_size=result.batch_per_worker,
        workers=result.workers,
        learning_rate=result.learning_rate,
        images_per_second=float(images_per_second),
        warmup_epochs=1 if steady else 0,
        strategy=result.strategy,
        lr_scaling=getattr(config, "lr_scaling", "linear"),
        rank_weight_digests=tuple(result.rank_digests),
        final_loss=float(result.final_loss),
        final_accuracy=None if result.final_accuracy is None else float(result.final_accuracy),
        test_loss=result.test_loss,
        test_accuracy=result.test_accuracy,
    )
    return Measurements(
        timings=tuple(timings),
        repeats=len(steady) or 1,
        warmup=1 if steady else 0,
        scores=tuple(scores),
        repeat_prediction_digests=(result.weights_digest,),
        dl=dl,
        stopped_because="epochs",
        task="classification",
    )
