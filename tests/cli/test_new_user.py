"""What a new user tripped on (issue 33), end to end through ``python -m accelml``: cases
this machine cannot run are skipped (not failed) everywhere, and every line names a case
so that two cases never print alike."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from accelml.probe import probe_gpus
from tests.cli.terminal import in_process

REPO = Path(__file__).resolve().parents[2]
SPEC = """
name = "mixed_scale"
reference = "sklearn"
repeats = 2
warmup = 0
threads = 1
[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 200
n_features = 3
centers = 3
seed = 0
[datasets.digits]
source = "shipped"
name = "digits"
[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {n_init = 1, random_state = 0}
grid = {n_clusters = [2, 3]}
[[cases]]
algorithm = "gradient_boosting_classifier"
backend = "xgboost"
device = "cuda"
dataset = "digits"
params = {n_estimators = 2, random_state = 0}
[[cases]]
algorithm = "fashion_mnist_cnn"
backend = "keras"
strategy = "horovod"
ranks = 4096
dataset = "digits"
epochs = 1
"""


def accelml(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accelml", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)


@pytest.fixture(scope="module")
def only_available_run(tmp_path_factory):
    """The spec run with --only-available on a machine without a GPU (and fewer than 4096
    cores): two kmeans cases run, the CUDA case and the 4096-rank case are skipped."""
    if probe_gpus().available:
        pytest.skip("this machine has a GPU: the CUDA case is available")
    directory = tmp_path_factory.mktemp("mixed")
    spec, results = directory / "mixed.toml", directory / "results"
    spec.write_text(SPEC)
    out = accelml("compare", str(spec), "--only-available", "--results-dir", str(results))
    return spec, results, out


@pytest.mark.slow
def test_a_case_of_more_ranks_than_cores_is_skipped_and_the_rest_run(only_available_run):
    spec, results, out = only_available_run
    assert out.returncode == 0, out.stderr
    assert "2 case(s) skipped, unavailable on this machine (--only-available)" in out.stderr
    assert "4096 ranks on this machine" in out.stderr
    # without the flag the spec is still refused before anything runs
    refused = accelml("compare", str(spec), "--results-dir", str(results))
    assert refused.returncode == 2 and "4096 ranks on this machine" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_skipped_cases_are_called_skipped_everywhere(only_available_run, capsys):
    _, results, out = only_available_run
    progress = [line for line in out.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 4
    assert sum("skipped (unavailable)" in line for line in progress) == 2
    assert not any("FAILED" in line or "failed" in line for line in progress)
    assert "skipped (unavailable)" in out.stdout and "failed" not in out.stdout
    # what runs and report print: their main in this process (a python -m accelml each: seconds)
    runs = json.loads(in_process(capsys, "runs", "--results-dir", str(results), "--json").stdout)
    assert [(run["failed"], run["skipped"]) for run in runs] == [(0, 2)]
    listed = in_process(capsys, "runs", "--results-dir", str(results))
    assert "skipped" in listed.stdout
    written = results.parent / "report.json"
    text = in_process(capsys, "report", "latest", "--results-dir", str(results), "--json",
                      str(written))
    assert "2 case(s) skipped" in text.stdout and "FAILED" not in text.stdout
    report = json.loads(written.read_text())
    assert report["failed"] == [] and len(report["skipped"]) == 2


def test_progress_lines_tell_every_case_apart(only_available_run):
    _, _, out = only_available_run
    progress = [line.split("] ", 1)[1].split(":")[0] for line in out.stderr.splitlines()
                if line.startswith("[")]
    assert len(set(progress)) == len(progress) == 4, progress
    assert any("n_clusters=2" in line for line in progress)
    assert any("x4096 [horovod]" in line for line in progress)


def test_the_dry_run_names_strategy_and_ranks(capsys):
    out = in_process(capsys, "compare", str(REPO / "experiments" / "dl_cpu_scaling.toml"),
                     "--dry-run")
    assert out.returncode == 0, out.stderr
    labels = [line.split(None, 1)[1] for line in out.stdout.splitlines()[1:]]
    assert len(labels) == 6 and len(set(labels)) == 6, labels
    assert any("x2 [jax-pmean]" in label for label in labels)


@pytest.mark.parametrize("argv", [
    ["compare", str(REPO / "experiments" / "dl_cpu_scaling.toml"), "--dry-run"],
    ["--help"], ["compare", "--help"]])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(argv):
    """``compare --dry-run | head -c 10``: the reader is gone before anything is written
    (its end of the pipe closed at once), so every write fails: no traceback, exit 141 (or
    0 where argparse's help already ignores the failed write)."""
    process = subprocess.Popen([sys.executable, "-m", "accelml", *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=120)
    assert err == "" and process.returncode in (0, 141), err
    if argv[0] == "compare" and argv[-1] == "--dry-run":
        assert process.returncode == 141


def test_the_warning_about_other_runs_counts_them():
    from accelml.cli.compare import others_text

    assert "both" not in others_text([11, 12, 13, 14])
    assert others_text([11, 12, 13, 14]).startswith("4 other accelml runs are active")
    assert "(pid 11)" in others_text([11]) and "both runs" in others_text([11])


def test_a_store_another_user_owns_is_read_only_not_damaged(only_available_run, tmp_path):
    """compare into a store the user may not write (root's, 0644 in a 0755 directory): one
    line saying read-only, permission denied, exit 2, and the store unchanged."""
    import os
    import shutil

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to switch to the nobody user (setpriv)")
    spec, results, _ = only_available_run
    root = Path(tempfile.mkdtemp(prefix="accelml-owned-"))
    try:
        shutil.copytree(results, root / "results")
        shutil.copy(spec, root / "spec.toml")
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        before = sorted((str(path), path.stat().st_mtime_ns) for path in root.rglob("*"))
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              sys.executable, "-m", "accelml", "compare", str(root / "spec.toml"),
                              "--only-available", "--results-dir", str(root / "results")],
                             capture_output=True, text=True, cwd="/", timeout=300,
                             env={**os.environ, "HOME": str(tmp_path), "MPLCONFIGDIR": "/nonexistent"})
        assert out.returncode == 2, out.stderr[-2000:]
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "read-only: permission denied" in out.stderr and "owned by root" in out.stderr
        assert "damaged" not in out.stderr
        assert sorted((str(path), path.stat().st_mtime_ns) for path in root.rglob("*")) == before
    finally:
        shutil.rmtree(root)
