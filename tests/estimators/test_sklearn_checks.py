"""scikit-learn's own estimator checks on every algorithm x backend that can run here.

A check that cannot pass is listed with the reason as an expected failure (pytest reports it
as xfail, or xpass where this data happens to pass it): accelml's own choices, the library's
known gaps, and what scikit-learn's own test suite expects to fail for the same stock class.
"""

from __future__ import annotations

import warnings

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from accelml.estimators import Estimator, algorithms, get_backend

EVERYWHERE = {
    "check_do_not_raise_errors_in_init_or_set_params": (
        "accelml rejects unknown algorithm/backend/device/parameter names when the estimator is "
        "built or set_params is called, so a typo in a spec fails before any work is scheduled"
    ),
}

XGBOOST = {
    "check_n_features_in_after_fitting": (
        "XGBoost's wrapper checks the column count in its C++ predictor, not via n_features_in_"),
    "check_fit2d_predict1d": "XGBoost's C++ error for 1-d input does not say 'Reshape your data'",
    "check_estimators_empty_data_messages": "XGBoost accepts an empty training set without a ValueError",
    "check_requires_y_none": "XGBoost's error for y=None is not scikit-learn's 'requires y to be passed'",
    "check_sample_weight_equivalence_on_dense_data": (
        "XGBoost's base_score and min_child_weight (a hessian sum) make weights differ from repeats"),
    "check_sample_weight_equivalence_on_sparse_data": (
        "XGBoost's base_score and min_child_weight (a hessian sum) make weights differ from repeats"),
    "check_all_zero_sample_weights_error": (
        "XGBoost fails on all-zero weights with a base_score error that does not mention weights"),
}

EXPECTED = {
    ("linear_regression", "sklearnex"): {
        "check_sample_weight_equivalence_on_dense_data": (
            "oneDAL's weighted least squares differs from repeated rows beyond rtol=1e-7"),
    },
    ("svc", "sklearnex"): {
        "check_sample_weights_not_an_array": (
            "sklearnex's SVC reshapes sample_weight with NumPy functions an array-like may refuse"),
    },
    ("gradient_boosting_classifier", "xgboost"): {
        **XGBOOST,
        "check_classifiers_multilabel_output_format_predict": (
            "XGBoost predicts multilabel targets as float64, not the targets' integer dtype"),
    },
    ("gradient_boosting_regressor", "xgboost"): {
        **XGBOOST,
        "check_complex_data": "XGBoost's C++ error for complex input is not 'Complex data not supported'",
        "check_regressor_multioutput": "XGBoost predicts multi-output targets as float32",
    },
}

# Few trees: the checks fit hundreds of times; the contract does not depend on the size.
SMALL = {"n_estimators": 10}


def _available_estimators() -> list[Estimator]:
    estimators = []
    for info in algorithms():
        for backend in info.backends:
            if not get_backend(backend).availability("cpu").available:
                continue
            small = SMALL if "n_estimators" in Estimator(info.name).get_params() else {}
            estimators.append(Estimator(info.name, backend=backend, **small))
    return estimators


def _stock_expected_failures(estimator: Estimator) -> dict[str, str]:
    """What scikit-learn's own test suite expects to fail for the stock class of this algorithm
    (sklearn and sklearnex backends: sklearnex's classes subclass the stock ones)."""
    if estimator.backend not in ("sklearn", "sklearnex"):
        return {}
    from sklearn.utils._test_common.instance_generator import _get_expected_failed_checks

    stock = get_backend("sklearn").implementations[estimator.algorithm].estimator_class()()
    return {check: f"stock scikit-learn expects this of {type(stock).__name__} too: {reason}"
            for check, reason in _get_expected_failed_checks(stock).items()}


def _expected_failed_checks(estimator: Estimator) -> dict[str, str]:
    return {
        **EVERYWHERE,
        **_stock_expected_failures(estimator),
        **EXPECTED.get((estimator.algorithm, estimator.backend), {}),
    }


@pytest.fixture(autouse=True)
def one_thread():
    """One OpenMP/BLAS thread: on a loaded 2-core CI machine, spinning OpenMP teams of tiny
    fits cost far more than they save."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@parametrize_with_checks(_available_estimators(), expected_failed_checks=_expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)
