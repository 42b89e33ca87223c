"""Backends, their implementations of each algorithm, and the parameter translation rules.

A backend is one frozen :class:`Backend` record, the single source of truth about it: its
devices and probe, its implementations with one translation rule per parameter, whether
two runs repeat bitwise and why its results differ from other backends' and across devices,
the libraries recorded in the environment fingerprint, how to install it, and the one line
``accelml backends`` shows. The rest of accelml reads the records through :data:`BACKENDS`:

* accelml's own backends are public modules of ``accelml.estimators`` defining
  ``BACKEND = Backend(...)``;
* a third party's backend is a ``[project.entry-points."accelml.backends"]`` entry naming its
  record (``acme = "acme_backend:BACKEND"``); one that fails to load is listed by
  ``BACKENDS.broken()`` and by ``accelml backends``, with the reason.

A backend module is imported whenever the backends are listed, so it imports its library
lazily: ``Implementation`` names the class as a 'module:Class' string, and the probe imports
inside its function.

>>> BACKENDS.get("xgboost").devices
('cpu', 'cuda')
>>> try:
...     get_backend("sklearnx")
... except InvalidChoiceError as error:
...     print(str(error).split(";")[0])
unknown backend 'sklearnx' (did you mean 'sklearnex'?)
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from accelml.cases import Case, CaseLike, Expectation, JSONScalar
from accelml.errors import AccelmlError, UnavailableError
from accelml.plugins import ExtensionPoint, unknown_choice
from accelml.probe import Availability

from ._algorithms import ALGORITHMS, Algorithm, Param
from ._measurer import MeasureContext, Measurements


class InvalidChoiceError(AccelmlError, ValueError):
    """An unknown algorithm, backend, device or parameter, or a value a backend cannot honour.

    A ``ValueError`` too, as scikit-learn expects from parameter validation.
    """


# ---------------------------------------------------------------- translation rules


@dataclass(frozen=True)
class Same:
    """The library takes the parameter under the same name and meaning."""

    note: str = ""

    def translate(self, param: Param, value: object, backend: str) -> Mapping[str, object]:
        return {param.name: value}

    def describe(self, param: Param) -> str:
        return param.name + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Rename:
    """The library takes the parameter under another name, with the same meaning."""

    target: str
    note: str = ""

    def translate(self, param: Param, value: object, backend: str) -> Mapping[str, object]:
        return {self.target: value}

    def describe(self, param: Param) -> str:
        return self.target + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Convert:
    """The value is converted: ``function(value)`` returns the library keyword arguments."""

    function: Callable[[object], Mapping[str, object]]
    note: str

    def translate(self, param: Param, value: object, backend: str) -> Mapping[str, object]:
        return self.function(value)

    def describe(self, param: Param) -> str:
        return self.note


@dataclass(frozen=True)
class Unsupported:
    """The library cannot honour the parameter: any value but the default is an error.

    ``reason`` says what the library does instead at the default (it is the documented mapping).
    """

    reason: str

    def translate(self, param: Param, value: object, backend: str) -> Mapping[str, object]:
        if not _equal(value, param.default):
            raise InvalidChoiceError(
                f"backend '{backend}' cannot honour {param.name}={value!r} "
                f"(only the default {param.default!r}): {self.reason}"
            )
        return {}

    def describe(self, param: Param) -> str:
        return f"unsupported, only {param.default!r}: {self.reason}"


@dataclass(frozen=True)
class FromData:
    """accelml resolves the parameter from the training data before the library sees it:
    ``function(X, value, params)`` returns accelml parameter values that replace the given
    ones (``params``: every accelml parameter, defaults filled in), e.g. an ``init`` array;
    they then reach the library through their own rules. The runner resolves them before
    the timed fits and records what they were (an array is stored under its digest).
    """

    function: Callable[[ArrayLike, object, Mapping[str, object]], Mapping[str, object]]
    note: str
    needs: tuple[str, ...] = ()     # parameters that must be set when the value is true

    def translate(self, param: Param, value: object, backend: str) -> Mapping[str, object]:
        return {}

    def check(self, param: Param, value: object, params: Mapping[str, object]) -> None:
        """:class:`InvalidChoiceError` when ``value`` is set but a parameter it needs is not."""
        missing = [name for name in self.needs if value and params.get(name) is None]
        if missing:
            raise InvalidChoiceError(f"{param.name}={value!r} needs {', '.join(missing)} set "
                                     f"({self.note})")

    def with_data(self, X: ArrayLike, value: object, params: Mapping[str, object]
                  ) -> Mapping[str, object]:
        return self.function(X, value, params)

    def describe(self, param: Param) -> str:
        return self.note


Rule = Same | Rename | Convert | Unsupported | FromData


def same(*names: str) -> dict[str, Rule]:
    """Rules for parameters a library takes unchanged: ``same("n_clusters", "tol")``."""
    return {name: Same() for name in names}


def _equal(value: object, default: object) -> bool:
    """``value`` is the default: same type and value (20 and 20.0 count as equal, True and 1 not)."""
    if value is default:
        return True
    numbers = (int, float, np.integer, np.floating)
    same_kind = type(value) is type(default) or (
        isinstance(value, numbers) and isinstance(default, numbers)
        and not isinstance(value, (bool, np.bool_)) and not isinstance(default, (bool, np.bool_)))
    try:
        return bool(same_kind and value == default)
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- backends


@dataclass(frozen=True)
class ExecutionPath:
    """Which code ran one library call: ``call`` like 'sklearn.cluster.KMeans.fit',
    ``path`` 'accelerated' or 'fallback', and the library's own message."""

    call: str
    path: str
    message: str


