"""Boosting fits timed as set-up and rounds, for backends with a round clock
(:attr:`accelml.estimators.Backend.round_clock`: XGBoost, on one worker and through xgboost.dask).

:func:`clocked` installs the clock on the case's estimator; after each timed fit,
:meth:`FitSplit.observe` reads it; :meth:`FitSplit.timings` gives the case's ``setup`` phase
(each counted fit's seconds outside its rounds: DMatrix or QuantileDMatrix construction, and on several workers the
tracker, the communicator and dask's scheduling) and :meth:`FitSplit.record` turns the counted
repeats into the case's :class:`~accelml.results.records.BoostingRounds` (rounds, median set-up,
median per-round = (fit - setup) / rounds).

>>> split = FitSplit(None)
>>> split.observe(0, object(), 1.0)
>>> split.timings((0,)), split.record((0,))
((), None)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelml.cases import Case
from accelml.estimators import RoundClock, get_backend
from accelml.results.records import BoostingRounds, PhaseTiming

if TYPE_CHECKING:
    from accelml.estimators import Estimator

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
    """The set-up and per-round seconds of the fits of one case, by repeat index (warm-up
    fits have negative indexes, as :func:`accelml.runner.timing.repeat_until_stable` numbers
    them). The ``setup`` phase is built here from the fits that counted, rather than being
    one more phase the repeats wait to converge: it is a part of ``fit``, whose samples decide."""

    clock: RoundClock | None
    rounds: int = 0
    setup: dict[int, float] = field(default_factory=dict)
    per_round: dict[int, float] = field(default_factory=dict)

    def observe(self, index: int, estimator: object, fit_seconds: float) -> None:
        """Read the clock of the fit of repeat ``index`` (``estimator``, an :class:`Estimator`,
        timed ``fit_seconds`` in all); nothing when it carries no reading."""
        fitted = getattr(estimator, "estimator_", None)
        reading = None if self.clock is None or fitted is None else self.clock.read(fitted)
        if reading is None:
            return
        rounds, seconds = reading
        self.rounds = rounds
        self.setup[index] = max(fit_seconds - seconds, 0.0)
        if rounds > 0:
            self.per_round[index] = seconds / rounds

    def timings(self, counted: Sequence[int]) -> tuple[PhaseTiming, ...]:
        """The ``setup`` phase over the counted fits ``counted`` (the others are its warm-up);
        empty without readings."""
        samples = [self.setup[index] for index in counted if index in self.setup]
        if not samples:
            return ()
        warmup = [seconds for index, seconds in sorted(self.setup.items(), reverse=True)
                  if index not in counted]
        return (PhaseTiming.from_samples(SETUP_PHASE, samples, warmup),)

    def record(self, counted: Sequence[int]) -> BoostingRounds | None:
        """The case's split over its counted fits ``counted`` (None without readings)."""
        setup = [self.setup[index] for index in counted if index in self.setup]
        per_round = [self.per_round[index] for index in counted if index in self.per_round]
        if not setup or not per_round:
            return None
        return BoostingRounds(self.rounds, statistics.median(setup), statistics.median(per_round))
