"""What one training run is (:class:`TrainingConfig`), what it measured (:class:`TrainingResult`),
and the :class:`Strategy` record of the way it is spread over ranks.

The config and the result are frozen dataclasses that travel as JSON between the runner,
the launcher and every rank, so nothing here imports TensorFlow, Keras or JAX. The config
names its strategy and is checked against its record, and a record's ``train`` takes a
config: they refer to each other, so they share this module (no import cycle).

>>> config = TrainingConfig(model="mnist_cnn", dataset="digits", strategy="horovod",
...                         ranks=2, batch_size=32, epochs=3)
>>> config.global_batch_size
64
>>> TrainingConfig.from_dict(config.to_dict()) == config
True
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelml.cases import Expectation
from accelml.convert import OBJECT, JSONRecord, JSONValue, from_data
from accelml.dl.data import ImageData
from accelml.errors import AccelmlError, SpecError
from accelml.plugins import ExtensionPoint
from accelml.probe import Availability

# The Strategy record. A strategy is one frozen record in the module of accelml.dl.strategies
# that implements it (or a third party's, found through the accelml.strategies entry points);
# the launcher, the trainer, the executors, deterministic mode, the expectations and the
# probes all read it, and nothing else in accelml tests a strategy's name.

LOCAL_PROCESSES = "local-processes"
SRUN = "srun"
LAUNCHERS = ("horovodrun", "mpirun", SRUN, LOCAL_PROCESSES)
"""How :func:`accelml.dl.launch` can start ranks: ``horovodrun`` (one host, gloo), ``mpirun``
(Open MPI), ``srun`` (inside a SLURM allocation), ``local-processes`` (plain processes)."""
ALLREDUCE = "allreduce"
FLOAT32 = "float32"
"""The gradient reduction and reduction dtype every strategy implements."""
AUTO = "auto"
"""The default of ``gradient_reduction``, ``gradient_reduce_dtype`` and ``step_capture``: the
strategy takes the fastest correct path it has measured for the run at hand and records
which one ran (:attr:`accelml.dl.config.TrainingResult.path`)."""


def no_variables(threads: int | None) -> dict[str, str]:
    """Deterministic mode sets nothing more for this strategy."""
    return {}


def no_rank_variables(config: TrainingConfig) -> dict[str, str]:
    """Ranks need no variables of their own beyond the Keras backend."""
    return {}


@dataclass(frozen=True)
class Determinism:
    """What deterministic mode does for a strategy, and what it promises then.

    ``expectation``: whether two deterministic runs of one case repeat bitwise, and why;
    ``environment(threads)``: variables set before the libraries load (op determinism, XLA
    flags, fusion off), given the case's thread count (None: not fixed);
    ``seeds_tensorflow``: the case process seeds TensorFlow and turns on its op determinism;
    ``notes``: what the mode costs here, or cannot promise.
    """

    expectation: Expectation
    environment: Callable[[int | None], Mapping[str, str]] = no_variables
    seeds_tensorflow: bool = False
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Listener:
    """What a run's ranks listen on for each other, and whether a stranger could talk to it.

    ``where``: one line for the case record and the table; ``authenticated``: only the
    run's own processes can use it (loopback of one host, a private network, a shared
    secret). A listener that is not is flagged in the table with ``where`` as the reason.
    """

    where: str
    authenticated: bool


NO_LISTENER = Listener("none: one process", True)
"""A single-process strategy's ranks listen on nothing."""


def no_listeners(launcher: str) -> Listener:
    """A strategy whose runs start no listener."""
    return NO_LISTENER


