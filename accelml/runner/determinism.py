"""Deterministic mode: what each backend needs to repeat itself.

:func:`settings_for` describes the seed, thread counts, environment variables and library
switches a case needs for run-to-run bitwise identity; :func:`apply` puts them in place in
the calling process. Whether identity is then expected, and why not where it is not, is
:mod:`accelml.expectations`.

What deterministic mode sets, by backend:

=============  ==========================================================================
every case     ``PYTHONHASHSEED``; Python's and NumPy's global seeds; ``random_state`` =
               the case seed where the algorithm takes one and the spec left it unset;
               a fixed thread count (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
               ``OPENBLAS_NUM_THREADS``; ``n_jobs`` where the algorithm takes one)
sklearn        nothing more: with a seed and a fixed thread count it repeats itself
sklearnex      nothing more (oneDAL's CPU algorithms repeat with a seed and fixed threads)
xgboost        ``random_state`` (XGBoost's ``seed``) and ``n_jobs`` (``nthread``); the CUDA
               histogram is deterministic by default (pre-rounded sums, XGBoost >= 1.1)
keras (TF)     ``keras.utils.set_random_seed``, ``tf.config.experimental.enable_op_determinism()``
               (also ``TF_DETERMINISTIC_OPS=1``, ``TF_CUDNN_DETERMINISTIC=1``), TF intra/inter-op
               threads; on CUDA ``CUBLAS_WORKSPACE_CONFIG=:4096:8``
keras (JAX)    ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` (before JAX is imported)
horovod        ``HOROVOD_FUSION_THRESHOLD=0`` (tensor fusion off: each gradient is reduced on
               its own, so chunk boundaries and summation order do not depend on timing) and
               ``HOROVOD_HIERARCHICAL_ALLREDUCE=0``
=============  ==========================================================================

The keras rows are what the built-in strategies' records declare
(:class:`accelml.dl.strategies.Determinism`); a strategy plug-in declares its own.

Environment variables must be in place before the libraries that read them are imported:
the runner passes ``settings.environment`` to the case's process (or calls :func:`apply`
first thing in it); every Horovod rank inherits them from ``horovodrun``/``srun``, and each
rank calls :func:`apply_tensorflow` before building its model.

>>> from types import SimpleNamespace
>>> case = SimpleNamespace(algorithm="kmeans", backend="sklearn", device="cpu", ranks=1,
...                        strategy=None, params=(("n_clusters", 3),), seed=7, threads=2)
>>> settings = settings_for(case)
>>> dict(settings.params)["random_state"], dict(settings.environment)["OMP_NUM_THREADS"]
(7, '2')
"""

from __future__ import annotations

import dataclasses
import os
import random
from dataclasses import dataclass, field
from typing import Any

from accelml.cases import Case, CaseLike, Experiment, JSONScalar
from accelml.dl.strategies import strategy_named
from accelml.expectations import algorithm_params, is_deep_learning

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
CUDA_VARIABLES = (("CUBLAS_WORKSPACE_CONFIG", ":4096:8"),)


@dataclass(frozen=True)
class DeterministicSettings:
    """Everything deterministic mode sets for one case (a description; :func:`apply` acts on it)."""

    seed: int
    threads: int | None
    environment: tuple[tuple[str, str], ...]       # variables set before libraries load
    params: tuple[tuple[str, JSONScalar], ...]     # the case's estimator params, seed filled in
    tensorflow: bool = False                       # seed TF and enable op determinism
    training: tuple[tuple[str, JSONScalar], ...] = ()   # TrainingConfig keys for keras cases
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "threads": self.threads,
                "environment": dict(self.environment), "params": dict(self.params),
                "tensorflow": self.tensorflow, "training": dict(self.training),
                "notes": list(self.notes)}


def deterministic_params(algorithm: str,
                         params: tuple[tuple[str, JSONScalar], ...] | dict[str, JSONScalar],
                         seed: int, threads: int | None = None
                         ) -> tuple[tuple[str, JSONScalar], ...]:
    """``params`` with ``random_state`` (and ``n_jobs``) filled in where the spec left them unset.

    A value the spec gives is kept: deterministic mode never overrides a choice.

    >>> deterministic_params("random_forest_classifier", {"n_estimators": 10}, seed=3, threads=1)
    (('n_estimators', 10), ('n_jobs', 1), ('random_state', 3))
    >>> deterministic_params("linear_regression", {}, seed=3)
    ()
    """
    values = dict(params)
    accepted = algorithm_params(algorithm)
    if "random_state" in accepted and values.get("random_state") is None:
        values["random_state"] = seed
    if threads is not None and "n_jobs" in accepted and values.get("n_jobs") is None:
        values["n_jobs"] = threads
    return tuple(sorted(values.items()))


