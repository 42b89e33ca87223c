"""Do two results give the same answer? Agreement measures and the agreement matrix of a run.

Everything here is computed from what the results store keeps: scores, the prediction arrays
(content-addressed beside the database) and the per-repeat prediction digests. Any two
results can be compared, from one run or two runs, also from different machines (open both
stores).

Measures (:func:`compare_arrays`, :func:`compare_results`):

* bitwise identity (dtype, shape and bytes);
* label agreement: the fraction of equal labels; for clustering, after matching cluster ids
  one-to-one with the Hungarian method (``scipy.optimize.linear_sum_assignment``), so a
  relabelled but equal clustering agrees fully;
* max and mean |diff|, absolute and relative, of continuous outputs (probabilities, decision
  values, regression outputs, transforms); cluster centres and k-means distance columns are
  matched up to permutation first, PCA components/transforms up to the sign of each component;
* score difference (``b - a``) of every score both results have;
* deep learning: final loss / accuracy difference, and whether all ranks ended with the same weights.

The matrix (:func:`agreement_matrix`) has four parts: run-to-run (the repeats of each case:
the runner keeps the digest of every repeat's predictions), cross-backend (each backend
against the reference backend), cross-device (CPU against CUDA) and cross-scale (1 worker
against N). Each entry carries :func:`accelml.expectations.pair_expectation`: whether
bitwise identity is expected there and why not, so a surprise is flagged (``unexpected``).

>>> import numpy as np
>>> a = np.array([0, 0, 1, 1, 2]); b = np.array([2, 2, 0, 0, 1])      # same clusters, renamed
>>> compare_arrays("predictions", a, b, task="clustering").label_agreement
1.0
>>> compare_arrays("predictions", a, b, task="classification").label_agreement
0.0
>>> m = compare_arrays("probabilities", np.array([0.5, 0.25]), np.array([0.5, 0.2]))
>>> m.identical, round(m.max_abs_diff, 2), round(m.max_rel_diff, 2)
(False, 0.05, 0.2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from accelml.results.records import CaseResult
from accelml.results.store import ResultsStore
from accelml.cases import Expectation
from accelml.expectations import pair_expectation, run_to_run_expectation

KINDS = ("run-to-run", "cross-backend", "cross-device", "cross-scale", "cross-run")

LABEL_ARRAYS = ("predictions", "labels", "labels_", "cluster_labels")
"""Array names that hold labels for classification and clustering (compared by agreement)."""

CENTRE_ARRAYS = ("cluster_centers", "cluster_centers_", "centers", "centres")
"""Array names that hold one row per cluster (matched up to permutation)."""


# ---------------------------------------------------------------- records of one comparison


@dataclass(frozen=True)
class ArrayAgreement:
    """How one output array of result ``b`` compares with the same array of result ``a``.

    ``kind`` is ``labels`` (label agreement), ``values`` (differences), ``shape`` (the
    shapes differ: nothing else is measured) or ``missing`` (one side lacks the array).
    ``matched`` says what was matched before measuring: ``hungarian`` (cluster ids or
    centres), ``sign`` (PCA component signs) or empty.
    """

    name: str
    kind: str
    identical: bool
    size: int = 0
    label_agreement: float | None = None
    max_abs_diff: float | None = None
    mean_abs_diff: float | None = None
    max_rel_diff: float | None = None
    mean_rel_diff: float | None = None
    matched: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


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

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "a": self.a, "b": self.b, "difference": self.difference,
                "relative": self.relative}


@dataclass(frozen=True)
class DLAgreement:
    """Deep-learning outcome of two results: final loss/accuracy and the ranks' weights."""

    final_loss_a: float | None
    final_loss_b: float | None
    final_accuracy_a: float | None
    final_accuracy_b: float | None
    ranks_identical_a: bool | None
    ranks_identical_b: bool | None
    weights_identical: bool | None      # rank 0's final weights equal in a and b

    @property
    def loss_difference(self) -> float | None:
        return _difference(self.final_loss_a, self.final_loss_b)

    @property
    def accuracy_difference(self) -> float | None:
        return _difference(self.final_accuracy_a, self.final_accuracy_b)

    def to_dict(self) -> dict[str, Any]:
        data = {key: getattr(self, key) for key in self.__dataclass_fields__}
        data.update(loss_difference=self.loss_difference,
                    accuracy_difference=self.accuracy_difference)
        return data


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


@dataclass(frozen=True)
class CaseRef:
    """Which result: its run, case id and a readable label."""

    run_id: str
    case_id: str
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "case_id": self.case_id, "label": self.label}


