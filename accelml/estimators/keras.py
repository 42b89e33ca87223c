"""The ``keras`` backend: neural networks trained by :mod:`accelml.dl` (Horovod, tf.distribute,
JAX, torch.distributed).

Keras cases are not scikit-learn estimators: their "algorithm" is a model from
:data:`accelml.dl.models.MODELS` and this module is their whole backend. It registers the
record (so that ``accelml.backends()`` and ``python -m accelml backends`` show whether this
machine can train on CPU and on CUDA, and asking it for a classical algorithm fails with a
clear reason), turns a case into a :class:`~accelml.dl.config.TrainingConfig`
(:func:`training_config_dict`: ``algorithm`` is the model; ``params`` are training keys such
as epochs, batch_size per worker, learning_rate, lr_scaling) and measures it
(:func:`measure_keras`, the record's measurer): it trains with :func:`accelml.dl.launch`
(which starts the ranks its strategy needs) and reports epoch times without the first epoch,
images/s, loss and accuracy per epoch, test accuracy and every rank's weight digest
(:class:`~accelml.results.records.DLMeasurements`).

>>> from accelml.estimators import get_backend
>>> backend = get_backend("keras")
>>> backend.devices
('cpu', 'cuda')
>>> "kmeans" in backend.missing, backend.deep_learning
(True, True)
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from accelml.cases import Case, CaseLike, Expectation, JSONScalar
from accelml.dl.config import TrainingConfig, TrainingResult
from accelml.dl.engines import probe_keras
from accelml.dl.launch import launch
from accelml.dl.strategies import STRATEGIES_POINT, default_strategy, find_strategy, probe_strategy
from accelml.dl.turns import TURNS_VARIABLE, EpochRelay
from accelml.estimators._algorithms import ALGORITHMS
from accelml.estimators._measurer import MeasureContext, Measurements, Turns
from accelml.estimators._registry import Backend
from accelml.probe import Availability, list_gpus
from accelml.results.records import DLMeasurements, EpochMeasurement, PhaseTiming, Score


def probe_keras_backend(device: str) -> Availability:
    """Keras, and the strategies that can train here (each strategy's own probe); on ``cuda``
    a GPU, as NVML sees it."""
    keras = probe_keras()
    if not keras.available:
        return Availability("keras", device, False, None, keras.detail)
    found = [(record, probe_strategy(record)) for record in STRATEGIES_POINT.records()]
    usable = [record for record, row in found if row.available]
    lacking = "; ".join(f"{record.name}: {row.detail}" for record, row in found
                        if not row.available)
    if not usable:
        return Availability("keras", device, False, keras.version,
                            f"no strategy can run here ({lacking})")
    engines = dict.fromkeys(engine for record in usable for engine in record.keras_backends)
    detail = (f"engines: {', '.join(engines)}; "
              f"strategies: {', '.join(record.name for record in usable)}")
    if lacking:
        detail += f" (unavailable: {lacking})"
    if device == "cuda":
        gpus, reason = list_gpus()
        if not gpus:
            return Availability("keras", "cuda", False, keras.version, reason)
        detail = f"{len(gpus)} GPU(s); " + detail
    return Availability("keras", device, True, keras.version, detail)


def repeat_expectation(case: CaseLike, deterministic: bool) -> Expectation:
    """Training repeats bitwise only in deterministic mode, as far as its strategy promises."""
    if not deterministic:
        return Expectation(False, "Keras training outside deterministic mode draws unseeded "
                                  "initial weights and picks non-deterministic kernels")
    record = find_strategy(case.strategy)
    if record is None:
        return Expectation(False, f"strategy {case.strategy!r} is not installed here")
    return record.determinism.expectation



_DEVICES_OF_CASES = {"cpu": "cpu", "cuda": "gpu"}


def training_config_dict(case: Case) -> dict[str, JSONScalar]:
    """The :class:`TrainingConfig` keys of a keras case (``TrainingConfig.from_dict`` checks them).

    The case's algorithm is the model, its params are training keys (epochs, batch_size per
    rank, learning_rate, lr_scaling, ...); a case without a strategy gets the default one.

    >>> from accelml.cases import DatasetSpec
    >>> case = Case("mlp", "keras", "cpu", DatasetSpec("d", "shipped", (("name", "digits"),)),
    ...             params=(("epochs", 2),))
    >>> config = TrainingConfig.from_dict(training_config_dict(case))
    >>> config.model, config.dataset, config.epochs, config.strategy == default_strategy().name
    ('mlp', 'digits', 2, True)
    """
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
    config: dict[str, JSONScalar] = {
        "model": case.algorithm,
        "dataset": dataset,
        "strategy": case.strategy or default_strategy().name,
        "ranks": case.ranks,
        "device": _DEVICES_OF_CASES.get(case.device, case.device),
        "seed": case.seed,
    }
    for key in ("train_samples", "test_samples", "image_size"):
        if key in options:
            config[key] = options[key]
    if "path" in options:
        config["data_path"] = options["path"]
    config.update(case.params_dict)
    if case.time_limit_s:
        config.setdefault("time_limit_s", float(case.time_limit_s))
    return config


def check_training_case(case: Case) -> None:
    """A case whose training keys :class:`TrainingConfig` refuses is a spec error (raises)."""
    TrainingConfig.from_dict(training_config_dict(case))


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
    relay = EpochRelay(folder, config.strategy_record.processes(config.ranks))
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
        EpochMeasurement(epoch=e.epoch, seconds=e.seconds, loss=e.loss, accuracy=e.accuracy)
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
        per_rank_batch_size=result.batch_per_rank,
        ranks=result.ranks,
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


BACKEND = Backend(
    name="keras",
    summary="Keras 3 models trained data-parallel by accelml.dl's strategies (tf.distribute, "
            "Horovod, JAX, torch.distributed, and any installed as plug-ins)",
    devices=("cpu", "cuda"),
    probe=probe_keras_backend,
    repeat_expectation=repeat_expectation,
    cross_device_reason="CPU (Eigen/oneDNN) and GPU (cuDNN/cuBLAS) kernels sum in different "
                        "orders; rounding differences grow over training steps",
    libraries=("keras",),
    deep_learning=True,
    main_phase="epoch",
    measurer=measure_keras,
    check_case=check_training_case,
    implementations={},
    how_to_get={
        "cpu": "pip install keras tensorflow (or jax, or torch); Horovod: make/build-horovod.sh",
        "cuda": "a GPU node with tensorflow[and-cuda], jax[cuda12] or torch (CUDA wheels)",
    },
    missing={name: ("backend 'keras' trains neural networks (accelml.dl models such as "
                    "mnist_cnn or resnet50v2), not " + name)
             for name in ALGORITHMS},
)
