"""Run one case in its own process, with its time and memory limits; return JSON-able output.

:func:`execute_case` is what an executor runs (on a dask worker, locally or on a cluster
node). It starts ``python -m accelml run-case`` as a child process, sets the thread count for
every threading library through the environment before the process starts, watches the time
limit and the memory limit (resident memory of the whole process tree), and returns a
:class:`CaseOutput`: the :class:`CaseResult` and the bytes of the arrays it refers to.

A case that raises, runs past its time limit, goes over its memory limit, or whose process
dies (SIGKILL from the kernel's OOM killer, a crash) comes back as a failed ``CaseResult``
with the reason; :func:`execute_case` itself does not raise for any of these.

>>> from accelml.cases import DatasetSpec
>>> case = Case("kmeans", "sklearn", "cpu", DatasetSpec("blobs", "generated"), threads=2)
>>> task = CaseTask(case=case, run_id="r1", threads=2)
>>> thread_environment(task.threads)["OMP_NUM_THREADS"]
'2'
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from accelml.cases import Case
from accelml.containers import RANK_CONTAINER_VARIABLE, case_binds, wrap
from accelml.convert import JSONRecord
from accelml.datasets import default_cache_dir
from accelml.dl.launch import ONE_HOST_LAUNCHERS, default_launcher
from accelml.dl.strategies import STRATEGIES_POINT
from accelml.results.records import CaseResult, FailureKind, utc_now
from accelml.runner.stacks import STACKS_DIR_VARIABLE, STACKS_SIGNAL, ask_workers, hung_at, workers_hung_at
from accelml.scratch import die_with_this_process, kill_tree, make_scratch, sweep

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS")
MEMORY_POLL_SECONDS = 0.1
OUT_OF_MEMORY_SHARE = 0.8
"""A case killed by SIGKILL is said to be out of memory when its peak memory reached this
share of the machine's."""
SCRATCH_PREFIXES = ("accelml-case-", "accelml-dl-")
"""Scratch folders of case processes and their launchers; those of a process killed with
SIGKILL are swept (:func:`accelml.scratch.sweep`) when the next case starts."""
STDERR_TAIL = 4000
STACKS_WAIT_S = 1.0
STACKS_DIR = "stacks"
"""The folder, in a case's scratch, where its dask workers write their stacks when asked."""


def _timed_out(time_limit: float, stderr_path: Path, stacks_dir: Path) -> tuple[FailureKind, str]:
    """The verdict on a case killed at its time limit, with where it and its dask workers
    were if they said so (:mod:`accelml.runner.stacks`)."""
    where = workers = ""
    if stderr_path.exists():
        where = hung_at(stderr_path.read_bytes()[-16 * STDERR_TAIL:].decode(errors="replace"))
        workers = workers_hung_at(stacks_dir)
    return (FailureKind.TIMEOUT, f"exceeded its time limit of {time_limit:g} s"
            + (f"; it was in {where}" if where else "")
            + (f"; its dask workers were in {workers}" if workers else ""))


def _ask_for_stacks(process: subprocess.Popen[bytes], stacks_dir: Path) -> None:
    """Have the case process and its dask workers print their threads' stacks
    (:data:`~accelml.runner.stacks.STACKS_SIGNAL`), and give them a moment."""
    try:
        os.kill(process.pid, STACKS_SIGNAL)
    except (ProcessLookupError, PermissionError):
        return
    ask_workers(stacks_dir)
    time.sleep(STACKS_WAIT_S)


@dataclass(frozen=True)
class CaseTask:
    """One case to run, its run, and where and how to run it."""

    case: Case
    run_id: str
    cache_dir: str | None = None
    threads: int | None = None
    attempt: int = 1
    python: str | None = None      # None: the interpreter running execute_case (on the worker)
    workdir: str | None = None     # where scratch folders go (default: the system temp dir)
    environment: dict[str, str] | None = None   # variables set in the case process (deterministic mode)
    deterministic: bool = False    # the case process seeds Python/NumPy first (determinism.apply)
    logs_dir: str | None = None    # where a case's launcher and rank logs are kept (the run's store)
    retries: int = 0               # re-runs of the case when it is killed (accelml.runner.retry)

    # What an executor reads to place the case (CaseNeeds.of_case):
    @property
    def case_id(self) -> str:
        return self.case.case_id

    @property
    def device(self) -> str:
        return self.case.device

    @property
    def ranks(self) -> int:
        return self.case.ranks

    @property
    def strategy(self) -> str | None:
        return self.case.strategy

    @property
    def memory_limit_mb(self) -> int | None:
        return self.case.memory_limit_mb

    @property
    def oversubscribe(self) -> bool:
        return self.case.oversubscribe

    @property
    def time_limit_s(self) -> float:
        return self.case.time_limit_s


