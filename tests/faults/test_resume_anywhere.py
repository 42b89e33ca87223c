"""Issue 16, item 6: ``--resume`` from any working directory (a spec's relative dataset paths
resolve against the spec's location recorded at the first run), one file mode for the whole
store (the umask), and a warning when two runs share this machine's cores."""

from __future__ import annotations

import os
import re
import signal
import stat

import numpy as np
import psutil
import pytest

from accelml.results.store import ResultsStore

from .conftest import case_processes, gone, wait_for

pytestmark = [pytest.mark.faults]

FILE_SPEC = """
repeats = 1
warmup = 0
threads = 1
[datasets.points]
source = "file"
path = "data/points.npz"
[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "points"
params = {n_init = 1, random_state = 0}
grid = {n_clusters = [2, 3]}
"""
"""Two cases: the client is stopped in its first, and the resume runs both."""


@pytest.mark.slow
def test_resume_from_another_directory_finds_the_specs_relative_data(faults, tmp_path):
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    np.savez(project / "data" / "points.npz", X=np.random.default_rng(0).normal(size=(200, 2)))
    (project / "spec.toml").write_text(FILE_SPEC)
    client = faults.client("spec.toml", cwd=project)          # a relative spec path
    wait_for(lambda: case_processes(faults.tag) or client.poll() is not None, "a case process")
    client.send_signal(signal.SIGTERM)
    _, err = client.communicate(timeout=120)
    assert client.returncode == 143, err
    (run,) = ResultsStore(faults.results).list_runs()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = faults.run("--resume", run.run_id, cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    results = ResultsStore(faults.results).case_results(run.run_id)
    assert len(results) == 2 and all(result.ok for result in results)
    assert gone(faults.tag) == []


@pytest.mark.parametrize("umask", [0o002, 0o077])
def test_database_and_arrays_share_the_umasks_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        store = ResultsStore(tmp_path / "store")
        digest = store.put_array(np.arange(5))
    finally:
        os.umask(old)
    modes = {stat.S_IMODE(path.stat().st_mode) for path in (store.database, store._array_path(digest))}
    assert modes == {0o666 & ~umask}


def parents(processes: list[psutil.Process]) -> set[int]:
    found = set()
    for process in processes:
        try:
            found.add(process.ppid())
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
def test_a_second_run_on_this_machine_is_warned_about(faults, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(FILE_SPEC.replace('"data/points.npz"', f'"{tmp_path}/points.npz"'))
    np.savez(tmp_path / "points.npz", X=np.random.default_rng(0).normal(size=(200, 2)))
    long = tmp_path / "long.toml"     # still running when the second one starts
    long.write_text(spec.read_text().replace("[2, 3]", str(list(range(2, 60)))))
    first = faults.client(str(long))
    wait_for(lambda: case_processes(faults.tag) or first.poll() is not None, "the first run's case")
    second = faults.run(str(spec), "--dry-run")
    assert "another accelml run" not in second.stderr     # a dry run times nothing
    faults.results = tmp_path / "other-results"
    overlapping = faults.client(str(spec))
    wait_for(lambda: overlapping.pid in parents(case_processes(faults.tag)) or overlapping.poll() is not None,
             "the second run's first case (it has planned its run)")
    for client in (first, overlapping):
        client.send_signal(signal.SIGTERM)
    first.communicate(timeout=120)
    _, err = overlapping.communicate(timeout=120)
    # one other run, or more where other accelml runs share this machine (a CI host)
    assert re.search(r"warning: (another accelml run is|\d+ other accelml runs are) active on "
                     r"this machine \(pid [\d, ]+\): the timings of (both|all \d+) runs share "
                     r"its cores", err), err
    assert gone(faults.tag) == []
