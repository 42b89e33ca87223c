"""How one output array of a result compares with the same array of another result.

This is what every agreement measure (:mod:`accelml.agreement.measures`) and the baseline check
(:mod:`accelml.agreement.baseline`) build on:

* bitwise identity (dtype, shape and bytes);
* label agreement: the fraction of equal labels; for clustering, after matching cluster ids
  one-to-one with the Hungarian method (``scipy.optimize.linear_sum_assignment``), so a
  relabelled but equal clustering agrees fully;
* max and mean |diff|, absolute and relative, of continuous outputs (probabilities, decision
  values, regression outputs, transforms); cluster centres and k-means distance columns are
  matched up to permutation first, PCA components/transforms up to the sign of each component.

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

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from accelml.cases import JSONScalar

LABEL_ARRAYS = ("predictions", "labels", "labels_", "cluster_labels")
"""Array names that hold labels for classification and clustering (compared by agreement)."""

CENTRE_ARRAYS = ("cluster_centers", "cluster_centers_", "centers", "centres")
"""Array names that hold one row per cluster (matched up to permutation)."""

LABEL_DTYPE_KINDS = "iubUSO"
"""Integer, boolean, string and object arrays always hold labels."""


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
    scale: float = 0.0     # the largest finite |value| of ``a`` (what a relative tolerance refers to)

    def to_dict(self) -> dict[str, JSONScalar]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


def identical_array(name: str, size: int, labels: bool) -> ArrayAgreement:
    """The agreement of two arrays known to be identical (equal digests) without reading them.

    >>> identical_array("predictions", 3, labels=True).label_agreement
    1.0
    """
    if labels:
        return ArrayAgreement(name, "labels", True, size, label_agreement=1.0)
    return ArrayAgreement(name, "values", True, size, max_abs_diff=0.0, mean_abs_diff=0.0,
                          max_rel_diff=0.0, mean_rel_diff=0.0)


def is_label_array(name: str, dtype: np.dtype[np.generic], task: str) -> bool:
    """Whether an array of this name and dtype holds labels for a result of ``task``.

    >>> is_label_array("predictions", np.dtype("float64"), "classification")
    True
    >>> is_label_array("probabilities", np.dtype("float64"), "classification")
    False
    """
    if dtype.kind in LABEL_DTYPE_KINDS:
        return True
    return task in ("classification", "clustering") and name in LABEL_ARRAYS


def _hungarian(cost: NDArray[np.float64] | NDArray[np.int64]
               ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost)
    return rows, cols


def match_labels(a: NDArray[np.generic], b: NDArray[np.generic]) -> NDArray[np.generic]:
    """``b`` with its cluster ids renamed to the ids of ``a`` they overlap most (one-to-one).

    Ids of ``b`` left without a partner (more clusters in ``b``) become None, which
    never equals a label of ``a``, so they count as disagreeing.

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
        renamed: NDArray[np.generic] = ids_a[renamed_index].reshape(b.shape)
        return renamed
    result = np.empty(renamed_index.shape, dtype=object)
    result[matched] = ids_a[renamed_index[matched]]
    return result.reshape(b.shape)


def match_rows(a: NDArray[np.generic], b: NDArray[np.generic]) -> NDArray[np.generic]:
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


def match_columns(a: NDArray[np.generic], b: NDArray[np.generic]) -> NDArray[np.generic]:
    """The columns of ``b`` reordered to the columns of ``a`` they are closest to.

    >>> match_columns(np.array([[0.0, 5.0]]), np.array([[5.0, 0.1]])).tolist()
    [[0.1, 5.0]]
    """
    return match_rows(a.T, b.T).T


