"""The algorithms accelml knows: their task, their methods and their accelml-level parameters.

Each algorithm is one :class:`Algorithm` entry in :data:`ALGORITHMS`. Its parameters are the
accelml names with their defaults; how each one reaches a library is said by the backend
modules (``accelml/estimators/<backend>.py``), one translation rule per parameter.

The defaults are scikit-learn's, except where a fair comparison needs one setting on every
backend (``gradient_boosting_*``: ``early_stopping=False``, so both libraries build the same
number of trees).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from accelml.cases import JSONScalar

Task = Literal["classification", "regression", "clustering", "decomposition"]

#: The scikit-learn estimator type of each task (what ``is_classifier`` and scoring look at).
ESTIMATOR_TYPE: Mapping[str, str] = MappingProxyType({
    "classification": "classifier",
    "regression": "regressor",
    "clustering": "clusterer",
    "decomposition": "transformer",
})


@dataclass(frozen=True)
class Param:
    """One accelml parameter: its name, default and what it means.

    ``minimum`` (with ``integer``) bounds a numeric parameter: a value that is not such a
    number (nor the default, nor one of ``words``) is refused when the case is validated,
    on every backend, before any library sees it.

    >>> Param("n_clusters", 8, minimum=1, integer=True).value_problem("three")
    'expected an integer >= 1, got a string'
    >>> Param("n_init", "auto", minimum=1, integer=True).value_problem("auto") is None
    True
    >>> Param("C", 1.0, minimum=0, exclusive=True).value_problem(0)
    'expected a number > 0, got 0'

    """

    name: str
    default: JSONScalar
    doc: str = ""
    minimum: float | None = None
    integer: bool = False
    words: tuple[str, ...] = ()
    exclusive: bool = False
    """The minimum itself is refused (``C > 0``)."""

    def value_problem(self, value: object) -> str | None:
        """Why ``value`` cannot be this parameter's value (None when it can)."""
        if self.minimum is None or (value == self.default
                                    and isinstance(value, bool) == isinstance(self.default, bool)):
            return None
        if isinstance(value, str) and value in self.words:
            return None
        number = "an integer" if self.integer else "a number"
        expected = f"expected {number} {'>' if self.exclusive else '>='} {self.minimum:g}" + (
            f" or one of {', '.join(map(repr, self.words))}" if self.words else "")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                self.integer and not isinstance(value, int)):
            kind = {str: "a string", bool: "a boolean", float: "a number"}.get(type(value),
                                                                            type(value).__name__)
            return f"{expected}, got {kind}"
        if value < self.minimum or (self.exclusive and value == self.minimum):
            return f"{expected}, got {value!r}"
        return None


@dataclass(frozen=True)
class Objective:
    """What an iterative fit minimises, as the runner records it: the score ``score`` (lower
    is better). Two backends whose values differ by more than ``tolerance_rel`` (relative to
    the reference's) reached a different optimum; ``why`` says how that happens."""

    score: str
    tolerance_rel: float
    why: str


@dataclass(frozen=True)
class Algorithm:
    """One algorithm: its task, the methods it offers on every backend, its parameters.

    ``main_phase``: the phase whose speedup users want first (``"predict"`` for neighbours,
    whose fit only stores the data); ``objective``: what its fit minimises, when that is
    recorded (None: no optimum to compare).
    """

    name: str
    task: Task
    methods: tuple[str, ...]
    params: tuple[Param, ...]
    doc: str = ""
    main_phase: str = "fit"
    objective: Objective | None = None

    @property
    def estimator_type(self) -> str:
        return ESTIMATOR_TYPE[self.task]

    @property
    def defaults(self) -> dict[str, JSONScalar]:
        return {param.name: param.default for param in self.params}

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(param.name for param in self.params)


_CLASSIFIER = ("predict", "predict_proba", "score")
_REGRESSOR = ("predict", "score")

NO_LIMIT = "none"
"""The word a spec writes for scikit-learn's ``None`` where a limit can be lifted (TOML has no
null): ``max_leaf_nodes = "none"``."""

