"""How a backend that is not a scikit-learn-style estimator plugs into the runner.

The runner measures classical backends itself (:mod:`accelml.runner.run_case`). For a
backend whose record names a measurer (``Backend.measurer``, 'module:function') it instead
calls that function, inside the case's own process, and stores what it returns:

    measure(case: Case, context: MeasureContext) -> Measurements

``case`` is the validated :class:`~accelml.cases.Case` (algorithm, backend, device,
workers, strategy, dataset, params, repeats, time limit, threads); ``context`` says where
the dataset cache is, a scratch directory for the case, and the deadline. The function
raises on failure (an :class:`~accelml.errors.UnavailableError` for a missing library or
device); the runner records the reason. A multi-rank case (``workers > 1``) launches its
ranks from inside this function (e.g. horovodrun or mpirun) and returns rank 0's view with
every rank's weight digest in ``dl.rank_weight_digests``.

The keras measurer below turns a case into :class:`accelml.dl.config.TrainingConfig`
(``algorithm`` is the model; ``params`` are training keys such as epochs, batch_size per
worker, learning_rate, lr_scaling), runs it with ``accelml.dl.launch`` (which starts the
ranks its strategy needs), and reports epoch times without the first
epoch, images/s, loss and accuracy per epoch and test accuracy.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from accelml.cases import Case
from accelml.dl import launch
from accelml.dl.config import TrainingConfig, TrainingResult, training_config_dict
from accelml.dl.turns import TURNS_VARIABLE, EpochRelay
from accelml.estimators import get_backend
from accelml.results.records import (
    BoostingRounds,
    DatasetInfo,
    DLMeasurements,
    PhaseTiming,
    Score,
)
from accelml.results.records import (
    EpochMeasurement as EpochRecord,
)
from accelml.runner.timing import Turns


@dataclass(frozen=True)
class MeasureContext:
    """Where a measurer may read and write, and by when it must be done."""

    cache_dir: str | None
    workdir: str
    deadline_monotonic: float | None
    threads: int | None
    turns: Turns | None = None
    """Set in an interleaved comparison group: a measurer that repeats rounds passes it to
    :func:`accelml.runner.timing.repeat_until_stable` (one that does not, e.g. a training's
    epochs, is measured alone in its turn)."""
    logs_dir: str | None = None     # where launchers' and ranks' logs are kept (the store's)


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
    iterations: int | None = None   # iterations of the last fit (iterative algorithms)
    warmup_note: str = ""           # why a phase's first run counted (it already took seconds)
    worker_peak_memory_bytes: tuple[int, ...] = ()   # each worker process's, on several workers
    workers_started_by: str = ""                     # local-processes | srun | mpirun
    boosting: BoostingRounds | None = None           # set-up vs rounds (accelml.runner.rounds)


def measurer_for(backend: str) -> Callable[[Case, MeasureContext], Measurements] | None:
    """The measurer ``backend``'s record names (imported now), or None: the runner's own."""
    target = get_backend(backend).measurer
    if not target:
        return None
    module, _, name = target.partition(":")
    measurer: Callable[[Case, MeasureContext], Measurements] = getattr(
        importlib.import_module(module), name)
    return measurer


def measure_keras(case: Case, context: MeasureContext) -> Measurements:
    """Train a keras case with :func:`accelml.dl.launch` (which starts its ranks, if any)."""
    config = TrainingConfig.from_dict(training_config_dict(case))
    if config.output_dir is None and (config.checkpoints or config.tensorboard or config.save_model):
        output_dir = Path(context.workdir) / "training"
        output_dir.mkdir(exist_ok=True)   # in the scratch folder now, never that folder itself
        config = config.replace(output_dir=str(output_dir))
    work_dir = None
    if context.logs_dir is not None:      # kept with the run in its store, named in reasons
        work_dir = str(Path(context.logs_dir) / f"{case.case_id}-{os.getpid()}")
        try:
            os.makedirs(work_dir, exist_ok=True)
        except OSError:
            work_dir = None               # not writable from here: a scratch folder instead
    if context.turns is None or config.epochs < 2:
        return measurements_from_training(launch(config, work_dir=work_dir), config)
    return _train_in_turns(config, work_dir, context, context.turns)


@dataclass
class _EpochTurns:
    """What the relay thread of a training in turns found: the epochs that ran in turn, and
    why the rounds ended before the training did (empty: they did not)."""

    epochs: list[int] = field(default_factory=list)
    ended: str = ""


def _relay_epochs(relay: EpochRelay, turns: Turns, epochs: int, stopped: threading.Event,
                  found: _EpochTurns) -> None:
    """Tell the coordinator when the ranks are warm (after the first epoch), run one epoch
    per turn and report its seconds; free the rest when the coordinator stops the rounds."""
    if relay.wait_done(0, stopped) is None:
        return
    turns.ready({}, rounds=epochs - 1)
    for epoch in range(1, epochs):
        try:
            reason = turns.next()
        except RuntimeError as error:   # the coordinator is gone: train on, untimed by turns
            reason = str(error)
        if reason is not None:
            found.ended = reason
            relay.free()
            return
        relay.start_epoch(epoch)
        seconds = relay.wait_done(epoch, stopped)
        if seconds is None:
            return
        found.epochs.append(epoch)
        turns.report({"epoch": seconds})


RELAY_JOIN_S = 30.0
"""How long a finished training waits for its relay thread to read the last epoch's files."""


