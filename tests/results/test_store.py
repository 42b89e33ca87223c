import multiprocessing
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from accelml.errors import AccelmlError
from accelml.results.records import CaseResult, PhaseTiming, RunRecord
from accelml.results.store import ResultsStore, array_digest, array_to_npy_bytes


def make_case(run_id: str, case_id: str, digest: str | None = None) -> CaseResult:
    from accelml.results.records import ArrayRef

    refs = (ArrayRef("predictions", digest, "int64", (100,)),) if digest else ()
    return CaseResult(run_id, case_id, "kmeans", "sklearn", "cpu", "blobs", "ok",
                      timings=(PhaseTiming.from_samples("fit", [1.0, 1.1]),), predictions=refs,
                      finished_at=f"2026-01-01T00:00:{len(case_id):02d}")


def test_runs_cases_and_arrays(tmp_path):
    store = ResultsStore(tmp_path / "res")
    run = RunRecord("20260101-aaaaaa", "smoke", "h", "text", created_at="2026-01-01",
                    case_ids=("b", "a"))
    store.create_run(run)
    array = np.arange(100)
    digest = array_digest(array)
    assert store.add_case_result(make_case(run.run_id, "a", digest),
                                 {digest: array_to_npy_bytes(array)})
    assert store.add_case_result(make_case(run.run_id, "b"))
    # a second copy of a finished case is ignored, not duplicated
    assert not store.add_case_result(make_case(run.run_id, "a", digest))
    assert [c.case_id for c in store.case_results(run.run_id)] == ["b", "a"]   # planned order
    assert store.finished_case_ids(run.run_id) == {"a", "b"}
    assert np.array_equal(store.read_array(digest), array)
    assert store.get_run("20260101").run_id == run.run_id            # unique prefix
    store.set_run_status(run.run_id, RunRecord.FINISHED)
    assert store.list_runs()[0].status == "finished"
    with pytest.raises(AccelmlError, match="no run"):
        store.get_run("nope")


def test_array_bytes_must_match_their_digest(tmp_path):
    store = ResultsStore(tmp_path)
    store.create_run(RunRecord("r", "s", "h", "t"))
    wrong = array_to_npy_bytes(np.zeros(3))
    with pytest.raises(AccelmlError, match="does not match"):
        store.add_case_result(make_case("r", "a"), {array_digest(np.ones(3)): wrong})
    assert store.finished_case_ids("r") == set()


def test_store_refuses_a_newer_schema(tmp_path):
    store = ResultsStore(tmp_path)
    with sqlite3.connect(store.database) as connection:
        connection.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
    with pytest.raises(AccelmlError, match="schema version 999"):
        ResultsStore(tmp_path)


def _writer(directory: str, name: str, count: int, start, errors) -> None:
    try:
        store = ResultsStore(directory)
        start.wait()
        run_id = f"run-{name}"
        store.create_run(RunRecord(run_id, name, "h", "t", created_at=name))
        for index in range(count):
            array = np.full(100, index)
            digest = array_digest(array)
            store.add_case_result(make_case(run_id, f"{name}-{index}", digest),
                                  {digest: array_to_npy_bytes(array)})
            store.set_run_status(run_id, RunRecord.RUNNING)
    except BaseException as error:  # reported to the parent
        errors.put(repr(error))
        raise


def test_two_concurrent_writers_lose_and_corrupt_nothing(tmp_path):
    context = multiprocessing.get_context("spawn")
    start, errors = context.Event(), context.Queue()
    count = 40
    writers = [context.Process(target=_writer, args=(str(tmp_path), name, count, start, errors))
               for name in ("x", "y")]
    for writer in writers:
        writer.start()
    start.set()
    for writer in writers:
        writer.join(120)
    assert errors.empty(), errors.get()
    assert all(writer.exitcode == 0 for writer in writers)
    store = ResultsStore(tmp_path)
    assert {run.run_id for run in store.list_runs()} == {"run-x", "run-y"}
    for name in ("x", "y"):
        results = store.case_results(f"run-{name}")
        assert len(results) == count
        for result in results:
            index = int(result.case_id.split("-")[1])
            assert store.read_array(result.prediction().digest)[0] == index
    with sqlite3.connect(store.database) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def posix_locks_on(path) -> list[str]:
    """This process's POSIX locks on a file, as /proc/locks lists them."""
    inode = os.stat(path).st_ino
    return [line for line in Path("/proc/locks").read_text().splitlines()
            if line.split()[4] == str(os.getpid()) and line.split()[5].endswith(f":{inode}")]


@pytest.mark.parametrize("read_only", [False, True])
def test_opening_a_store_keeps_the_locks_of_connections_already_open(tmp_path, read_only):
    # An open WAL connection holds a shared lock on the database file, and the last connection
    # to close deletes the -wal and -shm files only where it can lock the file exclusively.
    # A Python open()/close() of the file drops every POSIX lock of the process on it: a
    # writer elsewhere then deletes the files this process still uses, and its next read is
    # "database disk image is malformed" (CI, test_client_faults, stop 38).
    ResultsStore(tmp_path)
    database = tmp_path / "results.sqlite"
    held = sqlite3.connect(database, isolation_level=None)
    try:
        held.execute("SELECT count(*) FROM runs").fetchone()
        before = posix_locks_on(database)
        assert before, "an open WAL connection holds a lock on the database file"
        ResultsStore(tmp_path, read_only=read_only).list_runs()
        assert posix_locks_on(database) == before
    finally:
        held.close()
