"""Real multi-process Horovod runs (horovodrun --gloo, 2 CPU ranks) on scikit-learn's digits.

One 1-rank and one 2-rank run are shared by the tests (session fixtures): the 2-rank run
writes checkpoints, TensorBoard logs, the CSV log, the final model and a Horovod timeline,
with warm-up on, so each test checks one claim about it.
"""

from __future__ import annotations

import time

import psutil
import pytest

from accelml.dl import TrainingConfig, launch
from accelml.errors import AccelmlError
from tests.dl.checks import assert_learning_rates_follow_warmup, assert_only_rank_zero_wrote

pytestmark = pytest.mark.horovod

ACCURACY_TOLERANCE = 0.05
"""Largest test-accuracy gap allowed between the 1-rank and the 2-rank run (same epochs,
global batch doubled, learning rate doubled with warm-up); both reach about 0.95."""

BASE = TrainingConfig(model="mlp", dataset="digits", strategy="horovod", batch_size=32,
                      epochs=6, learning_rate=0.05, optimizer="sgd", momentum=0.9,
                      deterministic=True, seed=3, time_limit_s=300)


@pytest.fixture(scope="session")
def one_rank(horovod_ready):
    return launch(BASE, ranks=1)          # one rank: hvd.init() alone, no horovodrun


@pytest.fixture(scope="session")
def two_ranks(horovod_ready, tmp_path_factory):
    root = tmp_path_factory.mktemp("horovod2")
    config = BASE.replace(output_dir=str(root / "out"), checkpoints=True, tensorboard=True,
                          histogram_freq=1, save_model=True, warmup_epochs=2,
                          horovod_timeline=str(root / "timeline.json"))
    result = launch(config, ranks=2, launcher="horovodrun", work_dir=str(root / "work"))
    return result, config, root


@pytest.mark.slow
def test_both_ranks_end_with_identical_weights(two_ranks):
    result, _, _ = two_ranks
    assert len(result.rank_digests) == 2
    assert result.rank_digests[0] == result.rank_digests[1] == result.weights_digest


@pytest.mark.slow
def test_two_ranks_learn_as_well_as_one(one_rank, two_ranks):
    result, _, _ = two_ranks
    assert one_rank.global_batch == 32 and result.global_batch == 64
    assert result.learning_rate == pytest.approx(2 * one_rank.learning_rate)
    assert one_rank.test_accuracy > 0.85
    assert abs(result.test_accuracy - one_rank.test_accuracy) <= ACCURACY_TOLERANCE
    assert result.epochs[-1].images == one_rank.epochs[-1].images  # each sample once per epoch


def test_recorded_learning_rates_follow_the_warmup_formula(two_ranks):
    result, config, _ = two_ranks
    assert_learning_rates_follow_warmup(result, config)


def test_only_rank_zero_writes_files(two_ranks):
    result, config, root = two_ranks
    assert_only_rank_zero_wrote(result, config, root)
    timeline = (root / "timeline.json").read_text()
    assert "allreduce" in timeline.lower()


@pytest.mark.slow
def test_a_crashing_rank_fails_the_run_with_its_error_in_bounded_time(horovod_ready, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    # a stale lock of an interrupted caching run on rank 1's local disk: only rank 1 fails
    (cache / "train-1_0.lockfile").write_text("")
    config = BASE.replace(epochs=2, cache="disk", cache_dir=str(cache), time_limit_s=240)
    work = tmp_path / "work"
    started = time.monotonic()
    with pytest.raises(AccelmlError, match=r"rank 1 of 2 failed: AlreadyExistsError.*lockfile"):
        launch(config, ranks=2, launcher="horovodrun", grace_s=5, work_dir=str(work))
    assert time.monotonic() - started < 120
    # rank 0, blocked in an all-reduce its peer never joins, was killed too
    time.sleep(1)
    left = [p.pid for p in psutil.process_iter(["cmdline"])
            if any(str(work) in part for part in (p.info["cmdline"] or []))]
    assert left == []
