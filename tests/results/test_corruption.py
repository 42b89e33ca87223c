"""A damaged results store is a one-line error naming the file, exit 2, never a traceback,
and ``report`` / ``check`` read a store without writing to it (issue 16, item 4).

One real run (two cases through ``compare``) is stored once; each test damages a copy of it
the way a disk, a crash or a careless hand would, and runs the real commands on it.
"""

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from accelml.cli import main
from accelml.results.store import ResultsStore

REPO = Path(__file__).resolve().parents[2]
SPEC = """name = "damage"
reference = "sklearn"
repeats = 1
warmup = 0
[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 120
centers = 3
[[cases]]
algorithm = "kmeans"
backend = ["sklearn", "sklearnex"]
dataset = "blobs"
params = {n_clusters = 3, n_init = 1, random_state = 0}
"""


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A results directory with one finished run and a baseline made from it."""
    root = tmp_path_factory.mktemp("damage")
    (root / "spec.toml").write_text(SPEC)
    results = root / "results"
    assert main(["compare", str(root / "spec.toml"), "--results-dir", str(results),
                 "--no-progress", "--json"]) == 0
    baseline = root / "baseline.json"
    assert main(["check", "--run", "latest", "--baseline", str(baseline), "--results-dir",
                 str(results), "--update-baseline"]) == 0
    return results, baseline


@pytest.fixture
def store_copy(stored, tmp_path):
    results, baseline = stored
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    return copy, baseline


def fails_cleanly(capsys, argv, *needles):
    """The command exits 2 with one line on stderr containing every needle."""
    code = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def readers(results, baseline):
    return [["report", "latest", "--results-dir", str(results)],
            ["check", "--run", "latest", "--baseline", str(baseline), "--results-dir", str(results)]]


def snapshot(directory: Path) -> dict[str, str]:
    return {str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def prediction_file(results: Path) -> Path:
    store = ResultsStore(results, read_only=True)
    result = store.case_results(store.latest_run().run_id)[1]
    digest = result.prediction("predictions").digest
    return results / "arrays" / digest[:2] / f"{digest}.npy"


@pytest.mark.slow
def test_a_zero_byte_database_is_reported_and_left_as_it_is(store_copy, capsys):
    results, baseline = store_copy
    (results / "results.sqlite").write_bytes(b"")
    for argv in [*readers(results, baseline),
                 ["compare", "--resume", "x", "--results-dir", str(results)],
                 ["compare", str(REPO / "experiments" / "smoke.toml"), "--results-dir",
                  str(results)]]:
        fails_cleanly(capsys, argv, str(results / "results.sqlite"), "empty file (0 bytes)")
    assert (results / "results.sqlite").stat().st_size == 0


@pytest.mark.parametrize("damage", ["truncated", "garbage_header", "garbage_pages"])
def test_damaged_sqlite_is_one_line_naming_the_file(store_copy, capsys, damage):
    results, baseline = store_copy
    database = results / "results.sqlite"
    content = bytearray(database.read_bytes())
    if damage == "truncated":
        content = content[: len(content) // 3]
    elif damage == "garbage_header":
        content[:100] = os.urandom(100)
    else:
        rng = np.random.default_rng(0)
        for page in range(1, len(content) // 4096):
            start = page * 4096 + 8
            content[start:start + 2000] = rng.integers(0, 256, 2000, dtype=np.uint8).tobytes()
    database.write_bytes(bytes(content))
    for argv in readers(results, baseline):
        fails_cleanly(capsys, argv, str(database))


@pytest.mark.parametrize("table", ["runs", "cases"])
def test_a_record_that_is_not_json_is_one_line(store_copy, capsys, table):
    results, baseline = store_copy
    with sqlite3.connect(results / "results.sqlite") as connection:
        connection.execute(f"UPDATE {table} SET record_json = '{{not json'")
    for argv in readers(results, baseline):
        fails_cleanly(capsys, argv, str(results / "results.sqlite"), "damaged record")


@pytest.mark.parametrize("damage", ["deleted", "garbage", "flipped_labels"])
def test_a_damaged_prediction_file_is_one_line_naming_it(store_copy, capsys, damage):
    results, baseline = store_copy
    path = prediction_file(results)
    if damage == "deleted":
        path.unlink()
        what = "is missing"
    elif damage == "garbage":
        path.write_bytes(os.urandom(path.stat().st_size))
        what = "not a readable .npy"
    else:
        labels = np.load(path)
        np.save(path, (labels.max() - labels).astype(labels.dtype))   # a valid .npy, other labels
        what = "does not match its digest"
    for argv in readers(results, baseline):
        fails_cleanly(capsys, argv, str(path), what)


def test_report_and_check_change_nothing_in_the_store(store_copy, capsys, tmp_path):
    results, baseline = store_copy
    before = snapshot(results)
    assert main(["report", "latest", "--results-dir", str(results)]) == 0
    assert main(["check", "--run", "latest", "--baseline", str(baseline), "--results-dir",
                 str(results)]) == 0
    capsys.readouterr()
    assert snapshot(results) == before       # no -wal/-shm, no schema, nothing touched


def test_report_and_check_work_on_a_store_its_reader_cannot_write(stored):
    """As an unprivileged user (root ignores permissions) on a read-only directory: the
    issue's read-only mount, where ``PRAGMA journal_mode=WAL`` failed."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to switch to the nobody user (setpriv)")
    results, baseline = stored
    root = Path(tempfile.mkdtemp(prefix="accelml-ro-"))
    try:
        shutil.copytree(results, root / "results")
        shutil.copy(baseline, root / "baseline.json")
        for path in [root, *root.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        before = snapshot(root)
        environment = {**os.environ, "HOME": str(root), "MPLCONFIGDIR": "/nonexistent"}
        for argv in readers(root / "results", root / "baseline.json"):
            out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                  sys.executable, "-m", "accelml", *argv], capture_output=True,
                                 text=True, cwd="/", env=environment, timeout=300)
            assert out.returncode == 0, out.stderr[-2000:]
        assert snapshot(root) == before
    finally:
        shutil.rmtree(root)