@dataclass(frozen=True)
class Strategy:
    """One way of spreading Keras training over ranks (devices or processes).

    ``keras_backends``: the Keras engines it runs on; a run picks one with its
    ``keras_backend`` training key (default: the first), and its ranks get it as
    ``KERAS_BACKEND``. ``train(config, data)`` trains this process's share and returns what
    it measured. ``probe()`` says whether it can run here, never raising.
    ``multi_process``: each rank is a process of its own, started by one of
    ``launchers`` (``default_launcher`` outside a SLURM allocation, ``srun`` inside one where
    allowed); otherwise the ranks are devices of one process. ``mpi_ranks``: the ranks
    find each other through MPI, so ``srun`` starts them with ``--mpi``.
    ``local_process_environment(rank, addresses)``: the variables of each rank started as a
    local process (e.g. ``TF_CONFIG``), given every rank's ``host:port``; None: the strategy
    cannot run several local processes. ``rank_environment(config)``: variables every rank
    gets; ``environment_before_import``: variables that must be set before Keras and its
    engine are imported. ``max_ranks``: most ranks it can use (None: no limit).
    ``gpus_per_rank`` and ``cores_per_rank`` size the batch job of a case.
    ``libraries``: distributions recorded in the environment fingerprint. ``default``: the
    strategy of a Keras case that names none (exactly one record has it).
    ``gradient_reductions`` and ``gradient_reduce_dtypes``: the values of the training keys
    ``gradient_reduction`` (how gradients are averaged across ranks) and
    ``gradient_reduce_dtype`` (the dtype they travel in) it implements, besides ``auto``
    (:data:`AUTO`, the default: the strategy's own choice).
    ``listeners(launcher)``: what its ranks listen on when ``launcher`` starts them
    (:class:`Listener`), recorded with every case. ``private_network``: its library listens
    on every interface whatever address it is given, so the ranks of a one-host run share a
    private network namespace (:mod:`accelml.dl.private_network`).

    >>> record = Strategy(name="demo", doc="one process", keras_backends=("jax",),
    ...                   train=lambda config, data: None,   # type: ignore[arg-type,return-value]
    ...                   probe=lambda: Availability("demo", "-", True),
    ...                   determinism=Determinism(Expectation(True, "seeded")))
    >>> record.keras_backend, record.processes(ranks=4), record.gpus(ranks=4, on_gpu=True)
    ('jax', 1, 4)
    >>> record.keras_engine(None), record.keras_engine("jax")
    ('jax', 'jax')
    """

    name: str
    doc: str
    keras_backends: tuple[str, ...]
    train: Callable[[TrainingConfig, ImageData], TrainingResult]
    probe: Callable[[], Availability]
    determinism: Determinism
    libraries: tuple[str, ...] = ("keras",)
    multi_process: bool = False
    launchers: tuple[str, ...] = (LOCAL_PROCESSES,)
    default_launcher: str = LOCAL_PROCESSES
    mpi_ranks: bool = False
    local_process_environment: Callable[[int, tuple[str, ...]], Mapping[str, str]] | None = None
    rank_environment: Callable[[TrainingConfig], Mapping[str, str]] = no_rank_variables
    environment_before_import: tuple[tuple[str, str], ...] = ()
    max_ranks: int | None = None
    gpus_per_rank: int = 1
    cores_per_rank: int = 1
    default: bool = False
    gradient_reductions: tuple[str, ...] = (ALLREDUCE,)
    gradient_reduce_dtypes: tuple[str, ...] = (FLOAT32,)
    listeners: Callable[[str], Listener] = no_listeners
    private_network: bool = False

    def __post_init__(self) -> None:
        where = f"strategy {self.name!r}"
        if not self.keras_backends:
            raise AccelmlError(f"{where}: keras_backends names no Keras engine")
        unknown = [launcher for launcher in self.launchers if launcher not in LAUNCHERS]
        if unknown or not self.launchers:
            raise AccelmlError(f"{where}: launchers must be some of {', '.join(LAUNCHERS)}, "
                               f"not {self.launchers!r}")
        if self.default_launcher not in self.launchers:
            raise AccelmlError(f"{where}: default_launcher {self.default_launcher!r} is not "
                               f"one of its launchers {self.launchers!r}")
        if not self.multi_process and self.launchers != (LOCAL_PROCESSES,):
            raise AccelmlError(f"{where}: a single-process strategy runs as one local process; "
                               "set multi_process=True to use other launchers")
        for key in ("gradient_reductions", "gradient_reduce_dtypes"):
            if not getattr(self, key):
                raise AccelmlError(f"{where}: {key} names none")
        if self.gpus_per_rank < 0 or self.cores_per_rank < 1:
            raise AccelmlError(f"{where}: gpus_per_rank must be >= 0 and cores_per_rank >= 1")

    @property
    def keras_backend(self) -> str:
        """The Keras engine its ranks run on unless a run picks another."""
        return self.keras_backends[0]

    def keras_engine(self, requested: str | None) -> str:
        """The Keras engine of a run that asks for ``requested`` (None: the default one);
        an engine it does not run on is an error naming those it does."""
        if requested is None:
            return self.keras_backend
        if requested not in self.keras_backends:
            raise SpecError(f"training keras_backend must be one of "
                            f"{', '.join(self.keras_backends)} for strategy {self.name!r}, "
                            f"not {requested!r}")
        return requested

    def check_gradient_options(self, reduction: str, dtype: str) -> None:
        """A gradient reduction or reduction dtype it does not implement is an error naming
        those it does.

        >>> from accelml.dl.strategies import strategy_named
        >>> strategy_named("jax-pmean").check_gradient_options("reduce-scatter", "bfloat16")
        >>> strategy_named("single").check_gradient_options("allreduce", "bfloat16")
        Traceback (most recent call last):
        accelml.errors.SpecError: training gradient_reduce_dtype must be auto or float32 for ...
        """
        for key, value, allowed in (("gradient_reduction", reduction, self.gradient_reductions),
                                    ("gradient_reduce_dtype", dtype,
                                     self.gradient_reduce_dtypes)):
            allowed = (AUTO, *allowed)
            if value not in allowed:
                raise SpecError(f"training {key} must be {' or '.join(allowed)} for strategy "
                                f"{self.name!r}, not {value!r}")

    def processes(self, ranks: int) -> int:
        """Processes a run on ``ranks`` ranks starts (the ranks of a single-process strategy
        are devices of one process)."""
        return ranks if self.multi_process else 1

    def gpus(self, ranks: int, on_gpu: bool) -> int:
        """GPUs a run on ``ranks`` ranks uses (none off the GPU)."""
        return ranks * self.gpus_per_rank if on_gpu else 0

    def allowed_launchers(self, ranks: int) -> tuple[str, ...]:
        """Launchers that can start it on ``ranks`` ranks (one rank also runs alone)."""
        if ranks == 1 and LOCAL_PROCESSES not in self.launchers:
            return self.launchers + (LOCAL_PROCESSES,)
        return self.launchers