@dataclass(frozen=True)
class Implementation:
    """How one backend runs one algorithm.

    ``estimator`` is 'module:Class' (imported at fit time); ``params`` holds one rule for
    every accelml parameter of the algorithm; ``fixed`` are keyword arguments always passed;
    ``encodes_labels``: the library needs class labels 0..n-1 (accelml encodes and decodes them);
    ``randomised`` names what draws a new seed on every fit when ``random_state`` is left
    unset (empty: nothing does, an unseeded fit still repeats itself); ``randomised_when``
    narrows that to the parameter values that draw (``{"solver": ("sag", "saga")}``: only
    those solvers shuffle; empty: every fit draws). ``iterations``: the fitted attribute
    holding the iterations the fit ran (``"n_iter_"``), or a function of the fitted library
    estimator that returns them (XGBoost's boosted rounds); empty: not an iterative fit.
    ``on_workers`` is 'module:Class' of the library's estimator that trains on the workers
    of a dask cluster (scikit-learn API, taking the same keyword arguments, with a
    ``client`` attribute and dask arrays in and out); a case with ``ranks = N > 1``
    trains through it (:mod:`accelml.runner.dask_workers`). Empty: the backend trains in
    one process only.
    """

    estimator: str
    params: Mapping[str, Rule]
    fixed: Mapping[str, object] = field(default_factory=dict)
    encodes_labels: bool = False
    note: str = ""
    randomised: str = ""
    randomised_when: Mapping[str, tuple[JSONScalar, ...]] = field(default_factory=dict)
    iterations: str | Callable[[object], object] = ""

    def randomness(self, params: Mapping[str, object]) -> str:
        """What draws random numbers in a fit with ``params`` (every accelml parameter, defaults
        filled in), or "" when nothing does.

        >>> logistic = Implementation("m:C", {}, randomised="the sag/saga shuffling",
        ...                           randomised_when={"solver": ("sag", "saga")})
        >>> logistic.randomness({"solver": "lbfgs"}), logistic.randomness({"solver": "saga"})
        ('', 'the sag/saga shuffling')
        """
        if all(params.get(name) in values for name, values in self.randomised_when.items()):
            return self.randomised
        return ""
    on_workers: str = ""

    def estimator_class(self) -> type[Any]:
        """The library's class (untyped: the libraries ship no type hints)."""
        return _import_class(self.estimator)

    def workers_class(self) -> type[Any]:
        """The library's estimator for several workers (``on_workers``), imported now."""
        return _import_class(self.on_workers)


