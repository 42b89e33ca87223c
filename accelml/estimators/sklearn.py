"""Backend ``sklearn``: stock scikit-learn, the reference every other backend is compared to.

Every algorithm's parameter table is written out here: most parameters keep their name,
the renamed ones say so, and gradient boosting is ``HistGradientBoosting*``. With a seed
and a fixed thread count, two runs of a case repeat bitwise; the algorithms that draw
random numbers say what draws them (``Implementation.randomised``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike

from accelml.errors import AccelmlError
from accelml.probe import ImportProbe

from ._algorithms import NO_LIMIT
from ._registry import Backend, Convert, EveryCase, FromData, Implementation, Rename, Unsupported, same


def reference_centroids(X: ArrayLike, fair: object, params: Mapping[str, object]
                        ) -> Mapping[str, object]:
    """With ``fair_start``: the initial centroids scikit-learn's KMeans draws for ``random_state``
    (k-means++, or ``init="random"``'s random rows), as the parameters ``init`` (the array)
    and ``n_init=1``; ``fair_start`` is then resolved (False).

    Every backend's case process draws the same array from the same data and seed, so all
    start where the reference starts; scikit-learn's own fit from it is its fit from its seed.

    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> params = {"n_clusters": 3, "init": "k-means++", "random_state": 1}
    >>> start = reference_centroids(X, True, params)
    >>> start["init"].shape, start["n_init"], reference_centroids(X, False, params)
    ((3, 2), 1, {})
    """
    if not fair:
        return {}
    seed, n_clusters, init = params.get("random_state"), params.get("n_clusters"), params.get("init")
    if not isinstance(seed, int) or not isinstance(n_clusters, int):
        raise AccelmlError("fair_start needs an integer random_state (and n_clusters): every "
                           "backend must draw the same initial centroids")
    from sklearn.cluster import kmeans_plusplus

    data = np.asarray(X, dtype=float)
    if init == "random":
        rows = np.random.RandomState(seed).permutation(len(data))[:n_clusters]
        centres = data[rows]
    else:
        centres, _ = kmeans_plusplus(data, n_clusters, random_state=seed)
    return {"init": np.ascontiguousarray(centres), "n_init": 1, "fair_start": False}


_NEIGHBOR_SEARCH = Rename("algorithm", "sklearn's algorithm=")
_FOREST = "bootstrap rows and feature sampling"

#: algorithm -> (class name as 'module:Class' under sklearn, translation rules).
#: sklearnex reuses these rules (and what is randomised) with its own classes (see sklearnex.py).
IMPLEMENTATIONS = MappingProxyType({
    "kmeans": Implementation(
        "sklearn.cluster:KMeans",
        {**same("n_clusters", "init", "n_init", "max_iter", "tol", "copy_x", "random_state"),
         "variant": Rename("algorithm", "sklearn's algorithm="),
         "fair_start": FromData(reference_centroids,
                                "resolved by accelml before fitting: init = scikit-learn's "
                                "initial centroids for random_state (an array), n_init = 1",
                                needs=("random_state",))},
        randomised="k-means++ / random initialisation",
        randomised_when={"init": ("k-means++", "random")},
        iterations="n_iter_",
    ),
    "dbscan": Implementation(
        "sklearn.cluster:DBSCAN",
        {**same("eps", "min_samples", "metric", "leaf_size", "p", "n_jobs"),
         "neighbor_search": _NEIGHBOR_SEARCH},
    ),
    "pca": Implementation(
        "sklearn.decomposition:PCA",
        same("n_components", "whiten", "svd_solver", "tol", "iterated_power", "copy", "random_state"),
        randomised="the randomized / arpack SVD solver",
        randomised_when={"svd_solver": ("auto", "randomized", "arpack")},
    ),
    "linear_regression": Implementation(
        "sklearn.linear_model:LinearRegression",
        same("fit_intercept", "positive", "copy_X", "n_jobs"),
    ),
    "ridge": Implementation(
        "sklearn.linear_model:Ridge",
        same("alpha", "fit_intercept", "solver", "max_iter", "tol", "positive", "copy_X", "random_state"),
        randomised="the sag/saga shuffling",
        randomised_when={"solver": ("sag", "saga")},   # "auto" never picks them (scikit-learn 1.x)
        iterations="n_iter_",
    ),
    "logistic_regression": Implementation(
        "sklearn.linear_model:LogisticRegression",
        same("C", "l1_ratio", "solver", "max_iter", "tol", "fit_intercept", "class_weight", "random_state"),
        randomised="the sag/saga/liblinear shuffling",
        randomised_when={"solver": ("sag", "saga", "liblinear")},
        iterations="n_iter_",
    ),
    "svc": Implementation(
        "sklearn.svm:SVC",
        same("C", "kernel", "degree", "gamma", "coef0", "tol", "max_iter", "cache_size",
             "class_weight", "random_state"),
        # random_state only shuffles for probability calibration, which accelml never asks for
        iterations="n_iter_",
    ),
    "knn_classifier": Implementation(
        "sklearn.neighbors:KNeighborsClassifier",
        {**same("n_neighbors", "weights", "leaf_size", "p", "metric", "n_jobs"),
         "neighbor_search": _NEIGHBOR_SEARCH},
    ),
    "knn_regressor": Implementation(
        "sklearn.neighbors:KNeighborsRegressor",
        {**same("n_neighbors", "weights", "leaf_size", "p", "metric", "n_jobs"),
         "neighbor_search": _NEIGHBOR_SEARCH},
    ),
    "random_forest_classifier": Implementation(
        "sklearn.ensemble:RandomForestClassifier",
        same("n_estimators", "criterion", "max_depth", "min_samples_split", "min_samples_leaf",
             "max_features", "bootstrap", "max_samples", "class_weight", "random_state", "n_jobs"),
        randomised=_FOREST,
    ),
    "random_forest_regressor": Implementation(
        "sklearn.ensemble:RandomForestRegressor",
        same("n_estimators", "criterion", "max_depth", "min_samples_split", "min_samples_leaf",
             "max_features", "bootstrap", "max_samples", "random_state", "n_jobs"),
        randomised=_FOREST,
    ),
})

_HIST_GRADIENT_BOOSTING = {
    **same("learning_rate", "max_depth", "min_samples_leaf", "l2_regularization",
           "max_bins", "early_stopping", "random_state"),
    "max_leaf_nodes": Convert(
        lambda value: {"max_leaf_nodes": None if value == NO_LIMIT else value},
        f"max_leaf_nodes ({NO_LIMIT!r} -> None: no limit)",
    ),
    "n_estimators": Rename("max_iter", "HistGradientBoosting's max_iter= (boosting rounds)"),
    "n_jobs": Unsupported(
        "HistGradientBoosting has no n_jobs; it uses every OpenMP thread "
        "(limit them with OMP_NUM_THREADS or threadpoolctl)"
    ),
}

BACKEND = Backend(
    name="sklearn",
    summary="stock scikit-learn, the reference",
    devices=("cpu",),
    probe=ImportProbe("sklearn", "scikit-learn"),
    repeat_expectation=EveryCase(True, "scikit-learn repeats bitwise with a seed and a fixed "
                                       "thread count"),
    libraries=("scikit-learn",),
    how_to_get={"cpu": "pip install scikit-learn"},
    implementations=MappingProxyType({
        **IMPLEMENTATIONS,
        "gradient_boosting_classifier": Implementation(
            "sklearn.ensemble:HistGradientBoostingClassifier", _HIST_GRADIENT_BOOSTING,
            iterations="n_iter_"),
        "gradient_boosting_regressor": Implementation(
            "sklearn.ensemble:HistGradientBoostingRegressor", _HIST_GRADIENT_BOOSTING,
            iterations="n_iter_"),
    }),
)
