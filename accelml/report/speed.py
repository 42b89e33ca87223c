"""Speedups against a reference backend, and scaling over ranks, from stored case results.

A case's reference is the case of the reference backend with the same algorithm, dataset,
parameters, ranks and strategy: on the same device when there is one, else on the CPU,
else any device. A case of the reference backend itself on an accelerator is compared with
that backend's CPU case where there is one (XGBoost on CUDA against XGBoost on all cores:
the move this comparison is about), else it is the reference.
Speedup = reference time / case time, so 2.0 means twice as fast. For two cases measured
interleaved (one timed round each in turn, :mod:`accelml.runner.interleave`) it is the
median of the per-round ratios, with the interval of that median over the paired ratios
(``Speedup.measurement`` is ``interleaved``); for cases measured isolated it is the ratio of
the medians, with the interval from the two medians' confidence intervals (worst and best
combination).

For deep-learning cases, scaling compares epoch times (first epoch excluded) with the
1-rank case of the same backend, device, strategy, model, dataset and parameters (or,
when that strategy has no 1-rank case, the ``single`` 1-rank case):
speedup = t(1) / t(N), efficiency = speedup / N. Classical cases trained on several
ranks (dask workers, one a rank: XGBoost through xgboost.dask, say) compare fit times the
same way, with the 1-rank case of the same backend, device, algorithm, dataset and parameters.

Every phase a case and its reference both timed gets its own speedup with its interval
(:func:`phase_speedups`); the first is the case's main phase (:func:`main_phase`: the
backend's record says ``epoch`` for trained models, else the algorithm's record, e.g.
``predict`` for neighbours). Iterative fits are compared per iteration too
(:func:`iterations_against`), and an objective that differs beyond its tolerance marks a
different optimum (:func:`optimum_against`): a slower fit that ran 37 iterations to a worse
optimum against 5 is not a slower implementation.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from accelml.cases import INTERLEAVED, ISOLATED, Case, canonical_json
from accelml.dl.strategies import default_strategy, find_strategy
from accelml.estimators import ALGORITHMS, BACKENDS
from accelml.expectations import is_deep_learning
from accelml.results.records import CaseResult, paired_ratio

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
    measurement: str = ISOLATED   # interleaved: from the paired rounds' ratios


@dataclass(frozen=True)
class Scaling:
    """Epoch-time speedup and efficiency of an N-rank case against the 1-rank case."""

    case_id: str
    baseline_case_id: str
    ranks: int
    speedup: float
    efficiency: float
    images_per_second: float | None
    low: float = math.nan          # the speedup's interval, from paired rounds (interleaved)
    high: float = math.nan
    measurement: str = ISOLATED    # interleaved: the median of the per-round epoch-time ratios

    @property
    def efficiency_interval(self) -> tuple[float, float]:
        """The efficiency's interval (NaN where the speedup has none)."""
        return self.low / self.ranks, self.high / self.ranks


def _identity(result: CaseResult | Case, *, with_ranks: bool = True) -> str:
    dataset = result.dataset if isinstance(result, CaseResult) else result.dataset.name
    return canonical_json({
        "algorithm": result.algorithm, "dataset": dataset,
        "params": dict(result.params),
        "ranks": result.ranks if with_ranks else None,
        "strategy": result.strategy if with_ranks else None,
    })


Compared = TypeVar("Compared", CaseResult, Case)


def reference_cases(results: Iterable[Compared], reference: str) -> dict[str, Compared]:
    """case_id -> the reference case it is compared with (cases without one are left out);
    stored results, or the cases of a run before they run (its comparison groups,
    :mod:`accelml.runner.interleave`)."""
    results = list(results)
    by_identity: dict[str, list[Compared]] = {}
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
        if result.backend == reference and cpu:
            matched[result.case_id] = cpu[0]
        else:
            matched[result.case_id] = (same_device or cpu or candidates)[0]
    return matched


def paired(result: CaseResult, reference: CaseResult) -> bool:
    """Whether the two cases took their rounds in turn, in one group of one run (their
    samples pair round by round)."""
    return (result.measurement == reference.measurement == INTERLEAVED
            and result.run_id == reference.run_id and result.turn_group == reference.turn_group
            and {result.case_id, reference.case_id} <= set(result.turn_group))


