"""Orphans and Ctrl-C at any moment (issue 30, item 3).

- A single-process case lived on 2.0 to 2.7 s after its client was killed with SIGKILL (its
  watcher thread waited for a fit that held the GIL): the kernel now kills it with its
  client (a parent-death signal), within half a second.
- Ctrl-C while ``python -m accelml`` was still importing gave a ``KeyboardInterrupt``
  traceback: at every moment it is one line and exit 130.
- A case process whose runner was killed made its scratch folder again (mode 0755, no owner
  file, so no sweep ever removed it) after the next case's sweep had removed it: it now
  makes folders only inside that folder, never the folder itself.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from accelml.runner.process import CaseInput
from accelml.spec.load import load_spec_text

from .conftest import REPO, case_processes, gone, wait_for
from .test_client_faults import SLOW_CASES, spec_with

pytestmark = [pytest.mark.faults, pytest.mark.slow]

ONE_SLOW_CASE = SLOW_CASES.replace("[100000, 100001, 100002]", "[100000]").replace(
    "time_limit = 2", "time_limit = 300")


def test_a_case_dies_within_half_a_second_of_its_client(faults, tmp_path):
    spec = spec_with(tmp_path, cases=1, extra=ONE_SLOW_CASE)
    client = faults.client(spec)
    slow = []

    def slow_case_running() -> bool:   # the second case process is the forest's
        found = case_processes(faults.tag)
        if client.poll() is None and found and found[0].pid not in seen:
            seen.add(found[0].pid)
        slow[:] = found if len(seen) >= 2 else []
        return bool(slow) or client.poll() is not None

    seen: set[int] = set()
    wait_for(slow_case_running, "the slow case process", step=0.05)
    assert client.poll() is None, client.communicate()
    time.sleep(1.0)                       # into its fit
    (case,) = slow
    client.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    while case.is_running() and case.status() != psutil.STATUS_ZOMBIE:
        if time.monotonic() - killed_at > 10:
            break
        time.sleep(0.01)
    lived = time.monotonic() - killed_at
    client.communicate(timeout=60)
    assert lived < 0.5, f"the case process lived {lived:.2f} s after its client"
    assert gone(faults.tag) == []


def interrupted_at(faults, spec: str, delay: float) -> tuple[int, str]:
    """``python -m accelml compare SPEC`` sent SIGINT ``delay`` s after it started: its exit
    status and stderr."""
    process = subprocess.Popen([sys.executable, "-m", "accelml", "compare", spec, "--results-dir",
                                str(faults.results), "--no-progress"], cwd=REPO, env=faults.env,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    return process.returncode, err


STARTING_AT = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
"""Moments of Python's start-up and accelml's first imports (seconds after the process starts)."""
LATER = (0.4, 0.5, 0.6, 0.8, 1.0, 1.3, 1.6, 2.0)
"""Later moments, tried in turn where the first ones all fell in Python's start-up (a loaded
host: the clean-clone suite beside other work ended 20 of 21 there, 1 in accelml)."""


def test_ctrl_c_in_the_first_moments_is_never_an_accelml_traceback(faults, tmp_path):
    """Before the first line of accelml runs, Python itself starts (its own imports, site,
    runpy): a SIGINT there ends the process by the signal (exit status -2, shown as 130 by a
    shell) or, once Python has its handler, with a KeyboardInterrupt of Python's start-up
    that no package can catch. From accelml's first line on it is one line and exit 130
    (there used to be tracebacks from accelml/__init__.py and __main__.py until 0.2 s)."""
    spec = spec_with(tmp_path, cases=1)
    ended = {"accelml": 0, "python": 0}
    for delay in STARTING_AT * 3 + LATER:
        if delay in LATER and ended["accelml"] >= 3:
            break
        code, err = interrupted_at(faults, spec, delay)
        if code == 130:
            assert "Traceback" not in err, (delay, err)
            assert err.strip().splitlines()[-1].endswith("interrupted"), (delay, err)
            ended["accelml"] += 1
        else:   # in Python's own start-up: no frame of accelml, and no run begun
            assert code in (-signal.SIGINT, 1), (delay, code, err)
            assert not re.search(r'File "[^"]*/accelml/', err), (delay, err)
            assert "accelml: interrupted" not in err and "accelml compare" not in err, (delay, err)
            ended["python"] += 1
    assert ended["accelml"] >= 3, ended
    assert gone(faults.tag) == []


@pytest.mark.parametrize("delay", [0.5, 0.8, 1.2, 2.0, 2.7])
def test_ctrl_c_while_starting_is_one_line(delay, faults, tmp_path):
    spec = spec_with(tmp_path, cases=1)
    code, err = interrupted_at(faults, spec, delay)
    if code == 0:
        pytest.skip(f"the run ended before SIGINT at {delay} s")
    assert "Traceback" not in err, err
    assert code == 130, (code, err)
    assert err.strip().splitlines()[-1].endswith("interrupted") or \
        "interrupted" in err.strip().splitlines()[-1], err
    assert gone(faults.tag) == []


def test_a_swept_scratch_folder_is_never_made_again(faults, tmp_path):
    (case,) = load_spec_text("repeats = 1\nwarmup = 0\n" + ONE_SLOW_CASE.replace("[100000]", "[1500]")
                             + '[datasets.blobs]\nsource = "generated"\ngenerator = "blobs"\n'
                             'n_samples = 300\nn_features = 3\n', "slow.toml").cases
    scratch = Path(tempfile.mkdtemp(prefix="accelml-case-", dir=faults.tmp))  # its runner's
    inputs = CaseInput(case=case, run_id="r", arrays_dir=str(scratch / "arrays"),
                       cache_dir=str(tmp_path / "cache"), threads=1, time_limit_s=300)
    (scratch / "input.json").write_text(json.dumps(inputs.to_dict()))
    process = subprocess.Popen([sys.executable, "-m", "accelml", "run-case", str(scratch / "input.json"),
                                "--output", str(scratch / "result.json")], cwd=REPO, env=faults.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # into its fit (its data is in the cache), then swept as by the next case's runner
    wait_for(lambda: any((tmp_path / "cache").rglob("*.*")) or process.poll() is not None,
             "the case's data", step=0.05)
    time.sleep(0.5)
    assert process.poll() is None, process.communicate()
    shutil.rmtree(scratch)
    _, err = process.communicate(timeout=300)
    assert not scratch.exists(), (sorted(p.name for p in scratch.rglob("*")), err[-2000:])
    assert process.returncode != 0
