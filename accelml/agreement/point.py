"""The measure extension point: one :class:`Measure` record per way of comparing two results.

A measure (bitwise identity, label agreement, max |Δ|, score Δ, ... or a third party's, say
a Spearman correlation of the predicted probabilities) is one module that defines
``MEASURE = Measure(...)`` (or a tuple of them). The built-in ones live in
:mod:`accelml.agreement.measures`; a third party registers theirs under the entry-point group
``accelml.measures``. Everything that shows or gates agreement loops over :data:`MEASURES`:
the terminal table's agreement column (the comparison's *headline*), the agreement matrix
(a column per measure), the HTML report (a column per measure, the heat map's cells) and the
baseline of ``check`` (each comparison's value of every measure with a :class:`Tolerance`).

A measure sees two results as a :class:`Pair`: ``a`` (the reference) and ``b``, each an
:class:`Outputs` (the stored record, its task, its arrays read on demand), and what every
measure shares, computed once: each output array of ``b`` against ``a``'s
(:class:`accelml.agreement.arrays.ArrayAgreement`) and each score both have
(:class:`ScoreDifference`). ``compute(pair)`` returns :class:`Reading` values (one per
array, score, ...; none when the measure does not apply); :class:`Aggregate` makes them one
cell. ``compute_one(outputs)`` (optional) measures one result alone, for the run-to-run rows.

>>> def sign_agreement(pair):
...     a, b = pair.a.array("predictions"), pair.b.array("predictions")
...     if a is None or b is None:
...         return ()
...     return (Reading(float(np.mean(np.sign(a) == np.sign(b))), "predictions"),)
>>> SIGN = Measure("sign_agreement", "signs", "fraction", "fraction of equal signs",
...                Ideal.ONE, Aggregate.WORST, compute=sign_agreement,
...                tolerance=Tolerance("sign_agreement", Bounds(atol=0.0), Bounds(atol=0.01)))
>>> SIGN.heading, SIGN.cell(Reading(0.5)).text, SIGN.cell(Reading(1.0)).css
('signs (fraction)', '0.5', 'good')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from accelml.agreement.arrays import ArrayAgreement
from accelml.plugins import ExtensionPoint
from accelml.results.records import CaseResult, DLMeasurements


@dataclass(frozen=True)
class Reading:
    """One value a measure found, and what it was measured on (an array or score name).

    NumPy scalars become Python ones, so a reading is written to JSON as it is shown:

    >>> Reading(np.float32(0.5)).value, Reading(np.bool_(True)).value
    (0.5, True)
    """

    value: float | bool
    of: str = ""
    scale: float = field(default=0.0, repr=False)
    """The magnitude a relative tolerance refers to (``rtol * scale``): |a| of a score or
    loss, the largest |a| of an array, 1 for a fraction or a relative difference."""

    def __post_init__(self) -> None:
        value = self.value
        plain = bool(value) if isinstance(value, (bool, np.bool_)) else float(value)
        object.__setattr__(self, "value", plain)


class Ideal(Enum):
    """The value that means "the same answer"; a reading further from it is worse."""

    ONE = "one"        # agreements and correlations: 1 is the same, lower is worse
    ZERO = "zero"      # differences, signed or not: 0 is the same, larger |value| is worse
    TRUE = "true"      # yes/no: yes is the same

    def distance(self, value: float | bool) -> float:
        """How far ``value`` is from the ideal (NaN: infinitely far).

        >>> Ideal.ONE.distance(0.75), Ideal.ZERO.distance(-0.5), Ideal.TRUE.distance(False)
        (0.25, 0.5, 1.0)
        """
        if self is Ideal.TRUE:
            return 0.0 if value is True else 1.0
        number = float(value)
        if math.isnan(number):
            return math.inf
        return abs(1.0 - number) if self is Ideal.ONE else abs(number)

    def closeness(self, value: float | bool) -> float:
        """``1 - distance``, clipped to [0, 1] (the heat map's colour scale).

        >>> Ideal.ZERO.closeness(0.02), Ideal.ONE.closeness(-3.0)
        (0.98, 0.0)
        """
        return max(0.0, 1.0 - min(1.0, self.distance(value)))


class Aggregate(Enum):
    """How the readings of one comparison (one per array, score, ...) become one cell."""

    WORST = "worst"    # the reading furthest from the ideal (the first of equals)
    MEAN = "mean"      # the mean value
    FIRST = "first"    # the first reading (e.g. the primary score)

    def combine(self, readings: Sequence[Reading], ideal: Ideal) -> Reading | None:
        """One reading for the cell; None when there is none.

        >>> readings = (Reading(0.75, "predictions"), Reading(0.25, "labels_"))
        >>> Aggregate.WORST.combine(readings, Ideal.ONE), Aggregate.MEAN.combine(readings, Ideal.ONE)
        (Reading(value=0.25, of='labels_'), Reading(value=0.5, of='predictions, labels_'))
        """
        if not readings:
            return None
        if self is Aggregate.FIRST:
            return readings[0]
        if self is Aggregate.WORST:
            return max(readings, key=lambda reading: ideal.distance(reading.value))
        mean = sum(float(reading.value) for reading in readings) / len(readings)
        return Reading(mean, ", ".join(reading.of for reading in readings),
                       sum(reading.scale for reading in readings) / len(readings))


@dataclass(frozen=True)
class Bounds:
    """How far a value may move: ``|now - baseline| <= atol + rtol * |baseline|``."""

    atol: float = 0.0
    rtol: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return {"atol": self.atol, "rtol": self.rtol}


@dataclass(frozen=True)
class Tolerance:
    """How ``check`` gates a measure: ``key`` names it in a baseline's tolerance tables.

    ``check`` runs two kinds of pair through the measure. A case of the run against its own
    entry in the baseline: drift when the reading is further from the ideal than
    ``atol + rtol * reading.scale`` (:class:`Bounds`) or, for a yes/no measure gated with
    ``True``, when it is not yes. And each comparison of the run (cross-backend, -device,
    -scale) against the value the baseline kept for it: drift when the value moved beyond
    ``atol + rtol * |kept|``, or a yes became a no. ``default`` applies where the cases repeat
    bitwise, ``loose`` where one does not (written into the baseline, for review);
    ``answer`` is a case's own default where it differs from a comparison's (bitwise identity
    is not demanded of a case against its baseline: round-off may move across machines).
    ``legacy`` is the key version-2 baselines used for a case's own answer (still read).
    ``answers=False``: the measure gates comparisons only (a mean or relative difference,
    where the largest absolute one already gates a case's answer).
    """

    key: str
    default: Bounds | bool
    loose: Bounds | bool
    answer: Bounds | bool | None = None
    legacy: str = ""
    answers: bool = True

    @property
    def answer_default(self) -> Bounds | bool:
        """A case's own default bound against its baseline entry."""
        return self.default if self.answer is None else self.answer


@dataclass(frozen=True)
class ScoreDifference:
    """A score both results have: ``difference = b - a``, ``relative`` to ``|a|``."""

    name: str
    a: float
    b: float

    @property
    def difference(self) -> float:
        return self.b - self.a

    @property
    def relative(self) -> float:
        if self.a == self.b:
            return 0.0
        return abs(self.difference) / abs(self.a) if self.a else math.inf

    def to_dict(self) -> dict[str, str | float]:
        return {"name": self.name, "a": self.a, "b": self.b, "difference": self.difference,
                "relative": self.relative}


def output_task(result: CaseResult) -> str:
    """What a result's outputs are: its stored task (the runner stores the algorithm's task,
    so PCA on a labelled data set is a decomposition), else its data set's."""
    if result.task:
        return result.task
    return "" if result.dataset_info is None else result.dataset_info.task


class ArraySource(Protocol):
    """Where a result's arrays are read by digest: a :class:`~accelml.results.store.ResultsStore`, or a baseline file
    (its inline values, else the store being checked); None when it cannot be read."""

    @property
    def directory(self) -> Path: ...

    def read_array(self, digest: str) -> NDArray[np.generic] | None: ...


@dataclass(frozen=True)
class Outputs:
    """One stored result as a measure sees it: the record, its task, its arrays on demand."""

    result: CaseResult
    store: ArraySource = field(repr=False, compare=False)

    @property
    def task(self) -> str:
        return output_task(self.result)

    @property
    def dl(self) -> DLMeasurements | None:
        return self.result.dl

    def array(self, name: str) -> NDArray[np.generic] | None:
        """The stored output array ``name`` (None when the result has none; a file missing
        from the store or not matching its digest is a :class:`~accelml.errors.StoreError`)."""
        ref = self.result.prediction(name)
        if ref is None:
            return None
        return self.store.read_array(ref.digest)

    def score(self, name: str) -> float | None:
        return self.result.score(name)


@dataclass(frozen=True)
class Pair:
    """Two results to compare: ``a`` the reference, ``b`` the other, with each output array
    of ``b`` against ``a``'s (matched first) and each score both have."""

    a: Outputs
    b: Outputs
    arrays: tuple[ArrayAgreement, ...]
    scores: tuple[ScoreDifference, ...]


@dataclass(frozen=True)
class Cell:
    """A measure's value as shown: its text, and ``good`` when it is the ideal value."""

    text: str
    css: str


def number_text(reading: Reading) -> str:
    """``yes`` / ``NO`` for yes/no, four significant digits for numbers.

    >>> number_text(Reading(True)), number_text(Reading(0.000123456)), number_text(Reading(0.0))
    ('yes', '0.0001235', '0')
    """
    if isinstance(reading.value, bool):
        return "yes" if reading.value else "NO"
    return "0" if reading.value == 0 else f"{reading.value:.4g}"


@dataclass(frozen=True)
class Measure:
    """One way of comparing two results (see the module docstring).

    ``name`` keys the measure everywhere (matrix rows, JSON, the baseline); ``column`` and
    ``unit`` head its column in the terminal matrix and the HTML report, with
    ``description`` as the HTML column's title; ``ideal`` says which value means "the same"
    (colours, the worst reading); ``aggregate`` makes one cell of several readings;
    ``tolerance`` makes ``check`` gate it; ``text`` writes a reading for a cell.
    ``summary``: a measure that can stand for a whole comparison in one figure (the terminal
    table's agreement column, the heat map) has a rank; the lowest that applies is shown.
    ``order`` places its column (built-ins use 10-60; third parties come after by default).
    ``explain(pair)``: why the two results differ as much as they do, where the record of
    the results says (None: nothing to say); shown under the matrix and in the report.
    ``always_shown``: the terminal matrix keeps its column at any width (bitwise identity,
    the reproducibility answer itself); the others give way to a narrow terminal.
    """

    name: str
    column: str
    unit: str
    description: str
    ideal: Ideal
    aggregate: Aggregate
    compute: Callable[[Pair], Sequence[Reading]] | None = None
    compute_one: Callable[[Outputs], Sequence[Reading]] | None = None
    tolerance: Tolerance | None = None
    text: Callable[[Reading], str] = number_text
    summary: int | None = None
    order: int = 100
    explain: Callable[[Pair], str | None] | None = None
    always_shown: bool = False

    def between(self, pair: Pair) -> Reading | None:
        """The measure between ``pair.a`` and ``pair.b`` (None: it does not apply)."""
        if self.compute is None:
            return None
        return self.aggregate.combine(tuple(self.compute(pair)), self.ideal)

    def reason(self, pair: Pair) -> str | None:
        """What :attr:`explain` says of ``pair`` (None without it)."""
        return None if self.explain is None else self.explain(pair)

    def of(self, outputs: Outputs) -> Reading | None:
        """The measure of one result alone (None: it has no single-result form or does not apply)."""
        if self.compute_one is None:
            return None
        return self.aggregate.combine(tuple(self.compute_one(outputs)), self.ideal)

    def cell(self, reading: Reading) -> Cell:
        """The reading as shown in a table cell; css ``good`` when it is the ideal value."""
        return Cell(self.text(reading), "good" if self.ideal.distance(reading.value) == 0 else "")

    @property
    def heading(self) -> str:
        """The column's heading: its name, and its unit when it has one (``time (ms)``)."""
        return f"{self.column} ({self.unit})" if self.unit else self.column

    def headline_text(self, reading: Reading) -> str:
        """The reading with the column's name, for a cell that stands for the whole comparison."""
        return f"{self.column} {self.text(reading)}"


MEASURES: ExtensionPoint[Measure] = ExtensionPoint(
    "measure", "accelml.measures", "accelml.agreement.measures", "MEASURE", Measure)
"""Built-in measures (modules of :mod:`accelml.agreement.measures`) and third parties' (entry points)."""


def measures() -> tuple[Measure, ...]:
    """Every measure, in column order."""
    return tuple(sorted(MEASURES.records(), key=lambda measure: (measure.order, measure.name)))


Readings = tuple[tuple[Measure, Reading], ...]
"""The measures that applied to one comparison, with their readings, in column order."""


def headline(readings: Readings) -> tuple[Measure, Reading] | None:
    """The reading that stands for a whole comparison: the lowest-ranked ``summary`` measure
    that applied (None when none did)."""
    ranked = [(measure, reading) for measure, reading in readings if measure.summary is not None]
    return min(ranked, key=lambda item: item[0].summary or 0, default=None)


def bitwise_identical(arrays: Sequence[ArrayAgreement], a: CaseResult, b: CaseResult
                      ) -> bool | None:
    """Every array both results have is identical, and so are rank 0's final weights (deep
    learning); None when nothing could be compared."""
    checks = [measure.identical for measure in arrays if measure.kind != "missing"]
    weights_a = a.dl.rank_weight_digests if a.dl else ()
    weights_b = b.dl.rank_weight_digests if b.dl else ()
    if weights_a and weights_b:
        checks.append(weights_a[0] == weights_b[0])
    return all(checks) if checks else None


def repeats_identical(digests: Sequence[str]) -> bool | None:
    """Whether the counted repeats' prediction digests are all equal (None: fewer than two).

    >>> repeats_identical(("d1", "d1")), repeats_identical(("d1",)), repeats_identical(("d1", "d2"))
    (True, None, False)
    """
    return None if len(digests) < 2 else len(set(digests)) == 1
