"""accelml: how much faster is it on another backend, device or scale, and is the answer the same?

>>> import accelml
>>> from sklearn.datasets import make_blobs
>>> X, _ = make_blobs(n_samples=200, centers=3, random_state=0)
>>> est = accelml.Estimator("kmeans", backend="sklearn", n_clusters=3, random_state=0, n_init=1)
>>> est.fit(X).predict(X).shape
(200,)

``accelml.backends()`` says what this machine can run: one :class:`accelml.probe.Availability`
per backend and device, strategy library and tool (:func:`accelml.machine.probe_all`).

Heavy libraries are imported only when the name that needs them is first used.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "Estimator": ("accelml.estimators", "Estimator"),
    "backends": ("accelml.machine", "probe_all"),
    "compare": ("accelml.compare", "compare"),
    "AccelmlError": ("accelml.errors", "AccelmlError"),
    "SpecError": ("accelml.errors", "SpecError"),
    "UnavailableError": ("accelml.errors", "UnavailableError"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module_name, attribute = _LAZY[name]
        return getattr(importlib.import_module(module_name), attribute)
    raise AttributeError(f"module 'accelml' has no attribute {name!r}")
