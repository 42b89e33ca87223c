"""tests/conftest.py's xdist work units, and its ``alone`` mark: a test so marked runs while no
test runs on another worker (real xdist workers in a pytest subprocess)."""

from __future__ import annotations

import doctest
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tests.conftest

TIMED = textwrap.dedent("""
    import json, os, time
    import pytest

    def note(name, started):
        with open(os.environ["WINDOWS_LOG"], "a") as log:
            log.write(json.dumps([name, started, time.time()]) + "\\n")

    @pytest.mark.alone
    @pytest.mark.parametrize("index", range(2))
    def test_timed(index):
        started = time.time(); time.sleep(0.6); note(f"alone{index}", started)

    @pytest.mark.parametrize("index", range(6))
    def test_busy(index):
        started = time.time(); time.sleep(0.6); note(f"busy{index}", started)
""")


def test_work_unit_examples():
    result = doctest.testmod(tests.conftest)
    assert result.attempted >= 6 and result.failed == 0


@pytest.mark.slow
def test_a_test_marked_alone_runs_last_with_no_neighbour(tmp_path):
    (tmp_path / "tests").mkdir()
    shutil.copy(Path(tests.conftest.__file__), tmp_path / "tests" / "conftest.py")
    (tmp_path / "tests" / "test_windows.py").write_text(TIMED)
    log = tmp_path / "windows.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3",
                           "--dist", "loadgroup", "tests"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "WINDOWS_LOG": str(log)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    windows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(windows) == 8
    for name, start, end in windows:
        if name.startswith("alone"):
            beside = [other for other, a, b in windows if other != name and a < end and b > start]
            assert beside == [], f"{name} ran beside {beside}"
    # written first, run last: while an alone test runs, the other workers start nothing
    last_busy_start = max(start for name, start, _ in windows if name.startswith("busy"))
    assert all(start >= last_busy_start for name, start, _ in windows if name.startswith("alone"))


NAMED = textwrap.dedent("""
    import json, os, time
    import pytest

    WORK_UNIT = "pair"

    @pytest.mark.parametrize("index", range(3))
    def test_in_pair(index):
        started = time.time(); time.sleep(0.3)
        with open(os.environ["WINDOWS_LOG"], "a") as log:
            log.write(json.dumps([__name__, os.environ["PYTEST_XDIST_WORKER"], started, time.time()]) + "\\n")
""")


@pytest.mark.slow
def test_modules_naming_one_work_unit_run_on_one_worker_one_test_at_a_time(tmp_path):
    (tmp_path / "tests").mkdir()
    shutil.copy(Path(tests.conftest.__file__), tmp_path / "tests" / "conftest.py")
    for name in ("test_first", "test_second"):
        (tmp_path / "tests" / f"{name}.py").write_text(NAMED)
    log = tmp_path / "windows.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3",
                           "--dist", "loadgroup", "tests"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "WINDOWS_LOG": str(log)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    windows = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted({module for module, *_ in windows}) == ["test_first", "test_second"]
    assert len(windows) == 6 and len({worker for _, worker, _, _ in windows}) == 1, windows
