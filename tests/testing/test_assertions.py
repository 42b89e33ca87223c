"""accelml.testing: assert_equivalent, assert_reproducible and the pytest plugin."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.ensemble import RandomForestClassifier

import accelml
from accelml.results.records import CaseResult
from accelml.testing import assert_equivalent, assert_reproducible

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(n_samples=200, n_features=3, centers=3, random_state=0)
    return X, y


def test_assert_equivalent_passes_within_tolerance():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert_equivalent(a, a.copy(), rtol=0, atol=0)
    assert_equivalent(a, a + 1e-9, rtol=1e-8)
    assert_equivalent(a, a + 1e-3, atol=2e-3, rtol=0)
    assert_equivalent({"p": a, "score": 0.5, "name": "x"}, {"p": a, "score": 0.5, "name": "x"})
    assert_equivalent(np.array([0, 0, 1, 2]), np.array([2, 2, 0, 1]), labels="clusters")
    assert_equivalent(np.array([0, 1, 1, 1]), np.array([0, 1, 1, 0]), labels="classes",
                      min_agreement=0.75)
    assert_equivalent([np.nan, 1.0], [np.nan, 1.0])


@pytest.mark.parametrize("a, b, kwargs, message", [
    (np.ones(3), np.ones(3) + 1e-3, {"rtol": 1e-6}, "3 of 3 values differ beyond rtol=1e-06"),
    (np.ones(3), np.ones(3, np.float32), {"rtol": 0, "atol": 0}, "dtype float64 vs float32"),
    (np.ones(3), np.ones(4), {}, "shape (3,) vs (4,)"),
    ({"a": 1.0}, {"b": 1.0}, {}, "keys differ"),
    (np.array([0, 0, 1, 2]), np.array([2, 2, 0, 1]), {"labels": "classes"}, "label agreement 0"),
    (np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), {"labels": "clusters"},
     "after matching cluster ids"),
    ({"x": [1.0, 2.0]}, {"x": [1.0, 2.5]}, {}, "value['x']"),
    ("sklearn", "sklearnex", {}, "'sklearn' != 'sklearnex'"),
])
def test_assert_equivalent_fails_and_says_why(a, b, kwargs, message):
    with pytest.raises(AssertionError) as caught:
        assert_equivalent(a, b, **kwargs)
    assert message in str(caught.value)


def test_assert_reproducible_on_seeded_estimators(blobs):
    X, y = blobs
    assert_reproducible(KMeans(3, n_init=1, random_state=0), X)
    assert_reproducible(RandomForestClassifier(5, random_state=0), X, y, repeats=3)
    assert_reproducible(accelml.Estimator("kmeans", backend="sklearnex", n_clusters=3,
                                          n_init=1, random_state=0), X)


def test_assert_reproducible_refuses_an_unseeded_estimator(blobs):
    X, y = blobs
    with pytest.raises(AssertionError, match="random_state=None"):
        assert_reproducible(RandomForestClassifier(5), X, y)


class NoisyRegressor(BaseEstimator):
    """Fits nothing and predicts noise: never reproducible."""

    def fit(self, X, y=None):
        self.offset_ = np.random.default_rng().normal()
        return self

    def predict(self, X):
        return np.full(len(X), self.offset_)


def test_assert_reproducible_catches_a_nondeterministic_estimator(blobs):
    X, y = blobs
    with pytest.raises(AssertionError, match="NoisyRegressor is not reproducible: fit 2 of 2"):
        assert_reproducible(NoisyRegressor(), X, y)
    assert_reproducible(NoisyRegressor(), X, y, atol=10.0)        # within a loose tolerance


def test_assert_reproducible_on_a_stored_case_result():
    def result(digests):
        return CaseResult(run_id="r", case_id="c", algorithm="kmeans", backend="sklearn",
                          device="cpu", dataset="d", status="ok",
                          repeat_prediction_digests=tuple(digests))

    assert_reproducible(result(["a", "a", "a"]))
    with pytest.raises(AssertionError, match="2 different predictions over 3 repeats"):
        assert_reproducible(result(["a", "b", "a"]))
    with pytest.raises(AssertionError, match="at least 2"):
        assert_reproducible(result(["a"]))


def test_pytest_plugin_fixtures(pytester):
    pytester.makepyfile(test_user=textwrap.dedent("""
        import os
        import numpy as np
        import pytest
        from sklearn.cluster import KMeans

        X = np.random.default_rng(0).normal(size=(100, 2))

        def test_seeded(assert_reproducible):
            assert_reproducible(KMeans(2, n_init=1, random_state=0), X)

        def test_unseeded(assert_reproducible):
            assert_reproducible(KMeans(2, n_init=1), X)

        def test_equivalent(assert_equivalent):
            assert_equivalent([1.0], [1.0 + 1e-12], rtol=1e-9)

        def test_deterministic(accelml_deterministic):
            assert os.environ["PYTHONHASHSEED"] == "7"
            assert np.random.get_state()[1][0] == np.random.RandomState(7).get_state()[1][0]
            settings = accelml_deterministic(type("Case", (), dict(
                algorithm="kmeans", backend="sklearn", device="cpu", ranks=1,
                strategy=None, params=(), threads=1))())
            assert dict(settings.params)["random_state"] == 7
    """))
    outcome = pytester.runpytest_inprocess("-p", "accelml.testing.plugin", "-p", "no:cacheprovider",
                                           "--accelml-repeats", "3", "--accelml-seed", "7")
    outcome.assert_outcomes(passed=3, failed=1)
    outcome.stdout.fnmatch_lines(["*random_state=None*"])


def _forest_case(**params):
    from accelml.cases import Case, DatasetSpec, RepeatPolicy

    return Case("random_forest_classifier", "sklearn", "cpu",
                DatasetSpec("cancer", "shipped", (("name", "breast_cancer"),)),
                params=tuple(sorted({"n_estimators": 5, "n_jobs": 1, **params}.items())),
                repeats=RepeatPolicy(min_repeats=2, max_repeats=2, warmup=0), threads=1)


def test_assert_reproducible_runs_a_spec_case_through_the_runner():
    assert_reproducible(_forest_case(random_state=0))
    with pytest.raises(AssertionError, match="leaves random_state unset"):
        assert_reproducible(_forest_case())
    with pytest.raises(AssertionError, match="2 different predictions over 2 repeats"):
        assert_reproducible(_forest_case(), require_seed=False)