STRATEGIES_POINT: ExtensionPoint[Strategy] = ExtensionPoint(
    "strategy", "accelml.strategies", "accelml.dl.strategies", "STRATEGY", Strategy)
"""Every strategy: built-ins (modules of :mod:`accelml.dl.strategies`), then third parties'."""


def default_strategy() -> Strategy:
    """The strategy of a Keras case that names none (the one record with ``default=True``).

    >>> default_strategy().max_ranks
    1
    """
    defaults = [record for record in STRATEGIES_POINT.records() if record.default]
    if len(defaults) != 1:
        listed = ", ".join(record.name for record in defaults) or "none"
        raise AccelmlError(f"exactly one strategy must have default=True; found: {listed}")
    return defaults[0]


def strategy_named(name: str | None) -> Strategy:
    """The record of ``name`` (the default strategy for None); an error naming the choices
    for an unknown one."""
    return default_strategy() if name is None else STRATEGIES_POINT.get(name)


def find_strategy(name: str | None) -> Strategy | None:
    """The record of ``name`` (the default strategy for None), or None where it is not
    installed here (a stored result of a third party's strategy, say)."""
    return default_strategy() if name is None else STRATEGIES_POINT.find(name)


def strategy_libraries() -> tuple[str, ...]:
    """Every distribution a strategy declares, once each (for the environment fingerprint)."""
    return tuple(dict.fromkeys(library for record in STRATEGIES_POINT.records()
                               for library in record.libraries))


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


def scaled_learning_rate(base: float, ranks: int, scaling: str) -> float:
    """The learning rate for ``ranks`` ranks (Goyal et al.: linear; or sqrt; or none).

    >>> scaled_learning_rate(0.01, 4, "linear"), scaled_learning_rate(0.01, 4, "sqrt")
    (0.04, 0.02)
    """
    if scaling == "linear":
        return base * ranks
    if scaling == "sqrt":
        return base * math.sqrt(ranks)
    if scaling == "none":
        return base
    raise SpecError(f"lr_scaling must be one of {', '.join(LR_SCALINGS)}, not {scaling!r}")