@dataclass(frozen=True)
class CaseInput(JSONRecord):
    """What the case process is told (``input.json``): the case, its run, where its arrays and
    the dataset cache go, its threads, time limit, attempt and when it was spawned."""

    case: Case
    run_id: str
    arrays_dir: str
    cache_dir: str | None = None
    threads: int | None = None
    time_limit_s: float | None = None
    attempt: int = 1
    spawned_at: float | None = None
    deterministic: bool = False
    turn_fds: tuple[int, int] | None = None   # (commands, replies): rounds in turn (runner.interleave)
    logs_dir: str | None = None


@dataclass(frozen=True)
class CaseDocument(JSONRecord):
    """What the case process answers (``result.json``): the result, the digests of the arrays
    it wrote to ``arrays_dir``, and the traceback of a case that raised."""

    result: CaseResult
    arrays: tuple[str, ...] = ()
    traceback: str = ""


@dataclass(frozen=True)
class CaseOutput:
    """What :func:`execute_case` returns: the result, and the arrays it refers to
    (digest -> ``.npy`` bytes) for the client to store beside it."""

    result: CaseResult
    arrays: Mapping[str, bytes] = field(default_factory=dict)


def thread_environment(threads: int | None) -> dict[str, str]:
    if threads is None:
        return {}
    value = str(int(threads))
    env = {name: value for name in THREAD_VARIABLES}
    env["TF_NUM_INTEROP_THREADS"] = "1" if threads == 1 else "2"
    return env


def _tree_rss(pid: int) -> int:
    import psutil

    try:
        process = psutil.Process(pid)
        members = [process] + process.children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            continue
    return total


def _kill_group(process: subprocess.Popen[bytes], wait: bool = True) -> None:
    """SIGKILL the case process and everything it started (e.g. the ranks of horovodrun)."""
    kill_tree(process.pid, include_self=process.returncode is None)
    if wait:
        process.wait()


_RUNNING: dict[int, tuple[subprocess.Popen[bytes], Path]] = {}
_RUNNING_LOCK = threading.Lock()
_ENDING = threading.Event()


def end_running_cases() -> int:
    """Kill every case process this process started and still runs (with what they started)
    and remove their scratch folders (and those of their launchers): the client's clean-up when it is interrupted
    (Ctrl-C, SIGTERM) while cases run on dask threads beside it. Until :func:`accept_cases`,
    a case process started meanwhile is killed at once, and no killed case is run again
    (:func:`ending_cases`). Returns how many it ended."""
    with _RUNNING_LOCK:
        _ENDING.set()
        running = list(_RUNNING.values())
    for process, _ in running:
        _kill_group(process, wait=False)
    for process, scratch in running:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(scratch, ignore_errors=True)
    if running:   # the launchers' folders of the case processes just killed
        sweep(tempfile.gettempdir(), SCRATCH_PREFIXES)
    return len(running)


def accept_cases() -> None:
    """Case processes may start again (a run begins) after :func:`end_running_cases`."""
    _ENDING.clear()


def ending_cases() -> bool:
    """Whether this process is ending its cases (:func:`end_running_cases`): a case killed
    now was killed by the client's own clean-up, so it is not run again."""
    return _ENDING.is_set()


def _wait(process: subprocess.Popen[bytes]) -> int:
    """Wait for ``process``; return the peak resident memory (bytes) of its largest process
    (its own, or of a process it waited for) as the kernel accounts it."""
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except ChildProcessError:   # reaped already (by a kill that waited)
        process.wait()
        return 0
    process.returncode = os.waitstatus_to_exitcode(status)
    return int(usage.ru_maxrss) * 1024


def _killed_by_signal(code: int, peak_rss: int, last: str) -> tuple[FailureKind, str]:
    """What is known of a case process that ``-code`` (a signal) ended: which signal, and its
    peak memory against this machine's; out of memory is named only when it came near that.

    >>> kind, reason = _killed_by_signal(-9, 2**20, "")
    >>> kind.value, reason.split(";")[0]
    ('killed', 'killed by SIGKILL from outside the case (a user, the batch system or the kernel)')
    """
    import psutil

    name = signal.Signals(-code).name
    total = psutil.virtual_memory().total
    memory = f"peak memory {peak_rss / 2**20:.0f} MiB of {total / 2**20:.0f} MiB on this machine"
    if code == -signal.SIGKILL and peak_rss >= OUT_OF_MEMORY_SHARE * total:
        return FailureKind.MEMORY, f"killed by SIGKILL at {memory}: most likely out of memory"
    if code == -signal.SIGKILL:
        return FailureKind.KILLED, (f"killed by SIGKILL from outside the case (a user, the batch "
                                    f"system or the kernel); {memory}, so not for lack of memory")
    return FailureKind.KILLED, f"killed by {name}; {memory}" + (f": {last}" if last else "")