@dataclass(frozen=True)
class Agreement:
    """Every measure between two results ``a`` (the reference) and ``b``."""

    kind: str
    a: CaseRef
    b: CaseRef
    arrays: tuple[ArrayAgreement, ...]
    scores: tuple[ScoreDifference, ...]
    dl: DLAgreement | None
    expectation: Expectation

    @property
    def bitwise_identical(self) -> bool | None:
        """All shared arrays (and DL final weights) identical; None when nothing could be compared."""
        checks = [m.identical for m in self.arrays if m.kind != "missing"]
        if self.dl is not None and self.dl.weights_identical is not None:
            checks.append(self.dl.weights_identical)
        return all(checks) if checks else None

    @property
    def label_agreement(self) -> float | None:
        values = [m.label_agreement for m in self.arrays if m.label_agreement is not None]
        return min(values) if values else None

    @property
    def max_abs_diff(self) -> float | None:
        values = [m.max_abs_diff for m in self.arrays if m.max_abs_diff is not None]
        return max(values) if values else None

    @property
    def max_rel_diff(self) -> float | None:
        values = [m.max_rel_diff for m in self.arrays if m.max_rel_diff is not None]
        return max(values) if values else None

    @property
    def score_difference(self) -> ScoreDifference | None:
        """The first (primary) score both results have."""
        return self.scores[0] if self.scores else None

    @property
    def unexpected(self) -> bool:
        """Identity was expected here and not found."""
        return self.expectation.bitwise and self.bitwise_identical is False

    def array(self, name: str) -> ArrayAgreement | None:
        for measure in self.arrays:
            if measure.name == name:
                return measure
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "a": self.a.to_dict(), "b": self.b.to_dict(),
            "bitwise_identical": self.bitwise_identical, "label_agreement": self.label_agreement,
            "max_abs_diff": self.max_abs_diff, "max_rel_diff": self.max_rel_diff,
            "arrays": [m.to_dict() for m in self.arrays],
            "scores": [s.to_dict() for s in self.scores],
            "dl": None if self.dl is None else self.dl.to_dict(),
            "expectation": self.expectation.to_dict(), "unexpected": self.unexpected,
        }


@dataclass(frozen=True)
class RunToRun:
    """The counted repeats of one case: were their predictions bitwise identical?"""

    case: CaseRef
    repeats: int
    distinct: int                         # distinct prediction digests among the repeats
    ranks_identical: bool | None          # DL: every rank ended with the same weights
    expectation: Expectation

    @property
    def identical(self) -> bool | None:
        return None if self.repeats < 2 else self.distinct == 1

    @property
    def unexpected(self) -> bool:
        return (self.expectation.bitwise and self.identical is False) or self.ranks_identical is False

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "run-to-run", "case": self.case.to_dict(), "repeats": self.repeats,
                "distinct": self.distinct, "identical": self.identical,
                "ranks_identical": self.ranks_identical,
                "expectation": self.expectation.to_dict(), "unexpected": self.unexpected}


# ---------------------------------------------------------------- array measures


def _is_label_array(name: str, array: np.ndarray, task: str) -> bool:
    if array.dtype.kind in "iubUSO":
        return True
    return task in ("classification", "clustering") and name in LABEL_ARRAYS


