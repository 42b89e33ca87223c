"""Should two results be bitwise identical, and why (not)? One answer for every pair.

:func:`run_to_run_expectation` answers for two runs of one case, :func:`pair_expectation`
for any two results. The agreement matrix (:mod:`accelml.report.repro`) prints the answer
beside every measure, so a reader can tell a bug (identity expected, not found) from a
property of the backends; the runner's deterministic mode (:mod:`accelml.runner.determinism`)
is what makes identity possible.

For a classical case the answers come from its backend's record
(:class:`accelml.estimators.Backend`: ``repeat_expectation``, ``cross_backend_reason``,
``cross_device_reason``, and what each implementation draws at random). A backend that is
not installed here promises nothing: its repeats are not expected to be bitwise.

>>> from types import SimpleNamespace
>>> case = SimpleNamespace(algorithm="kmeans", backend="sklearn", device="cpu", workers=1,
...                        strategy=None, params=(("n_clusters", 3),), seed=7, threads=2)
>>> run_to_run_expectation(case).bitwise
True
>>> logistic = SimpleNamespace(**{**vars(case), "algorithm": "logistic_regression", "params": ()})
>>> run_to_run_expectation(logistic, deterministic=False).bitwise   # lbfgs draws nothing
True
>>> saga = SimpleNamespace(**{**vars(logistic), "params": (("solver", "saga"),)})
>>> run_to_run_expectation(saga, deterministic=False).reason
'random_state is not set: the sag/saga/liblinear shuffling draws a new seed on every fit'
>>> other = SimpleNamespace(**{**vars(case), "backend": "sklearnex"})
>>> pair_expectation(case, other).bitwise
False
>>> boosting = SimpleNamespace(**{**vars(case), "algorithm": "gradient_boosting_classifier",
...                               "backend": "xgboost", "params": ()})
>>> scaled = SimpleNamespace(**{**vars(boosting), "workers": 2})
>>> print(pair_expectation(boosting, scaled).reason[:60])
1 vs 2 workers: xgboost.dask on N workers builds each worker
"""

from __future__ import annotations

from collections.abc import Callable

from accelml.cases import CaseLike, Expectation
from accelml.estimators import ALGORITHMS, BACKENDS, Backend


def is_deep_learning(case: CaseLike) -> bool:
    """A case of a backend that trains models (its record says ``deep_learning``)."""
    backend = BACKENDS.find(case.backend)
    return backend is not None and backend.deep_learning


def algorithm_params(algorithm: str) -> tuple[str, ...]:
    """The accelml parameter names of ``algorithm`` (none for an unknown one)."""
    found = ALGORITHMS.get(algorithm)
    return () if found is None else found.param_names


def _unseeded_randomness(case: CaseLike, backend: Backend | None) -> str:
    """What draws a new seed on every fit of ``case`` because its random_state is unset ("":
    nothing; the implementation's record says which parameter values draw, e.g. which solvers)."""
    implementation = None if backend is None else backend.implementations.get(case.algorithm)
    algorithm = ALGORITHMS.get(case.algorithm)
    if implementation is None or algorithm is None or "random_state" not in algorithm.param_names \
            or dict(case.params).get("random_state") is not None:
        return ""
    return implementation.randomness({**algorithm.defaults, **dict(case.params)})


def run_to_run_expectation(case: CaseLike, deterministic: bool = True) -> Expectation:
    """Should two runs of ``case`` on the same machine and thread count be bitwise identical?"""
    backend = BACKENDS.find(case.backend)
    randomness = "" if deterministic else _unseeded_randomness(case, backend)
    if randomness:
        return Expectation(False, f"random_state is not set: {randomness} draws a new seed on "
                                  "every fit")
    if backend is None:
        return Expectation(False, f"backend {case.backend!r} is not installed here, so nothing "
                                  "is known about how its runs repeat")
    return backend.repeat_expectation(case, deterministic)


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


def _declared_reasons(a: CaseLike, b: CaseLike, reason: Callable[[Backend], str]) -> str:
    """The reasons the backend records of ``a`` and ``b`` declare (each once), joined."""
    found = (BACKENDS.find(name) for name in dict.fromkeys((a.backend, b.backend)))
    return "; ".join(dict.fromkeys(reason(backend) for backend in found
                                   if backend is not None and reason(backend)))


def _backend_reason(a: CaseLike, b: CaseLike) -> str:
    return (_declared_reasons(a, b, lambda backend: backend.cross_backend_reason)
            or f"{a.backend} and {b.backend} are different implementations")


def _device_reason(a: CaseLike, b: CaseLike) -> str:
    declared = _declared_reasons(a, b, lambda backend: backend.cross_device_reason)
    return declared or "CPU and GPU kernels sum in different orders"


def _scale_reason(a: CaseLike, b: CaseLike) -> str:
    if is_deep_learning(a):
        return (f"{a.workers} vs {b.workers} workers: each step averages gradients over a "
                "different global batch with a scaled learning rate, so the weights follow "
                "another path; compare final loss/accuracy, not weights")
    declared = _declared_reasons(a, b, lambda backend: backend.cross_scale_reason)
    return (f"{a.workers} vs {b.workers} workers: "
            + (declared or "splitting the work changes the floating-point summation order"))


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
    if "workers" in changed:
        reasons.append(_scale_reason(a, b))
    elif "strategy" in changed:
        reasons.append(f"strategies {a.strategy} and {b.strategy} train with other engines, "
                       "kernels and reduction orders; compare final loss/accuracy, not weights")
    for name in ("algorithm", "dataset", "params"):
        if name in changed:
            reasons.append(f"the {name} differ" if name == "params" else f"the {name} differs")
    return Expectation(False, "; ".join(reasons))
