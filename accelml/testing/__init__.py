"""Reproducibility checks for your own test suite.

``assert_equivalent(a, b, rtol=..., atol=...)`` checks that two answers agree (arrays,
numbers, dicts or lists of them; cluster labels up to renaming with ``labels="clusters"``).
``assert_reproducible(estimator, X, y)`` fits a scikit-learn-style estimator (an
``accelml.Estimator`` or any other) several times from a fresh clone and checks that every
fit gives the same predictions (bitwise by default). It also takes a stored ``CaseResult``
and checks that the case's repeats were identical. Both raise ``AssertionError`` with a
message that says what differed and by how much.

The pytest plugin (``pytest -p accelml.testing.plugin``, or ``pytest_plugins =
["accelml.testing.plugin"]`` in a conftest) adds the fixtures ``assert_reproducible``,
``assert_equivalent`` and ``accelml_deterministic``.

>>> import numpy as np
>>> assert_equivalent(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]), rtol=1e-9)
>>> assert_equivalent({"labels": [0, 0, 1]}, {"labels": [1, 1, 0]}, labels="clusters")
>>> from sklearn.cluster import KMeans
>>> from sklearn.datasets import make_blobs
>>> X, _ = make_blobs(200, centers=3, random_state=0)
>>> assert_reproducible(KMeans(3, n_init=1, random_state=0), X)
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from accelml.agreement.arrays import compare_arrays, value_differences
from accelml.cases import Case
from accelml.results.records import CaseResult
from accelml.runner.process import CaseInput
from accelml.runner.run_case import run_case

__all__ = ["assert_equivalent", "assert_reproducible"]

_METHODS = ("predict", "predict_proba", "decision_function", "transform")
_ALWAYS_RANDOM = ("kmeans", "random_forest_classifier", "random_forest_regressor")
"""Algorithms whose every fit draws random numbers (initialisation, bootstrap)."""


def _describe_difference(path: str, a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> str:
    diff = value_differences(a, b)
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    close = np.isclose(b64, a64, rtol=rtol, atol=atol, equal_nan=True)
    worst = np.unravel_index(int(np.argmax(np.where(close, -1.0, np.abs(a64 - b64)))), a64.shape) \
        if a64.ndim else ()
    return (f"{path}: {int((~close).sum())} of {close.size} values differ beyond "
            f"rtol={rtol:g}, atol={atol:g}; max |diff| {diff['max_abs_diff']:.3g}, "
            f"max relative {diff['max_rel_diff']:.3g}"
            + (f", worst at index {tuple(int(i) for i in worst)}: {float(a64[worst])!r} vs "
               f"{float(b64[worst])!r}"
               if a64.ndim else ""))


def _compare(path: str, a: Any, b: Any, rtol: float, atol: float, labels: str | None,
             min_agreement: float, problems: list[str]) -> None:
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
            problems.append(f"{path}: a {type(a).__name__} vs a {type(b).__name__}")
            return
        if set(a) != set(b):
            problems.append(f"{path}: keys differ: only in first {sorted(set(a) - set(b))}, "
                            f"only in second {sorted(set(b) - set(a))}")
        for key in sorted(set(a) & set(b), key=str):
            _compare(f"{path}[{key!r}]", a[key], b[key], rtol, atol, labels, min_agreement,
                     problems)
        return
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)) or a is None or b is None:
        if a != b:
            problems.append(f"{path}: {a!r} != {b!r}")
        return
    if isinstance(a, (float, int, np.number)) and isinstance(b, (float, int, np.number)):
        a, b = np.asarray(a), np.asarray(b)
    array_a: np.ndarray | None
    array_b: np.ndarray | None
    try:
        array_a, array_b = np.asarray(a), np.asarray(b)
    except ValueError:
        array_a = array_b = None
    if array_a is None or array_b is None or array_a.dtype == object or array_b.dtype == object:
        if isinstance(a, Sequence) and isinstance(b, Sequence) and len(a) == len(b):
            for index, (item_a, item_b) in enumerate(zip(a, b, strict=True)):
                _compare(f"{path}[{index}]", item_a, item_b, rtol, atol, labels, min_agreement,
                         problems)
        elif a != b:
            problems.append(f"{path}: {a!r} != {b!r}")
        return
    if array_a.shape != array_b.shape:
        problems.append(f"{path}: shape {array_a.shape} vs {array_b.shape}")
        return
    if labels is not None or array_a.dtype.kind in "bUS" or array_b.dtype.kind in "bUS":
        task = "clustering" if labels == "clusters" else "classification"
        measure = compare_arrays("labels", array_a, array_b, task=task)
        agreement = measure.label_agreement if measure.label_agreement is not None else 0.0
        if agreement < min_agreement:
            problems.append(f"{path}: label agreement {agreement:.6g} < {min_agreement:g} "
                            f"({int(round((1 - agreement) * array_a.size))} of {array_a.size} "
                            "labels differ" + (" after matching cluster ids" if measure.matched else "")
                            + ")")
        return
    if rtol == 0 and atol == 0:
        if array_a.dtype != array_b.dtype or array_a.tobytes() != array_b.tobytes():
            if array_a.dtype != array_b.dtype:
                problems.append(f"{path}: dtype {array_a.dtype} vs {array_b.dtype}")
            else:
                problems.append(_describe_difference(path, array_a, array_b, 0.0, 0.0)
                                .replace("beyond rtol=0, atol=0", "(bitwise)"))
        return
    close = np.isclose(np.asarray(array_b, np.float64), np.asarray(array_a, np.float64),
                       rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        problems.append(_describe_difference(path, array_a, array_b, rtol, atol))


def assert_equivalent(a: Any, b: Any, *, rtol: float = 1e-7, atol: float = 0.0,
                      labels: str | None = None, min_agreement: float = 1.0,
                      err_msg: str = "") -> None:
    """Assert that ``b`` is equivalent to ``a`` (the reference).

    Numbers and float arrays: ``|b - a| <= atol + rtol * |a|`` elementwise (``rtol=atol=0``:
    bitwise equal, dtype included). Integer, string and boolean arrays are compared exactly;
    with ``labels="classes"`` or ``labels="clusters"`` they are labels, and at least
    ``min_agreement`` of them must agree (``clusters``: after the best one-to-one renaming
    of cluster ids). Dicts and lists are compared item by item; every difference is listed.

    >>> assert_equivalent([1, 2, 3], [1, 2, 4])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: not equivalent: value: 1 of 3 values differ beyond rtol=1e-07, atol=0; ...
    """
    if labels not in (None, "classes", "clusters"):
        raise ValueError(f"labels must be None, 'classes' or 'clusters', not {labels!r}")
    problems: list[str] = []
    _compare("value", a, b, float(rtol), float(atol), labels, float(min_agreement), problems)
    if problems:
        prefix = f"{err_msg}: " if err_msg else ""
        raise AssertionError(prefix + "not equivalent: " + "; ".join(problems))


def _outputs(estimator: Any, X_eval: Any, methods: Sequence[str] | None) -> dict[str, np.ndarray]:
    wanted = methods or [m for m in _METHODS if hasattr(estimator, m)]
    outputs = {}
    for method in wanted:
        function = getattr(estimator, method, None)
        if function is None:
            if methods:
                raise AssertionError(f"{type(estimator).__name__} has no method {method!r}")
            continue
        try:
            outputs[method] = np.asarray(function(X_eval))
        except (AttributeError, NotImplementedError):
            if methods:
                raise
    if not outputs and hasattr(estimator, "labels_"):
        outputs["labels_"] = np.asarray(estimator.labels_)
    return outputs


def _random_state_unset(estimator: Any) -> bool:
    try:
        params = estimator.get_params(deep=True)
    except AttributeError:
        return False
    return any(key.endswith("random_state") and value is None for key, value in params.items())


def _assert_case_reproducible(case: Case, runs: int, require_seed: bool) -> None:
    """Run a spec case ``runs`` times through the runner (in this process) and compare."""
    if require_seed and case.algorithm in _ALWAYS_RANDOM and case.params_dict.get("random_state") is None:
        raise AssertionError(f"case {case.label} leaves random_state unset: every run draws a "
                             "new seed; set it in params (or require_seed=False)")
    outputs = []
    with tempfile.TemporaryDirectory(prefix="accelml-reproducible-") as scratch:
        for index in range(runs):
            result = run_case(CaseInput(
                case=case, run_id="assert-reproducible", arrays_dir=f"{scratch}/{index}",
                threads=case.threads, time_limit_s=case.time_limit_s, spawned_at=time.time())).result
            if not result.ok:
                raise AssertionError(f"case {case.label} failed: {result.reason}")
            if len(result.repeat_prediction_digests) >= 2:
                assert_reproducible(result)
            outputs.append(tuple((ref.name, ref.digest) for ref in result.predictions))
    changed = sorted({name for output in outputs[1:] for (name, digest) in output
                      if (name, digest) not in outputs[0]})
    if changed:
        raise AssertionError(f"case {case.label} is not reproducible: {', '.join(changed)} "
                             f"differ between {runs} runs")


def assert_reproducible(estimator_or_result: Any, X: Any = None, y: Any = None, *,
                        X_eval: Any = None, repeats: int = 2, methods: Sequence[str] | None = None,
                        rtol: float = 0.0, atol: float = 0.0, require_seed: bool = True) -> None:
    """Assert that an estimator gives the same answer on every fit (bitwise by default).

    ``estimator_or_result`` is one of:

    * a scikit-learn-style estimator: cloned and fitted ``repeats`` times on ``X, y``; the
      outputs of ``methods`` on ``X_eval`` (default ``X``; default methods: every one of
      predict / predict_proba / decision_function / transform it has) are compared with
      the first fit's;
    * a spec case (:class:`accelml.cases.Case`): run ``repeats`` times through the
      runner in this process; every run's stored arrays (predictions, probabilities) and
      every run's own repeats must be bitwise identical;
    * a stored :class:`accelml.results.CaseResult`: its repeats' prediction digests must
      all be equal.

    With ``require_seed`` an estimator or case whose ``random_state`` is unset fails at
    once: it cannot be expected to repeat itself.
    """
    if isinstance(estimator_or_result, Case):
        _assert_case_reproducible(estimator_or_result, repeats, require_seed)
        return
    if isinstance(estimator_or_result, CaseResult):
        result = estimator_or_result
        if not result.ok:
            raise AssertionError(f"case {result.case_id} failed: {result.reason}")
        digests = result.repeat_prediction_digests
        if len(digests) < 2:
            raise AssertionError(f"case {result.case_id} has {len(digests)} repeat digest(s); "
                                 "at least 2 are needed to judge reproducibility")
        distinct = sorted(set(digests))
        if len(distinct) > 1:
            raise AssertionError(
                f"case {result.case_id} ({result.algorithm}/{result.backend}/{result.device}): "
                f"{len(distinct)} different predictions over {len(digests)} repeats")
        return
    if X is None:
        raise TypeError("assert_reproducible(estimator, X, y) needs the training data X")
    if repeats < 2:
        raise ValueError("repeats must be >= 2")
    from sklearn.base import clone

    estimator = estimator_or_result
    if require_seed and _random_state_unset(estimator):
        raise AssertionError(f"{type(estimator).__name__} has random_state=None: every fit draws "
                             "a new seed; pass random_state=<int> (or require_seed=False)")
    X_eval = X if X_eval is None else X_eval
    reference: dict[str, np.ndarray] | None = None
    for attempt in range(repeats):
        fitted = clone(estimator)
        fitted.fit(X) if y is None else fitted.fit(X, y)
        outputs = _outputs(fitted, X_eval, methods)
        if reference is None:
            if not outputs:
                raise AssertionError(f"{type(estimator).__name__} has no output to compare")
            reference = outputs
            continue
        try:
            assert_equivalent(reference, outputs, rtol=rtol, atol=atol)
        except AssertionError as error:
            raise AssertionError(f"{type(estimator).__name__} is not reproducible: fit "
                                 f"{attempt + 1} of {repeats} differs from fit 1: "
                                 + str(error).replace("not equivalent: ", "")) from None