def test_verify_counts_what_it_read(stored):
    results, _ = stored
    store = ResultsStore(results, read_only=True)
    check = store.verify(store.latest_run().run_id)
    assert check.cases == 2 and check.arrays >= 2
    json.dumps(check.__dict__)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["flipped_labels", "truncated", "deleted", "replaced"])
def test_an_identity_behind_one_shared_digest_is_verified(damage, tmp_path, capsys):
    """issue 30, item 7: two results sharing one digest were called bitwise identical without
    reading the file; now the file is read and checked, or the pair is marked unverified."""
    from accelml.agreement.matrix import compare_results

    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('["sklearn", "sklearnex"]', '"sklearn"'))
    results = tmp_path / "results"
    for _ in range(2):        # one case, run twice: both results name one array file
        assert main(["compare", str(spec), "--results-dir", str(results), "--no-progress",
                     "--json"]) == 0
    capsys.readouterr()
    store = ResultsStore(results, read_only=True)
    first, second = (store.case_results(run.run_id)[0] for run in store.list_runs())
    assert first.prediction("predictions").digest == second.prediction("predictions").digest
    assert compare_results(store, first, b=second).bitwise_identical
    digest = first.prediction("predictions").digest
    path = results / "arrays" / digest[:2] / f"{digest}.npy"
    labels = np.load(path)
    if damage == "flipped_labels":
        np.save(path, (labels.max() - labels).astype(labels.dtype))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:60])
    elif damage == "deleted":
        path.unlink()
    else:
        np.save(path, np.zeros_like(labels))
    agreement = compare_results(store, first, b=second)
    assert not agreement.bitwise_identical
    (array,) = [entry for entry in agreement.arrays if entry.name == "predictions"]
    assert not array.identical and "unverified" in array.note and str(path) in array.note
