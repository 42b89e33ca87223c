"""tests/cli's shared set-up: one real smoke comparison that several modules read.

Three modules ran ``python -m accelml compare experiments/smoke.toml`` four times between
them (about 30 CPU-seconds each), and test_bad_inputs a run of its own, each for a store to
assert things about; :func:`smoke_store` makes the two runs they need once per test session,
on whichever xdist worker asks first, and every module copies the store it reads.
"""

from __future__ import annotations

import fcntl
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from accelml.results.store import ResultsStore
from tests.cli.terminal import piped

SMOKE = Path(__file__).resolve().parents[2] / "experiments" / "smoke.toml"


@dataclass(frozen=True)
class SmokeStore:
    """Two runs of experiments/smoke.toml in one store, through real ``python -m accelml
    compare`` processes with their output piped: the first ``--json`` (progress lines on
    stderr), the second ``--no-progress`` (the table on stdout). Read-only: a test that runs
    a command on it works on :meth:`copy`."""

    results: Path             # where the runs were made (the path their output names)
    run_ids: tuple[str, str]  # as the store lists them, newest first: (table run, --json run)
    json_stdout: str
    json_stderr: str
    table_stdout: str
    table_stderr: str

    def copy(self, directory: Path) -> Path:
        """A copy of the store under ``directory``, to run commands on: its results dir."""
        return Path(shutil.copytree(self.results, directory / "results"))

    @property
    def json_run_id(self) -> str:
        return self.run_ids[1]

    @property
    def table_run_id(self) -> str:
        return self.run_ids[0]


def _make(folder: Path) -> None:
    results = folder / "results"
    first = piped("compare", str(SMOKE), "--results-dir", str(results), "--json")
    assert first.returncode == 0, first.stderr
    second = piped("compare", str(SMOKE), "--results-dir", str(results), "--no-progress")
    assert second.returncode == 0, second.stderr
    run_ids = [run.run_id for run in ResultsStore(results).list_runs()]
    assert len(run_ids) == 2 and re.search(rf"run {run_ids[0]}:", second.stderr), second.stderr
    made = {"run_ids": run_ids, "json_stdout": first.stdout, "json_stderr": first.stderr,
            "table_stdout": second.stdout, "table_stderr": second.stderr}
    (folder / "made.tmp").write_text(json.dumps(made))
    (folder / "made.tmp").rename(folder / "made.json")      # last: the store is whole


@pytest.fixture(scope="session")
def smoke_store(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> SmokeStore:
    """The session's :class:`SmokeStore`, made once for all xdist workers: in the run's
    tmp_path root (the workers' basetemps' parent), under a file lock; the workers that ask
    while it is being made wait for it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if hasattr(request.config, "workerinput") else base
    folder = shared / "cli-smoke-store"
    with open(shared / "cli-smoke-store.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (folder / "made.json").is_file():
                shutil.rmtree(folder, ignore_errors=True)     # one a failed worker left
                folder.mkdir()
                _make(folder)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    made = json.loads((folder / "made.json").read_text())
    return SmokeStore(results=folder / "results", run_ids=tuple(made["run_ids"]),
                      json_stdout=made["json_stdout"], json_stderr=made["json_stderr"],
                      table_stdout=made["table_stdout"], table_stderr=made["table_stderr"])
