"""The foundation works on this machine: the CLI, the backends table and the built Horovod."""

import json
import os
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


def test_backends_table_has_a_row_per_probe():
    result = run_accelml("backends")
    assert result.returncode == 0, result.stderr
    for row in probe_all():
        assert row.name in result.stdout


@pytest.mark.horovod
@pytest.mark.parametrize("average", [True, False], ids=["averaged", "not-averaged"])
def test_horovodrun_gloo_two_ranks_average_gradients(tmp_path, average):
    horovodrun = find_launcher("horovodrun")
    assert horovodrun is not None, "horovodrun not found: make builds Horovod into the venv"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    command = [horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", sys.executable,
               str(HERE / "horovod_average_gradients.py"), str(tmp_path)]
    if not average:
        command.append("--no-average")
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [rank["size"] for rank in ranks] == [2, 2]
    same = ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"]
    assert same is average