def speedup(result: CaseResult, reference: CaseResult, phase: str = "fit") -> Speedup | None:
    """``phase``'s speedup of ``result`` over ``reference``: for cases measured interleaved
    (:func:`paired`), the median of the per-round ratios with that median's interval; else
    the ratio of the medians, with the interval from the worst and best combination of the
    medians' intervals."""
    mine, theirs = result.timing(phase), reference.timing(phase)
    if not (result.ok and reference.ok) or mine is None or theirs is None or mine.median <= 0:
        return None
    if result.case_id == reference.case_id:
        return Speedup(result.case_id, reference.case_id, phase, 1.0, 1.0, 1.0)
    if paired(result, reference):
        level = theirs.ci_level or mine.ci_level or 0.95
        found = paired_ratio(theirs.samples, mine.samples, level)
        if found is not None and found.rounds >= 2:
            return Speedup(result.case_id, reference.case_id, phase, found.value, found.low,
                           found.high, INTERLEAVED)
    low = theirs.ci_low / mine.ci_high if mine.ci_high > 0 else float("nan")
    high = theirs.ci_high / mine.ci_low if mine.ci_low > 0 else float("inf")
    return Speedup(result.case_id, reference.case_id, phase, theirs.median / mine.median, low, high)


def main_phase(result: CaseResult) -> str:
    """The phase whose speedup is shown first: the backend record's ``main_phase`` (``epoch``
    for trained models), else the algorithm record's (``predict`` for neighbours), else fit.

    >>> from accelml.results.records import CaseResult
    >>> main_phase(CaseResult("r", "c", "knn_classifier", "sklearnex", "cpu", "d", "ok"))
    'predict'
    """
    backend = BACKENDS.find(result.backend)
    if backend is not None and backend.main_phase:
        return backend.main_phase
    algorithm = ALGORITHMS.get(result.algorithm)
    return "fit" if algorithm is None else algorithm.main_phase


def phase_speedups(result: CaseResult, reference: CaseResult) -> tuple[Speedup, ...]:
    """The speedup of every phase both cases timed, the main phase first."""
    first = main_phase(result)
    order = (first, *(phase for phase in PHASES if phase != first))
    found = (speedup(result, reference, phase) for phase in order)
    return tuple(value for value in found if value is not None)


@dataclass(frozen=True)
class Iterations:
    """Iterations of a case's fit against its reference's, and the fit time per iteration
    (fit median / iterations; None where a figure is missing)."""

    iterations: int
    reference_iterations: int | None
    seconds_per_iteration: float | None
    reference_seconds_per_iteration: float | None

    @property
    def per_iteration_speedup(self) -> float | None:
        """Reference seconds per iteration / this case's (>1: each iteration is faster)."""
        if not self.seconds_per_iteration or self.reference_seconds_per_iteration is None:
            return None
        return self.reference_seconds_per_iteration / self.seconds_per_iteration

    def text(self) -> str:
        """'37 vs 5 it, per it 1.8x' (against the reference) or '5 it' alone.

        >>> Iterations(37, 5, 0.01, 0.018).text()
        '37 vs 5 it, per it 1.80x'
        """
        if self.reference_iterations is None:
            return f"{self.iterations} it"
        text = f"{self.iterations} vs {self.reference_iterations} it"
        per = self.per_iteration_speedup
        return text if per is None else f"{text}, per it {per:.2f}x"


def _per_iteration(result: CaseResult) -> float | None:
    fit = result.timing("fit")
    if fit is None or not result.iterations:
        return None
    return fit.median / result.iterations


def iterations_of(result: CaseResult, reference: CaseResult | None) -> Iterations | None:
    """The iterations of ``result``'s fit, against ``reference``'s when it recorded them."""
    if not result.ok or result.iterations is None:
        return None
    theirs = None if reference is None or not reference.ok else reference.iterations
    return Iterations(result.iterations, theirs, _per_iteration(result),
                      None if theirs is None or reference is None else _per_iteration(reference))


@dataclass(frozen=True)
class Optimum:
    """The objective a fit reached (``objective``: inertia, log_loss; lower is better) against
    the reference's; ``differs`` when the relative difference is beyond ``tolerance_rel``,
    and then ``reason`` says by how much and why that happens."""

    objective: str
    value: float
    reference_value: float
    relative_difference: float
    tolerance_rel: float
    differs: bool
    reason: str


