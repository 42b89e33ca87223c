"""The accelml estimator contract: parameters, errors, registry, sklearnex fallbacks, agreement."""

from __future__ import annotations

import logging
import pickle
import sys
import textwrap
import warnings

import numpy as np
import pytest
from sklearn.base import clone, is_classifier, is_clusterer, is_regressor
from sklearn.datasets import load_breast_cancer, load_diabetes, make_blobs
from sklearn.exceptions import NotFittedError
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags

import accelml.estimators as estimators
from accelml.errors import AccelmlError, UnavailableError
from accelml.estimators import (
    ALGORITHMS,
    BACKENDS,
    Estimator,
    algorithms,
    device_sync,
    get_backend,
    parameter_table,
    task_of,
)

EXPECTED_BACKENDS = {
    "kmeans": ("sklearn", "sklearnex"),
    "dbscan": ("sklearn", "sklearnex"),
    "pca": ("sklearn", "sklearnex"),
    "linear_regression": ("sklearn", "sklearnex"),
    "ridge": ("sklearn", "sklearnex"),
    "logistic_regression": ("sklearn", "sklearnex"),
    "svc": ("sklearn", "sklearnex"),
    "knn_classifier": ("sklearn", "sklearnex"),
    "knn_regressor": ("sklearn", "sklearnex"),
    "random_forest_classifier": ("sklearn", "sklearnex"),
    "random_forest_regressor": ("sklearn", "sklearnex"),
    "gradient_boosting_classifier": ("sklearn", "xgboost"),
    "gradient_boosting_regressor": ("sklearn", "xgboost"),
}


@pytest.fixture(scope="module")
def classification():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X[:300]), y[:300]


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(n_samples=300, centers=4, cluster_std=0.5, random_state=0)
    return X


# ---------------------------------------------------------------- registry


def test_algorithms_lists_every_algorithm_with_task_and_backends():
    found = {info.name: info for info in algorithms()}
    built_in = {"sklearn", "sklearnex", "xgboost"}  # other helpers' backend modules may add more
    assert {name: tuple(b for b in info.backends if b in built_in)
            for name, info in found.items()} == EXPECTED_BACKENDS
    assert found["pca"].task == "decomposition" and found["pca"].estimator_type == "transformer"
    assert [task_of(name) for name in ("svc", "ridge", "dbscan", "pca")] == [
        "classification", "regression", "clustering", "decomposition"]


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_implementation_has_one_rule_per_parameter(algorithm):
    params = set(ALGORITHMS[algorithm].param_names)
    for backend in EXPECTED_BACKENDS[algorithm]:
        assert set(get_backend(backend).implementations[algorithm].params) == params, backend
    rows = parameter_table(algorithm)
    assert [row.param for row in rows] == list(ALGORITHMS[algorithm].param_names)
    assert all(set(EXPECTED_BACKENDS[algorithm]) <= set(row.backends) for row in rows)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_estimator_type_follows_the_task(algorithm):
    est = Estimator(algorithm)
    task = task_of(algorithm)
    assert is_classifier(est) == (task == "classification")
    assert is_regressor(est) == (task == "regression")
    assert is_clusterer(est) == (task == "clustering")
    assert (get_tags(est).transformer_tags is not None) == (algorithm in ("pca", "kmeans"))


def test_translation_table_documents_the_xgboost_mapping():
    rows = {row.param: row.backends for row in parameter_table("gradient_boosting_classifier")}
    assert rows["n_estimators"] == {"sklearn": "max_iter (HistGradientBoosting's max_iter= (boosting rounds))",
                                    "xgboost": "n_estimators"}
    assert rows["min_samples_leaf"]["xgboost"].startswith("unsupported, only 20")
    kwargs = Estimator("gradient_boosting_regressor", backend="xgboost", max_depth=None,
                       n_estimators=7).fit(np.eye(4), np.arange(4.0)).estimator_.get_params()
    assert (kwargs["n_estimators"], kwargs["max_depth"], kwargs["max_leaves"], kwargs["grow_policy"],
            kwargs["reg_lambda"], kwargs["tree_method"]) == (7, 0, 31, "lossguide", 0.0, "hist")


