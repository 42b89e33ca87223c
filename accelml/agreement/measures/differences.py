"""Differences of continuous outputs (probabilities, decision values, regression outputs,
transforms; cluster centres and PCA outputs matched first): max and mean |Δ|, absolute and
relative to max(|a|, |b|) elementwise; the worst array's in a cell. A case against its
baseline entry is gated by the largest absolute difference (``atol + rtol * max|a|``); the
others gate comparisons."""

from __future__ import annotations

from collections.abc import Callable

from accelml.agreement.point import Aggregate, Bounds, Ideal, Measure, Pair, Reading, Tolerance


def _field(name: str) -> Callable[[Pair], tuple[Reading, ...]]:
    """The readings of one field of :class:`accelml.agreement.arrays.ArrayAgreement`; a
    relative difference is a fraction (scale 1), an absolute one scales with the array."""
    relative = "_rel_" in name

    def readings(pair: Pair) -> tuple[Reading, ...]:
        return tuple(Reading(value, array.name, 1.0 if relative else array.scale)
                     for array in pair.arrays if (value := getattr(array, name)) is not None)

    return readings


def difference_text(reading: Reading) -> str:
    """Three significant digits.

    >>> difference_text(Reading(0.000123456)), difference_text(Reading(0.0))
    ('0.000123', '0')
    """
    return "0" if reading.value == 0 else f"{reading.value:.3g}"


def _difference(name: str, column: str, description: str, order: int,
                summary: int | None = None, answers: bool = False) -> Measure:
    return Measure(
        name=name, column=column, unit="", description=description, ideal=Ideal.ZERO,
        aggregate=Aggregate.WORST, compute=_field(name),
        tolerance=Tolerance(name, default=Bounds(atol=1e-9, rtol=1e-6),
                            loose=Bounds(atol=1e-4, rtol=1e-2), legacy="values", answers=answers),
        text=difference_text, summary=summary, order=order)


MEASURE = (
    _difference("max_abs_diff", "max|d|",
                "largest absolute difference of a continuous output, in its units (the worst array)", 30,
                summary=2, answers=True),
    _difference("mean_abs_diff", "mean|d|",
                "mean absolute difference of a continuous output, in its units (the worst array)", 31),
    _difference("max_rel_diff", "max rel",
                "largest difference relative to max(|a|, |b|) elementwise (the worst array)", 32),
    _difference("mean_rel_diff", "mean rel",
                "mean difference relative to max(|a|, |b|) elementwise (the worst array)", 33),
)