def _import_class(target: str) -> type[Any]:
    module, _, name = target.partition(":")
    found: type[Any] = getattr(importlib.import_module(module), name)
    return found


@dataclass(frozen=True)
class RoundClock:
    """How a backend that trains in rounds (boosting) times its rounds apart from its set-up.

    ``library_params()``: the library keyword arguments that install the clock (XGBoost: a
    training callback); ``read(fitted)``: from the fitted library estimator, the rounds it
    trained and the seconds they took, timed inside the training (on a worker, for a fit on
    several workers), or None when the fit carries no clock reading. The runner installs the
    clock, reads it after each timed fit and records the rest of the fit as its ``setup``
    phase (:class:`accelml.results.records.BoostingRounds`).
    """

    library_params: Callable[[], Mapping[str, object]]
    read: Callable[[object], tuple[int, float] | None]


@dataclass(frozen=True)
class EveryCase:
    """A ``Backend.repeat_expectation`` that gives one answer for every case of the backend.

    >>> EveryCase(True, "seeded and single-threaded")(None, False)
    Expectation(bitwise=True, reason='seeded and single-threaded')
    """

    bitwise: bool
    reason: str

    def __call__(self, case: CaseLike, deterministic: bool) -> Expectation:
        return Expectation(self.bitwise, self.reason)


