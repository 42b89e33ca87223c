"""Config validation, LR scaling and the Horovod warm-up schedule (no training)."""

from __future__ import annotations

import math

import pytest

from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult, scaled_learning_rate, warmup_learning_rate
from accelml.errors import SpecError


def test_global_batch_is_per_rank_times_ranks():
    config = TrainingConfig(strategy="horovod", ranks=4, batch_size=256)
    assert config.global_batch_size == 1024


@pytest.mark.parametrize("scaling, expected", [("linear", 0.04), ("sqrt", 0.02), ("none", 0.01)])
def test_learning_rate_scaling(scaling, expected):
    assert scaled_learning_rate(0.01, 4, scaling) == pytest.approx(expected)


def horovod_warmup_callback_rate(initial_lr, size, warmup_epochs, epoch, batch, steps):
    """LearningRateWarmupCallback (horovod/_keras/callbacks.py, 0.28.1), written out:
    on_batch_begin sets initial_lr * multiplier(epoch + batch / steps) while epoch < warmup,
    with multiplier(e) = 1/size * ((e + 1/steps) * (size - 1) / warmup + 1)."""
    e = epoch + batch / steps + 1.0 / steps
    return initial_lr * (1.0 / size * (e * (size - 1) / warmup_epochs + 1))


@pytest.mark.parametrize("size, warmup, steps", [(2, 3, 7), (4, 5, 10), (8, 1, 3)])
def test_warmup_matches_horovod_callback_during_warmup_and_target_after(size, warmup, steps):
    target = 0.1 * size
    for epoch in range(warmup + 2):
        for batch in range(steps):
            got = warmup_learning_rate(target, size, warmup, epoch, batch, steps)
            if epoch < warmup:
                assert got == pytest.approx(
                    horovod_warmup_callback_rate(target, size, warmup, epoch, batch, steps))
            else:
                assert got == pytest.approx(target)
    assert warmup_learning_rate(target, size, warmup, 0, 0, steps) == pytest.approx(
        target / size * ((1 / steps) * (size - 1) / warmup + 1))
    assert warmup_learning_rate(target, size, warmup, warmup - 1, steps - 1, steps) == \
        pytest.approx(target)


def test_warmup_off_for_one_worker_or_zero_epochs():
    assert warmup_learning_rate(0.1, 1, 3, 0, 0, 10) == 0.1
    assert warmup_learning_rate(0.1, 4, 0, 0, 0, 10) == 0.1


@pytest.mark.slow
def test_keras_schedule_equals_formula_at_every_step():
    import keras

    from accelml.dl.common import learning_rate_value, make_learning_rate

    config = TrainingConfig(strategy="horovod", ranks=4, learning_rate=0.01, warmup_epochs=2,
                            lr_scaling="sqrt")
    steps = 6
    schedule = make_learning_rate(keras, keras.ops, config, steps)
    for step in range(4 * steps):
        expected = warmup_learning_rate(0.01 * math.sqrt(4), 4, 2, step // steps, step % steps,
                                        steps)
        assert learning_rate_value(schedule, step) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("changes, message", [
    ({"strategy": "ring"}, "strategy must be one of"),
    ({"ranks": 0}, "ranks must be an integer >= 1"),
    ({"strategy": "single", "ranks": 2}, "1 for strategy 'single'"),
    ({"lr_scaling": "cubic"}, "lr_scaling must be one of"),
    ({"cache": "disk"}, "needs cache_dir"),
    ({"strategy": "single", "keras_backend": "torch"},
     "keras_backend must be one of tensorflow for strategy 'single', not 'torch'"),
    ({"strategy": "torch-ddp", "keras_backend": "tensorflow"},
     "keras_backend must be one of torch for strategy 'torch-ddp'"),
    ({"strategy": "horovod", "keras_backend": "jax"},
     "keras_backend must be one of tensorflow, torch for strategy 'horovod'"),
    ({"step_capture": "always"}, "step_capture must be one of auto, none, cuda-graph, compiled"),
    ({"strategy": "horovod", "step_capture": "compiled"},
     "step_capture = 'compiled' compiles Keras-on-torch .* needs keras_backend 'torch'"),
    ({"steps_per_execution": 0}, "steps_per_execution must be an integer >= 1"),
    ({"batchnorm_momentum": 1.0}, "batchnorm_momentum must be a number in"),
    ({"strategy": "torch-ddp", "step_capture": "cuda-graph"}, "needs device 'cuda'"),
    ({"strategy": "horovod", "device": "gpu", "step_capture": "cuda-graph"},
     "and keras_backend 'torch'"),
    ({"strategy": "jax-pmean", "gradient_reduction": "ring"},
     "gradient_reduction must be auto or allreduce or buckets or reduce-scatter for strategy "
     "'jax-pmean', not 'ring'"),
    ({"strategy": "jax-dataparallel", "gradient_reduce_dtype": "bfloat16"},
     "gradient_reduce_dtype must be auto or float32 for strategy 'jax-dataparallel'"),
    ({"strategy": "jax-pmean", "gradient_reduce_dtype": "float16"},
     "gradient_reduce_dtype must be auto or float32 or bfloat16 for strategy 'jax-pmean'"),
    ({"strategy": "jax-pmean", "gradient_bucket_mb": 0}, "gradient_bucket_mb must be > 0"),
])
def test_bad_configs_are_spec_errors(changes, message):
    with pytest.raises(SpecError, match=message):
        TrainingConfig(**changes)


