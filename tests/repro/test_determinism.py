"""Deterministic mode: what it sets per backend, and that it makes TF training repeat bitwise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from accelml.expectations import pair_expectation, run_to_run_expectation
from accelml.runner.determinism import (
    apply,
    deterministic_experiment,
    deterministic_params,
    settings_for,
)


def _case(**changes):
    base = dict(algorithm="random_forest_classifier", backend="sklearn", device="cpu", ranks=1,
                strategy=None, params=(("n_estimators", 10),), seed=5, threads=2)
    return SimpleNamespace(**{**base, **changes})


def test_classical_cases_get_seed_and_threads_without_overriding_choices():
    settings = settings_for(_case())
    assert dict(settings.params) == {"n_estimators": 10, "random_state": 5, "n_jobs": 2}
    environment = dict(settings.environment)
    assert environment["OMP_NUM_THREADS"] == environment["MKL_NUM_THREADS"] == "2"
    assert environment["PYTHONHASHSEED"] == "5"
    chosen = deterministic_params("random_forest_classifier", {"random_state": 1, "n_jobs": 4}, 9, 2)
    assert dict(chosen) == {"random_state": 1, "n_jobs": 4}
    xgboost = settings_for(_case(algorithm="gradient_boosting_classifier", backend="xgboost",
                                 device="cuda"))
    assert dict(xgboost.params) == {"n_estimators": 10, "random_state": 5, "n_jobs": 2}
    unthreaded = settings_for(_case(threads=None))
    assert "OMP_NUM_THREADS" not in dict(unthreaded.environment)
    assert any("same number of cores" in note for note in unthreaded.notes)


def test_keras_cases_get_tf_determinism_and_horovod_fusion_off():
    horovod = settings_for(_case(algorithm="mnist_cnn", backend="keras", ranks=2,
                                 strategy="horovod", params=(("epochs", 2),)))
    environment = dict(horovod.environment)
    assert environment["HOROVOD_FUSION_THRESHOLD"] == "0"
    assert environment["TF_DETERMINISTIC_OPS"] == "1" and environment["TF_NUM_INTRAOP_THREADS"] == "2"
    assert dict(horovod.training) == {"deterministic": True, "seed": 5}
    assert horovod.tensorflow and dict(horovod.params) == {"epochs": 2}
    gpu = dict(settings_for(_case(algorithm="resnet", backend="keras", device="cuda")).environment)
    assert gpu["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8" and "HOROVOD_FUSION_THRESHOLD" not in gpu
    jax = settings_for(_case(algorithm="mnist_cnn", backend="keras", strategy="jax-pmean"))
    assert "--xla_gpu_deterministic_ops=true" in dict(jax.environment)["XLA_FLAGS"]
    assert not jax.tensorflow


def test_deterministic_experiment_fills_seeds_and_training_keys():
    from accelml.cases import Case, DatasetSpec, Experiment

    dataset = DatasetSpec("d", "shipped", (("name", "iris"),))
    forest = Case("random_forest_classifier", "sklearn", "cpu", dataset, seed=4)
    seeded = Case("kmeans", "sklearn", "cpu", dataset, params=(("random_state", 1),), seed=4)
    keras = Case("mnist_cnn", "keras", "cpu", DatasetSpec("m", "keras", (("name", "mnist"),)),
                 ranks=2, strategy="horovod", params=(("epochs", 1),), seed=4)
    spec = Experiment("e", "text", "e.toml", (dataset,), (forest, seeded, keras))
    experiment, environment = deterministic_experiment(spec)
    assert [dict(c.params) for c in experiment.cases] == [
        {"random_state": 4}, {"random_state": 1},
        {"epochs": 1, "deterministic": True, "seed": 4}]
    assert experiment.cases[0].case_id != forest.case_id          # the seed is part of the case
    assert experiment.cases[1].case_id == seeded.case_id
    assert environment["HOROVOD_FUSION_THRESHOLD"] == "0" and environment["PYTHONHASHSEED"] == "4"
    assert "OMP_NUM_THREADS" not in environment                   # the runner sets threads per case
    assert experiment.text_hash == spec.text_hash


def test_apply_sets_environment_and_seeds(monkeypatch):
    for name in ("OMP_NUM_THREADS", "PYTHONHASHSEED", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    state = np.random.get_state()
    try:
        settings = apply(_case(threads=1, seed=11))
        first = np.random.random_sample()
        apply(settings)
        assert np.random.random_sample() == first
        assert os.environ["OMP_NUM_THREADS"] == "1" and os.environ["PYTHONHASHSEED"] == "11"
    finally:
        np.random.set_state(state)
        for name, _ in settings.environment:
            monkeypatch.delenv(name, raising=False)


def test_statements_per_comparison():
    assert run_to_run_expectation(_case(backend="xgboost", device="cuda")).bitwise
    assert not run_to_run_expectation(_case(backend="keras", algorithm="m"),
                                      deterministic=False).bitwise
    scale = pair_expectation(_case(backend="keras", algorithm="m"),
                             _case(backend="keras", algorithm="m", ranks=4, strategy="horovod"))
    assert not scale.bitwise and "final loss" in scale.reason
    assert not pair_expectation(_case(), _case(params=(("n_estimators", 20),))).bitwise


@pytest.mark.slow
def test_tensorflow_training_repeats_bitwise_in_deterministic_mode(tmp_path):
    """Two trainings of a small Keras model in one process, after ``apply_tensorflow``."""
    script = textwrap.dedent("""
        import hashlib, os
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import numpy as np
        from accelml.runner.determinism import apply_tensorflow
        import tensorflow as tf

        def train(seed=3):
            apply_tensorflow(seed=seed, threads=2)
            rng = np.random.default_rng(0)
            x = rng.normal(size=(256, 8)).astype("float32")
            y = (x.sum(axis=1) > 0).astype("int32")
            model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"),
                                         tf.keras.layers.Dropout(0.3), tf.keras.layers.Dense(2)])
            model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            model.fit(x, y, batch_size=64, epochs=1, shuffle=True, verbose=0)
            digest = hashlib.sha256()
            for weight in model.get_weights():
                digest.update(weight.tobytes())
            return digest.hexdigest()

        first, second, other_seed = train(), train(), train(seed=4)
        print(first == second, first != other_seed)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                                os.path.abspath(__file__)))))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-2:] == ["True", "True"]


