"""Should two results be bitwise identical, and why (not)? One answer for every pair.

:func:`run_to_run_expectation` answers for two runs of one case, :func:`pair_expectation`
for any two results. The agreement matrix (:mod:`accelml.report.repro`) prints the answer
beside every measure, so a reader can tell a bug (identity expected, not found) from a
property of the backends; the runner's deterministic mode (:mod:`accelml.runner.determinism`)
is what makes identity possible.

>>> from types import SimpleNamespace
>>> case = SimpleNamespace(algorithm="kmeans", backend="sklearn", device="cpu", workers=1,
...                        strategy=None, params=(("n_clusters", 3),), seed=7, threads=2)
>>> run_to_run_expectation(case).bitwise
True
>>> other = SimpleNamespace(**{**vars(case), "backend": "sklearnex"})
>>> pair_expectation(case, other).bitwise
False
"""

from __future__ import annotations

from accelml.cases import CaseLike, Expectation
from accelml.dl.strategies import find_strategy
from accelml.estimators._algorithms import ALGORITHMS


def is_deep_learning(case: CaseLike) -> bool:
    return case.backend == "keras"


def algorithm_params(algorithm: str) -> tuple[str, ...]:
    """The accelml parameter names of ``algorithm`` (none for an unknown one)."""
    found = ALGORITHMS.get(algorithm)
    return () if found is None else found.param_names


_RANDOMISED = {
    "kmeans": "k-means++ / random initialisation",
    "random_forest_classifier": "bootstrap rows and feature sampling",
    "random_forest_regressor": "bootstrap rows and feature sampling",
    "pca": "the randomized SVD solver",
    "svc": "probability calibration / shuffling",
    "logistic_regression": "the sag/saga/liblinear shuffling",
    "ridge": "the sag/saga shuffling",
}


def run_to_run_expectation(case: CaseLike, deterministic: bool = True) -> Expectation:
    """Should two runs of ``case`` on the same machine and thread count be bitwise identical?"""
    params = dict(case.params)
    if case.algorithm in _RANDOMISED and "random_state" in algorithm_params(case.algorithm) \
            and params.get("random_state") is None and not deterministic:
        return Expectation(False, f"random_state is not set: {_RANDOMISED[case.algorithm]} "
                                  "draws a new seed on every fit")
    if is_deep_learning(case):
        if not deterministic:
            return Expectation(False, "not in deterministic mode: TF picks non-deterministic "
                                      "kernels and thread schedules, and seeds are not fixed")
        strategy = find_strategy(case.strategy)
        if strategy is None:
            return Expectation(False, f"strategy {case.strategy!r} is not installed here, so "
                                      "nothing is known about how it repeats")
        return strategy.determinism.expectation
    if case.backend == "xgboost":
        if case.device == "cuda":
            return Expectation(True, "XGBoost's CUDA histogram pre-rounds its sums, so the same "
                                     "GPU model repeats bitwise (XGBoost >= 1.1)")
        return Expectation(True, "XGBoost hist on CPU repeats bitwise with a seed and fixed nthread")
    if case.backend == "sklearnex":
        return Expectation(True, "oneDAL's CPU algorithms repeat bitwise with a seed and a fixed "
                                 "thread count")
    return Expectation(True, "scikit-learn repeats bitwise with a seed and a fixed thread count")


def _differences(a: CaseLike, b: CaseLike) -> list[str]:
    changed = []
    for name in ("algorithm", "backend", "device", "workers", "strategy"):
        if getattr(a, name) != getattr(b, name):
            changed.append(name)
    if getattr(a, "dataset", None) != getattr(b, "dataset", None):
        changed.append("dataset")
    if dict(a.params) != dict(b.params):
        changed.append("params")
    return changed


def _backend_reason(a: CaseLike, b: CaseLike) -> str:
    pair = {a.backend, b.backend}
    if pair == {"sklearn", "sklearnex"}:
        return ("sklearnex (oneDAL) and scikit-learn are different implementations (other "
                "solvers, summation order, initialisation): agreement is measured, not identity")
    if "xgboost" in pair:
        return ("XGBoost and scikit-learn's histogram boosting bin features and find splits "
                "differently (quantile sketch vs equal-count bins, hessian vs row limits)")
    return f"{a.backend} and {b.backend} are different implementations"


def _device_reason(a: CaseLike, b: CaseLike) -> str:
    if "xgboost" in (a.backend, b.backend):
        return ("XGBoost on CPU and CUDA differ by design: other histogram and gradient-sum "
                "order, so near-tied splits can go either way (issue 7 reports 99.67% label "
                "agreement on 1M rows)")
    if is_deep_learning(a):
        return ("CPU (Eigen/oneDNN) and GPU (cuDNN/cuBLAS) kernels sum in different orders; "
                "rounding differences grow over training steps")
    return "CPU and GPU kernels sum in different orders"


def _scale_reason(a: CaseLike, b: CaseLike) -> str:
    if is_deep_learning(a):
        return (f"{a.workers} vs {b.workers} workers: each step averages gradients over a "
                "different global batch with a scaled learning rate, so the weights follow "
                "another path; compare final loss/accuracy, not weights")
    return (f"{a.workers} vs {b.workers} workers split the work, which changes the "
            "floating-point summation order")


def pair_expectation(a: CaseLike, b: CaseLike, deterministic: bool = True) -> Expectation:
    """Should results ``a`` and ``b`` be bitwise identical (same machine), and why (not)?"""
    changed = _differences(a, b)
    if not changed:
        return run_to_run_expectation(a, deterministic)
    reasons = []
    if "backend" in changed:
        reasons.append(_backend_reason(a, b))
    if "device" in changed:
        reasons.append(_device_reason(a, b))
    if "workers" in changed or "strategy" in changed:
        reasons.append(_scale_reason(a, b))
    for name in ("algorithm", "dataset", "params"):
        if name in changed:
            reasons.append(f"the {name} differs")
    return Expectation(False, "; ".join(reasons))