def _watch_memory(process: subprocess.Popen[bytes], time_limit: float, memory_limit_mb: int,
                  stderr_path: Path, stacks_dir: Path) -> tuple[tuple[FailureKind, str] | None, int]:
    """Poll the process tree's resident memory; kill it over the limit or past the time limit."""
    started = time.monotonic()
    peak_rss = 0
    while process.poll() is None:
        if time.monotonic() - started > time_limit:
            _ask_for_stacks(process, stacks_dir)
            _kill_group(process)
            return _timed_out(time_limit, stderr_path, stacks_dir), peak_rss
        rss = _tree_rss(process.pid)
        peak_rss = max(peak_rss, rss)
        if rss > memory_limit_mb * 2**20:
            _kill_group(process)
            return (FailureKind.MEMORY, f"used {rss / 2**20:.0f} MiB, over its memory limit of "
                              f"{memory_limit_mb} MiB"), peak_rss
        time.sleep(MEMORY_POLL_SECONDS)
    return None, peak_rss


def _failed(task: CaseTask, failure: FailureKind, reason: str, wall: float, started_at: str,
            peak_rss: int | None) -> CaseOutput:
    result = CaseResult.failed(task.case, task.run_id, failure, reason,
                               threads=task.threads, attempts=task.attempt,
                               started_at=started_at, wall_seconds=wall,
                               peak_host_memory_bytes=peak_rss or None)
    return CaseOutput(result)


def ranks_started_from_the_host(case: Case) -> bool:
    """Whether ``case``'s ranks are started by srun or mpirun, which live on the host: in a
    container such a case process stays on the host and each rank runs in the image.

    >>> from accelml.cases import DatasetSpec
    >>> case = Case("mlp", "keras", "cpu", DatasetSpec("digits", "shipped"), ranks=2,
    ...             strategy="horovod", params=(("launcher", "mpirun"),))
    >>> ranks_started_from_the_host(case), ranks_started_from_the_host(Case("mlp", "keras", "cpu",
    ...     DatasetSpec("digits", "shipped"), ranks=2, strategy="horovod"))
    (True, False)
    """
    strategy = STRATEGIES_POINT.find(case.strategy) if case.strategy else None
    if strategy is None or case.ranks == 1:
        return False
    named = case.params_dict.get("launcher")
    launcher = named if isinstance(named, str) else default_launcher(strategy, case.ranks)
    return launcher not in ONE_HOST_LAUNCHERS


def _sweep_scratch(task: CaseTask) -> None:
    for parent in {task.workdir or tempfile.gettempdir(), tempfile.gettempdir()}:
        sweep(parent, SCRATCH_PREFIXES)


class TurnControl:
    """What an interleaved comparison group's coordinator (:mod:`accelml.runner.interleave`)
    holds of one case process it runs: the descriptors the process inherits for its turns,
    and :meth:`expire`, which ends it as timed out (a round past the case's time limit)."""

    def __init__(self, child_fds: tuple[int, int], time_limit_s: float):
        self.child_fds = child_fds
        self.time_limit_s = time_limit_s
        self.expired = threading.Event()
        self.started = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._stacks_dir: Path | None = None

    def attach(self, process: subprocess.Popen[bytes], stacks_dir: Path) -> None:
        self._process, self._stacks_dir = process, stacks_dir
        for fd in self.child_fds:   # the process has its copies; EOF reaches the coordinator
            os.close(fd)
        self.started.set()

    def expire(self) -> None:
        process, stacks_dir = self._process, self._stacks_dir
        if process is None or stacks_dir is None or process.poll() is not None:
            return
        self.expired.set()
        _ask_for_stacks(process, stacks_dir)
        _kill_group(process, wait=False)


def execute_case(task: CaseTask) -> CaseOutput:
    """Run one case in a fresh process; see the module docstring."""
    return run_case_process(task)


