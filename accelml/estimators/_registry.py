"""Backends, their implementations of each algorithm, and the parameter translation rules.

A backend is one module ``accelml/estimators/<name>.py`` (public name, no leading underscore)
that defines ``BACKEND = Backend(...)``. The module is found by its file name and imported
only when it is first needed, so it must import its library lazily (inside functions).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, ContextManager, Mapping

import numpy as np

from accelml.errors import AccelmlError, UnavailableError
from accelml.probe import Availability

from ._algorithms import ALGORITHMS, Algorithm, Param

_PACKAGE = "accelml.estimators"


class InvalidChoiceError(AccelmlError, ValueError):
    """An unknown algorithm, backend, device or parameter, or a value a backend cannot honour.

    A ``ValueError`` too, as scikit-learn expects from parameter validation.
    """


# ---------------------------------------------------------------- translation rules


@dataclass(frozen=True)
class Same:
    """The library takes the parameter under the same name and meaning."""

    note: str = ""

    def translate(self, param: Param, value: Any, backend: str) -> dict[str, Any]:
        return {param.name: value}

    def describe(self, param: Param) -> str:
        return param.name + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Rename:
    """The library takes the parameter under another name, with the same meaning."""

    target: str
    note: str = ""

    def translate(self, param: Param, value: Any, backend: str) -> dict[str, Any]:
        return {self.target: value}

    def describe(self, param: Param) -> str:
        return self.target + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Convert:
    """The value is converted: ``function(value)`` returns the library keyword arguments."""

    function: Callable[[Any], dict[str, Any]]
    note: str

    def translate(self, param: Param, value: Any, backend: str) -> dict[str, Any]:
        return self.function(value)

    def describe(self, param: Param) -> str:
        return self.note


@dataclass(frozen=True)
class Unsupported:
    """The library cannot honour the parameter: any value but the default is an error.

    ``reason`` says what the library does instead at the default (it is the documented mapping).
    """

    reason: str

    def translate(self, param: Param, value: Any, backend: str) -> dict[str, Any]:
        if not _equal(value, param.default):
            raise InvalidChoiceError(
                f"backend '{backend}' cannot honour {param.name}={value!r} "
                f"(only the default {param.default!r}): {self.reason}"
            )
        return {}

    def describe(self, param: Param) -> str:
        return f"unsupported, only {param.default!r}: {self.reason}"


Rule = Same | Rename | Convert | Unsupported


def same(*names: str) -> dict[str, Rule]:
    """Rules for parameters a library takes unchanged: ``same("n_clusters", "tol")``."""
    return {name: Same() for name in names}


def _equal(value: Any, default: Any) -> bool:
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
    ``encodes_labels``: the library needs class labels 0..n-1 (accelml encodes and decodes them).
    """

    estimator: str
    params: Mapping[str, Rule]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    encodes_labels: bool = False
    note: str = ""

    def estimator_class(self) -> type:
        module, _, name = self.estimator.partition(":")
        return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Backend:
    """One backend: its devices, how to probe them, and its implementations by algorithm.

    ``device_kwargs(device)`` gives the library keyword arguments that select a device;
    ``trace`` (optional) is a context manager factory yielding a list that receives an
    :class:`ExecutionPath` for every library call made inside it; ``missing`` maps an
    algorithm the backend lacks to the reason (shown in errors and ``algorithms()``).
    """

    name: str
    devices: tuple[str, ...]
    probe: Callable[[str], Availability]
    implementations: Mapping[str, Implementation]
    how_to_get: Mapping[str, str] = field(default_factory=dict)
    device_kwargs: Callable[[str], dict[str, Any]] = lambda device: {}
    trace: Callable[[], ContextManager[list[ExecutionPath]]] | None = None
    missing: Mapping[str, str] = field(default_factory=dict)
    doc: str = ""

    def availability(self, device: str) -> Availability:
        return self.probe(device)

    def require(self, device: str) -> None:
        """Raise :class:`UnavailableError` naming what is missing when ``device`` cannot run here."""
        found = self.probe(device)
        if not found.available:
            hint = self.how_to_get.get(device, "")
            raise UnavailableError(
                f"backend '{self.name}' on device '{device}' is unavailable here: {found.detail}"
                + (f"; {hint}" if hint else "")
            )