def warmup_learning_rate(target: float, ranks: int, warmup_epochs: float, epoch: int,
                         batch: int, steps_per_epoch: int) -> float:
    """The learning rate at ``batch`` of ``epoch`` during a Horovod-style warm-up.

    It rises linearly from ``target / ranks`` to ``target`` over ``warmup_epochs``
    epochs (Goyal et al., "Accurate, Large Minibatch SGD"), with the same formula as
    ``horovod.keras.callbacks.LearningRateWarmupCallback``: at fractional epoch
    ``e = epoch + (batch + 1) / steps_per_epoch`` the rate is
    ``target / ranks * (e * (ranks - 1) / warmup_epochs + 1)``; from
    ``warmup_epochs`` on it is ``target``.

    >>> round(warmup_learning_rate(0.04, 4, 2, epoch=0, batch=0, steps_per_epoch=10), 6)
    0.0115
    >>> warmup_learning_rate(0.04, 4, 2, epoch=2, batch=0, steps_per_epoch=10)
    0.04
    """
    if warmup_epochs <= 0 or ranks <= 1 or epoch >= warmup_epochs:
        return target
    fraction = epoch + (batch + 1) / steps_per_epoch
    if fraction >= warmup_epochs:
        return target
    return target / ranks * (fraction * (ranks - 1) / warmup_epochs + 1)


@dataclass(frozen=True)
class TrainingConfig(JSONRecord):
    """One data-parallel training run. ``batch_size`` is per rank; see ``global_batch_size``.

    ``strategy`` names a :class:`~accelml.dl.strategies.Strategy` record (default: the one
    marked default); ``keras_backend`` picks the Keras engine among those the strategy runs
    on (None: its first; see :attr:`engine`); ``ranks`` is the number of its ranks: processes
    (a multi-process strategy) or devices of one process (a single-process one).
    ``learning_rate`` is the rate for one rank; it is scaled by ``lr_scaling`` and warmed up
    over ``warmup_epochs`` (0 turns warm-up off).
    ``train_samples`` / ``test_samples`` cut the data set (None: all of it);
    ``steps_per_epoch`` cuts every epoch (None: one pass over this rank's shard).
    Files (checkpoints, TensorBoard, CSV log, final model) go under ``output_dir`` and are
    written by rank 0 only; ``launcher`` (None: chosen by :func:`accelml.dl.launch`) starts
    the ranks (:func:`accelml.dl.launch` refuses more ranks on this machine than it has cores
    unless ``oversubscribe`` is set); ``checkpoints``/``tensorboard``/``save_model`` need it by the
    time training starts (the runner gives each case one). ``horovod_*`` are passed to Horovod
    as its environment (by the strategies that run on Horovod). ``step_capture``
    ``"cuda-graph"`` replays Keras-on-torch training steps from CUDA graphs (GPUs; see
    :mod:`accelml.dl.strategies.torch_loop`), ``"compiled"`` compiles their forward pass,
    loss and optimizer update with Inductor (``torch.compile``; the backward through
    AOTAutograd) and, on GPUs,
    replays the step from CUDA graphs too (on CPUs the compiled step runs as it is), ``"none"``
    runs them eagerly, and ``"auto"`` (the default) does :data:`AUTO_STEP_CAPTURE` wherever it
    can capture (:attr:`captures_steps`); every one falls back, with the reason, where
    compiling or recording fails (``"compiled"`` to eager kernels, ``"auto"`` to eager steps).
    ``batchnorm_momentum`` sets the momentum of every BatchNorm layer of the model (None: the
    model's own, 0.99 in Keras).
    ``gradient_reduction`` (how gradients are averaged across ranks, e.g. ``allreduce``,
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
    ranks: int = 1
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
        for key in ("ranks", "batch_size", "epochs"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise bad(key, "an integer >= 1")
        strategy.keras_engine(self.keras_backend)
        strategy.check_gradient_options(self.gradient_reduction, self.gradient_reduce_dtype)
        if not self.gradient_bucket_mb > 0:
            raise bad("gradient_bucket_mb", "> 0")
        if self.launcher is not None and self.launcher not in LAUNCHERS:
            raise bad("launcher", "one of " + ", ".join(LAUNCHERS))
        if strategy.max_ranks is not None and self.ranks > strategy.max_ranks:
            most = "1" if strategy.max_ranks == 1 else f"at most {strategy.max_ranks}"
            raise bad("ranks", f"{most} for strategy {self.strategy!r}")
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
        return self.batch_size * self.ranks

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
        return scaled_learning_rate(self.learning_rate, self.ranks, self.lr_scaling)

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
        return warmup_learning_rate(self.scaled_learning_rate, self.ranks, self.warmup_epochs,
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


@dataclass(frozen=True)
class EpochRecord(JSONRecord):
    """One epoch as every rank agreed on it (metrics averaged across ranks)."""

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
    ranks: int
    batch_per_rank: int
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
        """Training images per second over the epochs after the first (all ranks together)."""
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