def _iterations_phrase(result: CaseResult, reference: CaseResult) -> str:
    if result.iterations is None or reference.iterations is None:
        return ""
    limit = dict(result.params).get("max_iter")
    if limit is None and result.algorithm in ALGORITHMS:
        limit = ALGORITHMS[result.algorithm].defaults.get("max_iter")
    capped = [name for name, found in ((result.backend, result.iterations),
                                       (reference.backend, reference.iterations))
              if isinstance(limit, int) and found >= limit]
    text = f" after {result.iterations} vs {reference.iterations} iterations"
    return text + (f" ({' and '.join(capped)} stopped at max_iter={limit})" if capped else "")


def optimum_against(result: CaseResult, reference: CaseResult) -> Optimum | None:
    """Did ``result`` reach the reference's optimum? None when the algorithm's record names no
    objective, a value is missing, or either case failed.

    >>> from accelml.results.records import CaseResult, Score
    >>> def fit(cid, backend, inertia, iterations):
    ...     return CaseResult("r", cid, "kmeans", backend, "cpu", "d", "ok", iterations=iterations,
    ...                       scores=(Score("inertia", inertia, False),))
    >>> found = optimum_against(fit("b", "sklearnex", 6.669e8, 37), fit("a", "sklearn", 6.399e8, 5))
    >>> found.differs, found.reason.split(":")[0]
    (True, 'inertia 6.669e+08 vs 6.399e+08 (+4.2%, tolerance 0.1%) after 37 vs 5 iterations')
    """
    algorithm = ALGORITHMS.get(result.algorithm)
    objective = None if algorithm is None else algorithm.objective
    if objective is None or not (result.ok and reference.ok):
        return None
    value, theirs = result.score(objective.score), reference.score(objective.score)
    if value is None or theirs is None or not (math.isfinite(value) and math.isfinite(theirs)):
        return None
    scale = abs(theirs) or 1.0
    relative = (value - theirs) / scale
    differs = abs(relative) > objective.tolerance_rel
    reason = ""
    if differs:
        reason = (f"{objective.score} {value:.4g} vs {theirs:.4g} ({relative:+.1%}, tolerance "
                  f"{objective.tolerance_rel:.1%}){_iterations_phrase(result, reference)}: "
                  f"{objective.why}")
    return Optimum(objective.score, value, theirs, relative, objective.tolerance_rel, differs,
                   reason)


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


def _scaling_key(result: CaseResult | Case, strategy: str | None) -> ScalingKey:
    """What a case and its 1-rank baseline share: everything but the rank count."""
    identity = _identity(result, with_ranks=False)
    return (result.backend, result.device, strategy or default_strategy().name, identity)


def scaling_baselines(cases: Iterable[Case]) -> dict[str, Case]:
    """case_id -> the 1-rank case a training on several ranks is scaled against (of its
    own strategy, else of the default strategy; as :func:`scaling` matches them): the cases
    of a run before they run, which the runner then measures in one interleaved group.

    >>> from accelml.cases import DatasetSpec
    >>> data = DatasetSpec("digits", "shipped")
    >>> one, two = (Case("mlp", "keras", "cpu", data, ranks=n, strategy="jax-pmean")
    ...             for n in (1, 2))
    >>> found = scaling_baselines([one, two])
    >>> list(found) == [two.case_id], found[two.case_id] == one
    (True, True)
    """
    trainings = [case for case in cases if is_deep_learning(case)]
    found = _one_rank_baselines(trainings)
    return {case.case_id: found[case.case_id] for case in trainings
            if case.ranks > 1 and case.case_id in found}


def _one_rank_baselines(items: list[Compared]) -> dict[str, Compared]:
    """case_id -> its 1-rank case among ``items`` (its own strategy's, else the default
    strategy's); a 1-rank case is its own."""
    baselines: dict[ScalingKey, Compared] = {}
    for item in items:
        if item.ranks == 1:
            baselines.setdefault(_scaling_key(item, item.strategy), item)
    found = {}
    for item in items:
        base = (baselines.get(_scaling_key(item, item.strategy))
                or baselines.get(_scaling_key(item, default_strategy().name)))
        if base is not None:
            found[item.case_id] = base
    return found