@pytest.mark.parametrize("algorithm, params, bitwise", [
    ("logistic_regression", (), True),                       # lbfgs draws nothing
    ("ridge", (), True),                                     # "auto" is a direct solver
    ("ridge", (("solver", "sag"),), False),
    ("logistic_regression", (("solver", "saga"),), False),
    ("svc", (), True),                                       # random_state only for probability
])
def test_unseeded_run_to_run_expectation_follows_the_solver(algorithm, params, bitwise):
    """Issue 17: lbfgs and ridge repeat bitwise without a seed; sag/saga shuffle. The record's
    answer matches two real unseeded fits (coefficients compared byte for byte)."""
    from accelml import Estimator

    case = _case(algorithm=algorithm, params=params)
    expectation = run_to_run_expectation(case, deterministic=False)
    assert expectation.bitwise is bitwise, expectation.reason
    if not bitwise:
        assert "shuffling" in expectation.reason
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + rng.normal(scale=0.5, size=300) > 0).astype(int)
    kwargs = {**dict(params), "max_iter": 3} if not bitwise else dict(params)
    fits = [Estimator(algorithm, backend="sklearn", **kwargs).fit(X, y) for _ in range(2)]
    attribute = "dual_coef_" if algorithm == "svc" else "coef_"
    first, second = (np.asarray(getattr(fit.estimator_, attribute)) for fit in fits)
    assert (first.tobytes() == second.tobytes()) is bitwise
