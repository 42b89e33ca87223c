"""Shared test set-up: markers, and the real one-node SLURM from slurm/local/."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import re
import signal
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SLURM_START = REPO / "slurm" / "local" / "start.sh"
CANNOT_RUN_HERE = 3


def pytest_configure(config):
    # A test run started as a background job of a non-interactive shell (`make test &` in a
    # script) inherits SIGINT ignored, under nohup SIGHUP too, and so would every client it
    # starts, which then rightly keeps them ignored: the tests of those signals (the
    # executors', the fault suite's) need them delivered, as in a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    for line in (
        "slurm: needs the local one-node SLURM (slurm/local/start.sh); skipped only where it cannot start",
        "horovod: runs real multi-process Horovod (horovodrun --gloo)",
        "torch_ddp: runs real multi-process torch.distributed (torchrun, gloo)",
        "gpu: needs an NVIDIA GPU; skipped with the reason where there is none",
        "slow: takes more than a few seconds",
        "faults: the fault suite (tests/faults): real faults injected into real runs",
        "alone: compares timings taken in two processes: no test runs beside it on another xdist worker",
    ):
        config.addinivalue_line("markers", line)


SHARED_SCOPE = re.compile(r"""scope\s*=\s*["'](module|class|package|session)["']""")
ONE_WORKER = re.compile(r"^ONE_WORKER = True\b", re.MULTILINE)
"""What a folder's conftest.py says when all the folder's tests must run on one worker, in order."""
NAMED_UNIT = re.compile(r"""^WORK_UNIT = ["']([^"'\n]+)["']""", re.MULTILINE)
"""What a module says to run in a unit of that name, with the other modules that name it."""


def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadgroup`` (pyproject.toml's addopts: ``-n 4 --dist loadgroup``), the
    work units the xdist workers take are :func:`work_unit` s. (xdist 3.8's own loadgroup reads
    ``xdist_group`` marks through ``item._nodeid``, which pytest 9 no longer uses: every test
    would be a unit of its own.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False   # the workers' collection order, not the units' sizes
    return WorkUnits(config, log)


def _text(path: str) -> str:
    found = REPO / path
    return found.read_text() if found.is_file() else ""


@functools.cache
def _shares_a_fixture(module: str) -> bool:
    return SHARED_SCOPE.search(_text(module)) is not None


@functools.cache
def _one_worker(folder: str) -> bool:
    return ONE_WORKER.search(_text(f"{folder}/conftest.py")) is not None


@functools.cache
def _named_unit(module: str) -> str | None:
    found = NAMED_UNIT.search(_text(module))
    return found.group(1) if found else None


def work_unit(nodeid: str) -> str:
    """The tests that one xdist worker runs together, one after another.

    - a module that says ``WORK_UNIT = "NAME"`` belongs to the unit NAME, with every module
      saying the same: the fault suite is four serial chains, ``tests/faults`` (the client's
      faults, timed against its start-up), its killed ranks (``test_killed_ranks``), its
      ranks' clean-up (``test_rank_cleanup``) and its SLURM jobs (``test_slurm_faults``): as
      one chain it took about half an hour on the CI machine, near the whole suite's wall time;
    - a folder whose conftest.py says ``ONE_WORKER = True`` is one unit: the fault suite
      (``tests/faults``), whose tests time signals against process start-up, and
      ``tests/report``, whose modules read one session-scoped store of real runs, some in order;
    - a module with a module-, class- or session-scoped fixture (one real comparison that
      several tests read, some of them in order: "latest" run of a shared store) is one unit,
      so that the fixture is built once and its tests keep their order;
    - every other test is a unit of its own, taken by whichever worker is free. A folder's
      session-scoped fixtures that are cheap to build (the Horovod look-up,
      ``tests/containers``' cached image) are built once per worker that needs them, rather
      than putting the whole folder (tests/dl: ~100 tests of real ranks) on one worker.

    Units with more tests start first; other tests may share the machine (each worker has its
    own tmp_path root; tests name their SLURM jobs, fault tags and ports uniquely).

    >>> work_unit("tests/faults/test_orphans.py::test_x[0.5]")
    'tests/faults'
    >>> work_unit("tests/faults/test_slurm_faults.py::test_x")
    'tests/faults: SLURM jobs'
    >>> work_unit("tests/report/test_crossover.py::test_x")
    'tests/report'
    >>> work_unit("tests/cli/test_compare.py::test_table")
    'tests/cli/test_compare.py'
    >>> work_unit("tests/dl/test_horovod.py::test_only_rank_zero_writes_files")
    'tests/dl/test_horovod.py'
    >>> work_unit("tests/dl/test_distribute.py::test_mirrored_on_two_logical_cpu_devices")
    'tests/dl/test_distribute.py::test_mirrored_on_two_logical_cpu_devices'
    >>> work_unit("tests/spec/test_load.py::test_x")
    'tests/spec/test_load.py::test_x'
    """
    module = nodeid.split("::")[0]
    folder = module.rpartition("/")[0]
    if named := _named_unit(module):
        return named
    if _one_worker(folder):
        return folder
    return module if _shares_a_fixture(module) else nodeid


def pytest_collection_modifyitems(config, items):
    """On an xdist worker: the units in the order the workers take them (the scheduler keeps
    this order): those with the most tests marked ``slow`` first (the fault suite's chain, then
    the longest real runs), then the other units of several tests, then single tests, and the
    tests marked ``alone`` last; stable otherwise, so that a unit keeps its own order (some read
    a shared store's latest run) and no long test starts last while the other workers sit idle.
    An ``alone`` test stops the other workers from starting tests until it has run (:func:`_turn`):
    at the end, once nothing else is left to start, that costs them nothing."""
    if hasattr(config, "workerinput"):
        units = {item.nodeid: work_unit(item.nodeid) for item in items}
        slow = collections.Counter(units[item.nodeid] for item in items if item.get_closest_marker("slow"))
        alone = {units[item.nodeid] for item in items if item.get_closest_marker("alone")}
        items.sort(key=lambda item: (units[item.nodeid] in alone, -slow[units[item.nodeid]],
                                     units[item.nodeid] == item.nodeid))


@contextlib.contextmanager
def _turn(config, alone: bool):
    """This worker's turn to run one test: shared with the other xdist workers' tests, or the
    whole machine for a test marked ``alone`` (its timings must not share the 2 cores with a
    neighbour's processes). A fair readers-writer lock of two flocks: a test marked ``alone``
    holds the turnstile while it waits, so the other workers start no new test meanwhile and
    it gets the machine once the tests already running end. Nothing to share without workers."""
    if not hasattr(config, "workerinput"):
        yield
        return
    shared = Path(config.option.basetemp).parent      # the run's tmp_path root, its workers' parent
    with open(shared / "turnstile.lock", "a") as turnstile, open(shared / "machine.lock", "a") as machine:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test (set-up, fixtures of wider scope it builds first, call, tear-down) in its
    :func:`_turn`."""
    with _turn(item.config, alone=item.get_closest_marker("alone") is not None):
        return (yield)


@pytest.fixture
def slurm_available() -> str:
    """Start (or find) the local SLURM; skip only where it cannot run here (not root, not Debian).

    Returns the partition name. A SLURM that should start here but does not is a test
    failure, not a skip. Called before every SLURM test (a third of a second when it is up):
    it also restarts a slurmd started before the PMIx library was installed, under which every
    ``srun --mpi=pmix`` step hangs (``restart_slurmd_lacking_mpi`` in start.sh), and clears a
    step daemon that slurmd never set up, which would otherwise keep its job completing and the
    node held for the tests after it (``clear_stuck_steps``).
    """
    result = subprocess.run(["bash", str(SLURM_START), "start"], capture_output=True, text=True)
    if result.returncode == CANNOT_RUN_HERE:
        pytest.skip(f"local SLURM unavailable: {result.stdout.strip()}")
    if result.returncode != 0:
        pytest.fail(f"local SLURM did not start: {result.stderr.strip() or result.stdout.strip()}")
    return "debug"


@pytest.fixture(scope="session")
def horovod_ready():
    """Skip (with the reason) where Horovod or horovodrun is not installed. Looked up, not
    imported: importing its bindings loads TensorFlow and PyTorch (~17 CPU-s in each xdist
    worker), and a binding that is installed but broken fails the tests that use it."""
    from accelml.probe import distribution_version, find_launcher

    if distribution_version("horovod") is None:
        pytest.skip("horovod unavailable: not installed (make/build-horovod.sh builds it)")
    if find_launcher("horovodrun") is None:
        pytest.skip("horovod unavailable: horovodrun is not on PATH")
    return True


@pytest.fixture(scope="session")
def gpus():
    """The NVIDIA GPUs here; skips the test with the reason where there are none."""
    from accelml.probe import list_gpus

    found, reason = list_gpus()
    if not found:
        pytest.skip(f"no GPU: {reason}")
    return found