def backend_modules() -> Mapping[str, str]:
    """Backend name -> module path, found by file name in ``accelml/estimators`` (not imported)."""
    package = importlib.import_module(_PACKAGE)
    names = sorted(
        info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_")
    )
    return MappingProxyType({name: f"{_PACKAGE}.{name}" for name in names})


def _one_line_choices(kind: str, given: Any, choices: Any) -> str:
    choices = list(choices)
    close = difflib.get_close_matches(str(given), [str(choice) for choice in choices], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {kind} {given!r}{hint}; choose from: {', '.join(map(str, choices))}"


def get_backend(name: str) -> Backend:
    """The :class:`Backend` called ``name``; :class:`AccelmlError` listing the choices otherwise."""
    module = sys.modules.get(f"{_PACKAGE}.{name}") if isinstance(name, str) else None
    if module is None:  # not loaded yet: find it by file name
        modules = backend_modules()
        if not isinstance(name, str) or name not in modules:
            raise InvalidChoiceError(_one_line_choices("backend", name, modules))
        module = importlib.import_module(modules[name])
    backend = getattr(module, "BACKEND", None)
    if not isinstance(backend, Backend):
        raise AccelmlError(f"backend module {module.__name__} defines no BACKEND = Backend(...)")
    return backend


def get_algorithm(name: str) -> Algorithm:
    """The :class:`Algorithm` called ``name``; :class:`AccelmlError` listing the choices otherwise."""
    if not isinstance(name, str) or name not in ALGORITHMS:
        raise InvalidChoiceError(_one_line_choices("algorithm", name, ALGORITHMS))
    return ALGORITHMS[name]


def get_implementation(algorithm: str, backend: str) -> tuple[Algorithm, Backend, Implementation]:
    found = get_algorithm(algorithm)
    runner = get_backend(backend)
    implementation = runner.implementations.get(algorithm)
    if implementation is None:
        having = [name for name in backend_modules() if algorithm in get_backend(name).implementations]
        why = runner.missing.get(algorithm, f"backend '{backend}' does not implement {algorithm}")
        raise InvalidChoiceError(f"{why}; backends with {algorithm}: {', '.join(having)}")
    return found, runner, implementation


def check_device(backend: Backend, device: str) -> None:
    if device not in backend.devices:
        raise InvalidChoiceError(
            _one_line_choices(f"device for backend '{backend.name}':", device, backend.devices)
        )


def translate(algorithm: Algorithm, backend: Backend, implementation: Implementation,
              params: Mapping[str, Any], device: str) -> dict[str, Any]:
    """The library keyword arguments for accelml ``params`` (errors say what cannot be honoured)."""
    kwargs: dict[str, Any] = dict(implementation.fixed)
    for param in algorithm.params:
        value = params.get(param.name, param.default)
        kwargs.update(implementation.params[param.name].translate(param, value, backend.name))
    kwargs.update(backend.device_kwargs(device))
    return kwargs


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
    loaded = {name: get_backend(name) for name in backend_modules()}
    return tuple(
        AlgorithmInfo(
            algorithm.name, algorithm.task, algorithm.estimator_type,
            tuple(name for name, backend in loaded.items() if algorithm.name in backend.implementations),
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
    default: Any
    backends: Mapping[str, str]


def parameter_table(algorithm: str) -> tuple[TranslationRow, ...]:
    """The translation table of ``algorithm``: how each parameter reaches each backend."""
    found = get_algorithm(algorithm)
    loaded = {name: get_backend(name) for name in backend_modules()}
    having = {name: b.implementations[algorithm] for name, b in loaded.items() if algorithm in b.implementations}
    return tuple(
        TranslationRow(
            param.name, param.default,
            MappingProxyType({name: impl.params[param.name].describe(param) for name, impl in having.items()}),
        )
        for param in found.params
    )


def backend_availability() -> tuple[tuple[str, str, Availability], ...]:
    """(backend, device, availability) for every backend module and device it declares."""
    rows = []
    for name in backend_modules():
        backend = get_backend(name)
        rows.extend((name, device, backend.availability(device)) for device in backend.devices)
    return tuple(rows)
