"""Boosting fits timed as set-up and rounds, for backends with a round clock
(:attr:`accelml.estimators.Backend.round_clock`: XGBoost, on one worker and through xgboost.dask).

:func:`clocked` installs the clock on the case's estimator; after each timed fit,
:meth:`FitSplit.phases` reads it and returns the fit's ``setup`` phase (the fit's seconds
outside its rounds: DMatrix or QuantileDMatrix construction, and on several workers the
tracker, the communicator and dask's scheduling); :meth:`FitSplit.record` turns the counted
repeats into the case's :class:`~accelml.results.records.BoostingRounds` (rounds, median set-up,
median per-round = (fit - setup) / rounds).

>>> split = FitSplit(None)
>>> split.phases(0, object(), 1.0), split.record({}, (0,))
({}, None)
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from accelml.cases import Case
from accelml.estimators import Estimator, RoundClock, get_backend
from accelml.results.records import BoostingRounds, PhaseTiming

SETUP_PHASE = "setup"


def clocked(case: Case, template: Estimator) -> tuple[Estimator, FitSplit]:
    """``template`` with its backend's round clock installed (unchanged without one), and the
    :class:`FitSplit` that reads it."""
    clock = get_backend(case.backend).round_clock
    if clock is None:
        return template, FitSplit(None)
    installed = {**(template.library_params or {}), **clock.library_params()}
    return template.set_params(library_params=installed), FitSplit(clock)


@dataclass
class FitSplit:
    """The set-up and per-round seconds of the fits of one case, by repeat index."""

    clock: RoundClock | None
    rounds: int = 0
    per_round: dict[int, float] = field(default_factory=dict)

    def phases(self, index: int, estimator: object, fit_seconds: float) -> dict[str, float]:
        """``{"setup": seconds}`` of the fit of repeat ``index`` (timed ``fit_seconds`` in
        all), read from ``estimator`` (an :class:`Estimator`); empty when it carries no reading."""
        fitted = getattr(estimator, "estimator_", None)
        reading = None if self.clock is None or fitted is None else self.clock.read(fitted)
        if reading is None:
            return {}
        rounds, seconds = reading
        self.rounds = rounds
        if rounds > 0:
            self.per_round[index] = seconds / rounds
        return {SETUP_PHASE: max(fit_seconds - seconds, 0.0)}

    def record(self, timings: Mapping[str, PhaseTiming], counted: Sequence[int]
               ) -> BoostingRounds | None:
        """The case's split over its counted repeats ``counted`` (None without readings)."""
        setup = timings.get(SETUP_PHASE)
        samples = [self.per_round[index] for index in counted if index in self.per_round]
        if setup is None or not samples:
            return None
        return BoostingRounds(self.rounds, setup.median, statistics.median(samples))
