"""One estimator interface over scikit-learn, scikit-learn-intelex and XGBoost.

The same algorithm, the same parameters, a different backend, and a real scikit-learn
estimator every time (``clone``, ``get_params``, ``Pipeline``, ``GridSearchCV``):

>>> import numpy as np
>>> from sklearn.base import clone
>>> from accelml.estimators import Estimator, algorithms, task_of
>>> X = np.random.default_rng(0).normal(size=(300, 4))
>>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
>>> stock = Estimator("logistic_regression", C=0.5).fit(X, y)
>>> fast = clone(stock).set_params(backend="sklearnex").fit(X, y)
>>> bool((stock.predict(X) == fast.predict(X)).mean() > 0.99), fast.fallbacks_
(True, ())
>>> task_of("kmeans"), [a.backends for a in algorithms() if a.name == "gradient_boosting_classifier"][0]
('clustering', ('sklearn', 'xgboost'))

Unknown names fail at once with one line listing the choices (``AccelmlError``); a backend
or device this machine cannot run fails on ``fit`` (or ``check_available()``) with
``UnavailableError`` naming what is missing:

>>> from accelml.errors import AccelmlError
>>> try:
...     Estimator("kmeans", backend="sklearnx")
... except AccelmlError as error:
...     print(str(error).split(";")[0])
unknown backend 'sklearnx' (did you mean 'sklearnex'?)

Layout (``accelml/estimators/``):

- ``_algorithms.py``: the algorithm table. A new algorithm is one ``Algorithm(...)`` entry
  (task, methods, accelml parameters with defaults) plus one ``Implementation`` in each
  backend module that has it.
- ``_registry.py``: ``Backend``, ``Implementation`` and the translation rules ``Same``,
  ``Rename``, ``Convert``, ``Unsupported`` (a value the backend cannot honour is an error,
  the default is the documented mapping). :func:`parameter_table` prints any algorithm's table.
- ``_estimator.py``: :class:`Estimator`.
- ``_measurer.py``: what a backend's own measurer (``Backend.measurer``) gets and returns:
  :class:`MeasureContext` (with the :class:`Turns` of an interleaved group), :class:`Measurements`.
- one public module per backend: ``sklearn.py``, ``sklearnex.py``, ``xgboost.py``, ``keras.py``.

Adding a backend is one module: ``BACKEND = Backend(name="<name>", summary="...",
devices=(...), probe=..., implementations={algorithm: Implementation("module:Class",
{param: rule, ...})}, repeat_expectation=EveryCase(True, "why runs repeat bitwise"),
libraries=("<pip name>",))`` -- one rule for every parameter of each algorithm it
implements. Put it in ``accelml/estimators/<name>.py``, or in your own package registered
under ``[project.entry-points."accelml.backends"]``; :data:`BACKENDS` finds both, and
``accelml backends``, specs, the expectations of the agreement matrix and the environment
fingerprint all read the record. Every backend module is imported when backends are listed,
so it imports its library inside functions (``Implementation`` takes the class as a
'module:Class' string for that reason). ``Backend.trace`` (optional) reports which code path
each call ran; ``Backend.missing`` says why an algorithm is absent.

For timing: :func:`device_sync` makes sure device work behind a result has finished; every
backend here returns host NumPy arrays from predict (XGBoost on CUDA copies predictions to
the host, which is the sync), and ``fit`` returns after the device finished training.
"""

import importlib
from typing import TYPE_CHECKING

from ._algorithms import ALGORITHMS, Algorithm, Objective, Param
from ._measurer import GO, MeasureContext, Measurements, Turns, device_sync
from ._registry import (
    BACKENDS,
    AlgorithmInfo,
    Backend,
    Convert,
    EveryCase,
    ExecutionPath,
    FromData,
    Implementation,
    InvalidChoiceError,
    Rename,
    RoundClock,
    Same,
    TranslationRow,
    Unsupported,
    algorithms,
    backend_availability,
    check_params,
    get_algorithm,
    get_backend,
    parameter_table,
    same,
    task_of,
)
from .sklearn import reference_centroids

if TYPE_CHECKING:
    from ._estimator import Estimator

_LOADS_SKLEARN = ("Estimator",)


def __getattr__(name: str) -> object:
    """:class:`Estimator`, from ``_estimator``, which imports scikit-learn (~3 CPU-s): loaded
    when first asked for, so that the registries alone (what the report, the CLI's client and
    a deep-learning case's process read) load no scikit-learn."""
    if name in _LOADS_SKLEARN:
        return getattr(importlib.import_module(f"{__name__}._estimator"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "ALGORITHMS", "BACKENDS", "GO", "Algorithm", "AlgorithmInfo", "Backend", "Convert", "Estimator",
    "EveryCase", "ExecutionPath", "FromData", "Implementation", "InvalidChoiceError",
    "MeasureContext", "Measurements", "Objective", "Param", "Rename", "RoundClock", "Same",
    "TranslationRow", "Turns", "Unsupported", "algorithms", "backend_availability",
    "check_params", "device_sync", "get_algorithm", "get_backend", "parameter_table",
    "reference_centroids", "same", "task_of",
]
