"""What one training run is (:class:`TrainingConfig`) and what it measured (:class:`TrainingResult`).

Both are frozen dataclasses that travel as JSON between the runner, the launcher and
every rank, so nothing here imports TensorFlow, Keras or JAX.

>>> config = TrainingConfig(model="mnist_cnn", dataset="digits", strategy="horovod",
...                         workers=2, batch_size=32, epochs=3)
>>> config.global_batch_size
64
>>> TrainingConfig.from_dict(config.to_dict()) == config
True
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelml.cases import Case, JSONScalar
from accelml.convert import OBJECT, JSONRecord, JSONValue, from_data
from accelml.dl.strategies import (
    AUTO,
    LAUNCHERS,
    STRATEGIES_POINT,
    Strategy,
    default_strategy,
)
from accelml.errors import SpecError

LR_SCALINGS = ("linear", "sqrt", "none")
OPTIMIZERS = ("sgd", "adam")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
CACHES = ("memory", "disk", "none")
DEVICES = ("cpu", "gpu")
CUDA_GRAPH = "cuda-graph"
COMPILED = "compiled"
EAGER_STEPS = "none"
STEP_CAPTURES = (AUTO, EAGER_STEPS, CUDA_GRAPH, COMPILED)
AUTO_STEP_CAPTURE = COMPILED
"""What ``step_capture = "auto"`` runs where steps can be captured (Keras on torch on GPUs):
:data:`COMPILED`, Inductor-fused kernels replayed from a CUDA graph, the fastest measured
(benchmarks/RESULTS.md, 2026-11-27): ResNet50V2 at batch 256 bf16 22.7 ms a step against 83.9 ms
for :data:`CUDA_GRAPH` (eager Keras kernels replayed) on an H100, 0.72x of jax-pmean per GPU
and 0.96 efficiency at 4 H200s; the workshop CNN 0.38 ms against 0.53 ms. It costs compiling
before the first epoch (about 1.5 min for ResNet50V2, 23 s for the CNN): ``"cuda-graph"`` is the
opt-in for runs too short to pay that back. Where compiling fails, the step runs eager
kernels from the CUDA graph, with the reason in the path."""


def scaled_learning_rate(base: float, workers: int, scaling: str) -> float:
    """The learning rate for ``workers`` workers (Goyal et al.: linear; or sqrt; or none).

    >>> scaled_learning_rate(0.01, 4, "linear"), scaled_learning_rate(0.01, 4, "sqrt")
    (0.04, 0.02)
    """
    if scaling == "linear":
        return base * workers
    if scaling == "sqrt":
        return base * math.sqrt(workers)
    if scaling == "none":
        return base
    raise SpecError(f"lr_scaling must be one of {', '.join(LR_SCALINGS)}, not {scaling!r}")


def warmup_learning_rate(target: float, workers: int, warmup_epochs: float, epoch: int,
                         batch: int, steps_per_epoch: int) -> float:
    """The learning rate at ``batch`` of ``epoch`` during a Horovod-style warm-up.

    It rises linearly from ``target / workers`` to ``target`` over ``warmup_epochs``
    epochs (Goyal et al., "Accurate, Large Minibatch SGD"), with the same formula as
    ``horovod.keras.callbacks.LearningRateWarmupCallback``: at fractional epoch
    ``e = epoch + (batch + 1) / steps_per_epoch`` the rate is
    ``target / workers * (e * (workers - 1) / warmup_epochs + 1)``; from
    ``warmup_epochs`` on it is ``target``.

    >>> round(warmup_learning_rate(0.04, 4, 2, epoch=0, batch=0, steps_per_epoch=10), 6)
    0.0115
    >>> warmup_learning_rate(0.04, 4, 2, epoch=2, batch=0, steps_per_epoch=10)
    0.04
    """
    if warmup_epochs <= 0 or workers <= 1 or epoch >= warmup_epochs:
        return target
    fraction = epoch + (batch + 1) / steps_per_epoch
    if fraction >= warmup_epochs:
        return target
    return target / workers * (fraction * (workers - 1) / warmup_epochs + 1)


@dataclass(frozen=True)
class TrainingConfig(JSONRecord):
    """One data-parallel training run. ``batch_size`` is per worker; see ``global_batch_size``.

    ``strategy`` names a :class:`~accelml.dl.strategies.Strategy` record (default: the one
    marked default); ``keras_backend`` picks the Keras engine among those the strategy runs
    on (None: its first; see :attr:`engine`); ``workers`` is the number of its ranks (a multi-process strategy) or
    devices (a single-process one). ``learning_rate`` is the rate for one worker; it is scaled
    by ``lr_scaling`` and warmed up over ``warmup_epochs`` (0 turns warm-up off).
    ``train_samples`` / ``test_samples`` cut the data set (None: all of it);
    ``steps_per_epoch`` cuts every epoch (None: one pass over this worker's shard).
    Files (checkpoints, TensorBoard, CSV log, final model) go under ``output_dir`` and are
    written by rank 0 only; ``launcher`` (None: chosen by :func:`accelml.dl.launch`) starts
    the ranks (:func:`accelml.dl.launch` refuses more ranks on this machine than it has cores
    unless ``oversubscribe`` is set); ``checkpoints``/``tensorboard``/``save_model`` need it by the
    time training starts (the runner gives each case one). ``horovod_*`` are passed to Horovod
    as its environment (by the strategies that run on Horovod). ``step_capture``
    ``"cuda-graph"`` replays Keras-on-torch training steps from CUDA graphs (GPUs; see
    :mod:`accelml.dl.strategies.torch_loop`), ``"compiled"`` compiles their forward pass and
    loss with Inductor (``torch.compile``; the backward through AOTAutograd) and, on GPUs,
    replays the step from CUDA graphs too (on CPUs the compiled step runs as it is), ``"none"``
    runs them eagerly, and ``"auto"`` (the default) does :data:`AUTO_STEP_CAPTURE` wherever it
    can capture (:attr:`captures_steps`); every one falls back, with the reason, where
    compiling or recording fails (``"compiled"`` to eager kernels, ``"auto"`` to eager steps).
    ``batchnorm_momentum`` sets the momentum of every BatchNorm layer of the model (None: the
    model's own, 0.99 in Keras).
    ``gradient_reduction`` (how gradients are averaged across workers, e.g. ``allreduce``,
    ``buckets``, ``reduce-scatter``), ``gradient_reduce_dtype`` (``float32`` or
    ``bfloat16``, the dtype they travel in) and ``gradient_bucket_mb`` (bucket size of a
    bucketed reduction) take the values the strategy's record lists, or ``"auto"`` (the
    default: the strategy picks for the model at hand). ``steps_per_execution``: training
    steps per dispatch to the devices (strategies that compile their step; None: chosen
    from the step's size). What ran is recorded in :attr:`TrainingResult.path`.
    """

    model: str = "mnist_cnn"
    dataset: str = "digits"
    strategy: str = field(default_factory=lambda: default_strategy().name)
    keras_backend: str | None = None
    workers: int = 1
    batch_size: int = 32
    epochs: int = 3
    learning_rate: float = 0.01
    optimizer: str = "sgd"
    momentum: float = 0.9
    lr_scaling: str = "linear"
    warmup_epochs: float = 0.0
    seed: int = 0
    deterministic: bool = False
    precision: str = "float32"
    device: str = "cpu"
    data_path: str | None = None
    image_size: int | None = None
    train_samples: int | None = None
    test_samples: int | None = None
    steps_per_epoch: int | None = None
    shuffle: bool = True
    cache: str = "memory"
    cache_dir: str | None = None
    output_dir: str | None = None
    checkpoints: bool = False
    tensorboard: bool = False
    histogram_freq: int = 0
    save_model: bool = False
    verbose: int = 0
    horovod_timeline: str | None = None
    horovod_timeline_mark_cycles: bool = False
    horovod_fusion_threshold_mb: int | None = None
    horovod_cycle_time_ms: float | None = None
    gradient_reduction: str = AUTO
    gradient_reduce_dtype: str = AUTO
    gradient_bucket_mb: float = 25.0
    time_limit_s: float = 1800.0
    launcher: str | None = None
    step_capture: str = AUTO
    steps_per_execution: int | None = None
    batchnorm_momentum: float | None = None
    oversubscribe: bool = False
    model_options: tuple[tuple[str, object], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        def bad(key: str, allowed: str) -> SpecError:
            return SpecError(f"training {key} must be {allowed}, not {getattr(self, key)!r}")

        strategy = STRATEGIES_POINT.find(self.strategy)
        if strategy is None:
            raise bad("strategy", "one of " + ", ".join(sorted(STRATEGIES_POINT.names())))
        for key, allowed in (("lr_scaling", LR_SCALINGS), ("optimizer", OPTIMIZERS),
                             ("precision", PRECISIONS), ("cache", CACHES), ("device", DEVICES),
                             ("step_capture", STEP_CAPTURES)):
            if getattr(self, key) not in allowed:
                raise bad(key, "one of " + ", ".join(allowed))
        for key in ("workers", "batch_size", "epochs"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise bad(key, "an integer >= 1")
        strategy.keras_engine(self.keras_backend)
        strategy.check_gradient_options(self.gradient_reduction, self.gradient_reduce_dtype)
        if not self.gradient_bucket_mb > 0:
            raise bad("gradient_bucket_mb", "> 0")
        if self.launcher is not None and self.launcher not in LAUNCHERS:
            raise bad("launcher", "one of " + ", ".join(LAUNCHERS))
        if strategy.max_workers is not None and self.workers > strategy.max_workers:
            most = "1" if strategy.max_workers == 1 else f"at most {strategy.max_workers}"
            raise bad("workers", f"{most} for strategy {self.strategy!r}")
        if self.learning_rate <= 0:
            raise bad("learning_rate", "> 0")
        if self.warmup_epochs < 0:
            raise bad("warmup_epochs", ">= 0")
        if self.steps_per_execution is not None and (
                not isinstance(self.steps_per_execution, int) or self.steps_per_execution < 1):
            raise bad("steps_per_execution", "an integer >= 1 (or absent: chosen per model)")
        if self.step_capture == CUDA_GRAPH and not self.can_capture_steps:
            raise SpecError("training step_capture = 'cuda-graph' captures Keras-on-torch "
                            "training steps on GPUs: it needs device 'cuda' and "
                            "keras_backend 'torch'")
        if self.step_capture == COMPILED and self.engine != "torch":
            raise SpecError("training step_capture = 'compiled' compiles Keras-on-torch "
                            "training steps: it needs keras_backend 'torch'")
        if self.batchnorm_momentum is not None and not 0.0 <= self.batchnorm_momentum < 1.0:
            raise bad("batchnorm_momentum", "a number in [0, 1)")
        if self.cache == "disk" and not self.cache_dir:
            raise SpecError("training cache = 'disk' needs cache_dir (fast local storage)")
        if isinstance(self.model_options, dict):
            object.__setattr__(self, "model_options", tuple(sorted(self.model_options.items())))

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.workers

    @property
    def model_arguments(self) -> dict[str, object]:
        """What :func:`accelml.dl.models.build_model` takes besides the model's name and shape.

        >>> TrainingConfig(batchnorm_momentum=0.9, model_options={"width": 4}).model_arguments
        {'width': 4, 'batchnorm_momentum': 0.9}
        """
        arguments = dict(self.model_options)
        if self.batchnorm_momentum is not None:
            arguments["batchnorm_momentum"] = self.batchnorm_momentum
        return arguments

    @property
    def can_capture_steps(self) -> bool:
        """Whether its training steps can be replayed from CUDA graphs: Keras on torch on GPUs.

        >>> TrainingConfig(strategy="torch-ddp", device="gpu").can_capture_steps
        True
        """
        return self.device == "gpu" and self.engine == "torch"

    @property
    def captures_steps(self) -> bool:
        """Whether the run tries to replay its steps from CUDA graphs (``cuda-graph`` or
        ``compiled``, asked for or chosen by ``auto``) where it can (eager Keras-on-torch
        steps on a GPU are host-bound: 0.45x of the captured step's speed on ResNet50V2 and
        17x slower on the workshop's CNN, measured on H200s).

        >>> TrainingConfig(strategy="torch-ddp", device="gpu").captures_steps
        True
        >>> TrainingConfig(strategy="torch-ddp", device="gpu", step_capture="none").captures_steps
        False
        >>> TrainingConfig(strategy="torch-ddp", device="cpu").captures_steps
        False
        """
        return self.can_capture_steps and self.step_choice in (CUDA_GRAPH, COMPILED)

    @property
    def step_choice(self) -> str:
        """What ``step_capture`` comes to for this run: ``auto`` resolved to
        :data:`AUTO_STEP_CAPTURE` where steps can be captured, else to eager steps.

        >>> TrainingConfig(strategy="torch-ddp", device="gpu").step_choice == AUTO_STEP_CAPTURE
        True
        >>> TrainingConfig(strategy="torch-ddp", step_capture="compiled").step_choice
        'compiled'
        >>> TrainingConfig(strategy="torch-ddp").step_choice
        'none'
        """
        if self.step_capture != AUTO:
            return self.step_capture
        return AUTO_STEP_CAPTURE if self.can_capture_steps else EAGER_STEPS

    @property
    def compiles_steps(self) -> bool:
        """Whether the run compiles its Keras-on-torch steps with Inductor (``torch.compile``).

        >>> TrainingConfig(strategy="torch-ddp", step_capture="compiled").compiles_steps
        True
        >>> TrainingConfig(strategy="torch-ddp", device="gpu", step_capture="cuda-graph").compiles_steps
        False
        """
        return self.step_choice == COMPILED

    @property
    def scaled_learning_rate(self) -> float:
        return scaled_learning_rate(self.learning_rate, self.workers, self.lr_scaling)

    @property
    def strategy_record(self) -> Strategy:
        """The record of this run's strategy (its launchers, environment, train function)."""
        return STRATEGIES_POINT.get(self.strategy)

    @property
    def multi_process(self) -> bool:
        return self.strategy_record.multi_process

    @property
    def engine(self) -> str:
        """The Keras engine this run trains on: ``keras_backend``, or the strategy's default.

        >>> TrainingConfig(strategy="horovod").engine
        'tensorflow'
        """
        return self.strategy_record.keras_engine(self.keras_backend)

    def learning_rate_at(self, epoch: int, batch: int, steps_per_epoch: int) -> float:
        return warmup_learning_rate(self.scaled_learning_rate, self.workers, self.warmup_epochs,
                                    epoch, batch, steps_per_epoch)

    def replace(self, **changes: Any) -> TrainingConfig:
        """A copy with ``changes`` (each checked against its field by ``__post_init__``)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> TrainingConfig:
        """The config ``data`` describes; an unknown key is a :class:`SpecError` naming the allowed."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"unknown training key(s): {', '.join(unknown)}; "
                            f"allowed: {', '.join(sorted(known))}")
        config = from_data(cls, data)
        return config.replace(model_options=tuple(sorted(config.model_options)))


_DEVICES_OF_CASES = {"cpu": "cpu", "cuda": "gpu"}


def training_config_dict(case: Case) -> dict[str, JSONScalar]:
    """The :class:`TrainingConfig` keys of a keras case (``TrainingConfig.from_dict`` checks them).

    The case's algorithm is the model, its params are training keys (epochs, batch_size per
    worker, learning_rate, lr_scaling, ...); a case without a strategy gets the default one.

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
        "workers": case.workers,
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


@dataclass(frozen=True)
class EpochRecord(JSONRecord):
    """One epoch as every rank agreed on it (metrics averaged across workers)."""

    epoch: int
    seconds: float
    loss: float
    accuracy: float
    learning_rate: float
    images: int


@dataclass(frozen=True)
class TrainingResult(JSONRecord):
    """What one run measured. Times exclude process start and data loading.

    ``epochs[0]`` is the warm-up epoch (tracing, XLA compilation, cache fill): it is
    reported as ``first_epoch_s`` and left out of ``mean_epoch_s`` and ``images_per_s``.
    ``rank_digests`` holds the SHA-256 of every rank's final weights (one entry per
    process; for single-process strategies, one entry). ``batchnorm_momentum``: the model's
    (:func:`accelml.dl.models.batchnorm_momentum`), None without BatchNorm. ``path``: how the
    step ran, and why where a default chose (e.g. ``"CUDA graph (auto)"``, ``"eager (auto:
    recording failed: ...)"``, ``"234 steps per dispatch (auto: 2e+08 FLOPs a step); gradients:
    one all-reduce, float32 (auto: 1.6 MB of gradients, 4 devices)"``).
    """

    strategy: str
    model: str
    dataset: str
    workers: int
    batch_per_worker: int
    global_batch: int
    learning_rate: float
    parameters: int
    train_samples: int
    test_samples: int
    steps_per_epoch: int
    epochs: tuple[EpochRecord, ...]
    test_loss: float | None
    test_accuracy: float | None
    weights_digest: str
    rank_digests: tuple[str, ...]
    setup_s: float
    data_s: float
    backend: str
    versions: tuple[tuple[str, str], ...] = field(metadata=OBJECT)
    files: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    rank: int = 0
    batchnorm_momentum: float | None = None
    path: str = ""
    listeners: str = ""                   # what the ranks listened on (the strategy's Listener)
    listeners_authenticated: bool = True  # only the run's own processes could reach them

    @property
    def batchnorm_updates(self) -> int:
        """How many times the BatchNorm moving statistics were updated: one per training step."""
        return self.steps_per_epoch * len(self.epochs)

    @property
    def epoch_times_s(self) -> tuple[float, ...]:
        return tuple(e.seconds for e in self.epochs)

    @property
    def first_epoch_s(self) -> float:
        return self.epochs[0].seconds

    @property
    def steady_epoch_times_s(self) -> tuple[float, ...]:
        return self.epoch_times_s[1:]

    @property
    def mean_epoch_s(self) -> float | None:
        steady = self.steady_epoch_times_s
        return sum(steady) / len(steady) if steady else None

    @property
    def median_epoch_s(self) -> float | None:
        steady = sorted(self.steady_epoch_times_s)
        if not steady:
            return None
        middle = len(steady) // 2
        return steady[middle] if len(steady) % 2 else (steady[middle - 1] + steady[middle]) / 2

    @property
    def images_per_s(self) -> float | None:
        """Training images per second over the epochs after the first (all workers together)."""
        steady = self.epochs[1:]
        if not steady:
            return None
        return sum(e.images for e in steady) / sum(e.seconds for e in steady)

    @property
    def final_loss(self) -> float:
        return self.epochs[-1].loss

    @property
    def final_accuracy(self) -> float:
        return self.epochs[-1].accuracy

    @property
    def ranks_agree(self) -> bool:
        return len(set(self.rank_digests)) == 1

    def replace(self, **changes: Any) -> TrainingResult:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def json_extras(self) -> dict[str, JSONValue]:
        """Written beside the fields (:mod:`accelml.convert`) for a reader of the rank's JSON."""
        return {"summary": {
            "epoch_times_s": list(self.epoch_times_s),
            "first_epoch_s": self.first_epoch_s,
            "mean_epoch_s": self.mean_epoch_s,
            "median_epoch_s": self.median_epoch_s,
            "images_per_s": self.images_per_s,
            "final_loss": self.final_loss,
            "final_accuracy": self.final_accuracy,
        }}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)
