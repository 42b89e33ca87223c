"""accelml: how much faster is it on another backend, device or scale, and is the answer the same?

>>> import accelml
>>> from sklearn.datasets import make_blobs
>>> X, _ = make_blobs(n_samples=200, centers=3, random_state=0)
>>> est = accelml.Estimator("kmeans", backend="sklearn", n_clusters=3, random_state=0, n_init=1)
>>> est.fit(X).predict(X).shape
(200,)

``accelml.backends()`` says what this machine can run: one :class:`accelml.probe.Availability`
per backend and device, strategy library and tool (:func:`accelml.machine.probe_all`).

``import accelml`` stays cheap: each public name is listed in ``_LAZY`` (name -> module,
attribute) and its module is imported with :func:`importlib.import_module` when the name is
first used, so heavy libraries load only for the names that need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers see of the names _LAZY imports on first use ("as": re-exported)
    from accelml.compare import compare as compare
    from accelml.errors import AccelmlError as AccelmlError
    from accelml.errors import SpecError as SpecError
    from accelml.errors import UnavailableError as UnavailableError
    from accelml.estimators import Estimator as Estimator
    from accelml.machine import probe_all

    backends = probe_all

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
    """The public ``name``, its module imported on first use (the table ``_LAZY``)."""
    if name in _LAZY:
        module_name, attribute = _LAZY[name]
        return getattr(importlib.import_module(module_name), attribute)
    raise AttributeError(f"module 'accelml' has no attribute {name!r}")
