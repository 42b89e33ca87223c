"""Deep learning: the difference of the final training loss and accuracy and of the test
accuracy (this case minus the reference), whether every rank of a data-parallel case ended
with the same weights, and why two cases' test accuracies differ where the record says
(:func:`accuracy_gap_reason`)."""

from __future__ import annotations

from collections.abc import Callable

from accelml.agreement.point import Aggregate, Bounds, Ideal, Measure, Pair, Reading, Tolerance
from accelml.results.records import DLMeasurements


def _final(field: str) -> Callable[[Pair], tuple[Reading, ...]]:
    def readings(pair: Pair) -> tuple[Reading, ...]:
        a = None if pair.a.dl is None else getattr(pair.a.dl, field)
        b = None if pair.b.dl is None else getattr(pair.b.dl, field)
        return () if a is None or b is None else (Reading(b - a, field, abs(a)),)

    return readings


def _gap(pair: Pair) -> str | None:
    if pair.a.dl is None or pair.b.dl is None:
        return None
    return accuracy_gap_reason(pair.a.dl, pair.b.dl)


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
                                loose=Bounds(atol=1e-3, rtol=1e-2), legacy="loss"),
            text=signed_text, order=50),
    Measure(name="accuracy_difference", column="acc d", unit="",
            description="final training accuracy, this case minus the reference",
            ideal=Ideal.ZERO, aggregate=Aggregate.FIRST, compute=_final("final_accuracy"),
            tolerance=Tolerance("accuracy_difference", default=Bounds(),
                                loose=Bounds(atol=0.01), legacy="accuracy"),
            text=signed_text, summary=3, order=51),
    Measure(name="test_accuracy_difference", column="test acc d", unit="",
            description="test accuracy (the model in evaluation mode: BatchNorm uses its "
                        "moving statistics), this case minus the reference",
            ideal=Ideal.ZERO, aggregate=Aggregate.FIRST, compute=_final("test_accuracy"),
            tolerance=Tolerance("test_accuracy_difference", default=Bounds(),
                                loose=Bounds(atol=0.01), legacy="accuracy"),
            text=signed_text, summary=2, order=51, explain=lambda pair: _gap(pair)),
    Measure(name="ranks_identical", column="ranks", unit="",
            description="every rank of the data-parallel case ended with the same weights",
            ideal=Ideal.TRUE, aggregate=Aggregate.WORST,
            tolerance=Tolerance("ranks_identical", default=True, loose=True, legacy="ranks"),
            compute=lambda pair: _ranks(pair.b.dl),
            compute_one=lambda outputs: _ranks(outputs.dl), order=52),
)


GAP = 0.05
"""A test-accuracy difference worth explaining."""


def _stale_statistics(dl: DLMeasurements) -> float | None:
    """How much the BatchNorm moving statistics' initial values still weigh (``m ** N``)."""
    if dl.batchnorm_momentum is None or not dl.batchnorm_updates:
        return None
    return float(dl.batchnorm_momentum ** dl.batchnorm_updates)


def accuracy_gap_reason(reference: DLMeasurements, other: DLMeasurements) -> str | None:
    """Why ``other``'s test accuracy is far below (or above) ``reference``'s, from what was
    recorded: BatchNorm moving statistics updated too few times to forget their initial
    values (evaluation mode uses them; training accuracy, measured with batch statistics,
    stays high), or training that itself got less far (fewer steps at a larger global batch).
    None where the test accuracies are within :data:`GAP` or were not measured.

    >>> one = DLMeasurements("resnet50v2", (), 256, 1, 0.01, 1.0, test_accuracy=0.99,
    ...                      final_accuracy=1.0, batchnorm_momentum=0.99, batchnorm_updates=256)
    >>> four = DLMeasurements("resnet50v2", (), 256, 4, 0.04, 1.0, test_accuracy=0.08,
    ...                       final_accuracy=1.0, batchnorm_momentum=0.99, batchnorm_updates=64)
    >>> print(accuracy_gap_reason(one, four))  # doctest: +NORMALIZE_WHITESPACE
    test accuracy 0.08 vs 0.99 while its training accuracy is 1; its BatchNorm moving
    statistics were updated 64 times at momentum 0.99, so their initial values still weigh
    0.53 (the reference's: 0.076): evaluation uses them. Train more steps or lower
    batchnorm_momentum.
    """
    if reference.test_accuracy is None or other.test_accuracy is None:
        return None
    low, high = sorted((reference, other), key=lambda dl: dl.test_accuracy or 0.0)
    if (high.test_accuracy or 0.0) - (low.test_accuracy or 0.0) < GAP:
        return None
    who = "" if low is other else "the reference: "
    stale, stale_high = _stale_statistics(low), _stale_statistics(high)
    trained = low.final_accuracy
    accuracies = f"test accuracy {low.test_accuracy:.3g} vs {high.test_accuracy:.3g}"
    if (stale is not None and stale > GAP and trained is not None
            and trained - (low.test_accuracy or 0.0) > GAP):
        other_one = "the reference's" if low is other else "this case's"
        theirs = "" if stale_high is None else f" ({other_one}: {stale_high:.2g})"
        return (f"{who}{accuracies} while its training accuracy is {trained:.3g}; its "
                f"BatchNorm moving statistics were updated {low.batchnorm_updates} times at "
                f"momentum {low.batchnorm_momentum:g}, so their initial values still weigh "
                f"{stale:.2g}{theirs}: evaluation uses them. Train more steps or lower "
                f"batchnorm_momentum.")
    if (stale is not None and trained is not None and trained - (low.test_accuracy or 0.0) > GAP
            and high.final_accuracy is not None and high.final_accuracy - trained <= GAP
            and (low.batchnorm_updates or 0) < (high.batchnorm_updates or 0)):
        memory = 1.0 / (1.0 - (low.batchnorm_momentum or 0.0))
        return (f"{who}{accuracies} while its training accuracy (batch statistics) is "
                f"{trained:.3g}, as the reference's: evaluation uses BatchNorm moving statistics, "
                f"updated only {low.batchnorm_updates} times (vs {high.batchnorm_updates}) at "
                f"momentum {low.batchnorm_momentum:g}, an average over the last ~{memory:.0f} "
                f"steps, of weights that were still changing fast at learning rate "
                f"{low.learning_rate:g}; they do not match the final weights. Train more steps "
                f"(or evaluate in training mode to confirm).")
    if trained is not None and high.final_accuracy is not None \
            and high.final_accuracy - trained > GAP:
        steps = ("" if low.batchnorm_updates is None or high.batchnorm_updates is None else
                 f" in {low.batchnorm_updates} steps vs {high.batchnorm_updates}")
        return (f"{who}{accuracies}; it also trained less far (training accuracy "
                f"{trained:.3g} vs {high.final_accuracy:.3g}{steps}, global batch "
                f"{low.global_batch_size} vs {high.global_batch_size}): train more epochs.")
    return None
