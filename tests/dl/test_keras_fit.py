"""``keras-fit``: plain ``model.fit`` from NumPy on one device, on the JAX and torch engines."""

from __future__ import annotations

import pytest

from accelml.dl import TrainingConfig, launch
from accelml.errors import SpecError


@pytest.mark.slow
@pytest.mark.parametrize("engine, image_size", [("jax", 16), ("torch", None)])
def test_keras_fit_trains_from_numpy_on_the_engine_asked_for(engine, image_size, request):
    pytest.importorskip(engine, reason=f"{engine} is not installed")
    if engine == "jax":
        request.getfixturevalue("quick_xla")
    config = TrainingConfig(strategy="keras-fit", keras_backend=engine, model="mlp",
                            dataset="digits", batch_size=32, epochs=3, learning_rate=0.05,
                            seed=1, image_size=image_size, time_limit_s=240)
    result = launch(config)
    assert result.backend == engine and result.ranks == 1 and result.global_batch == 32
    assert dict(result.versions).keys() >= {"keras", "jax" if engine == "jax" else "torch"}
    assert [e.images for e in result.epochs] == [32 * result.steps_per_epoch] * 3
    assert result.epochs[-1].loss < result.epochs[0].loss
    assert result.test_accuracy > 0.5


def test_keras_fit_runs_on_one_device():
    with pytest.raises(SpecError, match="ranks must be 1 for strategy 'keras-fit'"):
        TrainingConfig(strategy="keras-fit", ranks=2)


@pytest.mark.slow
def test_keras_fit_in_deterministic_mode_repeats_bitwise(quick_xla):
    # the record promises bitwise repeats: same seed, same shuffles, same final weights
    config = TrainingConfig(strategy="keras-fit", keras_backend="jax", model="mlp",
                            dataset="digits", batch_size=32, epochs=2, seed=3,
                            deterministic=True, time_limit_s=240)
    first, second = launch(config), launch(config)
    assert first.weights_digest == second.weights_digest
    assert launch(config.replace(seed=4)).weights_digest != first.weights_digest