@pytest.mark.slow
def test_no_leaf_limit_grows_xgboost_depthwise_to_the_same_trees():
    """``max_leaf_nodes = "none"``: scikit-learn gets None, XGBoost grows depth-wise (one
    all-reduce per level on several workers), and the trees are those that leaf-wise growth
    without a leaf limit makes; a limit keeps leaf-wise growth."""
    pytest.importorskip("xgboost")
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    unlimited = Estimator("gradient_boosting_classifier", backend="xgboost", max_leaf_nodes="none",
                          max_depth=4, n_estimators=30, random_state=0).fit(x, y)
    params = unlimited.estimator_.get_params()
    assert (params["grow_policy"], params["max_leaves"], params["max_depth"]) == ("depthwise", 0, 4)
    leafwise = type(unlimited.estimator_)(**{**params, "grow_policy": "lossguide"}).fit(x, y)
    np.testing.assert_array_equal(unlimited.predict_proba(x), leafwise.predict_proba(x))
    limited = Estimator("gradient_boosting_classifier", backend="xgboost", max_leaf_nodes=5,
                        max_depth=4, n_estimators=30, random_state=0).fit(x, y)
    assert limited.estimator_.get_params()["grow_policy"] == "lossguide"
    assert not np.array_equal(limited.predict_proba(x), leafwise.predict_proba(x))
    stock = Estimator("gradient_boosting_classifier", backend="sklearn", max_leaf_nodes="none",
                      max_depth=4, n_estimators=30, random_state=0).fit(x, y)
    assert stock.estimator_.get_params()["max_leaf_nodes"] is None


def test_a_new_backend_is_one_module(tmp_path, monkeypatch, blobs):
    (tmp_path / "toy.py").write_text(textwrap.dedent("""
        from accelml.probe import Availability
        from accelml.estimators import (Backend, EveryCase, FromData, Implementation, Rename,
                                        reference_centroids, same)

        BACKEND = Backend(
            name="toy", summary="a toy", devices=("cpu",),
            probe=lambda device: Availability("toy", device, True, "1"),
            repeat_expectation=EveryCase(True, "seeded"), libraries=("scikit-learn",),
            implementations={"kmeans": Implementation("sklearn.cluster:KMeans", {
                **same("n_clusters", "init", "n_init", "max_iter", "tol", "copy_x", "random_state"),
                "variant": Rename("algorithm"),
                "fair_start": FromData(reference_centroids, "the reference's centroids")})},
        )
    """))
    monkeypatch.setattr(estimators, "__path__", [*estimators.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "accelml.estimators.toy", raising=False)
    assert "toy" in BACKENDS.names()
    assert "toy" in [info.backends for info in algorithms() if info.name == "kmeans"][0]
    est = Estimator("kmeans", backend="toy", n_clusters=4, random_state=0).fit(blobs)
    assert type(est.estimator_).__name__ == "KMeans" and est.labels_.max() == 3
    with pytest.raises(AccelmlError, match="backend 'toy' does not implement pca; backends with pca: .*sklearnex"):
        Estimator("pca", backend="toy")


# ---------------------------------------------------------------- scikit-learn contract


def test_params_clone_and_repr():
    est = Estimator("kmeans", backend="sklearnex", n_clusters=3, random_state=0)
    params = est.get_params()
    assert params["algorithm"] == "kmeans" and params["backend"] == "sklearnex"
    assert params["n_clusters"] == 3 and params["max_iter"] == 300  # defaults are listed too
    copy = clone(est)
    assert copy is not est and copy.get_params() == params
    assert repr(est) == "Estimator('kmeans', backend='sklearnex', n_clusters=3, random_state=0)"
    assert est.set_params(n_clusters=5) is est and est.get_params()["n_clusters"] == 5
    with pytest.raises(AccelmlError, match="unknown parameter for pca: 'n_clusters'"):
        est.set_params(algorithm="pca")  # n_clusters=5 has no meaning for pca
    switched = clone(Estimator("kmeans", random_state=0)).set_params(algorithm="pca")
    assert switched.get_params()["n_components"] is None and switched.get_params()["random_state"] == 0
    assert "n_clusters" not in switched.get_params()


def test_availability_is_probed_only_off_the_cpu_and_travels_with_clones(monkeypatch, classification):
    probes = []
    monkeypatch.setattr(type(get_backend("xgboost")), "require", lambda self, device: probes.append(device))
    Estimator("gradient_boosting_classifier", backend="xgboost", n_estimators=2).fit(*classification)
    assert probes == []  # on the CPU, importing the library is the check
    template = Estimator("gradient_boosting_classifier", backend="xgboost", device="cuda").check_available()
    assert probes == ["cuda"]
    twin = clone(template)
    assert twin.__dict__["_available_for"] == ("xgboost", "cuda")  # its first fit will not probe again
    assert "_available_for" not in clone(template.set_params(device="cpu")).__dict__


def test_not_fitted_before_fit(classification):
    X, y = classification
    est = Estimator("logistic_regression")
    for call in (est.predict, est.predict_proba, est.decision_function):
        with pytest.raises(NotFittedError):
            call(X)
    with pytest.raises(NotFittedError):
        est.score(X, y)
    assert not hasattr(est, "coef_") and not hasattr(est, "fallbacks_")


def test_methods_follow_the_algorithm():
    assert not hasattr(Estimator("dbscan"), "predict") and hasattr(Estimator("dbscan"), "fit_predict")
    assert hasattr(Estimator("pca"), "transform") and not hasattr(Estimator("pca"), "predict")
    assert not hasattr(Estimator("svc"), "predict_proba")
    assert not hasattr(Estimator("gradient_boosting_classifier"), "decision_function")


def test_fit_returns_self_and_exposes_fitted_attributes(classification):
    X, y = classification
    est = Estimator("logistic_regression", backend="sklearnex")
    assert est.fit(X, y) is est
    assert est.coef_.shape == (1, X.shape[1]) and est.n_features_in_ == X.shape[1]
    assert list(est.classes_) == [0, 1]
    assert est.score(X, y) > 0.95


def test_pipeline_and_grid_search_over_params_and_backends(classification):
    X, y = classification
    pipeline = make_pipeline(StandardScaler(), Estimator("logistic_regression"))
    search = GridSearchCV(
        pipeline, {"estimator__C": [0.1, 1.0], "estimator__backend": ["sklearn", "sklearnex"]}, cv=3)
    search.fit(X, y)
    assert search.best_score_ > 0.9
    assert set(search.cv_results_["param_estimator__backend"]) == {"sklearn", "sklearnex"}
    assert search.best_estimator_[-1].estimator_.__class__.__module__.split(".")[0] in ("sklearn", "sklearnex")


def test_pickle_round_trip(blobs):
    est = Estimator("kmeans", backend="sklearnex", n_clusters=4, random_state=0).fit(blobs)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(blobs), est.predict(blobs))
    assert again.get_params() == est.get_params()