def align_signs(a: NDArray[np.generic], b: NDArray[np.generic], axis: int
                ) -> NDArray[np.generic]:
    """``b`` with each component flipped to point the way of ``a``'s (PCA components are
    defined up to sign): ``axis=0`` for one component per column, ``axis=1`` per row.

    >>> align_signs(np.array([[1.0, 2.0]]), np.array([[-1.0, 2.0]]), axis=0).tolist()
    [[1.0, 2.0]]
    """
    dots = (a.astype(np.float64) * b.astype(np.float64)).sum(axis=axis, keepdims=True)
    flipped: NDArray[np.generic] = b * np.where(dots < 0, -1, 1).astype(b.dtype)
    return flipped


def bitwise_equal(a: NDArray[np.generic], b: NDArray[np.generic]) -> bool:
    """Same dtype, shape and bytes.

    >>> bitwise_equal(np.array([1.0]), np.array([1.0], dtype=np.float32))
    False
    """
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def value_differences(a: NDArray[np.generic], b: NDArray[np.generic]) -> dict[str, float]:
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


def largest_magnitude(a: NDArray[np.generic]) -> float:
    """The largest finite |value| of ``a`` (0 when it has none).

    >>> largest_magnitude(np.array([1.0, -3.0, np.inf, np.nan]))
    3.0
    """
    values = np.abs(np.asarray(a, dtype=np.float64).ravel())
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else 0.0


def matched_values(name: str, a: NDArray[np.generic], b: NDArray[np.generic], task: str
                   ) -> tuple[NDArray[np.generic], str]:
    """``b`` matched to ``a`` where the task allows it, and how: cluster centres and k-means
    distance columns up to permutation (``hungarian``), PCA outputs up to sign (``sign``).

    >>> matched_values("transform", np.array([[1.0], [2.0]]), np.array([[-1.0], [-2.0]]),
    ...                "decomposition")[1]
    'sign'
    """
    if a.size == 0 or a.ndim != 2 or bitwise_equal(a, b):
        return b, ""
    if task == "clustering" and name in CENTRE_ARRAYS:
        return match_rows(a, b), "hungarian"
    if task == "clustering" and name == "transform":
        return match_columns(a, b), "hungarian"
    if task == "decomposition" and name in ("transform", "fit_transform", "predictions"):
        return align_signs(a, b, axis=0), "sign"
    if task == "decomposition" and name in ("components", "components_"):
        return align_signs(a, b, axis=1), "sign"
    return b, ""


def compare_arrays(name: str, a: NDArray[np.generic] | None, b: NDArray[np.generic] | None, *,
                   task: str = "") -> ArrayAgreement:
    """Measure array ``b`` against array ``a`` (the reference) of one output called ``name``.

    ``task`` (``classification``, ``regression``, ``clustering``, ``decomposition``) decides
    what may be matched first: cluster ids and centres up to permutation, PCA outputs up to sign.
    """
    if a is None or b is None:
        side = "first" if a is None else "second"
        return ArrayAgreement(name, "missing", False, note=f"the {side} result has no {name!r}")
    a, b = np.asarray(a), np.asarray(b)
    identical = bitwise_equal(a, b)
    if a.shape != b.shape:
        return ArrayAgreement(name, "shape", False, int(a.size),
                              note=f"shape {a.shape} vs {b.shape}")
    if is_label_array(name, a.dtype, task) or is_label_array(name, b.dtype, task):
        matched = ""
        candidate = b
        if task == "clustering" and not identical and a.size:
            candidate, matched = match_labels(a, b), "hungarian"
        agreement = float(np.mean(a.ravel() == candidate.ravel())) if a.size else 1.0
        return ArrayAgreement(name, "labels", identical, int(a.size),
                              label_agreement=1.0 if identical else agreement, matched=matched)
    candidate, matched = matched_values(name, a, b, task)
    differences = value_differences(a, candidate)
    return ArrayAgreement(name, "values", identical, int(a.size), scale=largest_magnitude(a),
                          max_abs_diff=differences["max_abs_diff"],
                          mean_abs_diff=differences["mean_abs_diff"],
                          max_rel_diff=differences["max_rel_diff"],
                          mean_rel_diff=differences["mean_rel_diff"], matched=matched)
