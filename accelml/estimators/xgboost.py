"""Backend ``xgboost``: XGBoost's ``hist`` tree method on ``device="cpu"`` or ``device="cuda"``.

It implements gradient boosting, translated from scikit-learn's HistGradientBoosting
parameters so both libraries grow the same kind of trees: leaf-wise
(``grow_policy="lossguide"``) with at most ``max_leaf_nodes`` leaves, no depth limit unless
one is given, the same learning rate, rounds, L2 penalty and bins. Classifier labels of any
type are encoded to 0..n-1 for XGBoost and decoded back (``classes_`` holds the originals).

Device synchronisation: XGBoost's ``fit`` returns after the last boosting round has finished
on the device, and ``predict``/``predict_proba`` return host NumPy arrays, so a prediction in
hand means the device work is done; no extra sync call is needed for timing.

If the CUDA device is asked for on a machine without a GPU, accelml raises
``UnavailableError`` instead of letting XGBoost fall back to the CPU with a warning.
"""

from __future__ import annotations

from types import MappingProxyType

from accelml.probe import probe_xgboost

from ._registry import Backend, Convert, Implementation, Rename, Same, Unsupported

_GRADIENT_BOOSTING = MappingProxyType({
    "n_estimators": Same(),
    "learning_rate": Same(),
    "max_depth": Convert(
        lambda value: {"max_depth": 0 if value is None else value},
        "max_depth (None -> 0: unlimited under grow_policy='lossguide')",
    ),
    "max_leaf_nodes": Convert(
        lambda value: {"max_leaves": 0 if value is None else value},
        "max_leaves (None -> 0: unlimited)",
    ),
    "min_samples_leaf": Unsupported(
        "XGBoost bounds a leaf by its hessian sum (min_child_weight, left at 1), not by a row count"
    ),
    "l2_regularization": Rename("reg_lambda", "passed explicitly: XGBoost's own default is 1, sklearn's 0"),
    "max_bins": Rename("max_bin", "sklearn keeps one more bin for missing values"),
    "early_stopping": Unsupported(
        "XGBoost stops early only with an eval_set passed to fit; accelml trains all n_estimators rounds"
    ),
    "random_state": Same(),
    "n_jobs": Same(),
})

_FIXED = MappingProxyType({"tree_method": "hist", "grow_policy": "lossguide"})

BACKEND = Backend(
    name="xgboost",
    devices=("cpu", "cuda"),
    probe=probe_xgboost,
    how_to_get={
        "cpu": "pip install xgboost",
        "cuda": "run on a machine with an NVIDIA GPU and driver, with the CUDA-enabled 'xgboost' wheel",
    },
    device_kwargs=lambda device: {"device": device},
    implementations=MappingProxyType({
        "gradient_boosting_classifier": Implementation(
            "xgboost:XGBClassifier", _GRADIENT_BOOSTING, _FIXED, encodes_labels=True),
        "gradient_boosting_regressor": Implementation(
            "xgboost:XGBRegressor", _GRADIENT_BOOSTING, _FIXED),
    }),
    missing=MappingProxyType({}),
    doc="XGBoost hist trees, CPU or CUDA",
)
