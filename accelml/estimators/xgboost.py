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

Data on the GPU: on ``cuda`` with CuPy installed the runner copies the features into GPU
memory first (the ``place`` phase, :attr:`Backend.to_device`), so XGBoost sketches the
quantiles and builds its histogram index on the GPU and ``fit`` times the training, not the
host-side preparation: from NumPy arrays XGBoost does that preparation on the CPU inside
``fit`` (on 16 cores of an H100 machine, 10M x 50 rows took 13.2 s against 4.9 s on 64
cores). Without CuPy the fit takes the host arrays, as XGBoost itself does.

Several workers: a case with ``ranks = N`` trains through ``xgboost.dask`` (its
``DaskXGBClassifier``/``DaskXGBRegressor`` take the same keyword arguments) on a dask cluster
of N worker processes, one per GPU on ``cuda`` (:mod:`accelml.runner.dask_workers`). Its
results differ from one worker's: each worker sketches the quantiles of its own rows and the
sketches are merged, so the bin edges move, and the histograms are summed across workers in
another order.

Set-up and rounds: the runner gives each timed fit a round clock (:data:`ROUND_CLOCK`, a
training callback timing the rounds where they run, on the workers for xgboost.dask) and
records the rest of each fit as its ``setup`` phase (DMatrix/QuantileDMatrix, tracker, communicator) and
the seconds per round apart (:class:`accelml.results.records.BoostingRounds`).

Repeats: with a seed and a fixed ``nthread`` the CPU histogram repeats bitwise, and so does
the CUDA one on one GPU model (its sums are pre-rounded). CPU and CUDA differ from each
other by design.

>>> probe("cpu").available
True
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from accelml.cases import CaseLike, Expectation
from accelml.probe import Availability, ImportProbe, list_gpus

from ._algorithms import NO_LIMIT
from ._registry import Backend, Convert, Implementation, Rename, RoundClock, Rule, Same, Unsupported


def probe(device: str) -> Availability:
    """xgboost imports; for ``cuda`` the wheel is built with CUDA and NVML sees a GPU."""
    imported = ImportProbe("xgboost", "xgboost")(device)
    if not imported.available or device == "cpu":
        return imported
    version = imported.version
    if not importlib.import_module("xgboost").build_info().get("USE_CUDA", False):
        return Availability(
            "xgboost", "cuda", False, version,
            "this xgboost wheel is built without CUDA (install the full 'xgboost' wheel, not 'xgboost-cpu')",
        )
    gpus, gpu_reason = list_gpus()
    if not gpus:
        return Availability("xgboost", "cuda", False, version, gpu_reason)
    return Availability("xgboost", "cuda", True, version, f"{len(gpus)} GPU(s)")


def repeat_expectation(case: CaseLike, deterministic: bool) -> Expectation:
    """Both devices repeat bitwise with a seed (deterministic mode or not: hist draws nothing
    unless subsampling is asked for, and accelml passes the seed it is given).

    >>> from types import SimpleNamespace
    >>> repeat_expectation(SimpleNamespace(device="cuda"), False).bitwise
    True
    """
    if case.device == "cuda":
        return Expectation(True, "XGBoost's CUDA histogram pre-rounds its sums, so the same "
                                 "GPU model repeats bitwise (XGBoost >= 1.1)")
    return Expectation(True, "XGBoost hist on CPU repeats bitwise with a seed and fixed nthread")

def to_device(device: str) -> Callable[[np.ndarray], object] | None:
    """On ``cuda`` where CuPy is installed, :func:`to_gpu`; else None (host arrays).

    >>> to_device("cpu") is None
    True
    """
    if device != "cuda" or importlib.util.find_spec("cupy") is None:
        return None
    return to_gpu


def to_gpu(array: np.ndarray) -> object:
    """``array`` copied into the current GPU's memory (a CuPy array), once the copy is done."""
    cupy = importlib.import_module("cupy")
    placed = cupy.asarray(array)
    cupy.cuda.get_current_stream().synchronize()
    return placed


def _round_clock_params() -> Mapping[str, object]:
    """A fresh :class:`~accelml.estimators._xgboost_rounds.RoundTimer` as XGBoost's ``callbacks``
    (the module imports xgboost, so it is imported here, when a fit asks for it)."""
    clock = importlib.import_module("accelml.estimators._xgboost_rounds")
    return {"callbacks": [clock.RoundTimer()]}


