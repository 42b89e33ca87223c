"""pytest plugin: reproducibility fixtures for your own tests.

Enable it with ``pytest -p accelml.testing.plugin`` or, in a ``conftest.py``::

    pytest_plugins = ["accelml.testing.plugin"]

Fixtures:

``assert_reproducible``
    :func:`accelml.testing.assert_reproducible` with ``repeats`` defaulting to
    ``--accelml-repeats`` (default 2).
``assert_equivalent``
    :func:`accelml.testing.assert_equivalent`.
``accelml_deterministic``
    Puts accelml's deterministic mode in place for the test (seeds Python and NumPy, fixes
    thread-count variables, ``PYTHONHASHSEED``) and restores the environment afterwards.
    Its value is a function ``settings(case_like)`` returning the
    :class:`~accelml.runner.determinism.DeterministicSettings` of a case, and it is seeded
    with ``--accelml-seed`` (default 0).

Example::

    def test_my_model_repeats(assert_reproducible):
        assert_reproducible(make_pipeline(StandardScaler(), KMeans(4, random_state=0)), X)
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import numpy as np
import pytest

from accelml.cases import CaseLike
from accelml.runner.determinism import DeterministicSettings, settings_for
from accelml.testing import assert_equivalent as _assert_equivalent
from accelml.testing import assert_reproducible as _assert_reproducible


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("accelml", "accelml reproducibility")
    group.addoption("--accelml-repeats", type=int, default=2, metavar="N",
                    help="fits compared by the assert_reproducible fixture (default 2)")
    group.addoption("--accelml-seed", type=int, default=0, metavar="SEED",
                    help="seed of the accelml_deterministic fixture (default 0)")


@pytest.fixture
def assert_reproducible(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``assert_reproducible(estimator, X, y, ...)`` with the command line's repeat count."""
    repeats = request.config.getoption("--accelml-repeats")
    if repeats < 2:
        raise pytest.UsageError("--accelml-repeats must be >= 2")
    return functools.partial(_assert_reproducible, repeats=repeats)


@pytest.fixture
def assert_equivalent() -> Callable[..., None]:
    """``assert_equivalent(a, b, rtol=..., atol=...)``."""
    return _assert_equivalent


@pytest.fixture
def accelml_deterministic(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
                          ) -> Iterator[Callable[..., DeterministicSettings]]:
    """Deterministic mode for one test; the environment and global seeds are restored after."""
    seed = request.config.getoption("--accelml-seed")
    python_state, numpy_state = random.getstate(), np.random.get_state()
    process = settings_for(SimpleNamespace(algorithm="", backend="sklearn", device="cpu",
                                           ranks=1, strategy=None, params=(), seed=seed,
                                           threads=None))
    for name, value in process.environment:
        monkeypatch.setenv(name, value)
    random.seed(seed)
    np.random.seed(seed % 2**32)

    def settings(case_like: CaseLike, *, seed: int = seed,
                 threads: int | None = None) -> DeterministicSettings:
        return settings_for(case_like, seed=seed, threads=threads)

    yield settings
    random.setstate(python_state)
    np.random.set_state(numpy_state)