def _train_in_turns(config: TrainingConfig, work_dir: str | None, context: MeasureContext,
                    turns: Turns) -> Measurements:
    """Train with each epoch after the first as one round of the case's interleaved group
    (:mod:`accelml.dl.turns`): the ranks stay warm between turns."""
    folder = tempfile.mkdtemp(prefix="turns-", dir=work_dir or context.workdir)
    relay = EpochRelay(folder, config.strategy_record.ranks(config.workers))
    stopped, found = threading.Event(), _EpochTurns()
    thread = threading.Thread(target=_relay_epochs, daemon=True,
                              args=(relay, turns, config.epochs, stopped, found))
    thread.start()
    try:
        result = launch(config, work_dir=work_dir, extra_env={TURNS_VARIABLE: folder})
        thread.join(RELAY_JOIN_S)
    finally:
        stopped.set()
        shutil.rmtree(folder, ignore_errors=True)
    return measurements_from_training(result, config, tuple(found.epochs), found.ended)


def measurements_from_training(result: TrainingResult, config: TrainingConfig,
                               in_turn: tuple[int, ...] = (), ended: str = "") -> Measurements:
    """Convert an ``accelml.dl`` TrainingResult into runner measurements (first epoch = warm-up).

    ``in_turn``: the epochs that ran as the rounds of an interleaved group (then only they
    are the ``epoch`` phase's samples, so that they pair with the other cases' rounds);
    ``ended``: why those rounds ended before the training did (its later epochs ran alone)."""
    epochs = tuple(
        EpochRecord(epoch=e.epoch, seconds=e.seconds, loss=e.loss, accuracy=e.accuracy)
        for e in result.epochs
    )
    steady = [e.seconds for e in result.epochs[1:]]
    alone = [e.epoch for e in result.epochs[1:] if e.epoch not in in_turn]
    note = ""
    if in_turn:
        steady = [e.seconds for e in result.epochs if e.epoch in in_turn]
        if alone:
            note = (f"epochs {alone[0] + 1}-{alone[-1] + 1} ran after its group's rounds ended "
                    f"({ended or 'group_ended'}), alone: in the epoch records, not in the "
                    "epoch phase")
    timings = []
    if steady:
        timings.append(PhaseTiming.from_samples("epoch", steady, [result.epochs[0].seconds]))
    else:
        timings.append(PhaseTiming.from_samples("epoch", [result.epochs[0].seconds]))
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
        lr_scaling=config.lr_scaling,
        rank_weight_digests=tuple(result.rank_digests),
        final_loss=float(result.final_loss),
        final_accuracy=None if result.final_accuracy is None else float(result.final_accuracy),
        test_loss=result.test_loss,
        test_accuracy=result.test_accuracy,
        batchnorm_momentum=result.batchnorm_momentum,
        batchnorm_updates=result.batchnorm_updates,
        path=result.path or None,
        listeners=result.listeners,
        listeners_authenticated=result.listeners_authenticated,
    )
    return Measurements(
        timings=tuple(timings),
        repeats=len(steady) or 1,
        warmup=1 if steady else 0,
        scores=tuple(scores),
        repeat_prediction_digests=(result.weights_digest,),
        dl=dl,
        stopped_because=(ended or "epochs") if in_turn else "epochs",
        task="classification",
        warmup_note=note,
    )