def test_xgboost_classifier_keeps_any_label_type(classification):
    X, y = classification
    labels = np.array(["benign", "malignant"])[y]
    est = Estimator("gradient_boosting_classifier", backend="xgboost", n_estimators=20, random_state=0)
    predicted = est.fit(X, labels).predict(X)
    assert list(est.classes_) == ["benign", "malignant"] and predicted.dtype == labels.dtype
    assert est.score(X, labels) > 0.95 and est.predict_proba(X).shape == (len(X), 2)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("build, pattern", [
    (lambda: Estimator("kmean"),
     r"unknown algorithm 'kmean' \(did you mean 'kmeans'\?\); choose from: kmeans, dbscan"),
    (lambda: Estimator("kmeans", backend="cuml"),
     r"unknown backend 'cuml'; choose from: .*sklearn, sklearnex, xgboost"),
    (lambda: Estimator("kmeans", device="cuda"), r"unknown device for backend 'sklearn': 'cuda'; choose from: cpu"),
    (lambda: Estimator("kmeans", n_cluster=3),
     r"unknown parameter for kmeans: 'n_cluster' \(did you mean 'n_clusters'\?\)"),
    (lambda: Estimator("gradient_boosting_classifier", backend="sklearnex"),
     r"sklearnex has no gradient boosting.*; backends with gradient_boosting_classifier: .*sklearn, xgboost"),
    (lambda: Estimator("gradient_boosting_classifier", backend="xgboost", min_samples_leaf=5),
     r"backend 'xgboost' cannot honour min_samples_leaf=5 \(only the default 20\): XGBoost bounds"),
    (lambda: Estimator("gradient_boosting_regressor", n_jobs=2), r"cannot honour n_jobs=2.*OMP_NUM_THREADS"),
    (lambda: Estimator("svc").set_params(kernel_size=3), r"unknown parameter for svc: 'kernel_size'"),
])
def test_user_errors_are_one_line_and_list_the_choices(build, pattern):
    with pytest.raises(AccelmlError, match=pattern) as error:
        build()
    assert "\n" not in str(error.value)
    assert isinstance(error.value, ValueError)  # what scikit-learn's parameter checks expect


def test_the_default_of_an_unsupported_parameter_is_accepted_in_any_numeric_type():
    est = Estimator("gradient_boosting_classifier", backend="xgboost", min_samples_leaf=20.0, n_jobs=None)
    assert est.get_params()["min_samples_leaf"] == 20.0
    with pytest.raises(AccelmlError, match="cannot honour early_stopping=1"):
        Estimator("gradient_boosting_classifier", backend="xgboost", early_stopping=1)  # 1 is not False


def test_set_params_changes_nothing_when_it_fails():
    est = Estimator("ridge", alpha=2.0)
    with pytest.raises(AccelmlError):
        est.set_params(alpha=3.0, backend="nope")
    assert est.get_params()["alpha"] == 2.0 and est.backend == "sklearn"


