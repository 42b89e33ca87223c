"""``keras-fit``: plain ``model.fit`` from NumPy on one device, on the JAX and torch engines.

The JAX run is deterministic and shared (module fixture): it trains, and it is the first of
the bitwise repeats."""

from __future__ import annotations

import pytest

from accelml.dl import TrainingConfig, launch
from accelml.errors import SpecError
from tests.dl.conftest import quick_xla_environment

EPOCHS = 2
FIT = TrainingConfig(strategy="keras-fit", model="mlp", dataset="digits", batch_size=32,
                     epochs=EPOCHS, learning_rate=0.05, seed=3, time_limit_s=240)
JAX_FIT = FIT.replace(keras_backend="jax", image_size=16, deterministic=True)


@pytest.fixture(scope="module")
def jax_fit():
    """JAX_FIT's run, compiled with the quick_xla fixture's flags (as its repeats are)."""
    pytest.importorskip("jax", reason="jax is not installed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XLA_FLAGS", quick_xla_environment()["XLA_FLAGS"])
        return launch(JAX_FIT)


@pytest.fixture
def torch_fit():
    pytest.importorskip("torch", reason="torch is not installed")
    return launch(FIT.replace(keras_backend="torch"))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["jax", "torch"])
def test_keras_fit_trains_from_numpy_on_the_engine_asked_for(engine, request):
    result = request.getfixturevalue(f"{engine}_fit")
    assert result.backend == engine and result.ranks == 1 and result.global_batch == 32
    assert dict(result.versions).keys() >= {"keras", engine}
    assert [e.images for e in result.epochs] == [32 * result.steps_per_epoch] * EPOCHS
    assert result.epochs[-1].loss < result.epochs[0].loss
    assert result.test_accuracy > 0.5


def test_keras_fit_runs_on_one_device():
    with pytest.raises(SpecError, match="ranks must be 1 for strategy 'keras-fit'"):
        TrainingConfig(strategy="keras-fit", ranks=2)


@pytest.mark.slow
def test_keras_fit_in_deterministic_mode_repeats_bitwise(jax_fit, quick_xla):
    # the record promises bitwise repeats: same seed, same shuffles, same final weights
    assert launch(JAX_FIT).weights_digest == jax_fit.weights_digest
    assert launch(JAX_FIT.replace(seed=4)).weights_digest != jax_fit.weights_digest
