"""The foundation works on this machine: the CLI, the backends table, the built Horovod (on
TensorFlow and on PyTorch) and torch.distributed."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from accelml.machine import probe_all
from accelml.probe import find_launcher

HERE = Path(__file__).parent


def run_accelml(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "accelml", *args], capture_output=True, text=True,
                          timeout=120, **kwargs)


def test_help_lists_the_commands():
    result = run_accelml("--help")
    assert result.returncode == 0
    assert "backends" in result.stdout


def test_unknown_command_is_a_one_line_usage_error():
    result = run_accelml("no-such-command")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "invalid choice" in result.stderr


def test_backends_json_tells_the_truth_about_this_machine():
    result = run_accelml("backends", "--json")
    assert result.returncode == 0, result.stderr
    rows = {(row["name"], row["device"]): row for row in json.loads(result.stdout)}
    for name, device in [("sklearn", "cpu"), ("sklearnex", "cpu"), ("xgboost", "cpu")]:
        assert rows[(name, device)]["available"], rows[(name, device)]
    import sklearn
    assert rows[("sklearn", "cpu")]["version"] == sklearn.__version__
    gpus = rows[("GPUs", "cuda")]
    cuda = rows[("xgboost", "cuda")]
    assert cuda["available"] == gpus["available"]
    if not gpus["available"]:
        assert cuda["status"].startswith("unavailable: ") and cuda["detail"]


@pytest.mark.slow
def test_backends_table_has_a_row_per_probe():
    result = run_accelml("backends")
    assert result.returncode == 0, result.stderr
    for row in probe_all():
        assert row.name in result.stdout


def _run_two_ranks(command, tmp_path):
    """Run a 2-rank job whose script writes OUT_DIR/rank<R>.json; return the two records."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    # Its own session, so that a hung job is killed whole (the launcher and both ranks).
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           start_new_session=True)
    try:
        stdout, stderr = job.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        stdout, stderr = job.communicate()
        pytest.fail(f"{Path(command[0]).name} did not finish in 300 s:\n{stdout[-3000:]}{stderr[-3000:]}")
    assert job.returncode == 0, stdout[-3000:] + stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [rank["rank"] for rank in ranks] == [0, 1]
    assert [rank["size"] for rank in ranks] == [2, 2]
    # The plain all-reduce of each rank's number, averaged: (0 + 1) / 2 on both ranks.
    assert [rank["allreduce_average"] for rank in ranks] == [[0.5] * 3, [0.5] * 3]
    return ranks


def _assert_only_averaging_keeps_the_ranks_in_step(ranks, same_start_without_averaging: bool):
    """Both ranks' two models (the script trains them side by side on the same data): the one
    whose gradients are averaged starts and ends identical on both ranks; the one without
    averaging (the negative control) ends different."""
    averaged, not_averaged = ([rank[label] for rank in ranks] for label in ("averaged", "not_averaged"))
    assert averaged[0]["initial_weights_sha256"] == averaged[1]["initial_weights_sha256"]
    assert averaged[0]["weights_sha256"] == averaged[1]["weights_sha256"]
    same_start = not_averaged[0]["initial_weights_sha256"] == not_averaged[1]["initial_weights_sha256"]
    assert same_start is same_start_without_averaging
    assert not_averaged[0]["weights_sha256"] != not_averaged[1]["weights_sha256"]


def _horovodrun(script: str, tmp_path) -> list[str]:
    horovodrun = find_launcher("horovodrun")
    assert horovodrun is not None, "horovodrun not found: make builds Horovod into the venv"
    return [horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, str(HERE / script),
            str(tmp_path)]


@pytest.mark.slow
@pytest.mark.horovod
def test_horovodrun_gloo_two_ranks_average_gradients(tmp_path):
    """horovod.tensorflow under horovodrun --gloo: a Keras 3 model on the TensorFlow backend."""
    ranks = _run_two_ranks(_horovodrun("horovod_average_gradients.py", tmp_path), tmp_path)
    # Both models broadcast rank 0's initial weights; only the averaged one keeps them in step.
    _assert_only_averaging_keeps_the_ranks_in_step(ranks, same_start_without_averaging=True)


@pytest.mark.slow
@pytest.mark.horovod
def test_horovodrun_gloo_two_ranks_torch_backend_average_gradients(tmp_path):
    """horovod.torch under horovodrun --gloo: a Keras 3 model on the torch backend."""
    ranks = _run_two_ranks(_horovodrun("horovod_torch_average_gradients.py", tmp_path), tmp_path)
    _assert_only_averaging_keeps_the_ranks_in_step(ranks, same_start_without_averaging=True)


@pytest.mark.slow
@pytest.mark.torch_ddp
def test_torchrun_gloo_two_ranks_ddp_average_gradients(tmp_path):
    """torch.distributed (gloo) under torchrun: a Keras 3 model on the torch backend wrapped in DDP."""
    torchrun = find_launcher("torchrun")
    assert torchrun is not None, "torchrun not found: make installs PyTorch into the venv"
    command = [torchrun, "--standalone", "--nproc-per-node", "2",
               str(HERE / "torch_ddp_average_gradients.py"), str(tmp_path)]
    ranks = _run_two_ranks(command, tmp_path)
    # DDP broadcasts rank 0's weights when it wraps the model; without it each rank keeps its own.
    _assert_only_averaging_keeps_the_ranks_in_step(ranks, same_start_without_averaging=False)