def test_xgboost_cuda_without_a_gpu_is_unavailable_and_says_why(classification):
    availability = get_backend("xgboost").availability("cuda")
    if availability.available:
        pytest.skip(f"this machine has CUDA for XGBoost ({availability.detail})")
    est = Estimator("gradient_boosting_classifier", backend="xgboost", device="cuda")
    with pytest.raises(UnavailableError, match=r"backend 'xgboost' on device 'cuda' is unavailable here: .+; "
                                                r"run on a machine with an NVIDIA GPU") as error:
        est.fit(*classification)
    assert "\n" not in str(error.value)
    assert not hasattr(est, "estimator_")  # no silent fall back to the CPU


@pytest.mark.gpu
def test_xgboost_cuda_trains_on_the_gpu(gpus, classification):
    est = Estimator("gradient_boosting_classifier", backend="xgboost", device="cuda", n_estimators=20)
    predicted = device_sync(est.fit(*classification).predict(classification[0]))
    assert est.estimator_.get_params()["device"] == "cuda" and (predicted == classification[1]).mean() > 0.95


# ---------------------------------------------------------------- sklearnex execution paths


def test_sklearnex_fallback_is_reported(capfd):
    X, y = load_diabetes(return_X_y=True)
    est = Estimator("ridge", backend="sklearnex", solver="sag", max_iter=2000, random_state=0)
    est.fit(X, y).predict(X)
    assert [path.call for path in est.fallbacks_] == [
        "sklearn.linear_model.Ridge.fit", "sklearn.linear_model.Ridge.predict"]
    assert "fallback to original Scikit-learn" in est.fallbacks_[0].message
    assert "sklearnex" not in capfd.readouterr().err  # captured, not printed


def test_sklearnex_accelerated_calls_are_not_fallbacks(classification):
    X, y = classification
    est = Estimator("ridge", backend="sklearnex").fit(X, y)
    est.predict(X)
    assert est.fallbacks_ == ()
    assert [(p.call, p.path) for p in est.execution_paths_] == [
        ("sklearn.linear_model.Ridge.fit", "accelerated"), ("sklearn.linear_model.Ridge.predict", "accelerated")]
    assert est.fit(X, y).execution_paths_[-1].call.endswith("Ridge.fit")  # fit starts a new log


def test_sklearnex_tracing_leaves_the_logger_as_it_was_and_patches_nothing(blobs):
    logger = logging.getLogger("sklearnex")
    before = (logger.level, logger.propagate, list(logger.handlers),
              [list(h.filters) for h in logger.handlers])
    Estimator("kmeans", backend="sklearnex", n_clusters=4, n_init=1, random_state=0).fit(blobs).predict(blobs)
    assert (logger.level, logger.propagate, list(logger.handlers),
            [list(h.filters) for h in logger.handlers]) == before
    from sklearn.cluster import KMeans
    assert KMeans.__module__.startswith("sklearn.")


def test_stock_backends_report_no_execution_paths(blobs):
    assert Estimator("kmeans", n_clusters=4, random_state=0).fit(blobs).execution_paths_ == ()


# ---------------------------------------------------------------- cross-backend agreement


def test_kmeans_labels_agree_across_backends_up_to_permutation(blobs):
    labels = [Estimator("kmeans", backend=b, n_clusters=4, n_init=3, random_state=0).fit_predict(blobs)
              for b in ("sklearn", "sklearnex")]
    assert adjusted_rand_score(*labels) == 1.0


def test_linear_models_agree_across_backends():
    X, y = load_diabetes(return_X_y=True)
    coefs = [Estimator("linear_regression", backend=b).fit(X, y).coef_ for b in ("sklearn", "sklearnex")]
    np.testing.assert_allclose(*coefs, rtol=1e-6, atol=1e-6)


def test_pca_agrees_across_backends(classification):
    X, _ = classification
    variances = [Estimator("pca", backend=b, n_components=3).fit(X).explained_variance_ratio_
                 for b in ("sklearn", "sklearnex")]
    np.testing.assert_allclose(*variances, rtol=1e-6)


def test_gradient_boosting_backends_reach_the_same_accuracy(classification):
    X, y = classification
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = [Estimator("gradient_boosting_classifier", backend=b, n_estimators=30, random_state=0)
                  .fit(X[:200], y[:200]).score(X[200:], y[200:]) for b in ("sklearn", "xgboost")]
    assert min(scores) > 0.9 and abs(scores[0] - scores[1]) < 0.05


def test_device_sync_returns_host_arrays():
    values = np.arange(3.0)
    assert device_sync(values) is values
