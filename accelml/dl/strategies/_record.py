"""The :class:`Strategy` record: everything accelml knows about one way of spreading training.

A strategy is one frozen record in the module that implements it; the launcher, the trainer,
the executors (resources per case), deterministic mode, the expectations and the probes all
read it, and nothing else in accelml tests a strategy's name. Records are found in the public
modules of :mod:`accelml.dl.strategies` (attribute ``STRATEGY``: one record or a tuple) and
through the ``accelml.strategies`` entry-point group of installed distributions.

>>> from accelml.cases import Expectation
>>> record = Strategy(name="demo", doc="one process", keras_backends=("jax",),
...                   train=lambda config, data: None,   # type: ignore[arg-type,return-value]
...                   probe=lambda: Availability("demo", "-", True),
...                   determinism=Determinism(Expectation(True, "seeded")))
>>> record.keras_backend, record.ranks(workers=4), record.gpus(workers=4, on_gpu=True)
('jax', 1, 4)
>>> record.keras_engine(None), record.keras_engine("jax")
('jax', 'jax')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelml.cases import Expectation
from accelml.errors import AccelmlError, SpecError
from accelml.plugins import ExtensionPoint
from accelml.probe import Availability

if TYPE_CHECKING:
    # Only the records' function signatures name these; accelml.dl.config validates its
    # strategy through this registry, so it cannot be imported from here at run time.
    from accelml.dl.config import TrainingConfig, TrainingResult
    from accelml.dl.data import ImageData

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
    """One way of spreading Keras training over workers (devices or processes).

    ``keras_backends``: the Keras engines it runs on; a run picks one with its
    ``keras_backend`` training key (default: the first), and its ranks get it as
    ``KERAS_BACKEND``. ``train(config, data)`` trains this process's share and returns what
    it measured. ``probe()`` says whether it can run here, never raising.
    ``multi_process``: each worker is a process (rank) of its own, started by one of
    ``launchers`` (``default_launcher`` outside a SLURM allocation, ``srun`` inside one where
    allowed); otherwise the workers are devices of one process. ``mpi_ranks``: the ranks
    find each other through MPI, so ``srun`` starts them with ``--mpi``.
    ``local_process_environment(rank, addresses)``: the variables of each rank started as a
    local process (e.g. ``TF_CONFIG``), given every rank's ``host:port``; None: the strategy
    cannot run several local processes. ``rank_environment(config)``: variables every rank
    gets; ``environment_before_import``: variables that must be set before Keras and its
    engine are imported. ``max_workers``: most workers it can use (None: no limit).
    ``gpus_per_worker`` and ``cores_per_rank`` size the batch job of a case.
    ``libraries``: distributions recorded in the environment fingerprint. ``default``: the
    strategy of a Keras case that names none (exactly one record has it).
    ``gradient_reductions`` and ``gradient_reduce_dtypes``: the values of the training keys
    ``gradient_reduction`` (how gradients are averaged across workers) and
    ``gradient_reduce_dtype`` (the dtype they travel in) it implements, besides ``auto``
    (:data:`AUTO`, the default: the strategy's own choice).
    ``listeners(launcher)``: what its ranks listen on when ``launcher`` starts them
    (:class:`Listener`), recorded with every case. ``private_network``: its library listens
    on every interface whatever address it is given, so the ranks of a one-host run share a
    private network namespace (:mod:`accelml.dl.private_network`).
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
    max_workers: int | None = None
    gpus_per_worker: int = 1
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
        if self.gpus_per_worker < 0 or self.cores_per_rank < 1:
            raise AccelmlError(f"{where}: gpus_per_worker must be >= 0 and cores_per_rank >= 1")

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

    def ranks(self, workers: int) -> int:
        """Processes a run on ``workers`` workers starts."""
        return workers if self.multi_process else 1

    def gpus(self, workers: int, on_gpu: bool) -> int:
        """GPUs a run on ``workers`` workers uses (none off the GPU)."""
        return workers * self.gpus_per_worker if on_gpu else 0

    def allowed_launchers(self, workers: int) -> tuple[str, ...]:
        """Launchers that can start it on ``workers`` workers (one rank also runs alone)."""
        if workers == 1 and LOCAL_PROCESSES not in self.launchers:
            return self.launchers + (LOCAL_PROCESSES,)
        return self.launchers


STRATEGIES_POINT: ExtensionPoint[Strategy] = ExtensionPoint(
    "strategy", "accelml.strategies", "accelml.dl.strategies", "STRATEGY", Strategy)
"""Every strategy: built-ins (modules of :mod:`accelml.dl.strategies`), then third parties'."""


def default_strategy() -> Strategy:
    """The strategy of a Keras case that names none (the one record with ``default=True``).

    >>> default_strategy().max_workers
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