def _scaled_phase(result: CaseResult) -> str:
    """The phase scaling compares: epochs of a training, else the fit."""
    return "epoch" if result.timing("epoch") is not None else "fit"


def scaling(results: Iterable[CaseResult]) -> dict[str, Scaling]:
    """case_id -> scaling against the 1-rank case: deep-learning cases by epoch time,
    classical cases by fit time where their group (backend, device, algorithm, dataset,
    parameters) was also run on several ranks.

    Each case is measured against the 1-rank case of its own strategy (and backend,
    device, model, dataset, parameters); where its strategy has no 1-rank case, against
    the default strategy's 1-rank case of the same model and data. Failed cases
    are never a baseline.

    >>> from accelml.results.records import PhaseTiming
    >>> def case(cid, ranks, seconds):
    ...     return CaseResult("r", cid, "gradient_boosting_classifier", "xgboost", "cuda", "d",
    ...                       "ok", ranks=ranks,
    ...                       timings=(PhaseTiming.from_samples("fit", [seconds]),))
    >>> found = scaling([case("one", 1, 8.0), case("four", 4, 2.5)])
    >>> found["four"].speedup, found["four"].efficiency, found["one"].speedup
    (3.2, 0.8, 1.0)
    >>> scaling([case("alone", 1, 8.0)])
    {}
    """
    results = [r for r in results if r.ok and r.timing(_scaled_phase(r)) is not None]
    scaled = {_scaling_key(r, r.strategy) for r in results if r.ranks > 1}
    results = [r for r in results if r.timing("epoch") is not None
               or _scaling_key(r, r.strategy) in scaled]
    baselines = _one_rank_baselines(results)
    found = {}
    for result in results:
        base = baselines.get(result.case_id)
        if base is None:
            continue
        phase = _scaled_phase(result)
        base_epoch, epoch = base.timing(phase), result.timing(phase)
        if base_epoch is None or epoch is None:
            continue
        value, low, high, measurement = base_epoch.median / epoch.median, math.nan, math.nan, ISOLATED
        ratio = paired_ratio(base_epoch.samples, epoch.samples, base_epoch.ci_level or 0.95)
        if paired(result, base) and ratio is not None and ratio.rounds >= 2:
            value, low, high, measurement = ratio.value, ratio.low, ratio.high, INTERLEAVED
        found[result.case_id] = Scaling(
            result.case_id, base.case_id, result.ranks, value, value / result.ranks,
            None if result.dl is None else result.dl.images_per_second, low, high, measurement)
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


def images_per_rank(result: CaseResult) -> float | None:
    """Images/s of a deep-learning case per rank (per GPU on GPUs): its images/s, warm-up
    epochs left out, over its ranks; None for other cases.

    >>> from accelml.results.records import DLMeasurements
    >>> dl = DLMeasurements("cnn", (), 64, 4, 0.01, 10_000.0)
    >>> images_per_rank(CaseResult("r", "c", "cnn", "keras", "cuda", "d", "ok", ranks=4, dl=dl))
    2500.0
    """
    if result.dl is None or not result.ok or not result.dl.images_per_second > 0:
        return None
    return result.dl.images_per_second / max(1, result.dl.ranks)


def rank_unit(device: str) -> str:
    """What one rank of a case on ``device`` is called: ``GPU`` except on the CPU."""
    return "rank" if device == "cpu" else "GPU"


def engine_of(result: CaseResult) -> str | None:
    """The Keras engine a deep-learning case trained on: its ``keras_backend``, else its
    strategy's default (None for other cases, or a strategy not installed here)."""
    record = find_strategy(result.strategy)
    if result.dl is None or record is None:
        return None
    requested = dict(result.params).get("keras_backend")
    return requested if isinstance(requested, str) else record.keras_backend


def _times(value: float) -> str:
    """A ratio with two decimals (two significant digits below 0.1): '5.76', '0.076'."""
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


