"""Should two results be bitwise identical, and why (not)? One answer for every pair.

:func:`run_to_run_expectation` answers for two runs of one case, :func:`pair_expectation`
for any two results. The agreement matrix (:mod:`accelml.agreement.matrix`) prints the answer
beside every measure, so a reader can tell a bug (identity expected, not found) from a
property of the backends; the runner's deterministic mode (:mod:`accelml.runner.determinism`)
is what makes identity possible.

For a classical case the answers come from its backend's record
(:class:`accelml.estimators.Backend`: ``repeat_expectation``, ``cross_backend_reason``,
``cross_device_reason``, and what each implementation draws at random). A backend that is
not installed here promises nothing: its repeats are not expected to be bitwise.

>>> from types import SimpleNamespace
>>> case = SimpleNamespace(algorithm="kmeans", backend="sklearn", device="cpu", ranks=1,
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
>>> scaled = SimpleNamespace(**{**vars(boosting), "ranks": 2})
>>> print(pair_expectation(boosting, scaled).reason[:60])
1 vs 2 ranks: xgboost.dask on N workers builds each worker's
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
    for name in ("algorithm", "backend", "device", "ranks", "strategy"):
        if getattr(a, name) != getattr(b, name):
            changed.append(name)
    if getattr(a, "dataset", None) != getattr(b, "dataset", None):
        changed.append("dataset")
    if dict(a.params) != dict(b.params):
        changed.append("params")
    if getattr(a, "container", None) != getattr(b, "container", None):
        changed.append("container")
    return changed


def _where(case: CaseLike) -> str:
    container = getattr(case, "container", None)
    return "the host" if container is None else container.label


def _container_expectation(a: CaseLike, b: CaseLike, same_code: Expectation) -> Expectation:
    """Host vs image, or image A vs image B: identical when the libraries (and Python) that
    ran are the same, as their environments say; else which differ.

    >>> from types import SimpleNamespace as S
    >>> env = lambda numpy: S(python="3.11.2", libraries=(("numpy", numpy), ("scipy", "1.16.3")))
    >>> host = S(container=None, environment=env("2.4.6"), backend="sklearn")
    >>> image = S(container=S(label="charliecloud:bookworm"), environment=env("2.3.5"), backend="sklearn")
    >>> print(_container_expectation(host, image, Expectation(True, "")).reason[:85])
    the host and charliecloud:bookworm run other library versions (numpy 2.4.6 vs 2.3.5):
    """
    env_a, env_b = getattr(a, "environment", None), getattr(b, "environment", None)
    places = f"{_where(a)} and {_where(b)}"
    if env_a is None or env_b is None:
        return Expectation(False, f"{places}: the libraries of one of them are not recorded")
    versions_a, versions_b = dict(env_a.libraries), dict(env_b.libraries)
    backend = BACKENDS.find(a.backend)
    used = {*(backend.libraries if backend is not None else ()), "numpy", "scipy"}
    # a library both have, or one the case's backend uses (missing on one side)
    differ = [f"{name} {versions_a.get(name, 'missing')} vs {versions_b.get(name, 'missing')}"
              for name in sorted(set(versions_a) | set(versions_b))
              if name != "accelml" and versions_a.get(name) != versions_b.get(name)
              and (name in used or (name in versions_a and name in versions_b))]
    if differ:
        return Expectation(False, f"{places} run other library versions ({', '.join(differ)}): "
                                  "other builds of the same kernels may round and sum differently")
    if not same_code.bitwise:
        return same_code
    return Expectation(True, f"{places} run the same library versions (Python {env_a.python} vs "
                             f"{env_b.python}): the same code on the same CPU")


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
        return (f"{a.ranks} vs {b.ranks} ranks: each step averages gradients over a "
                "different global batch with a scaled learning rate, so the weights follow "
                "another path; compare final loss/accuracy, not weights")
    declared = _declared_reasons(a, b, lambda backend: backend.cross_scale_reason)
    return (f"{a.ranks} vs {b.ranks} ranks: "
            + (declared or "splitting the work changes the floating-point summation order"))


def pair_expectation(a: CaseLike, b: CaseLike, deterministic: bool = True) -> Expectation:
    """Should results ``a`` and ``b`` be bitwise identical (same machine), and why (not)?"""
    changed = _differences(a, b)
    if not changed:
        return run_to_run_expectation(a, deterministic)
    if changed == ["container"]:
        return _container_expectation(a, b, run_to_run_expectation(a, deterministic))
    reasons = []
    if "backend" in changed:
        reasons.append(_backend_reason(a, b))
    if "device" in changed:
        reasons.append(_device_reason(a, b))
    if "ranks" in changed:
        reasons.append(_scale_reason(a, b))
    elif "strategy" in changed:
        reasons.append(f"strategies {a.strategy} and {b.strategy} train with other engines, "
                       "kernels and reduction orders; compare final loss/accuracy, not weights")
    if "container" in changed:
        reasons.append(_container_expectation(a, b, Expectation(False, f"{_where(a)} vs {_where(b)}")).reason)
    for name in ("algorithm", "dataset", "params"):
        if name in changed:
            reasons.append(f"the {name} differ" if name == "params" else f"the {name} differs")
    return Expectation(False, "; ".join(reasons))
