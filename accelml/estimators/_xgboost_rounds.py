"""XGBoost's round clock: a training callback that times the boosting rounds where they run.

:class:`RoundTimer` reads ``time.perf_counter`` in ``before_training`` (the DMatrix or
QuantileDMatrix is built and, on several workers, the communicator is up: XGBoost calls it
from ``xgboost.train`` once the booster exists) and in ``after_training`` (the last round is
done), and leaves the seconds between in a booster attribute. A fit through ``xgboost.dask``
runs the callback on every worker (pickled there) and returns a worker's booster, so the
reading comes back with the model; :func:`read` takes it off again, so the user's model keeps
no trace of the clock. The rounds are :func:`accelml.estimators.xgboost.boosted_rounds`, the
one owner of "XGBoost's rounds" (the table's iterations read it too): the booster's own count,
as early stopping can end the training before ``n_estimators``.

This module imports xgboost at import time; :mod:`accelml.estimators.xgboost` imports it only
when a fit asks for the clock.

>>> import numpy as np, xgboost
>>> X = np.random.default_rng(0).normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
>>> model = xgboost.XGBClassifier(n_estimators=7, callbacks=[RoundTimer()]).fit(X, y)
>>> rounds, seconds = read(model)
>>> rounds, seconds > 0, read(model)
(7, True, None)
"""

from __future__ import annotations

import time
from typing import Any

from xgboost.callback import TrainingCallback

from accelml.estimators.xgboost import boosted_rounds

SECONDS_ATTRIBUTE = "accelml_rounds_seconds"
"""The booster attribute that carries the seconds of the rounds from the training to :func:`read`."""


class RoundTimer(TrainingCallback):
    """Times the boosting rounds of one training (reset at each ``before_training``)."""

    def __init__(self) -> None:
        super().__init__()
        self._started = 0.0

    def before_training(self, model: Any) -> Any:
        self._started = time.perf_counter()
        return model

    def after_training(self, model: Any) -> Any:
        model.set_attr(**{SECONDS_ATTRIBUTE: repr(time.perf_counter() - self._started)})
        return model


def read(fitted: Any) -> tuple[int, float] | None:
    """The rounds ``fitted`` (an XGBoost scikit-learn model) trained and the seconds they took,
    with the reading removed from its booster; None when the fit was not clocked."""
    booster = fitted.get_booster()
    seconds = booster.attr(SECONDS_ATTRIBUTE)
    if seconds is None:
        return None
    booster.set_attr(**{SECONDS_ATTRIBUTE: None})
    return boosted_rounds(fitted), float(seconds)