@dataclass(frozen=True)
class Backend:
    """One backend, everything accelml knows about it.

    ``summary``: the one line ``accelml backends`` shows. ``devices``: the devices a case may
    ask for; ``probe(device)`` says whether this machine can run it (an :class:`Availability`;
    it imports the library inside the function; if it raises, :meth:`availability` reports
    the error as the reason). ``implementations``: algorithm -> :class:`Implementation`,
    ``missing``: algorithm -> why the backend lacks it (shown in errors).

    ``repeat_expectation(case, deterministic)``: whether two runs of ``case`` on one machine
    and thread count are bitwise identical, and why (:class:`EveryCase` when the answer is
    the same for every case). It is required: a backend that says nothing would be taken
    for bitwise and flag false surprises. ``cross_backend_reason``: why its results differ
    from another backend's (empty: they are "different implementations");
    ``cross_device_reason``: why its results differ between its devices (empty: the
    generic kernel-order reason); ``cross_scale_reason``: why its results on N workers
    differ from one worker's (for implementations with ``on_workers``; empty: the generic
    summation-order reason).

    ``libraries``: the pip distributions whose versions the environment fingerprint records;
    ``how_to_get``: device -> how to install what is missing (appended to "unavailable");
    ``deep_learning``: cases train neural networks through :mod:`accelml.dl` (with a
    strategy and ranks) instead of fitting an estimator; ``measurer``: the function
    that measures a case of this backend in its own process (:mod:`accelml.estimators._measurer`;
    None: the runner fits and predicts an :class:`Estimator`); ``check_case(case)``: for such
    a backend, raises :class:`~accelml.errors.SpecError` (or ValueError, TypeError) for a case
    it cannot run as written (loading a spec calls it; None: nothing to check). ``device_kwargs(device)``: the
    library keyword arguments that select a device; ``trace`` (optional): a context manager
    factory yielding a list that receives an :class:`ExecutionPath` for every library call
    made inside it. ``main_phase``: the phase whose speedup is shown first for every case of
    the backend (``"epoch"`` for one that trains models; empty: the algorithm's own).
    ``to_device(device)``: for a backend that trains faster from features already in device
    memory, a function that copies a host array there and returns once the copy is done; the
    runner calls it before the clock of ``fit`` starts and times it as the ``place`` phase
    (as deep learning keeps its images on the GPUs). None (the default): host arrays.
    ``round_clock``: for a backend that trains in rounds, how its fits time the rounds apart
    from their set-up (:class:`RoundClock`); None: a fit is one phase.
    """

    name: str
    summary: str
    devices: tuple[str, ...]
    probe: Callable[[str], Availability]
    implementations: Mapping[str, Implementation]
    repeat_expectation: Callable[[CaseLike, bool], Expectation]
    libraries: tuple[str, ...]
    cross_backend_reason: str = ""
    cross_device_reason: str = ""
    cross_scale_reason: str = ""
    how_to_get: Mapping[str, str] = field(default_factory=dict)
    deep_learning: bool = False
    measurer: Callable[[Case, MeasureContext], Measurements] | None = None
    check_case: Callable[[Case], None] | None = None
    device_kwargs: Callable[[str], Mapping[str, object]] = lambda device: {}
    trace: Callable[[], AbstractContextManager[list[ExecutionPath]]] | None = None
    missing: Mapping[str, str] = field(default_factory=dict)
    main_phase: str = ""
    to_device: Callable[[str], Callable[[np.ndarray], object] | None] = lambda device: None
    round_clock: RoundClock | None = None

    def __post_init__(self) -> None:
        where = f"Backend {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"{where}: name must be a non-empty string")
        if not isinstance(self.summary, str) or not self.summary or "\n" in self.summary:
            raise TypeError(f"{where}: summary must be one non-empty line")
        for label, names in (("devices", self.devices), ("libraries", self.libraries)):
            if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
                raise TypeError(f"{where}: {label} must be a tuple of strings, not {names!r}")
        if not self.devices:
            raise TypeError(f"{where}: devices must name at least one device")
        for label, function in (("probe", self.probe), ("repeat_expectation", self.repeat_expectation),
                                ("to_device", self.to_device)):
            if not callable(function):
                raise TypeError(f"{where}: {label} must be callable, not {function!r}")
        for algorithm, implementation in self.implementations.items():
            known = ALGORITHMS.get(algorithm)
            if known is None:
                raise TypeError(f"{where}: {unknown_choice('algorithm', algorithm, tuple(ALGORITHMS))}")
            lacking = [param.name for param in known.params if param.name not in implementation.params]
            if lacking:
                raise TypeError(f"{where}: its {algorithm} has no rule for {', '.join(lacking)} (one "
                                "rule per parameter: Same, Rename, Convert, Unsupported, ...)")

    def availability(self, device: str) -> Availability:
        """Whether ``device`` can run here, under the backend's name; never raises."""
        try:
            found = self.probe(device)
        except Exception as error:  # a probe must not raise; a third party's may
            found = Availability(self.name, device, False, None,
                                 f"its probe failed: {type(error).__name__}: {error}")
        if not isinstance(found, Availability):
            found = Availability(self.name, device, False, None,
                                 f"its probe returned {type(found).__name__}, not an Availability")
        return replace(found, name=self.name, device=device, summary=self.summary)

    def trains_on_workers(self, algorithm: str) -> bool:
        """Whether its ``algorithm`` can train on several workers (``on_workers`` is set).

        >>> BACKENDS.get("xgboost").trains_on_workers("gradient_boosting_classifier")
        True
        >>> BACKENDS.get("sklearn").trains_on_workers("kmeans")
        False
        """
        implementation = self.implementations.get(algorithm)
        return implementation is not None and bool(implementation.on_workers)

    def require(self, device: str) -> None:
        """Raise :class:`UnavailableError` naming what is missing when ``device`` cannot run here."""
        found = self.availability(device)
        if not found.available:
            hint = self.how_to_get.get(device, "")
            raise UnavailableError(
                f"backend '{self.name}' on device '{device}' is unavailable here: {found.detail}"
                + (f"; {hint}" if hint else "")
            )


#: Every backend: accelml's modules, then third parties' ``accelml.backends`` entry points.
BACKENDS = ExtensionPoint("backend", "accelml.backends", "accelml.estimators", "BACKEND", Backend)


