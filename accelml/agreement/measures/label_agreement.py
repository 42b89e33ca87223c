"""Label agreement: the fraction of equal labels of each label array (classification and
clustering outputs; cluster ids matched one-to-one first), the worst array's in a cell."""

from __future__ import annotations

from accelml.agreement.point import Aggregate, Bounds, Ideal, Measure, Pair, Reading, Tolerance


def _between(pair: Pair) -> tuple[Reading, ...]:
    return tuple(Reading(array.label_agreement, array.name, 1.0) for array in pair.arrays
                 if array.label_agreement is not None)


def percent_text(reading: Reading) -> str:
    """``98.50%``; exactly ``100%`` only when every label agrees.

    >>> percent_text(Reading(0.985)), percent_text(Reading(0.99999)), percent_text(Reading(1.0))
    ('98.50%', '99.99%', '100%')
    """
    value = float(reading.value)
    if value == 1:
        return "100%"
    return f"{min(value, 0.9999):.2%}"


MEASURE = Measure(
    name="label_agreement", column="labels", unit="",
    description="fraction of equal labels (cluster ids matched one-to-one first); the worst "
                "label array",
    ideal=Ideal.ONE, aggregate=Aggregate.WORST, compute=_between,
    tolerance=Tolerance("label_agreement", default=Bounds(), loose=Bounds(atol=0.01),
                        legacy="labels"),
    text=percent_text, summary=1, order=20)
