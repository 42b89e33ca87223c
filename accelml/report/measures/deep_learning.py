"""Deep learning: the difference of the final training loss and accuracy (this case minus the
reference), and whether every rank of a data-parallel case ended with the same weights."""

from __future__ import annotations

from collections.abc import Callable

from accelml.report.measure import Aggregate, Bounds, Ideal, Measure, Pair, Reading, Tolerance
from accelml.results.records import DLMeasurements


def _final(field: str) -> Callable[[Pair], tuple[Reading, ...]]:
    def readings(pair: Pair) -> tuple[Reading, ...]:
        a = None if pair.a.dl is None else getattr(pair.a.dl, field)
        b = None if pair.b.dl is None else getattr(pair.b.dl, field)
        return () if a is None or b is None else (Reading(b - a, field),)

    return readings


def _ranks(dl: DLMeasurements | None) -> tuple[Reading, ...]:
    identical = None if dl is None else dl.ranks_identical
    return () if identical is None else (Reading(identical, "ranks"),)


def signed_text(reading: Reading) -> str:
    """A signed difference, three significant digits.

    >>> signed_text(Reading(0.05)), signed_text(Reading(-0.02))
    ('+0.05', '-0.02')
    """
    return f"{reading.value:+.3g}"


MEASURE = (
    Measure(name="loss_difference", column="loss d", unit="",
            description="final training loss, this case minus the reference",
            ideal=Ideal.ZERO, aggregate=Aggregate.FIRST, compute=_final("final_loss"),
            tolerance=Tolerance("loss_difference", default=Bounds(atol=1e-6, rtol=1e-5),
                                loose=Bounds(atol=1e-3, rtol=1e-2)),
            text=signed_text, order=50),
    Measure(name="accuracy_difference", column="acc d", unit="",
            description="final training accuracy, this case minus the reference",
            ideal=Ideal.ZERO, aggregate=Aggregate.FIRST, compute=_final("final_accuracy"),
            tolerance=Tolerance("accuracy_difference", default=Bounds(),
                                loose=Bounds(atol=0.01)),
            text=signed_text, summary=3, order=51),
    Measure(name="ranks_identical", column="ranks", unit="",
            description="every rank of the data-parallel case ended with the same weights "
                        "(checked for each case by check's 'ranks' tolerance)",
            ideal=Ideal.TRUE, aggregate=Aggregate.WORST,
            compute=lambda pair: _ranks(pair.b.dl),
            compute_one=lambda outputs: _ranks(outputs.dl), order=52),
)
