"""Bitwise identity: the same bytes in every output array both results have, and the same
final weights on rank 0 (deep learning). Of one result alone: were the predictions of its
counted repeats identical?"""

from __future__ import annotations

from accelml.agreement.point import (
    Aggregate,
    Ideal,
    Measure,
    Outputs,
    Pair,
    Reading,
    Tolerance,
    bitwise_identical,
    repeats_identical,
)


def _between(pair: Pair) -> tuple[Reading, ...]:
    identical = bitwise_identical(pair.arrays, pair.a.result, pair.b.result)
    return () if identical is None else (Reading(identical),)


def _repeats(outputs: Outputs) -> tuple[Reading, ...]:
    identical = repeats_identical(outputs.result.repeat_prediction_digests)
    return () if identical is None else (Reading(identical, "repeats"),)


MEASURE = Measure(
    name="identical", column="bitwise", unit="",
    description="bitwise identical: the same bytes in every output array (and rank 0's final "
                "weights); for one case, the same predictions in every counted repeat",
    ideal=Ideal.TRUE, aggregate=Aggregate.WORST, compute=_between, compute_one=_repeats,
    tolerance=Tolerance("identical", default=True, loose=False, answer=False, legacy="bitwise"),
    order=10, always_shown=True)