def run_case_process(task: CaseTask, turns: TurnControl | None = None) -> CaseOutput:
    """Run one case in a fresh process; with ``turns``, its rounds wait for their turn
    (an interleaved group) and its process may run for the group's time limit."""
    time_limit = (turns.time_limit_s if turns is not None else task.case.time_limit_s) or 600.0
    memory_limit_mb = task.case.memory_limit_mb
    _sweep_scratch(task)
    scratch = Path(make_scratch("accelml-case-", task.workdir))
    try:
        input_path, output_path = scratch / "input.json", scratch / "result.json"
        stderr_path, stacks_dir = scratch / "stderr.txt", scratch / STACKS_DIR
        started_at = utc_now()
        spawned_at = time.time()
        inputs = CaseInput(case=task.case, run_id=task.run_id, arrays_dir=str(scratch / "arrays"),
                           cache_dir=task.cache_dir, threads=task.threads, time_limit_s=time_limit,
                           attempt=task.attempt, spawned_at=spawned_at,
                           deterministic=task.deterministic, logs_dir=task.logs_dir,
                           turn_fds=None if turns is None else turns.child_fds)
        input_path.write_text(json.dumps(inputs.to_dict()))
        env = {**os.environ, **(task.environment or {}), **thread_environment(task.threads),
               "PYTHONUNBUFFERED": "1", STACKS_DIR_VARIABLE: str(stacks_dir)}
        # The case process imports the same accelml as this one, installed or not.
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.pop("ACCELML_CLIENT", None)
        python = task.python or sys.executable
        command = [python, "-m", "accelml", "run-case", str(input_path), "--output", str(output_path)]
        container = task.case.container
        if container is not None and ranks_started_from_the_host(task.case):
            env[RANK_CONTAINER_VARIABLE] = json.dumps(container.to_dict())   # (accelml.dl.launch)
        elif container is not None:   # the case process (and every rank it starts) in the image
            cache = Path(task.cache_dir or default_cache_dir())
            cache.mkdir(parents=True, exist_ok=True)
            wrapped = wrap(container, [container.python, *command[1:]], env,
                           binds=case_binds(package_root, str(scratch), str(cache)),
                           gpus=task.case.device == "cuda", workdir=str(scratch))
            if wrapped.problem:
                return _failed(task, FailureKind.UNAVAILABLE, wrapped.problem,
                               time.time() - spawned_at, started_at, None)
            command, env = list(wrapped.argv), dict(wrapped.environment)
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                pass_fds=() if turns is None else turns.child_fds,
                # Same session and process group as the client: the same CPU share (the
                # scheduler's autogroups are per session), and Ctrl-C reaches the case too.
                # The kernel kills it the moment its client dies (a watcher thread in the
                # case could wait seconds for a fit that holds the GIL); the thread that
                # starts it waits for it, so it cannot end first.
                preexec_fn=die_with_this_process(),
            )
            with _RUNNING_LOCK:
                _RUNNING[process.pid] = (process, scratch)
                ending = _ENDING.is_set()
            if ending:   # started as the client ends its cases: it ends with them
                _kill_group(process, wait=False)
            if turns is not None:
                turns.attach(process, stacks_dir)
            peak_rss = 0
            verdict: tuple[FailureKind, str] | None = None
            try:
                if memory_limit_mb:
                    verdict, peak_rss = _watch_memory(process, time_limit, memory_limit_mb,
                                                      stderr_path, stacks_dir)
                else:
                    # Block in waitpid (no polling that would take CPU from the timed case);
                    # a timer kills the process group at the time limit.
                    expired = threading.Event()

                    def expire() -> None:
                        expired.set()
                        _ask_for_stacks(process, stacks_dir)
                        _kill_group(process, wait=False)

                    timer = threading.Timer(time_limit, expire)
                    timer.daemon = True
                    timer.start()
                    try:
                        peak_rss = _wait(process)
                    finally:
                        timer.cancel()
                    if expired.is_set() and process.returncode != 0:
                        verdict = _timed_out(time_limit, stderr_path, stacks_dir)
                if turns is not None and turns.expired.is_set() and process.returncode != 0:
                    verdict = _timed_out(task.case.time_limit_s, stderr_path, stacks_dir)
            except BaseException:
                _kill_group(process)
                raise
            finally:
                with _RUNNING_LOCK:
                    _RUNNING.pop(process.pid, None)
        wall = time.time() - spawned_at
        if verdict is not None:
            return _failed(task, verdict[0], verdict[1], wall, started_at, peak_rss)
        if not output_path.exists():
            tail = stderr_path.read_bytes()[-STDERR_TAIL:].decode(errors="replace").strip()
            last = tail.splitlines()[-1] if tail else ""
            code = process.returncode
            if code is not None and code < 0:
                kind, reason = _killed_by_signal(code, peak_rss, last)
                return _failed(task, kind, reason, wall, started_at, peak_rss)
            return _failed(task, FailureKind.KILLED, f"exited with code {code} without a result"
                           + (f": {last}" if last else ""), wall, started_at, peak_rss)
        document = CaseDocument.from_dict(json.loads(output_path.read_text()))
        result = dataclasses.replace(document.result, wall_seconds=wall)
        arrays = {digest: (scratch / "arrays" / f"{digest}.npy").read_bytes()
                  for digest in document.arrays}
        return CaseOutput(result, arrays)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        _sweep_scratch(task)   # a launcher's folder left by a case process killed from outside
