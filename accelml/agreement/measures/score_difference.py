"""Score difference: ``b - a`` of the primary score (the first score both results have)."""

from __future__ import annotations

from accelml.agreement.point import Aggregate, Bounds, Ideal, Measure, Pair, Reading, Tolerance


def _between(pair: Pair) -> tuple[Reading, ...]:
    return tuple(Reading(score.difference, score.name, abs(score.a)) for score in pair.scores)


def score_text(reading: Reading) -> str:
    """The score's name and the signed difference.

    >>> score_text(Reading(-0.0125, "accuracy"))
    'accuracy -0.0125'
    """
    return f"{reading.of} {reading.value:+.3g}"


MEASURE = Measure(
    name="score_difference", column="score d", unit="",
    description="difference of the primary score, this case minus the reference",
    ideal=Ideal.ZERO, aggregate=Aggregate.FIRST, compute=_between,
    tolerance=Tolerance("score_difference", default=Bounds(atol=1e-9, rtol=1e-6),
                        loose=Bounds(atol=1e-6, rtol=1e-3), legacy="score"),
    text=score_text, order=40)