def get_backend(name: object) -> Backend:
    """The :class:`Backend` called ``name``; :class:`InvalidChoiceError` listing the choices otherwise."""
    found = BACKENDS.find(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidChoiceError(unknown_choice("backend", name, BACKENDS.names()))
    return found


def get_algorithm(name: object) -> Algorithm:
    """The :class:`Algorithm` called ``name``; :class:`AccelmlError` listing the choices otherwise."""
    if not isinstance(name, str) or name not in ALGORITHMS:
        raise InvalidChoiceError(unknown_choice("algorithm", name, tuple(ALGORITHMS)))
    return ALGORITHMS[name]


def get_implementation(algorithm: object, backend: object) -> tuple[Algorithm, Backend, Implementation]:
    found = get_algorithm(algorithm)
    runner = get_backend(backend)
    implementation = runner.implementations.get(found.name)
    if implementation is None:
        having = [other.name for other in BACKENDS.records() if found.name in other.implementations]
        why = runner.missing.get(found.name, f"backend '{runner.name}' does not implement {found.name}")
        raise InvalidChoiceError(f"{why}; backends with {found.name}: {', '.join(having)}")
    return found, runner, implementation


def check_device(backend: Backend, device: object) -> str:
    """``device``, when ``backend`` declares it; :class:`InvalidChoiceError` listing the choices otherwise."""
    for declared in backend.devices:
        if declared == device:
            return declared
    raise InvalidChoiceError(unknown_choice(f"device for backend '{backend.name}':", device, backend.devices))


def check_params(algorithm: object, backend: object, device: object,
                 params: Mapping[str, object],
                 library_params: Mapping[str, object] | None = None,
                 ) -> tuple[tuple[Algorithm, Backend, Implementation], str]:
    """The records for ``algorithm`` and ``backend``, and ``device``, once they and every
    parameter's name and value are checked (:class:`InvalidChoiceError` saying what is wrong;
    a library's own spelling of a parameter is answered with accelml's), with the library's
    own ``library_params`` (see :func:`translate`).

    >>> try:
    ...     check_params("kmeans", "sklearn", "cpu", {"algorithm": "elkan"})
    ... except InvalidChoiceError as error:
    ...     print(str(error).split("; ")[1])
    accelml calls it 'variant' (sklearn's algorithm=)
    """
    found, runner, implementation = get_implementation(algorithm, backend)
    checked_device = check_device(runner, device)
    for name, value in params.items():
        param = next((p for p in found.params if p.name == name), None)
        if param is None:
            spelled = [f"{accelml!r}" + (f" ({rule.note})" if rule.note else "")
                       for accelml, rule in implementation.params.items()
                       if isinstance(rule, Rename) and rule.target == name]
            if spelled:
                raise InvalidChoiceError(f"parameter {name!r} of {found.name} is the library's "
                                         f"name; accelml calls it {' or '.join(spelled)}")
            raise InvalidChoiceError(unknown_choice(f"parameter for {found.name}:", name, found.param_names))
        problem = param.value_problem(value)
        if problem is not None:
            raise InvalidChoiceError(f"{found.name} parameter {name} = {value!r}: {problem}")
    translate(found, runner, implementation, params, checked_device, library_params)
    return (found, runner, implementation), checked_device
def params_from_data(algorithm: Algorithm, implementation: Implementation,
                     params: Mapping[str, object], X: ArrayLike) -> dict[str, object]:
    """The accelml parameter values that the :class:`FromData` rules derive from ``X``
    (empty when no rule applies)."""
    values = {**algorithm.defaults, **params}
    found: dict[str, object] = {}
    for param in algorithm.params:
        rule = implementation.params[param.name]
        if isinstance(rule, FromData):
            found.update(rule.with_data(X, values[param.name], values))
    return found


def translate(algorithm: Algorithm, backend: Backend, implementation: Implementation,
              params: Mapping[str, object], device: str,
              library_params: Mapping[str, object] | None = None) -> dict[str, object]:
    """The library keyword arguments for accelml ``params`` (errors say what cannot be honoured),
    and ``library_params``: the library's own parameters without an accelml name (XGBoost's
    ``subsample``), checked against the library class's parameters when it is installed.

    >>> from accelml.estimators import BACKENDS
    >>> xgb = BACKENDS.get("xgboost")
    >>> gb = get_algorithm("gradient_boosting_classifier")
    >>> translate(gb, xgb, xgb.implementations[gb.name], {}, "cpu", {"subsample": 0.5})["subsample"]
    0.5
    >>> translate(gb, xgb, xgb.implementations[gb.name], {}, "cpu", {"subsampel": 0.5})
    Traceback (most recent call last):
    accelml.estimators._registry.InvalidChoiceError: unknown parameter of xgboost:XGBClassifier 'subsampel' ...
    """
    kwargs: dict[str, object] = dict(implementation.fixed)
    for param in algorithm.params:
        value = params.get(param.name, param.default)
        rule = implementation.params[param.name]
        if isinstance(rule, FromData):
            rule.check(param, value, params)
        kwargs.update(rule.translate(param, value, backend.name))
    kwargs.update(backend.device_kwargs(device))
    if library_params:
        names = library_parameter_names(implementation)
        for name in library_params:
            if names is not None and name not in names:
                raise InvalidChoiceError(unknown_choice(f"parameter of {implementation.estimator}", name,
                                                        sorted(names)))
            if name in kwargs:
                raise InvalidChoiceError(f"{backend.name} parameter {name!r} is set by accelml (from the "
                                         f"{algorithm.name} parameters or the device); set it there")
        kwargs.update(library_params)
    return kwargs


def library_parameter_names(implementation: Implementation) -> frozenset[str] | None:
    """The keyword parameters the library's class takes (its ``get_params()`` keys; else its
    constructors' named parameters), or None when the library is not installed here."""
    try:
        library_class = implementation.estimator_class()
    except ImportError:
        return None
    if callable(getattr(library_class, "get_params", None)):
        try:
            return frozenset(library_class().get_params(deep=False))
        except (TypeError, ValueError):
            pass
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(parameter.name for owner in library_class.__mro__ if "__init__" in vars(owner)
                     for parameter in inspect.signature(vars(owner)["__init__"]).parameters.values()
                     if parameter.kind in kinds and parameter.name != "self")


# ---------------------------------------------------------------- what there is


@dataclass(frozen=True)
class AlgorithmInfo:
    """An algorithm, its task and the backends that implement it (available here or not)."""

    name: str
    task: str
    estimator_type: str
    backends: tuple[str, ...]


def algorithms() -> tuple[AlgorithmInfo, ...]:
    """Every algorithm with its task and the backends having it.

    >>> from accelml.estimators import algorithms
    >>> [a.backends for a in algorithms() if a.name == "kmeans"][0][:2]
    ('sklearn', 'sklearnex')
    """
    loaded = BACKENDS.records()
    return tuple(
        AlgorithmInfo(
            algorithm.name, algorithm.task, algorithm.estimator_type,
            tuple(backend.name for backend in loaded if algorithm.name in backend.implementations),
        )
        for algorithm in ALGORITHMS.values()
    )


def task_of(algorithm: str) -> str:
    """'classification', 'regression', 'clustering' or 'decomposition'.

    >>> task_of("svc")
    'classification'
    """
    return get_algorithm(algorithm).task


@dataclass(frozen=True)
class TranslationRow:
    """One row of an algorithm's parameter table: the accelml parameter and each backend's rule."""

    param: str
    default: JSONScalar
    backends: Mapping[str, str]


def parameter_table(algorithm: str) -> tuple[TranslationRow, ...]:
    """The translation table of ``algorithm``: how each parameter reaches each backend."""
    found = get_algorithm(algorithm)
    having = {backend.name: backend.implementations[algorithm]
              for backend in BACKENDS.records() if algorithm in backend.implementations}
    return tuple(
        TranslationRow(
            param.name, param.default,
            MappingProxyType({name: impl.params[param.name].describe(param) for name, impl in having.items()}),
        )
        for param in found.params
    )


def backend_availability() -> tuple[Availability, ...]:
    """Whether this machine can run each backend on each device it declares (never raises)."""
    return tuple(backend.availability(device)
                 for backend in BACKENDS.records() for device in backend.devices)
