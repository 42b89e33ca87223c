"""A third party's DL strategy, one module registered under ``accelml.strategies``, works end to
end without touching accelml: the spec validates it, ``compare`` runs it (real processes),
deterministic mode sets what its record declares, and its expectation is the one reported."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from accelml.dl.strategies import STRATEGIES_POINT, strategy_availability
from accelml.errors import SpecError
from accelml.expectations import run_to_run_expectation
from accelml.results.store import ResultsStore
from accelml.spec.load import load_spec_text

# find_spec, not importorskip: every xdist worker collects this module, and importing jax
# there costs each of them seconds of CPU before any test runs
pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="the example strategy runs Keras on JAX (pip install jax)")

ACME_FIT = '''
    """acme-fit: Keras 3 on JAX, plain model.fit in one process."""

    import functools
    import os

    from accelml.cases import Expectation
    from accelml.dl.common import Clock, make_optimizer, versions, weights_digest
    from accelml.dl.config import EpochRecord, TrainingResult
    from accelml.dl.engines import probe_jax, probe_keras, requirements
    from accelml.dl.models import build_model
    from accelml.dl.strategies import Determinism, Strategy

    REASON = "acme-fit: one seeded process on XLA's CPU kernels repeats bitwise"


    def train(config, data):
        if config.deterministic and os.environ.get("ACME_FIT_SEEDED") != "1":
            raise RuntimeError("deterministic mode did not set ACME_FIT_SEEDED")
        import keras

        keras.utils.set_random_seed(config.seed)
        model = build_model(config.model, keras, data.image_shape, data.classes)
        model.compile(optimizer=make_optimizer(keras, config, config.scaled_learning_rate),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        x_train, x_test = (images.astype("float32") / 255 for images in (data.x_train, data.x_test))
        epochs = []

        class Timer(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.clock = Clock()

            def on_epoch_end(self, epoch, logs=None):
                epochs.append(EpochRecord(epoch, self.clock.seconds(), float(logs["loss"]),
                                          float(logs["accuracy"]), config.scaled_learning_rate,
                                          len(x_train)))

        model.fit(x_train, data.y_train, batch_size=config.batch_size, epochs=config.epochs,
                  shuffle=False, callbacks=[Timer()], verbose=0)
        test_loss, test_accuracy = model.evaluate(x_test, data.y_test, verbose=0)
        digest = weights_digest(model.get_weights())
        return TrainingResult(
            strategy=config.strategy, model=config.model, dataset=data.name, ranks=1,
            batch_per_rank=config.batch_size, global_batch=config.batch_size,
            learning_rate=config.scaled_learning_rate, parameters=int(model.count_params()),
            train_samples=len(x_train), test_samples=len(x_test),
            steps_per_epoch=-(-len(x_train) // config.batch_size), epochs=tuple(epochs),
            test_loss=float(test_loss), test_accuracy=float(test_accuracy),
            weights_digest=digest, rank_digests=(digest,), setup_s=0.0, data_s=0.0,
            backend="jax", versions=versions("jax"))


    STRATEGY = Strategy(
        name="acme-fit",
        doc="Keras 3 on JAX: model.fit in one process",
        keras_backends=("jax",),
        train=train,
        probe=functools.partial(requirements, probe_keras, probe_jax),
        determinism=Determinism(Expectation(True, REASON),
                                environment=lambda threads: {"ACME_FIT_SEEDED": "1"}),
        libraries=("keras", "jax"),
        max_ranks=1,
    )
'''

SPEC = """
name = "acme"
reference = "keras"
repeats = 1
warmup = 0
threads = 1
deterministic = true
time_limit = 300

[datasets.digits]
source = "shipped"
name = "digits"

[[cases]]
algorithm = "mlp"
backend = "keras"
strategy = "acme-fit"
dataset = "digits"
epochs = 2
batch_size = 64
"""


@pytest.fixture
def acme_fit(install_plugin):
    install_plugin("acme-fit", {"acme_fit.py": ACME_FIT},
                   {"accelml.strategies": {"acme-fit": "acme_fit:STRATEGY"}})
    return STRATEGIES_POINT.get("acme-fit")


def test_the_registry_lists_and_probes_it(acme_fit):
    assert STRATEGIES_POINT.origin("acme-fit") == "acme_fit:STRATEGY"
    rows = {row.name: row for row in strategy_availability()}
    assert rows["strategy acme-fit"].available, rows["strategy acme-fit"].detail
    with pytest.raises(SpecError, match="training ranks must be 1 for strategy 'acme-fit'"):
        load_spec_text(SPEC.replace("batch_size = 64", "batch_size = 64\nranks = 2"), "w.toml")


@pytest.mark.slow
def test_a_spec_using_it_compares_end_to_end(acme_fit, tmp_path):
    spec = tmp_path / "acme.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "accelml", "compare", str(spec),
                           "--results-dir", str(results), "--no-progress"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    store = ResultsStore(results, create=False)
    run = store.latest_run()
    assert run is not None and run.deterministic
    (result,) = store.case_results(run.run_id)
    assert result.ok, result.reason              # its train checked ACME_FIT_SEEDED was set
    assert result.strategy == "acme-fit" and result.dl is not None
    assert len(result.dl.epochs) == 2 and len(result.dl.rank_weight_digests) == 1
    assert result.dl.ranks_identical is None        # one rank: nothing to compare it with
    expectation = run_to_run_expectation(result)
    assert expectation.bitwise and expectation.reason == acme_fit.determinism.expectation.reason
    baseline = tmp_path / "baseline.json"
    check = subprocess.run([sys.executable, "-m", "accelml", "check", "--run", run.run_id,
                            "--results-dir", str(results), "--baseline", str(baseline),
                            "--update-baseline"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert acme_fit.determinism.expectation.reason in baseline.read_text()
