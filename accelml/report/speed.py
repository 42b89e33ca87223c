"""Speedups against a reference backend, and scaling over workers, from stored case results.

A case's reference is the case of the reference backend with the same algorithm, dataset,
parameters, workers and strategy (on the same device when there is one, else any device).
Speedup = reference median / case median, so 2.0 means twice as fast. Its interval comes
from the two medians' confidence intervals (worst and best combination).

For deep-learning cases, scaling compares epoch times (first epoch excluded) with the
1-worker case of the same backend, device, strategy, model, dataset and parameters (or,
when that strategy has no 1-worker case, the ``single`` 1-worker case):
speedup = t(1) / t(N), efficiency = speedup / N. Classical cases trained on several
workers (XGBoost through xgboost.dask, say) compare fit times the same way, with the
1-worker case of the same backend, device, algorithm, dataset and parameters.

>>> from accelml.results.records import CaseResult, PhaseTiming
>>> def case(cid, backend, seconds):
...     return CaseResult("r", cid, "kmeans", backend, "cpu", "blobs", "ok",
...                       timings=(PhaseTiming.from_samples("fit", seconds),))
>>> stock, fast = case("a", "sklearn", [2.0, 2.0, 2.0]), case("b", "sklearnex", [0.5, 0.5, 0.5])
>>> speedups([stock, fast], "sklearn")["b"].value
4.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from accelml.cases import canonical_json
from accelml.dl.strategies import default_strategy
from accelml.results.records import CaseResult

PHASES = ("fit", "predict", "epoch")
"""The timed phases a report shows, in order."""


@dataclass(frozen=True)
class Speedup:
    """How many times faster a case is than its reference for one phase."""

    case_id: str
    reference_case_id: str
    phase: str
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Scaling:
    """Epoch-time speedup and efficiency of an N-worker case against the 1-worker case."""

    case_id: str
    baseline_case_id: str
    workers: int
    speedup: float
    efficiency: float
    images_per_second: float | None


def _identity(result: CaseResult, *, with_workers: bool = True) -> str:
    return canonical_json({
        "algorithm": result.algorithm, "dataset": result.dataset,
        "params": dict(result.params),
        "workers": result.workers if with_workers else None,
        "strategy": result.strategy if with_workers else None,
    })


def reference_cases(results: Iterable[CaseResult], reference: str) -> dict[str, CaseResult]:
    """case_id -> the reference case it is compared with (cases without one are left out)."""
    results = list(results)
    by_identity: dict[str, list[CaseResult]] = {}
    for result in results:
        if result.backend == reference:
            by_identity.setdefault(_identity(result), []).append(result)
    matched = {}
    for result in results:
        candidates = by_identity.get(_identity(result), [])
        if not candidates:
            continue
        same_device = [c for c in candidates if c.device == result.device]
        cpu = [c for c in candidates if c.device == "cpu"]
        matched[result.case_id] = (same_device or cpu or candidates)[0]
    return matched


def speedup(result: CaseResult, reference: CaseResult, phase: str = "fit") -> Speedup | None:
    mine, theirs = result.timing(phase), reference.timing(phase)
    if not (result.ok and reference.ok) or mine is None or theirs is None or mine.median <= 0:
        return None
    low = theirs.ci_low / mine.ci_high if mine.ci_high > 0 else float("nan")
    high = theirs.ci_high / mine.ci_low if mine.ci_low > 0 else float("inf")
    return Speedup(result.case_id, reference.case_id, phase, theirs.median / mine.median, low, high)


def speedups(results: Iterable[CaseResult], reference: str, phase: str = "fit"
             ) -> dict[str, Speedup]:
    """case_id -> speedup of that case against its reference case (the reference gets 1.0)."""
    results = list(results)
    found = {}
    for case_id, ref in reference_cases(results, reference).items():
        result = next(r for r in results if r.case_id == case_id)
        value = speedup(result, ref, phase)
        if value is not None:
            found[case_id] = value
    return found


ScalingKey = tuple[str, str, str, str]


def _scaling_key(result: CaseResult, strategy: str | None) -> ScalingKey:
    """What a case and its 1-worker baseline share: everything but the worker count."""
    identity = _identity(result, with_workers=False)
    return (result.backend, result.device, strategy or default_strategy().name, identity)


def _scaled_phase(result: CaseResult) -> str:
    """The phase scaling compares: epochs of a training, else the fit."""
    return "epoch" if result.timing("epoch") is not None else "fit"


def scaling(results: Iterable[CaseResult]) -> dict[str, Scaling]:
    """case_id -> scaling against the 1-worker case: deep-learning cases by epoch time,
    classical cases by fit time where their group (backend, device, algorithm, dataset,
    parameters) was also run on several workers.

    Each case is measured against the 1-worker case of its own strategy (and backend,
    device, model, dataset, parameters); where its strategy has no 1-worker case, against
    the default strategy's 1-worker case of the same model and data. Failed cases
    are never a baseline.

    >>> from accelml.results.records import PhaseTiming
    >>> def case(cid, workers, seconds):
    ...     return CaseResult("r", cid, "gradient_boosting_classifier", "xgboost", "cuda", "d",
    ...                       "ok", workers=workers,
    ...                       timings=(PhaseTiming.from_samples("fit", [seconds]),))
    >>> found = scaling([case("one", 1, 8.0), case("four", 4, 2.5)])
    >>> found["four"].speedup, found["four"].efficiency, found["one"].speedup
    (3.2, 0.8, 1.0)
    >>> scaling([case("alone", 1, 8.0)])
    {}
    """
    results = [r for r in results if r.ok and r.timing(_scaled_phase(r)) is not None]
    scaled = {_scaling_key(r, r.strategy) for r in results if r.workers > 1}
    results = [r for r in results if r.timing("epoch") is not None
               or _scaling_key(r, r.strategy) in scaled]
    baselines: dict[ScalingKey, CaseResult] = {}
    for result in results:
        if result.workers == 1:
            baselines.setdefault(_scaling_key(result, result.strategy), result)
    found = {}
    for result in results:
        base = (baselines.get(_scaling_key(result, result.strategy))
                or baselines.get(_scaling_key(result, default_strategy().name)))
        if base is None:
            continue
        phase = _scaled_phase(result)
        base_epoch, epoch = base.timing(phase), result.timing(phase)
        if base_epoch is None or epoch is None:
            continue
        value = base_epoch.median / epoch.median
        found[result.case_id] = Scaling(
            result.case_id, base.case_id, result.workers, value, value / result.workers,
            None if result.dl is None else result.dl.images_per_second)
    return found


@dataclass(frozen=True)
class GeometricMeanSpeedup:
    """exp(mean(log speedup)) over the cases of one backend/device that have a reference case."""

    backend: str
    device: str
    phase: str
    value: float
    cases: int
    minimum: float
    maximum: float

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device, "phase": self.phase,
                "value": self.value, "cases": self.cases, "minimum": self.minimum,
                "maximum": self.maximum}


def geometric_mean(values: Iterable[float]) -> float:
    """The geometric mean of the positive, finite values (NaN when there are none).

    >>> round(geometric_mean([2.0, 8.0]), 6)
    4.0
    """
    values = [v for v in values if v > 0 and math.isfinite(v)]
    if not values:
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geometric_mean_speedups(results: Iterable[CaseResult], reference: str | None
                            ) -> tuple[GeometricMeanSpeedup, ...]:
    """One entry per (backend, device, phase) with at least one case measured against the reference.

    The reference cases themselves (speedup 1 by definition) are left out.
    """
    if not reference:
        return ()
    results = list(results)
    by_id = {result.case_id: result for result in results}
    found = []
    for phase in PHASES:
        groups: dict[tuple[str, str], list[float]] = {}
        for case_id, value in speedups(results, reference, phase).items():
            if value.reference_case_id == case_id:
                continue
            result = by_id[case_id]
            groups.setdefault((result.backend, result.device), []).append(value.value)
        for (backend, device), values in groups.items():
            found.append(GeometricMeanSpeedup(backend, device, phase, geometric_mean(values),
                                              len(values), min(values), max(values)))
    order = {phase: index for index, phase in enumerate(PHASES)}
    return tuple(sorted(found, key=lambda s: (s.backend, s.device, order[s.phase])))
