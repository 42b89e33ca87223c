"""Do two results give the same answer? Comparisons of results and the agreement matrix of a run.

Everything here is computed from what the results store keeps: scores, the prediction arrays
(content-addressed beside the database) and the per-repeat prediction digests. Any two
results can be compared, from one run or two runs, also from different machines (open both
stores).

:func:`compare_results` compares two results: each output array (:mod:`accelml.agreement.arrays`:
identity, label agreement, differences, after matching cluster ids or component signs) and
each score, then every registered measure (:mod:`accelml.agreement.point`; the built-ins are
bitwise identity, label agreement, max/mean |Δ| absolute and relative, score Δ, deep-learning
loss/accuracy Δ and rank agreement). It is the one place agreement is computed: the terminal
table's agreement column, the matrix, the HTML report and the baseline all read it.

The matrix (:func:`agreement_matrix`) has these parts: run-to-run (the repeats of each case:
the runner keeps the digest of every repeat's predictions), cross-backend (each backend
against the reference backend), cross-device (CPU against CUDA), cross-scale (1 rank
against N) and cross-strategy (deep-learning strategies against the run's first one, at
the same rank count and per-rank batch, so the same global batch). Each entry carries
:func:`accelml.expectations.pair_expectation`: whether
bitwise identity is expected there and why not, so a surprise is flagged (``unexpected``).

>>> import tempfile
>>> from accelml.results.records import CaseResult
>>> store = ResultsStore(tempfile.mkdtemp())
>>> a = CaseResult("r", "a", "kmeans", "sklearn", "cpu", "blobs", "ok")
>>> b = CaseResult("r", "b", "kmeans", "sklearnex", "cpu", "blobs", "ok")
>>> compare_results(store, a, store, b, kind="cross-backend").bitwise_identical is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelml.agreement.arrays import (
    ArrayAgreement,
    compare_arrays,
    identical_array,
    is_label_array,
)
from accelml.agreement.point import (
    Measure,
    Outputs,
    Pair,
    Reading,
    Readings,
    ScoreDifference,
    bitwise_identical,
    headline,
    measures,
    output_task,
    repeats_identical,
)
from accelml.cases import Expectation, JSONScalar
from accelml.dl.strategies import default_strategy
from accelml.errors import StoreError
from accelml.expectations import pair_expectation, run_to_run_expectation
from accelml.results.records import CaseResult
from accelml.results.store import ResultsStore

KINDS = ("run-to-run", "cross-backend", "cross-device", "cross-scale", "cross-strategy",
         "cross-run")


@dataclass(frozen=True)
class CaseRef:
    """Which result: its run, case id and a readable label; ``parts`` are the label's pieces
    by field (``("backend", "sklearn")``, ``("n_clusters", "n_clusters=8")``), so that a
    table can show only the pieces that tell its rows apart."""

    run_id: str
    case_id: str
    label: str
    parts: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, str]:
        return {"run_id": self.run_id, "case_id": self.case_id, "label": self.label}


def _values(readings: Readings) -> dict[str, JSONScalar]:
    return {measure.name: reading.value for measure, reading in readings}


def _reading(readings: Readings, name: str) -> Reading | None:
    return next((reading for measure, reading in readings if measure.name == name), None)


@dataclass(frozen=True)
class PairAgreement:
    """Two results ``a`` (the reference) and ``b`` compared: each array, each score, and the
    reading of every measure that applied (``readings``, in column order)."""

    kind: str
    a: CaseRef
    b: CaseRef
    arrays: tuple[ArrayAgreement, ...]
    scores: tuple[ScoreDifference, ...]
    bitwise_identical: bool | None      # every shared array (and rank 0's final weights) equal
    expectation: Expectation
    readings: Readings = ()
    notes: tuple[str, ...] = ()          # why the results differ, where a measure can say

    def reading(self, name: str) -> Reading | None:
        """The reading of the measure called ``name`` (None when it did not apply)."""
        return _reading(self.readings, name)

    def value(self, name: str) -> float | bool | None:
        found = self.reading(name)
        return None if found is None else found.value

    @property
    def headline(self) -> tuple[Measure, Reading] | None:
        """The one figure that stands for this comparison (see :func:`accelml.agreement.point.headline`)."""
        return headline(self.readings)

    @property
    def unexpected(self) -> bool:
        """Identity was expected here and not found."""
        return self.expectation.bitwise and self.bitwise_identical is False

    def array(self, name: str) -> ArrayAgreement | None:
        return next((measure for measure in self.arrays if measure.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "a": self.a.to_dict(), "b": self.b.to_dict(),
            "bitwise_identical": self.bitwise_identical, **_values(self.readings),
            "arrays": [m.to_dict() for m in self.arrays],
            "scores": [s.to_dict() for s in self.scores],
            "expectation": self.expectation.to_dict(), "unexpected": self.unexpected,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class RunToRun:
    """The counted repeats of one case: were their predictions bitwise identical? And the
    reading of every measure that has a single-result form."""

    case: CaseRef
    repeats: int
    distinct: int                         # distinct prediction digests among the repeats
    identical: bool | None                # None: fewer than two repeats
    ranks_identical: bool | None          # DL: every rank ended with the same weights
    expectation: Expectation
    readings: Readings = ()

    @property
    def unexpected(self) -> bool:
        return (self.expectation.bitwise and self.identical is False) or self.ranks_identical is False

    def to_dict(self) -> dict[str, Any]:
        return {**_values(self.readings), "kind": "run-to-run", "case": self.case.to_dict(),
                "repeats": self.repeats, "distinct": self.distinct, "identical": self.identical,
                "ranks_identical": self.ranks_identical,
                "expectation": self.expectation.to_dict(), "unexpected": self.unexpected}


# ---------------------------------------------------------------- two results


def label_parts(result: CaseResult) -> tuple[tuple[str, str], ...]:
    """The pieces of the case's label (:func:`accelml.cases.case_label`) by field, in its order.

    >>> label_parts(CaseResult("r", "c", "kmeans", "sklearn", "cpu", "blobs", "ok", ranks=2,
    ...                        params=(("n_clusters", 3),)))  # doctest: +NORMALIZE_WHITESPACE
    (('algorithm', 'kmeans'), ('backend', 'sklearn'), ('device', 'cpu'), ('ranks', 'x2'),
     ('strategy', ''), ('dataset', 'blobs'), ('n_clusters', 'n_clusters=3'), ('run', 'r'))
    """
    return (("algorithm", result.algorithm), ("backend", result.backend),
            ("device", result.device), ("ranks", f"x{result.ranks}"),
            ("strategy", f"[{result.strategy}]" if result.strategy else ""), ("dataset", result.dataset),
            *((key, f"{key}={value}") for key, value in result.params + result.library_params),
            *((("container", f"in {result.container.label}"),) if result.container else ()),
            ("run", result.run_id))


def case_ref(result: CaseResult) -> CaseRef:
    return CaseRef(result.run_id, result.case_id, result.label, label_parts(result))


def _compare_array(name: str, a: Outputs, b: Outputs, task: str) -> ArrayAgreement:
    ref_a, ref_b = a.result.prediction(name), b.result.prediction(name)
    if ref_a is not None and ref_b is not None and ref_a.digest == ref_b.digest:
        # one file behind both: identical only if it is there and still matches the digest
        try:
            a.array(name)
            if b.store.directory != a.store.directory:
                b.array(name)
        except StoreError as error:
            return ArrayAgreement(name, "missing", False,
                                  note=f"array {name!r} unverified: {error}")
        size = int(np.prod(ref_a.shape)) if ref_a.shape else 1
        return identical_array(name, size, is_label_array(name, np.dtype(ref_a.dtype), task))
    array_a = None if ref_a is None else a.array(name)
    array_b = None if ref_b is None else b.array(name)
    if ref_a is not None and ref_b is not None and (array_a is None or array_b is None):
        return ArrayAgreement(name, "missing", False,
                              note=f"array {name!r} is not in the store (digest known only)")
    return compare_arrays(name, array_a, array_b, task=task)


def pair_of(a: Outputs, b: Outputs) -> Pair:
    """``b`` against ``a`` as every measure sees them: each output array of either (those of
    ``a`` first) and each score both have. Arrays whose digests are equal are identical
    without reading them."""
    task = output_task(a.result)
    names_a = [ref.name for ref in a.result.predictions]
    names = names_a + [ref.name for ref in b.result.predictions if ref.name not in names_a]
    arrays = tuple(_compare_array(name, a, b, task) for name in names)
    scores_b = {score.name: score.value for score in b.result.scores}
    scores = tuple(ScoreDifference(score.name, score.value, scores_b[score.name])
                   for score in a.result.scores if score.name in scores_b)
    return Pair(a, b, arrays, scores)


def compare_results(store_a: ResultsStore, a: CaseResult, store_b: ResultsStore | None = None,
                    b: CaseResult | None = None, *, kind: str = "cross-run",
                    deterministic: bool = True,
                    measures_used: Sequence[Measure] | None = None) -> PairAgreement:
    """Every measure between result ``a`` (reference) and result ``b``.

    The results may come from two stores (two machines): pass ``store_b``; otherwise both
    are read from ``store_a``. Arrays whose digests are equal are identical without reading
    them. ``measures_used`` defaults to every registered measure.
    """
    if b is None:
        raise TypeError("compare_results needs two results")
    pair = pair_of(Outputs(a, store_a), Outputs(b, store_a if store_b is None else store_b))
    arrays, scores = pair.arrays, pair.scores
    readings = tuple((measure, reading) for measure in (measures_used or measures())
                     if (reading := measure.between(pair)) is not None)
    notes = tuple(dict.fromkeys(note for measure in (measures_used or measures())
                                if (note := measure.reason(pair)) is not None))
    return PairAgreement(kind, case_ref(a), case_ref(b), arrays, scores,
                     bitwise_identical(arrays, a, b), pair_expectation(a, b, deterministic),
                     readings, notes)


def run_to_run(result: CaseResult, deterministic: bool = True, store: ResultsStore | None = None,
               measures_used: Sequence[Measure] | None = None) -> RunToRun:
    """Whether the counted repeats of one case produced bitwise identical predictions, with
    the single-result measures (read from ``store`` when given)."""
    digests = result.repeat_prediction_digests
    readings: Readings = ()
    if store is not None:
        outputs = Outputs(result, store)
        readings = tuple((measure, reading) for measure in (measures_used or measures())
                         if (reading := measure.of(outputs)) is not None)
    return RunToRun(case_ref(result), len(digests), len(set(digests)), repeats_identical(digests),
                    None if result.dl is None else result.dl.ranks_identical,
                    run_to_run_expectation(result, deterministic), readings)


# ---------------------------------------------------------------- the matrix of a run


Identity = tuple[tuple[str, Any], ...]
PickReference = Callable[[CaseResult, list[CaseResult]], CaseResult]


ENGINE_PARAMS = ("keras_backend", "step_capture", "steps_per_execution", "gradient_reduction",
                 "gradient_reduce_dtype", "gradient_bucket_mb")
"""Training keys that pick how a strategy runs, not what it trains: left out where
strategies are compared with each other."""


def _identity(result: CaseResult, leave_out: Iterable[str]) -> Identity:
    leave_out = tuple(leave_out)
    params = tuple(sorted(item for item in result.params
                          if "strategy" not in leave_out or item[0] not in ENGINE_PARAMS))
    fields = {"algorithm": result.algorithm, "backend": result.backend, "device": result.device,
              "ranks": result.ranks, "strategy": result.strategy or default_strategy().name,
              "dataset": result.dataset, "params": params,
              "container": result.container}
    for name in leave_out:
        fields.pop(name)
    return tuple(sorted(fields.items()))


def _first_reference(other: CaseResult, references: list[CaseResult]) -> CaseResult:
    return references[0]


def _same_strategy_reference(other: CaseResult, references: list[CaseResult]) -> CaseResult:
    """The 1-rank case of ``other``'s own strategy, else the default strategy's, else the first."""
    default = default_strategy().name
    for wanted in (other.strategy or default, default):
        for reference in references:
            if (reference.strategy or default) == wanted:
                return reference
    return references[0]


def _pairs(results: list[CaseResult], leave_out: tuple[str, ...],
           is_reference: Callable[[CaseResult], bool],
           pick_reference: PickReference = _first_reference
           ) -> list[tuple[CaseResult, CaseResult]]:
    groups: dict[Identity, list[CaseResult]] = {}
    for result in results:
        groups.setdefault(_identity(result, leave_out), []).append(result)
    pairs: list[tuple[CaseResult, CaseResult]] = []
    for members in groups.values():
        references = [m for m in members if is_reference(m)]
        if not references:
            continue
        pairs.extend((pick_reference(other, references), other) for other in members
                     if not is_reference(other))
    return pairs


def cross_strategy_pairs(results: Iterable[CaseResult]) -> list[tuple[CaseResult, CaseResult]]:
    """``(reference, other)`` of every cross-strategy comparison: each successful case of
    another strategy against the same case (ranks, model, data, parameters; the engine
    keys :data:`ENGINE_PARAMS` left out) of the run's first strategy."""
    ok = [r for r in results if r.ok]
    strategies = list(dict.fromkeys(r.strategy for r in ok if r.strategy is not None))
    if len(strategies) < 2:
        return []
    return _pairs(ok, ("strategy",), lambda r: r.strategy == strategies[0])