def test_files_without_output_dir_fail_before_training():
    from accelml.dl import run_training

    with pytest.raises(SpecError, match="need output_dir"):
        run_training(TrainingConfig(checkpoints=True))


def test_unknown_key_names_the_allowed_ones():
    with pytest.raises(SpecError, match="unknown training key.*batchsize"):
        TrainingConfig.from_dict({"batchsize": 3})


def test_result_round_trips_and_excludes_first_epoch():
    epochs = tuple(EpochRecord(i, s, 1.0 / (i + 1), 0.5, 0.1, 100)
                   for i, s in enumerate([9.0, 1.0, 3.0]))
    result = TrainingResult(
        strategy="horovod", model="mlp", dataset="digits", ranks=2, batch_per_rank=32,
        global_batch=64, learning_rate=0.02, parameters=10, train_samples=200,
        test_samples=10, steps_per_epoch=3, epochs=epochs, test_loss=0.3, test_accuracy=0.9,
        weights_digest="a", rank_digests=("a", "a"), setup_s=1.0, data_s=0.1,
        backend="tensorflow", versions=(("keras", "3"),))
    assert result.first_epoch_s == 9.0
    assert result.mean_epoch_s == 2.0
    assert result.images_per_s == pytest.approx(200 / 4.0)
    assert TrainingResult.from_dict(result.to_dict()) == result


@pytest.mark.parametrize("strategy, ranks, launcher, message", [
    ("multiworker", 2, "horovodrun", "launched with local-processes or srun"),
    ("horovod", 2, "local-processes", "launched with horovodrun or mpirun or srun"),
    ("horovod", 2, "pbsdsh", "launcher must be one of"),
])
def test_launcher_must_fit_the_strategy(strategy, ranks, launcher, message):
    from accelml.dl import launch

    with pytest.raises(SpecError, match=message):
        launch(TrainingConfig(strategy=strategy, ranks=ranks), launcher=launcher)


def test_rank_environment_passes_horovod_and_xla_settings_through():
    from accelml.dl.launch import rank_environment

    env = rank_environment(TrainingConfig(strategy="horovod", ranks=2, deterministic=True,
                                          horovod_timeline="t.json", horovod_cycle_time_ms=3.5))
    assert env["HOROVOD_TIMELINE"].endswith("t.json") and env["HOROVOD_FUSION_THRESHOLD"] == "0"
    assert env["HOROVOD_TIMELINE_MARK_CYCLES"] == "0" and env["HOROVOD_CYCLE_TIME"] == "3.5"
    jax_env = rank_environment(TrainingConfig(strategy="jax-pmean", ranks=4))
    assert jax_env["KERAS_BACKEND"] == "jax"
    assert "--xla_force_host_platform_device_count=4" in jax_env["XLA_FLAGS"]
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in jax_env
    gpu_env = rank_environment(TrainingConfig(strategy="jax-pmean", ranks=2, device="gpu"))
    assert gpu_env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"   # peak memory is the model's
    assert "xla_force_host_platform_device_count" not in gpu_env.get("XLA_FLAGS", "")
    assert rank_environment(TrainingConfig(strategy="multiworker", ranks=2))[
        "TF_USE_LEGACY_KERAS"] == "1"


@pytest.mark.parametrize("strategy, keras_backend, engine", [
    ("horovod", None, "tensorflow"), ("horovod", "torch", "torch"),
    ("horovod", "tensorflow", "tensorflow"), ("torch-ddp", None, "torch"),
])
def test_keras_backend_picks_the_engine_its_ranks_run(strategy, keras_backend, engine):
    from accelml.dl.launch import rank_environment

    config = TrainingConfig(strategy=strategy, ranks=2, keras_backend=keras_backend)
    assert config.engine == engine
    assert rank_environment(config)["KERAS_BACKEND"] == engine
    assert TrainingConfig.from_dict(config.to_dict()) == config


def test_torch_ddp_ranks_get_their_place_and_where_to_meet():
    from accelml.dl.launch import rank_environment
    from accelml.dl.strategies.torch_ddp import STRATEGY

    env = rank_environment(TrainingConfig(strategy="torch-ddp", ranks=2))
    assert env["MASTER_ADDR"] and env["MASTER_PORT"].isdigit()     # where srun's ranks meet
    local = STRATEGY.local_process_environment(1, ("localhost:4001", "localhost:4002"))
    assert local == {"MASTER_ADDR": "localhost", "MASTER_PORT": "4001", "RANK": "1",
                     "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