_N_JOBS = Param("n_jobs", None, "threads/processes the library may use (None: library default)")
_RANDOM_STATE = Param("random_state", None, "seed")


def _gradient_boosting(task: Task) -> Algorithm:
    return Algorithm(
        f"gradient_boosting_{'classifier' if task == 'classification' else 'regressor'}",
        task,
        _CLASSIFIER if task == "classification" else _REGRESSOR,
        (
            Param("n_estimators", 100, "boosting rounds (trees per class)", 1, True),
            Param("learning_rate", 0.1, "shrinkage", 0, exclusive=True),
            Param("max_depth", None, "depth limit (None: unlimited, leaves limited by max_leaf_nodes)"),
            Param("max_leaf_nodes", 31, f"leaves per tree (leaf-wise growth; {NO_LIMIT!r}: no limit)",
                  2, True, (NO_LIMIT,)),
            Param("min_samples_leaf", 20, "smallest leaf", 1, True),
            Param("l2_regularization", 0.0, "L2 penalty on leaf values"),
            Param("max_bins", 255, "histogram bins per feature", 2, True),
            Param("early_stopping", False, "stop on a held-out split (off: same trees on every backend)"),
            _RANDOM_STATE,
            _N_JOBS,
        ),
        "histogram gradient boosting (scikit-learn HistGradientBoosting* vs XGBoost hist)",
    )


def _random_forest(task: Task) -> Algorithm:
    classifier = task == "classification"
    return Algorithm(
        f"random_forest_{'classifier' if classifier else 'regressor'}",
        task,
        _CLASSIFIER if classifier else _REGRESSOR,
        (
            Param("n_estimators", 100, "trees", 1, True),
            Param("criterion", "gini" if classifier else "squared_error", "split quality"),
            Param("max_depth", None, "depth limit"),
            Param("min_samples_split", 2, "smallest node that is split", 2, True),
            Param("min_samples_leaf", 1, "smallest leaf", 1, True),
            Param("max_features", "sqrt" if classifier else 1.0, "features tried per split"),
            Param("bootstrap", True, "sample rows with replacement"),
            Param("max_samples", None, "rows per tree when bootstrapping"),
            *((Param("class_weight", None, "class weights"),) if classifier else ()),
            _RANDOM_STATE,
            _N_JOBS,
        ),
    )


def _knn(task: Task) -> Algorithm:
    classifier = task == "classification"
    return Algorithm(
        f"knn_{'classifier' if classifier else 'regressor'}",
        task,
        _CLASSIFIER if classifier else _REGRESSOR,
        (
            Param("n_neighbors", 5, "neighbours voting", 1, True),
            Param("weights", "uniform", "'uniform' or 'distance'"),
            Param("neighbor_search", "auto", "'auto', 'ball_tree', 'kd_tree' or 'brute' (sklearn's algorithm=)"),
            Param("leaf_size", 30, "tree leaf size"),
            Param("p", 2, "Minkowski power"),
            Param("metric", "minkowski", "distance"),
            _N_JOBS,
        ),
        main_phase="predict",
    )