def _hungarian(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from scipy.optimize import linear_sum_assignment

    return linear_sum_assignment(cost)


def match_labels(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b`` with its cluster ids renamed to the ids of ``a`` they overlap most (one-to-one).

    Ids of ``b`` left without a partner (more clusters in ``b``) keep a fresh id that is
    not in ``a``, so they count as disagreeing.

    >>> match_labels(np.array([0, 0, 1, 1]), np.array([5, 5, 7, 7])).tolist()
    [0, 0, 1, 1]
    """
    ids_a, inverse_a = np.unique(a, return_inverse=True)
    ids_b, inverse_b = np.unique(b, return_inverse=True)
    contingency = np.zeros((len(ids_a), len(ids_b)), dtype=np.int64)
    np.add.at(contingency, (inverse_a.ravel(), inverse_b.ravel()), 1)
    rows, cols = _hungarian(-contingency)
    mapping = np.arange(len(ids_a), len(ids_a) + len(ids_b))      # unmatched -> fresh index
    mapping[cols] = rows
    renamed_index = mapping[inverse_b.ravel()]
    matched = renamed_index < len(ids_a)
    if matched.all():
        return ids_a[renamed_index].reshape(b.shape)
    result = np.empty(renamed_index.shape, dtype=object)   # None never equals a label of a
    result[matched] = ids_a[renamed_index[matched]]
    return result.reshape(b.shape)


def match_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rows of ``b`` reordered to the rows of ``a`` they are closest to (one-to-one).

    >>> match_rows(np.array([[0.0, 0.0], [5.0, 5.0]]), np.array([[5.1, 5.0], [0.0, 0.1]])).tolist()
    [[0.0, 0.1], [5.1, 5.0]]
    """
    a2 = a.reshape(len(a), -1).astype(np.float64)
    b2 = b.reshape(len(b), -1).astype(np.float64)
    cost = np.sqrt(((a2[:, None, :] - b2[None, :, :]) ** 2).sum(axis=2))
    rows, cols = _hungarian(cost)
    order = np.empty(len(a), dtype=np.int64)
    order[rows] = cols
    return b[order]


def match_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The columns of ``b`` reordered to the columns of ``a`` they are closest to."""
    return match_rows(a.T, b.T).T


def align_signs(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    """``b`` with each component (column for ``axis=0`` sums, i.e. per column) flipped to
    point the way of ``a``'s (PCA components are defined up to sign).

    >>> align_signs(np.array([[1.0, 2.0]]), np.array([[-1.0, 2.0]]), axis=0).tolist()
    [[1.0, 2.0]]
    """
    dots = (a.astype(np.float64) * b.astype(np.float64)).sum(axis=axis, keepdims=True)
    return b * np.where(dots < 0, -1, 1).astype(b.dtype)


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def value_differences(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Max and mean |a - b|, absolute and relative to max(|a|, |b|) elementwise.

    NaN in the same place counts as equal; NaN against a number is an infinite difference.

    >>> value_differences(np.array([1.0, 2.0]), np.array([1.0, 2.5]))["max_rel_diff"]
    0.2
    """
    a64 = np.asarray(a, dtype=np.float64).ravel()
    b64 = np.asarray(b, dtype=np.float64).ravel()
    if a64.size == 0:
        return {"max_abs_diff": 0.0, "mean_abs_diff": 0.0, "max_rel_diff": 0.0, "mean_rel_diff": 0.0}
    both_nan = np.isnan(a64) & np.isnan(b64)
    with np.errstate(invalid="ignore", over="ignore"):
        absolute = np.abs(a64 - b64)
    absolute[both_nan] = 0.0
    same_inf = np.isinf(a64) & (a64 == b64)
    absolute[same_inf] = 0.0
    absolute[np.isnan(absolute)] = np.inf
    scale = np.maximum(np.abs(a64), np.abs(b64))
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = np.where(absolute == 0, 0.0, absolute / scale)
    relative[np.isnan(relative)] = np.inf
    return {"max_abs_diff": float(absolute.max()), "mean_abs_diff": float(absolute.mean()),
            "max_rel_diff": float(relative.max()), "mean_rel_diff": float(relative.mean())}


def compare_arrays(name: str, a: np.ndarray | None, b: np.ndarray | None, *,
                   task: str = "") -> ArrayAgreement:
    """Measure array ``b`` against array ``a`` (the reference) of one output called ``name``.

    ``task`` (``classification``, ``regression``, ``clustering``, ``decomposition``) decides
    what may be matched first: cluster ids and centres up to permutation, PCA outputs up to sign.
    """
    if a is None or b is None:
        side = "first" if a is None else "second"
        return ArrayAgreement(name, "missing", False, note=f"the {side} result has no {name!r}")
    a, b = np.asarray(a), np.asarray(b)
    identical = _bitwise_equal(a, b)
    if a.shape != b.shape:
        return ArrayAgreement(name, "shape", False, int(a.size),
                              note=f"shape {a.shape} vs {b.shape}")
    if _is_label_array(name, a, task) or _is_label_array(name, b, task):
        matched = ""
        candidate = b
        if task == "clustering" and not identical and a.size:
            candidate, matched = match_labels(a, b), "hungarian"
        agreement = float(np.mean(a.ravel() == candidate.ravel())) if a.size else 1.0
        return ArrayAgreement(name, "labels", identical, int(a.size),
                              label_agreement=1.0 if identical else agreement, matched=matched)
    matched = ""
    candidate = b
    if not identical and a.size and a.ndim == 2:
        if task == "clustering" and name in CENTRE_ARRAYS:
            candidate, matched = match_rows(a, b), "hungarian"
        elif task == "clustering" and name == "transform":
            candidate, matched = match_columns(a, b), "hungarian"
        elif task == "decomposition" and name in ("transform", "fit_transform", "predictions"):
            candidate, matched = align_signs(a, b, axis=0), "sign"
        elif task == "decomposition" and name in ("components", "components_"):
            candidate, matched = align_signs(a, b, axis=1), "sign"
    differences = value_differences(a, candidate)
    return ArrayAgreement(name, "values", identical, int(a.size), matched=matched, **differences)


# ---------------------------------------------------------------- two results


def case_label(result: CaseResult) -> str:
    """A readable name: ``algorithm/backend/device[ xN] on dataset (params)``."""
    extra = ", ".join(f"{key}={value}" for key, value in result.params)
    workers = f" x{result.workers}" if result.workers != 1 else ""
    strategy = f" [{result.strategy}]" if result.strategy and result.strategy != "single" else ""
    return (f"{result.algorithm}/{result.backend}/{result.device}{workers}{strategy} "
            f"on {result.dataset}" + (f" ({extra})" if extra else ""))


def case_ref(result: CaseResult) -> CaseRef:
    return CaseRef(result.run_id, result.case_id, case_label(result))


def _task(result: CaseResult) -> str:
    """What the outputs are: the algorithm's task (PCA on a labelled data set is still a
    decomposition), else the stored task (deep-learning models)."""
    from accelml.estimators._algorithms import ALGORITHMS

    found = ALGORITHMS.get(result.algorithm)
    if found is not None:
        return found.task
    if result.task:
        return result.task
    return "" if result.dataset_info is None else result.dataset_info.task


def _read(store: ResultsStore, result: CaseResult, name: str) -> np.ndarray | None:
    ref = result.prediction(name)
    if ref is None or not store.has_array(ref.digest):
        return None
    return store.read_array(ref.digest)


def compare_results(store_a: ResultsStore, a: CaseResult, store_b: ResultsStore | None = None,
                    b: CaseResult | None = None, *, kind: str = "cross-run",
                    deterministic: bool = True) -> Agreement:
    """Every measure between result ``a`` (reference) and result ``b``.

    The results may come from two stores (two machines): pass ``store_b``; otherwise both
    are read from ``store_a``. Arrays whose digests are equal are identical without reading them.
    """
    if b is None:
        raise TypeError("compare_results needs two results")
    store_b = store_a if store_b is None else store_b
    task = _task(a)
    names_a = [ref.name for ref in a.predictions]
    names = names_a + [ref.name for ref in b.predictions if ref.name not in names_a]
    measures = []
    for name in names:
        ref_a, ref_b = a.prediction(name), b.prediction(name)
        if ref_a is not None and ref_b is not None and ref_a.digest == ref_b.digest:
            size = int(np.prod(ref_a.shape)) if ref_a.shape else 1
            is_labels = np.dtype(ref_a.dtype).kind in "iubUSO" or (
                task in ("classification", "clustering") and name in LABEL_ARRAYS)
            measures.append(ArrayAgreement(
                name, "labels" if is_labels else "values", True, size,
                label_agreement=1.0 if is_labels else None,
                **({} if is_labels else {"max_abs_diff": 0.0, "mean_abs_diff": 0.0,
                                          "max_rel_diff": 0.0, "mean_rel_diff": 0.0})))
            continue
        array_a = None if ref_a is None else _read(store_a, a, name)
        array_b = None if ref_b is None else _read(store_b, b, name)
        measure = compare_arrays(name, array_a, array_b, task=task)
        if ref_a is not None and ref_b is not None and (array_a is None or array_b is None):
            measure = ArrayAgreement(name, "missing", False,
                                     note=f"array {name!r} is not in the store (digest known only)")
        measures.append(measure)
    scores_b = {score.name: score.value for score in b.scores}
    scores = tuple(ScoreDifference(score.name, score.value, scores_b[score.name])
                   for score in a.scores if score.name in scores_b)
    dl = None
    if a.dl is not None or b.dl is not None:
        digests_a = a.dl.rank_weight_digests if a.dl else ()
        digests_b = b.dl.rank_weight_digests if b.dl else ()
        dl = DLAgreement(
            final_loss_a=a.dl.final_loss if a.dl else None,
            final_loss_b=b.dl.final_loss if b.dl else None,
            final_accuracy_a=a.dl.final_accuracy if a.dl else None,
            final_accuracy_b=b.dl.final_accuracy if b.dl else None,
            ranks_identical_a=a.dl.ranks_identical if a.dl else None,
            ranks_identical_b=b.dl.ranks_identical if b.dl else None,
            weights_identical=(digests_a[0] == digests_b[0]) if digests_a and digests_b else None,
        )
    return Agreement(kind, case_ref(a), case_ref(b), tuple(measures), scores, dl,
                     pair_expectation(a, b, deterministic))


def run_to_run(result: CaseResult, deterministic: bool = True) -> RunToRun:
    """Whether the counted repeats of one case produced bitwise identical predictions."""
    digests = result.repeat_prediction_digests
    return RunToRun(case_ref(result), len(digests), len(set(digests)),
                    None if result.dl is None else result.dl.ranks_identical,
                    run_to_run_expectation(result, deterministic))


# ---------------------------------------------------------------- the matrix of a run


def _identity(result: CaseResult, leave_out: Iterable[str]) -> tuple:
    fields = {"algorithm": result.algorithm, "backend": result.backend, "device": result.device,
              "workers": result.workers, "strategy": result.strategy or "single",
              "dataset": result.dataset, "params": tuple(sorted(result.params))}
    for name in leave_out:
        fields.pop(name)
    return tuple(sorted(fields.items()))


def _first_reference(other: CaseResult, references: list[CaseResult]) -> CaseResult:
    return references[0]


def _same_strategy_reference(other: CaseResult, references: list[CaseResult]) -> CaseResult:
    """The 1-worker case of ``other``'s own strategy, else the ``single`` one, else the first."""
    for wanted in (other.strategy or "single", "single"):
        for reference in references:
            if (reference.strategy or "single") == wanted:
                return reference
    return references[0]


def _pairs(results: list[CaseResult], leave_out: tuple[str, ...], is_reference,
           pick_reference=_first_reference) -> list[tuple[CaseResult, CaseResult]]:
    groups: dict[tuple, list[CaseResult]] = {}
    for result in results:
        groups.setdefault(_identity(result, leave_out), []).append(result)
    pairs = []
    for members in groups.values():
        references = [m for m in members if is_reference(m)]
        if not references:
            continue
        pairs.extend((pick_reference(other, references), other) for other in members
                     if not is_reference(other))
    return pairs


@dataclass(frozen=True)
class AgreementMatrix:
    """The agreement of one run: run-to-run, cross-backend, cross-device and cross-scale.

    ``skipped`` names results that could not take part (failed cases) and why.
    """

    run_id: str
    reference: str | None
    run_to_run: tuple[RunToRun, ...]
    cross_backend: tuple[Agreement, ...]
    cross_device: tuple[Agreement, ...]
    cross_scale: tuple[Agreement, ...]
    cross_run: tuple[Agreement, ...] = ()
    skipped: tuple[tuple[str, str], ...] = field(default=())

    @property
    def comparisons(self) -> tuple[Agreement, ...]:
        return self.cross_backend + self.cross_device + self.cross_scale + self.cross_run

    @property
    def unexpected(self) -> tuple[RunToRun | Agreement, ...]:
        """Entries where bitwise identity was expected and not found (or ranks disagreed)."""
        return tuple(e for e in self.run_to_run + self.comparisons if e.unexpected)

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per entry (for tables): kind, cases, identity, agreement, |diff|, score Δ."""
        rows = []
        for entry in self.run_to_run:
            rows.append({
                "kind": "run-to-run", "reference": entry.case.label, "other": "",
                "identical": entry.identical, "repeats": entry.repeats,
                "label_agreement": None, "max_abs_diff": None, "max_rel_diff": None,
                "score": None, "score_difference": None,
                "loss_difference": None, "accuracy_difference": None,
                "ranks_identical": entry.ranks_identical,
                "expected_identical": entry.expectation.bitwise,
                "why": entry.expectation.reason, "unexpected": entry.unexpected,
            })
        for entry in self.comparisons:
            score = entry.score_difference
            rows.append({
                "kind": entry.kind, "reference": entry.a.label, "other": entry.b.label,
                "identical": entry.bitwise_identical, "repeats": None,
                "label_agreement": entry.label_agreement, "max_abs_diff": entry.max_abs_diff,
                "max_rel_diff": entry.max_rel_diff,
                "score": None if score is None else score.name,
                "score_difference": None if score is None else score.difference,
                "loss_difference": None if entry.dl is None else entry.dl.loss_difference,
                "accuracy_difference": None if entry.dl is None else entry.dl.accuracy_difference,
                "ranks_identical": None if entry.dl is None else entry.dl.ranks_identical_b,
                "expected_identical": entry.expectation.bitwise,
                "why": entry.expectation.reason, "unexpected": entry.unexpected,
            })
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "reference": self.reference,
            "run_to_run": [e.to_dict() for e in self.run_to_run],
            "cross_backend": [e.to_dict() for e in self.cross_backend],
            "cross_device": [e.to_dict() for e in self.cross_device],
            "cross_scale": [e.to_dict() for e in self.cross_scale],
            "cross_run": [e.to_dict() for e in self.cross_run],
            "skipped": [list(item) for item in self.skipped],
        }

    def format(self, width: int = 48) -> str:
        """A plain-text table (the terminal report and ``check`` print it)."""
        return format_rows(self.rows(), width)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if value == 0:
            return "0"
        return f"{value:.4g}"
    return str(value)


def format_rows(rows: list[dict[str, Any]], width: int = 48) -> str:
    """Rows of :meth:`AgreementMatrix.rows` as an aligned text table."""
    if not rows:
        return "(no agreement to show)"
    columns = (("kind", "comparison"), ("reference", "reference"), ("other", "other"),
               ("identical", "bitwise"), ("label_agreement", "labels"),
               ("max_abs_diff", "max|d|"), ("max_rel_diff", "max rel"),
               ("score_difference", "score d"), ("loss_difference", "loss d"),
               ("expected_identical", "expected"))
    table = [[title for _, title in columns]]
    for row in rows:
        cells = []
        for key, _ in columns:
            text = _fmt(row.get(key))
            if key == "identical" and row.get("kind") == "run-to-run" and row.get("repeats"):
                text += f" ({row['repeats']}x)"
            if key == "expected_identical" and row.get("unexpected"):
                text += " !"
            cells.append(text if len(text) <= width else text[: width - 1] + "~")
        table.append(cells)
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip()
             for line in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    reasons = []
    for row in rows:
        if not row.get("expected_identical") and row.get("why") and row["why"] not in reasons:
            reasons.append(row["why"])
    if reasons:
        lines.append("not expected to be bitwise identical:")
        lines.extend(f"  - {reason}" for reason in reasons)
    for row in rows:
        if row.get("unexpected"):
            other = f" vs {row['other']}" if row.get("other") else ""
            lines.append(f"! {row['kind']}: {row['reference']}{other}: identity was expected "
                         f"({row['why']})")
    return "\n".join(lines)


def agreement_matrix(store: ResultsStore, run_id: str, reference: str | None = None, *,
                     against: tuple[ResultsStore, str] | None = None,
                     deterministic: bool = True) -> AgreementMatrix:
    """The agreement matrix of run ``run_id``.

    ``reference`` is the reference backend (default: the run's own). ``against`` adds a
    cross-run part: ``(other_store, other_run_id)``, each case compared with the case of
    the same id there (e.g. the same spec on another machine).

    The compare API calls ``agreement_matrix(store, run.run_id, reference=...)`` for
    ``res.agreement(...)``.
    """
    run = store.get_run(run_id)
    reference = reference or run.reference_backend
    results = store.case_results(run.run_id)
    ok = [r for r in results if r.ok]
    skipped = tuple((case_label(r), r.reason or r.status) for r in results if not r.ok)
    repeat_entries = tuple(run_to_run(r, deterministic) for r in ok)

    def comparisons(kind: str, leave_out: tuple[str, ...], is_reference,
                    pick_reference=_first_reference) -> tuple[Agreement, ...]:
        return tuple(compare_results(store, a, store, b, kind=kind, deterministic=deterministic)
                     for a, b in _pairs(ok, leave_out, is_reference, pick_reference))

    cross_backend = (comparisons("cross-backend", ("backend",), lambda r: r.backend == reference)
                     if reference else ())
    cross_device = comparisons("cross-device", ("device",), lambda r: r.device == "cpu")
    cross_scale = comparisons("cross-scale", ("workers", "strategy"), lambda r: r.workers == 1,
                              _same_strategy_reference)
    cross_run: tuple[Agreement, ...] = ()
    if against is not None:
        other_store, other_run = against
        others = {r.case_id: r for r in other_store.case_results(other_run) if r.ok}
        cross_run = tuple(compare_results(store, r, other_store, others[r.case_id],
                                          kind="cross-run", deterministic=deterministic)
                          for r in ok if r.case_id in others)
    return AgreementMatrix(run.run_id, reference, repeat_entries, cross_backend, cross_device,
                           cross_scale, cross_run, skipped)