def _read_round_clock(fitted: object) -> tuple[int, float] | None:
    clock = importlib.import_module("accelml.estimators._xgboost_rounds")
    reading: tuple[int, float] | None = clock.read(fitted)
    return reading


ROUND_CLOCK = RoundClock(_round_clock_params, _read_round_clock)
"""XGBoost's rounds timed inside the training, apart from the fit's set-up."""


def boosted_rounds(model: Any) -> int:
    """The boosting rounds a fitted XGBoost model ran: ``n_estimators``, or fewer where early
    stopping ended the fit (scikit-learn's gradient boosting reports its own as ``n_iter_``)."""
    rounds: int = model.get_booster().num_boosted_rounds()
    return rounds


def _leaves(value: object) -> Mapping[str, object]:
    """XGBoost's leaf limit for ``max_leaf_nodes``; without one, depth-wise growth.

    Leaf-wise growth (``lossguide``) only differs from depth-wise growth in which leaf it
    splits first when leaves are counted; with no limit both split every node that gains,
    down to ``max_depth``. Depth-wise, xgboost.dask sums the histograms of a whole level in
    one all-reduce; leaf-wise it needs one per leaf: on 2 H200s through xgboost.dask, 1M x 50
    rows at depth 8 took 0.71 s per round leaf-wise against 0.026 s depth-wise (1 GPU: the
    same time either way; ``benchmarks/gpu/xgb_dask_probe.py``).

    >>> _leaves(63), _leaves("none")
    ({'max_leaves': 63}, {'max_leaves': 0, 'grow_policy': 'depthwise'})
    """
    if value == NO_LIMIT:
        return {"max_leaves": 0, "grow_policy": "depthwise"}
    return {"max_leaves": value}


_GRADIENT_BOOSTING: Mapping[str, Rule] = MappingProxyType({
    "n_estimators": Same(),
    "learning_rate": Same(),
    "max_depth": Convert(
        lambda value: {"max_depth": 0 if value is None else value},
        "max_depth (None -> 0: unlimited under grow_policy='lossguide')",
    ),
    "max_leaf_nodes": Convert(
        _leaves,
        f"max_leaves ({NO_LIMIT!r} -> 0, grown depth-wise: with no leaf limit, the same trees as "
        "leaf-wise growth, and on several workers one histogram all-reduce per level, not per leaf)",
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
    summary="XGBoost hist trees, CPU or CUDA",
    devices=("cpu", "cuda"),
    probe=probe,
    repeat_expectation=repeat_expectation,
    cross_backend_reason=("XGBoost and scikit-learn's histogram boosting bin features and find "
                          "splits differently (quantile sketch vs equal-count bins, hessian vs "
                          "row limits)"),
    cross_device_reason=("XGBoost on CPU and CUDA differ by design: other histogram and "
                         "gradient-sum order, so near-tied splits can go either way (issue 7 "
                         "reports 99.67% label agreement on 1M rows)"),
    cross_scale_reason=("xgboost.dask on N workers builds each worker's quantile sketch of its "
                        "own rows and merges them (other bin edges than one sketch of all rows) "
                        "and all-reduces histograms in another summation order, so near-tied "
                        "splits can go either way; XGBoost documents that results depend on "
                        "the number of workers and how the data is partitioned (on small data, where "
                        "every sketch keeps every distinct value, the results can still coincide)"),
    libraries=("xgboost",),
    how_to_get={
        "cpu": "pip install xgboost",
        "cuda": "run on a machine with an NVIDIA GPU and driver, with the CUDA-enabled 'xgboost' wheel",
    },
    device_kwargs=lambda device: {"device": device},
    to_device=to_device,
    round_clock=ROUND_CLOCK,
    implementations=MappingProxyType({
        "gradient_boosting_classifier": Implementation(
            "xgboost:XGBClassifier", _GRADIENT_BOOSTING, _FIXED, encodes_labels=True,
            on_workers="xgboost.dask:DaskXGBClassifier", iterations=boosted_rounds),
        "gradient_boosting_regressor": Implementation(
            "xgboost:XGBRegressor", _GRADIENT_BOOSTING, _FIXED,
            on_workers="xgboost.dask:DaskXGBRegressor", iterations=boosted_rounds),
    }),
    missing=MappingProxyType({}),
)
