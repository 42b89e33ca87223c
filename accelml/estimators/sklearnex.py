"""Backend ``sklearnex``: Intel Extension for Scikit-learn (oneDAL), CPU.

The accelerated classes are imported from ``sklearnex`` itself; nothing is patched, so
code outside an accelml estimator keeps running stock scikit-learn.

sklearnex silently runs stock scikit-learn for parameter values or inputs it does not
accelerate. It says so only on its ``sklearnex`` logger at level INFO ("running accelerated
version on CPU" vs "fallback to original Scikit-learn"). :func:`trace` listens to that
logger around every call an accelml estimator makes, so ``est.fallbacks_`` lists the calls
that were not accelerated. While it listens, the messages are not printed (unless you asked
for them with ``SKLEARNEX_VERBOSE=INFO`` or by configuring the logger yourself).

Device: ``cpu`` only. sklearnex can also offload to Intel GPUs through SYCL (dpctl); that is not
wired here, and it is not CUDA.

sklearnex has no gradient boosting estimator (its model builders only speed up inference of
already trained XGBoost/LightGBM models), so ``gradient_boosting_*`` is not offered here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from types import MappingProxyType

from accelml.probe import ImportProbe

from ._registry import Backend, EveryCase, ExecutionPath
from .sklearn import IMPLEMENTATIONS as _SKLEARN

_CLASSES = {
    "kmeans": "sklearnex.cluster:KMeans",
    "dbscan": "sklearnex.cluster:DBSCAN",
    "pca": "sklearnex.decomposition:PCA",
    "linear_regression": "sklearnex.linear_model:LinearRegression",
    "ridge": "sklearnex.linear_model:Ridge",
    "logistic_regression": "sklearnex.linear_model:LogisticRegression",
    "svc": "sklearnex.svm:SVC",
    "knn_classifier": "sklearnex.neighbors:KNeighborsClassifier",
    "knn_regressor": "sklearnex.neighbors:KNeighborsRegressor",
    "random_forest_classifier": "sklearnex.ensemble:RandomForestClassifier",
    "random_forest_regressor": "sklearnex.ensemble:RandomForestRegressor",
}



_ACCELERATED = "running accelerated version"
_FALLBACK = "fallback to original Scikit-learn"


class _Collector(logging.Handler):
    """Turns the sklearnex log records of one thread into :class:`ExecutionPath` entries."""

    def __init__(self, paths: list[ExecutionPath], thread: int):
        super().__init__(logging.DEBUG)
        self.paths = paths
        self.thread = thread

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread or record.levelno != logging.INFO:
            return
        text = record.getMessage().strip()
        call, _, message = text.partition(": ")
        if _FALLBACK in message:
            self.paths.append(ExecutionPath(call, "fallback", message))
        elif _ACCELERATED in message:
            self.paths.append(ExecutionPath(call, "accelerated", message))
        else:
            self.paths.append(ExecutionPath("", "note", text))


def _only_above_info(record: logging.LogRecord) -> bool:
    return record.levelno > logging.INFO


class _LoggerSwitch:
    """Raises the process-wide ``sklearnex`` logger to INFO while at least one trace is open.

    The logger is process-wide, so this is the one piece of shared state here: a count of
    open traces under a lock, so that nested or concurrent traces restore it exactly once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._saved: tuple[int, bool, bool] = (logging.NOTSET, True, False)

    def enter(self, logger: logging.Logger, handler: logging.Handler) -> None:
        with self._lock:
            if self._open == 0:
                quiet = logger.getEffectiveLevel() > logging.INFO
                self._saved = (logger.level, logger.propagate, quiet)
                if quiet:
                    logger.setLevel(logging.INFO)
                    logger.propagate = False
                    for existing in logger.handlers:
                        existing.addFilter(_only_above_info)
            self._open += 1
            logger.addHandler(handler)

    def leave(self, logger: logging.Logger, handler: logging.Handler) -> None:
        with self._lock:
            logger.removeHandler(handler)
            self._open -= 1
            if self._open == 0:
                level, propagate, quiet = self._saved
                if quiet:
                    for existing in logger.handlers:
                        existing.removeFilter(_only_above_info)
                    logger.setLevel(level)
                    logger.propagate = propagate


_SWITCH = _LoggerSwitch()


@contextmanager
def trace() -> Iterator[list[ExecutionPath]]:
    """Collect what sklearnex ran for the calls made inside (this thread only).

    >>> import numpy as np
    >>> from sklearnex.cluster import KMeans
    >>> with trace() as paths:
    ...     _ = KMeans(2, n_init=1, random_state=0).fit(np.arange(20.0).reshape(10, 2))
    >>> [(p.call, p.path) for p in paths]
    [('sklearn.cluster.KMeans.fit', 'accelerated')]
    """
    logger = logging.getLogger("sklearnex")
    paths: list[ExecutionPath] = []
    handler = _Collector(paths, threading.get_ident())
    _SWITCH.enter(logger, handler)
    try:
        yield paths
    finally:
        _SWITCH.leave(logger, handler)


BACKEND = Backend(
    name="sklearnex",
    summary="Intel Extension for Scikit-learn (oneDAL), imported directly, no global patching",
    devices=("cpu",),
    probe=ImportProbe("sklearnex", "scikit-learn-intelex"),
    repeat_expectation=EveryCase(True, "oneDAL's CPU algorithms repeat bitwise with a seed and "
                                       "a fixed thread count"),
    cross_backend_reason=("sklearnex (oneDAL) and scikit-learn are different implementations "
                          "(other solvers, summation order, initialisation): agreement is "
                          "measured, not identity"),
    libraries=("scikit-learn-intelex", "daal"),
    how_to_get={"cpu": "pip install scikit-learn-intelex (x86-64 only)"},
    implementations=MappingProxyType({
        name: replace(_SKLEARN[name], estimator=path) for name, path in _CLASSES.items()
    }),
    trace=trace,
    missing=MappingProxyType({
        name: "sklearnex has no gradient boosting estimator (its model builders only accelerate "
              "inference of trained XGBoost/LightGBM models)"
        for name in ("gradient_boosting_classifier", "gradient_boosting_regressor")
    }),
)