_TABLE = (
    Algorithm(
        "kmeans", "clustering", ("predict", "transform", "fit_predict", "fit_transform", "score"),
        (
            Param("n_clusters", 8, "clusters", 1, True),
            Param("init", "k-means++", "'k-means++' or 'random'"),
            Param("n_init", "auto", "restarts", 1, True, ("auto",)),
            Param("max_iter", 300, "Lloyd iterations", 1, True),
            Param("tol", 1e-4, "convergence tolerance", 0),
            Param("variant", "lloyd", "'lloyd' or 'elkan' (sklearn's algorithm=)"),
            Param("copy_x", True, "leave X untouched"),
            _RANDOM_STATE,
            Param("fair_start", False,
                  "start every backend from scikit-learn's (the reference's) initial centroids "
                  "for random_state, given to the library as init=array with n_init=1, so "
                  "iterations and time per iteration are compared from the same start"),
        ),
        objective=Objective(
            "inertia", 1e-3,
            "Lloyd iterations from different initial centroids end in different local optima "
            "(fair_start = true starts every backend from the reference's centroids)"),
    ),
    Algorithm(
        "dbscan", "clustering", ("fit_predict",),
        (
            Param("eps", 0.5, "neighbourhood radius", 0, exclusive=True),
            Param("min_samples", 5, "core point neighbours", 1, True),
            Param("metric", "euclidean", "distance"),
            Param("neighbor_search", "auto", "'auto', 'ball_tree', 'kd_tree' or 'brute' (sklearn's algorithm=)"),
            Param("leaf_size", 30, "tree leaf size"),
            Param("p", None, "Minkowski power"),
            _N_JOBS,
        ),
    ),
    Algorithm(
        "pca", "decomposition", ("transform", "fit_transform", "inverse_transform", "score"),
        (
            Param("n_components", None, "components kept"),
            Param("whiten", False, "scale components to unit variance"),
            Param("svd_solver", "auto", "'auto', 'full', 'covariance_eigh', 'arpack', 'randomized'"),
            Param("tol", 0.0, "arpack tolerance"),
            Param("iterated_power", "auto", "randomized power iterations"),
            Param("copy", True, "leave X untouched"),
            _RANDOM_STATE,
        ),
    ),
    Algorithm(
        "linear_regression", "regression", _REGRESSOR,
        (
            Param("fit_intercept", True, "fit an intercept"),
            Param("positive", False, "force positive coefficients"),
            Param("copy_X", True, "leave X untouched"),
            _N_JOBS,
        ),
    ),
    Algorithm(
        "ridge", "regression", _REGRESSOR,
        (
            Param("alpha", 1.0, "L2 penalty", 0),
            Param("fit_intercept", True, "fit an intercept"),
            Param("solver", "auto", "solver"),
            Param("max_iter", None, "iterative solver limit"),
            Param("tol", 1e-4, "iterative solver tolerance"),
            Param("positive", False, "force positive coefficients"),
            Param("copy_X", True, "leave X untouched"),
            _RANDOM_STATE,
        ),
    ),
    Algorithm(
        "logistic_regression", "classification", ("predict", "predict_proba", "decision_function", "score"),
        (
            Param("C", 1.0, "inverse regularisation strength", 0, exclusive=True),
            Param("l1_ratio", 0.0, "elastic-net mix (0: L2, 1: L1)"),
            Param("solver", "lbfgs", "solver"),
            Param("max_iter", 100, "solver iterations", 1, True),
            Param("tol", 1e-4, "solver tolerance"),
            Param("fit_intercept", True, "fit an intercept"),
            Param("class_weight", None, "class weights"),
            _RANDOM_STATE,
        ),
        objective=Objective(
            "log_loss", 5e-3,
            "the solvers stopped at different points (tolerance or max_iter reached before "
            "convergence); the held-out log loss tells the two fits apart"),
    ),
    Algorithm(
        "svc", "classification", ("predict", "decision_function", "score"),
        (
            Param("C", 1.0, "penalty", 0, exclusive=True),
            Param("kernel", "rbf", "kernel"),
            Param("degree", 3, "polynomial degree"),
            Param("gamma", "scale", "kernel coefficient"),
            Param("coef0", 0.0, "kernel constant"),
            Param("tol", 1e-3, "stopping tolerance"),
            Param("max_iter", -1, "solver limit (-1: none)"),
            Param("cache_size", 200, "kernel cache (MB)"),
            Param("class_weight", None, "class weights"),
            _RANDOM_STATE,
        ),
    ),
    _knn("classification"),
    _knn("regression"),
    _random_forest("classification"),
    _random_forest("regression"),
    _gradient_boosting("classification"),
    _gradient_boosting("regression"),
)

#: Every algorithm by name. A new algorithm is one more entry here plus one
#: :class:`~accelml.estimators._registry.Implementation` per backend module that has it.
ALGORITHMS: Mapping[str, Algorithm] = MappingProxyType({algorithm.name: algorithm for algorithm in _TABLE})
