"""``python -m accelml compare`` end to end: real processes, a real dask LocalCluster, SQLite.

The smoke run (tests/cli/conftest.py's, shared) and the killed client are real processes;
what a command then prints is read from its ``main`` run in this process."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelml.cli import main
from accelml.results.store import ResultsStore
from tests.cli.terminal import in_process

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "experiments" / "smoke.toml"


@pytest.fixture(scope="module")
def smoke_run(smoke_store, tmp_path_factory):
    """The smoke spec's ``compare --json`` run (tests/cli/conftest.py's shared store, exit 0
    checked there), in a copy of its store: (results dir, run id, stdout, stderr)."""
    results = smoke_store.copy(tmp_path_factory.mktemp("smoke"))
    return results, smoke_store.json_run_id, smoke_store.json_stdout, smoke_store.json_stderr


@pytest.mark.slow
def test_smoke_spec_end_to_end_json(smoke_run):
    _, run_id, stdout, stderr = smoke_run
    document = json.loads(stdout)
    rows = {(row["algorithm"], row["backend"]): row for row in document["rows"]}
    assert set(rows) == {("kmeans", "sklearn"), ("kmeans", "sklearnex"),
                         ("gradient_boosting_classifier", "sklearn"),
                         ("gradient_boosting_classifier", "xgboost")}
    assert all(row["status"] == "ok" for row in rows.values())
    assert rows[("kmeans", "sklearn")]["is_reference"]
    fast = rows[("kmeans", "sklearnex")]
    assert fast["speedup"] > 0 and fast["agreement"]["kind"] == "label_agreement"
    assert fast["agreement"]["value"] > 0.9
    assert rows[("gradient_boosting_classifier", "xgboost")]["score_name"] == "accuracy"
    assert document["failed"] == []
    for case in document["cases"]:
        assert case["repeats"] == 2 and case["warmup"] == 1
        boosting = {"setup"} if case["backend"] == "xgboost" else set()   # its fits' set-up
        assert {t["phase"] for t in case["timings"]} == {"startup", "load", "fit", "predict"} | boosting
        assert case["environment"]["env_hash"] and case["threads"] == 1
    assert "results in" in stderr and "[4/4]" in stderr and f"run {run_id}" in stderr
    matrix = document["agreement_matrix"]
    assert matrix["reference"] == "sklearn" and len(matrix["run_to_run"]) == 4
    pairs = {(e["a"]["label"].split("/")[1], e["b"]["label"].split("/")[1])
             for e in matrix["cross_backend"]}
    assert pairs == {("sklearn", "sklearnex"), ("sklearn", "xgboost")}


def test_finished_run_resumes_to_nothing_and_prints_the_table(smoke_run, capsys):
    results, run_id, _, _ = smoke_run
    run = ResultsStore(results).get_run(run_id)
    assert run.status == "finished"
    prefix = run.run_id.split("-")[0]     # its time: unique (the store's other run is later)
    out = in_process(capsys, "compare", "--resume", prefix, "--results-dir", str(results))
    assert out.returncode == 0, out.stderr
    assert "0 case(s) to run of 4" in out.stderr
    for word in ("algorithm", "kmeans", "sklearnex", "xgboost", "ref", "labels", "speedup"):
        assert word in out.stdout
    # the agreement matrix follows the table
    table_end = out.stdout.index("speedup")
    assert out.stdout.index("run-to-run") > table_end
    assert out.stdout.index("cross-backend") > table_end


def test_deterministic_flag_lists_the_seeded_case_ids(capsys):
    plain = in_process(capsys, "compare", str(SMOKE), "--dry-run")
    seeded = in_process(capsys, "compare", str(SMOKE), "--dry-run", "--deterministic")
    assert plain.returncode == seeded.returncode == 0, plain.stderr + seeded.stderr
    def ids(out):
        return {line.split()[0] for line in out.stdout.splitlines()[1:]}

    assert len(ids(plain)) == len(ids(seeded)) == 4
    unseeded = [line for line in plain.stdout.splitlines()[1:] if "random_state" not in line]
    assert len(ids(plain) - ids(seeded)) == len(unseeded)


KILL_SPEC = """
reference = "sklearn"
repeats = 1
warmup = 0
threads = 1
[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 300
n_features = 3
[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {n_init = 1, random_state = 0}
grid = {n_clusters = [2, 3]}
"""


@pytest.mark.slow
def test_killed_client_is_resumed_without_losing_or_duplicating_cases(tmp_path, capsys):
    spec = tmp_path / "kill.toml"
    spec.write_text(KILL_SPEC)
    results = tmp_path / "results"
    client = subprocess.Popen([sys.executable, "-m", "accelml", "compare", str(spec),
                               "--results-dir", str(results), "--no-progress"],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    before = {}
    store = None
    while time.monotonic() < deadline and client.poll() is None:
        if store is None and (results / "results.sqlite").exists():
            store = ResultsStore(results)
        if store is not None:
            runs = store.list_runs()
            if runs and store.finished_case_ids(runs[0].run_id):
                os.kill(client.pid, signal.SIGKILL)
                client.wait()
                before = {r.case_id: r for r in store.case_results(runs[0].run_id)}
                break
        time.sleep(0.05)
    assert client.returncode == -signal.SIGKILL, "the client finished before it could be killed"
    assert len(before) == 1
    (run,) = store.list_runs()
    assert run.status == "running"           # killed: it never got to say otherwise
    out = in_process(capsys, "compare", "--resume", run.run_id, "--results-dir", str(results),
                     "--json")
    assert out.returncode == 0, out.stderr
    assert "1 case(s) to run of 2" in out.stderr
    after = store.case_results(run.run_id)
    assert sorted(r.case_id for r in after) == sorted(run.case_ids)     # none lost, none twice
    for result in after:
        if result.case_id in before:
            assert result == before[result.case_id]                     # kept as it was
    assert store.get_run(run.run_id).status == "finished"
    assert len(json.loads(out.stdout)["cases"]) == 2


FAILING_SPEC = """
reference = "sklearn"
repeats = 1
warmup = 0
threads = 1
[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 200
n_features = 3
[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {n_clusters = 3, n_init = 1, random_state = 0}
[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {n_clusters = 5000, n_init = 1}
[[cases]]
algorithm = "random_forest_classifier"
backend = "sklearn"
dataset = "blobs"
params = {n_estimators = 100000}
time_limit = 1
"""


@pytest.mark.slow
def test_failing_cases_are_recorded_and_the_rest_go_on(tmp_path, capsys):
    spec = tmp_path / "failing.toml"
    spec.write_text(FAILING_SPEC)
    results = tmp_path / "results"
    code = main(["compare", str(spec), "--results-dir", str(results), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1
    store = ResultsStore(results)
    (run,) = store.list_runs()
    by_status = {(r.algorithm, r.backend, r.params_dict.get("n_clusters")): r
                 for r in store.case_results(run.run_id)}
    assert by_status[("kmeans", "sklearn", 3)].ok
    bad = by_status[("kmeans", "sklearn", 5000)]
    assert (bad.status, bad.failure.value) == ("failed", "error") and "n_samples" in bad.reason
    slow = by_status[("random_forest_classifier", "sklearn", None)]
    assert slow.failure.value == "timeout" and "time limit of 1 s" in slow.reason
    assert "2 of 3 case(s) failed" in captured.err and "time limit of 1 s" in captured.err
    assert "failed (timeout)" in captured.out and "failed (error)" in captured.out
