"""Deterministic mode enters one way: the CLI flags and the spec key all reach
``run_experiment(deterministic=...)``, the stored run says so, and the client's own
environment is never changed (issue 14: ``check --deterministic`` stored runs as not
deterministic although their cases were seeded, and set ``PYTHONHASHSEED`` in the client).
The commands run in this process (``accelml.cli.main``, the same parsing and plumbing as
``python -m accelml``; their cases in their own processes), where the environment is seen."""

import os
from pathlib import Path

import pytest

from accelml.cli import main
from accelml.orchestration import plan_run
from accelml.results.store import ResultsStore
from accelml.spec.load import load_spec
from tests.cli.terminal import in_process

SPEC = """
name = "seedless"
reference = "sklearn"
repeats = 2
warmup = 0
threads = 1
EXTRA

[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 200
n_features = 3
centers = 3

[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {n_clusters = 3, n_init = 1}
"""


def _spec(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "seedless.toml"
    path.write_text(SPEC.replace("EXTRA", extra))
    return path


def _the_run_is_deterministic_and_seeded(results: Path, spec: Path) -> None:
    store = ResultsStore(results, create=False)
    (run,) = store.list_runs()
    assert run.deterministic
    seeded = plan_run(load_spec(spec), deterministic=True).experiment
    assert run.case_ids == tuple(case.case_id for case in seeded.cases)
    (result,) = store.case_results(run.run_id)
    assert result.ok, result.reason
    assert dict(result.params)["random_state"] == 0
    # seeded, single-threaded sklearn k-means repeats itself bitwise in this mode
    assert len(set(result.repeat_prediction_digests)) == 1


def test_check_deterministic_stores_a_deterministic_run_and_leaves_the_environment_alone(
        tmp_path):
    """``check --deterministic`` in this process: the stored run is deterministic and
    seeded, and the client's environment (``PYTHONHASHSEED`` and the rest) is unchanged."""
    spec, results = _spec(tmp_path), tmp_path / "results"
    before = dict(os.environ)
    code = main(["check", str(spec), "--deterministic", "--update-baseline",
                 "--baseline", str(tmp_path / "baseline.json"),
                 "--results-dir", str(results), "--cache-dir", str(tmp_path / "cache")])
    assert code == 0
    assert dict(os.environ) == before
    _the_run_is_deterministic_and_seeded(results, spec)


@pytest.mark.parametrize("how", ["compare --deterministic", "spec key"])
def test_compare_flag_and_spec_key_store_the_same_deterministic_run(tmp_path, capsys, how):
    flag = how.endswith("--deterministic")
    spec, results = _spec(tmp_path, "" if flag else "deterministic = true"), tmp_path / "results"
    before = dict(os.environ)
    out = in_process(capsys, "compare", str(spec), "--results-dir", str(results), "--no-progress",
                     "--cache-dir", str(tmp_path / "cache"), *(["--deterministic"] if flag else []))
    assert out.returncode == 0, out.stderr
    assert dict(os.environ) == before
    _the_run_is_deterministic_and_seeded(results, spec)


def test_dry_run_lists_the_cases_the_spec_key_and_the_flag_would_run(tmp_path, capsys):
    flagged = in_process(capsys, "compare", str(_spec(tmp_path)), "--dry-run", "--deterministic")
    keyed = in_process(capsys, "compare", str(_spec(tmp_path, "deterministic = true")), "--dry-run")
    plain = in_process(capsys, "compare", str(_spec(tmp_path)), "--dry-run")
    assert flagged.returncode == keyed.returncode == plain.returncode == 0
    ids = [out.stdout.splitlines()[1].split()[0] for out in (flagged, keyed, plain)]
    assert ids[0] == ids[1] != ids[2]