def settings_for(case: CaseLike, *, seed: int | None = None,
                 threads: int | None = None) -> DeterministicSettings:
    """What deterministic mode sets for ``case`` (nothing is changed; see :func:`apply`).

    ``seed`` and ``threads`` default to the case's own (``case.seed``, ``case.threads``);
    without a thread count the threads stay as the executor gave them, and the notes say
    that bitwise identity then holds only on the same core count.
    """
    seed = int(getattr(case, "seed", 0) if seed is None else seed)
    threads = getattr(case, "threads", None) if threads is None else threads
    environment: dict[str, str] = {"PYTHONHASHSEED": str(seed)}
    notes: list[str] = []
    if threads is not None:
        environment.update({name: str(threads) for name in THREAD_VARIABLES})
    else:
        notes.append("no fixed thread count: identity holds only on the same number of cores")
    tensorflow = False
    training: tuple[tuple[str, JSONScalar], ...] = ()
    if is_deep_learning(case):
        # accelml.dl seeds the engine and enables op determinism in every rank for
        # deterministic=True; the variables the case's strategy record declares (set before
        # its libraries load) cover what it does not.
        training = (("deterministic", True), ("seed", seed))
        determinism = strategy_named(case.strategy).determinism
        environment.update(determinism.environment(threads))
        tensorflow = determinism.seeds_tensorflow
        if case.device in ("cuda", "gpu"):
            environment.update(CUDA_VARIABLES)
            notes.append("deterministic GPU kernels are slower; timings in this mode are not "
                         "the library's best")
        notes.extend(determinism.notes)
        params = tuple(sorted(dict(case.params).items()))
    else:
        params = deterministic_params(case.algorithm, case.params, seed, threads)
    return DeterministicSettings(seed=seed, threads=threads,
                                 environment=tuple(sorted(environment.items())),
                                 params=params, tensorflow=tensorflow, training=training,
                                 notes=tuple(notes))


def apply(case_or_settings: CaseLike | DeterministicSettings, *, tensorflow: bool = False,
          **overrides: Any) -> DeterministicSettings:
    """Put deterministic mode in place in this process, before the case runs.

    Sets the environment variables and seeds Python and NumPy. With ``tensorflow=True``
    (a TF case trained in this very process) it also seeds TF and turns on op determinism
    (:func:`apply_tensorflow`); a keras case run by ``accelml.dl`` gets that from
    ``settings.training`` (``deterministic=True``) in every rank instead. Environment
    variables read at import time (``OMP_NUM_THREADS``, ``XLA_FLAGS``, ``HOROVOD_*``) only
    take effect if the library is imported after this call, so the runner calls it first
    thing in the case's process. Returns the settings it applied; ``overrides`` go to
    :func:`settings_for`.
    """
    settings = (case_or_settings if isinstance(case_or_settings, DeterministicSettings)
                else settings_for(case_or_settings, **overrides))
    os.environ.update(dict(settings.environment))
    random.seed(settings.seed)
    import numpy as np

    np.random.seed(settings.seed % 2**32)
    if tensorflow and settings.tensorflow:
        apply_tensorflow(settings.seed, settings.threads)
    return settings


def deterministic_case(case: Case, seed: int | None = None) -> Case:
    """A spec ``Case`` in deterministic mode: the seed filled into its params (so the case id
    records it); a keras case also gets ``deterministic = true`` and its ``seed`` as training
    keys, which ``accelml.dl`` honours in every rank. ``n_jobs`` is left to the runner, which
    sets it from the case's thread count without changing the case's identity."""
    settings = settings_for(case, seed=seed)
    if is_deep_learning(case):
        params = {**dict(case.params), **dict(settings.training)}
    else:
        params = dict(deterministic_params(case.algorithm, case.params, settings.seed))
    return dataclasses.replace(case, params=tuple(sorted(params.items())))


def deterministic_experiment(experiment: Experiment, seed: int | None = None
                             ) -> tuple[Experiment, dict[str, str]]:
    """``experiment`` in deterministic mode (marked ``deterministic``, its cases seeded), and
    the environment the client passes to every case process (``PYTHONHASHSEED``,
    TF/cuDNN/XLA determinism, Horovod fusion off). Thread-count variables are left to the
    runner, which sets them per case. The spec text (and its hash) is unchanged, so
    ``--resume`` keeps working as long as the resumed run is deterministic too. Applying it
    twice changes nothing. Runs get here only through
    :func:`accelml.orchestration.plan_run` (``run_experiment(deterministic=...)``).

    >>> from accelml.spec.load import load_spec_text
    >>> spec = load_spec_text(
    ...     '[datasets.d]\\nsource = "shipped"\\nname = "iris"\\n[[cases]]\\n'
    ...     'algorithm = "random_forest_classifier"\\nbackend = "sklearn"\\ndataset = "d"\\n',
    ...     "inline.toml")
    >>> experiment, environment = deterministic_experiment(spec)
    >>> experiment.deterministic, dict(experiment.cases[0].params), environment["PYTHONHASHSEED"]
    (True, {'random_state': 0}, '0')
    >>> deterministic_experiment(experiment) == (experiment, environment)
    True
    """
    cases = tuple(deterministic_case(case, seed) for case in experiment.cases)
    environment: dict[str, str] = {}
    for case in experiment.cases:
        settings = settings_for(case, seed=seed, threads=None)
        environment.update({name: value for name, value in settings.environment
                            if name not in THREAD_VARIABLES})
    return dataclasses.replace(experiment, cases=cases, deterministic=True), environment


def apply_tensorflow(seed: int, threads: int | None = None) -> None:
    """Seed Python, NumPy and TF (``keras.utils.set_random_seed``), enable TF op determinism
    and fix TF's thread pools. Call it in every rank, before the model is built."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    if threads is not None:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:
            # TF's runtime is already initialised; TF_NUM_*_THREADS (set by apply) took effect.
            pass