@dataclass(frozen=True)
class MatrixRow:
    """One line of the matrix: a run-to-run entry (``other`` is None) or a comparison."""

    kind: str
    reference: CaseRef
    other: CaseRef | None
    repeats: int | None
    readings: Readings
    expectation: Expectation
    unexpected: bool
    notes: tuple[str, ...] = ()

    def reading(self, name: str) -> Reading | None:
        return _reading(self.readings, name)


@dataclass(frozen=True)
class AgreementMatrix:
    """The agreement of one run: run-to-run, cross-backend, cross-device and cross-scale.

    ``skipped`` names results that could not take part (failed cases) and why.
    """

    run_id: str
    reference: str | None
    run_to_run: tuple[RunToRun, ...]
    cross_backend: tuple[PairAgreement, ...]
    cross_device: tuple[PairAgreement, ...]
    cross_scale: tuple[PairAgreement, ...]
    cross_run: tuple[PairAgreement, ...] = ()
    skipped: tuple[tuple[str, str], ...] = field(default=())
    cross_strategy: tuple[PairAgreement, ...] = ()
    cross_container: tuple[PairAgreement, ...] = ()
    """Each case in a container image against the same case on the host (or in the run's
    first image when no case ran on the host)."""

    @property
    def comparisons(self) -> tuple[PairAgreement, ...]:
        return (self.cross_backend + self.cross_device + self.cross_scale + self.cross_strategy
                + self.cross_container + self.cross_run)

    @property
    def unexpected(self) -> tuple[RunToRun | PairAgreement, ...]:
        """Entries where bitwise identity was expected and not found (or ranks disagreed)."""
        return tuple(e for e in self.run_to_run + self.comparisons if e.unexpected)

    def entries(self) -> list[MatrixRow]:
        """One row per entry: run-to-run first, then the comparisons."""
        rows = [MatrixRow("run-to-run", entry.case, None, entry.repeats, entry.readings,
                          entry.expectation, entry.unexpected) for entry in self.run_to_run]
        rows += [MatrixRow(entry.kind, entry.a, entry.b, None, entry.readings,
                           entry.expectation, entry.unexpected, entry.notes)
                 for entry in self.comparisons]
        return rows

    def columns(self) -> tuple[Measure, ...]:
        """The measures that applied to at least one entry, in column order."""
        found: dict[str, Measure] = {}
        for row in self.entries():
            for measure, _ in row.readings:
                found.setdefault(measure.name, measure)
        return tuple(sorted(found.values(), key=lambda m: (m.order, m.name)))

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per entry (for tables): kind, cases, a value per measure, expectation."""
        return [{"kind": row.kind, "reference": row.reference.label,
                 "other": "" if row.other is None else row.other.label, "repeats": row.repeats,
                 **_values(row.readings), "expected_identical": row.expectation.bitwise,
                 "why": row.expectation.reason, "unexpected": row.unexpected}
                for row in self.entries()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "reference": self.reference,
            "run_to_run": [e.to_dict() for e in self.run_to_run],
            "cross_backend": [e.to_dict() for e in self.cross_backend],
            "cross_device": [e.to_dict() for e in self.cross_device],
            "cross_scale": [e.to_dict() for e in self.cross_scale],
            "cross_strategy": [e.to_dict() for e in self.cross_strategy],
            "cross_container": [e.to_dict() for e in self.cross_container],
            "cross_run": [e.to_dict() for e in self.cross_run],
            "skipped": [list(item) for item in self.skipped],
        }



def agreement_matrix(store: ResultsStore, run_id: str, reference: str | None = None, *,
                     against: tuple[ResultsStore, str] | None = None,
                     deterministic: bool = True,
                     measures_used: Sequence[Measure] | None = None) -> AgreementMatrix:
    """The agreement matrix of run ``run_id``.

    ``reference`` is the reference backend (default: the run's own). ``against`` adds a
    cross-run part: ``(other_store, other_run_id)``, each case compared with the case of
    the same id there (e.g. the same spec on another machine).

    The compare API calls ``agreement_matrix(store, run.run_id, reference=...)`` for
    ``res.agreement(...)``.
    """
    used = tuple(measures_used or measures())
    run = store.get_run(run_id)
    reference = reference or run.reference_backend
    results = store.case_results(run.run_id)
    ok = [r for r in results if r.ok]
    skipped = tuple((r.label, r.reason or r.status) for r in results if not r.ok)
    repeat_entries = tuple(run_to_run(r, deterministic, store, used) for r in ok)

    def comparisons(kind: str, leave_out: tuple[str, ...], is_reference: Callable[[CaseResult], bool],
                    pick_reference: PickReference = _first_reference) -> tuple[PairAgreement, ...]:
        return tuple(compare_results(store, a, store, b, kind=kind, deterministic=deterministic,
                                     measures_used=used)
                     for a, b in _pairs(ok, leave_out, is_reference, pick_reference))

    cross_backend = (comparisons("cross-backend", ("backend",), lambda r: r.backend == reference)
                     if reference else ())
    cross_device = comparisons("cross-device", ("device",), lambda r: r.device == "cpu")
    cross_scale = comparisons("cross-scale", ("ranks", "strategy"), lambda r: r.ranks == 1,
                              _same_strategy_reference)
    cross_strategy = tuple(compare_results(store, a, store, b, kind="cross-strategy",
                                           deterministic=deterministic, measures_used=used)
                           for a, b in cross_strategy_pairs(ok))
    containers = list(dict.fromkeys(r.container for r in ok))
    on_host = None if None in containers or not containers else containers[0]
    cross_container = (comparisons("cross-container", ("container",),
                                   lambda r: r.container == on_host)
                       if len(containers) > 1 else ())
    cross_run: tuple[PairAgreement, ...] = ()
    if against is not None:
        other_store, other_run = against
        others = {r.case_id: r for r in other_store.case_results(other_run) if r.ok}
        cross_run = tuple(compare_results(store, r, other_store, others[r.case_id],
                                          kind="cross-run", deterministic=deterministic,
                                          measures_used=used)
                          for r in ok if r.case_id in others)
    return AgreementMatrix(run.run_id, reference, repeat_entries, cross_backend, cross_device,
                           cross_scale, cross_run, skipped, cross_strategy, cross_container)