@dataclass(frozen=True)
class EngineComparison:
    """Two strategies' cases at the same rank count, per rank, beside their 1-rank cases.

    ``engine_ratio`` is the 1-rank per-GPU ratio: the engines' (``case`` over
    ``reference``); at N ranks, ``ratio`` / ``engine_ratio`` is what the strategies
    themselves add (their efficiencies' ratio).
    """

    case_id: str
    reference_case_id: str
    label: str                     # "resnet50v2 on synthetic_128"
    device: str
    ranks: int
    strategy: str
    engine: str
    per_rank: float                # images/s per rank
    reference_strategy: str
    reference_engine: str
    reference_per_rank: float
    engine_ratio: float | None     # the 1-rank cases' per-rank ratio (None: no such pair)

    @property
    def ratio(self) -> float:
        return self.per_rank / self.reference_per_rank

    def text(self) -> str:
        """'x1 [torch-ddp] vs [jax-pmean]: per GPU, engine torch = 0.17 x engine jax (...)'.

        >>> one = EngineComparison("b", "a", "cnn on d", "cuda", 1, "torch-ddp", "torch", 1000.0,
        ...                        "jax-pmean", "jax", 4000.0, 0.25)
        >>> one.text()[len("cnn on d x1 [torch-ddp] vs [jax-pmean]: "):]
        'per GPU, engine torch = 0.25 × engine jax (1,000 vs 4,000 images/s per GPU)'
        """
        unit = rank_unit(self.device)
        head = f"{self.label} x{self.ranks} [{self.strategy}] vs [{self.reference_strategy}]: "
        rates = (f"{self.per_rank:,.0f} vs {self.reference_per_rank:,.0f} images/s "
                 f"per {unit}")
        if self.engine_ratio is None:
            engines = ""
        elif self.engine == self.reference_engine:
            engines = (f"same engine ({self.engine}): per {unit}, {self.strategy} = "
                       f"{_times(self.engine_ratio)} × {self.reference_strategy}")
        else:
            engines = (f"per {unit}, engine {self.engine} = {_times(self.engine_ratio)} × "
                       f"engine {self.reference_engine}")
        if self.ranks == 1:
            return head + (f"{engines} ({rates})" if engines else rates)
        found = f"{rates} ({_times(self.ratio)}×)"
        if self.engine_ratio is None:
            return head + found + f"; no 1-{unit} pair to tell the engines apart"
        return (head + f"{found}; {engines} on 1 {unit}, so the strategies account for "
                f"{_times(self.ratio / self.engine_ratio)}×")

    def to_dict(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "reference_case_id": self.reference_case_id,
                "label": self.label, "device": self.device, "ranks": self.ranks,
                "strategy": self.strategy, "engine": self.engine,
                "images_per_second_per_rank": self.per_rank,
                "reference_strategy": self.reference_strategy,
                "reference_engine": self.reference_engine,
                "reference_images_per_second_per_rank": self.reference_per_rank,
                "ratio": self.ratio, "engine_ratio": self.engine_ratio, "text": self.text()}


def engine_comparisons(pairs: Iterable[tuple[CaseResult, CaseResult]],
                       label: Callable[[CaseResult], str] | None = None
                       ) -> tuple[EngineComparison, ...]:
    """Per-rank images/s of each ``(reference, case)`` pair of deep-learning cases of two
    strategies (the agreement's cross-strategy pairs,
    :func:`accelml.agreement.matrix.cross_strategy_pairs`), with the engines' ratio taken from
    the pair's 1-rank cases (the same two strategies, model, data and parameters).
    ``label`` names a pair by its case (default: "model on dataset")."""
    found = []
    for reference, case in pairs:
        rate, reference_rate = images_per_rank(case), images_per_rank(reference)
        engine, reference_engine = engine_of(case), engine_of(reference)
        if (rate is None or reference_rate is None or engine is None or reference_engine is None
                or case.ranks != reference.ranks):
            continue
        found.append((reference, case, rate, reference_rate, engine, reference_engine))

    def key(result: CaseResult) -> str:
        return _identity(result, with_ranks=False) + (result.strategy or "") + result.backend

    single = {(key(reference), key(case)): rate / reference_rate
              for reference, case, rate, reference_rate, _, _ in found if case.ranks == 1}
    comparisons = [
        EngineComparison(
            case.case_id, reference.case_id,
            label(case) if label else f"{case.algorithm} on {case.dataset}", case.device,
            case.ranks, case.strategy or default_strategy().name, engine, rate,
            reference.strategy or default_strategy().name, reference_engine, reference_rate,
            single.get((key(reference), key(case))))
        for reference, case, rate, reference_rate, engine, reference_engine in found]
    return tuple(sorted(comparisons, key=lambda c: (c.label, c.ranks)))
