"""Start the processes of one training run, gather what they measured, check they agree.

``launch(config, ranks, launcher)`` runs ``python -m accelml.dl.rank`` once per rank:

- ``horovodrun``: ``horovodrun -np N -H localhost:N --gloo`` (one host, no MPI needed);
- ``mpirun``: ``mpirun -np N -bind-to none -map-by slot -x ...`` (Open MPI, inside a job);
- ``srun``: ``srun --ntasks N --kill-on-bad-exit=1`` (inside a SLURM allocation; Horovod
  finds its ranks through MPI/PMI, tf.distribute through ``SlurmClusterResolver``);
- ``local-processes``: N plain processes, each with its rank in ``ACCELML_RANK`` and the
  variables its strategy's ``local_process_environment`` gives it (``TF_CONFIG`` naming N
  localhost ports, say). Single-process strategies (and one rank of a multi-process one,
  which needs no launcher) run this way with N = 1.

What a strategy allows and needs (launchers, variables per rank, MPI under ``srun``) is read
off its :class:`~accelml.dl.strategies.Strategy` record.

The launch fails (``AccelmlError`` with the failing rank's own error) rather than hangs: when
one rank reports an error, the others get ``grace_s`` to finish and are then killed, and
the whole run is killed at ``config.time_limit_s`` (``TimeLimitExceeded``). Every rank's
final-weight digest is gathered; ranks that disagree make the run fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from accelml.cases import Container
from accelml.containers import RANK_CONTAINER_VARIABLE, case_binds, rank_container, wrap
from accelml.datasets.registry import default_cache_dir
from accelml.dl.common import LOOPBACK, free_ports, loopback_interface
from accelml.dl.config import TrainingConfig, TrainingResult
from accelml.dl.private_network import PrivateNetwork
from accelml.dl.strategies import LAUNCHERS, LOCAL_PROCESSES, SRUN, Listener, Strategy
from accelml.dl.turns import TURNS_VARIABLE
from accelml.errors import AccelmlError, ProcessKilled, SpecError, TimeLimitExceeded, UnavailableError
from accelml.probe import usable_cores
from accelml.scratch import die_with_this_process, kill_tree, make_scratch

RANK_VARIABLE = "ACCELML_RANK"
"""The rank given to each process that :func:`launch` starts itself (local processes)."""


def default_launcher(strategy: Strategy, ranks: int = 2) -> str:
    """``srun`` inside a SLURM allocation where the strategy allows it, else its own default.

    One rank, or a single-process strategy, runs as one local process (one Horovod rank
    needs no launcher: ``hvd.init()`` alone gives size 1).
    """
    if not strategy.multi_process or ranks == 1:
        return LOCAL_PROCESSES
    if SRUN in strategy.launchers and os.environ.get("SLURM_JOB_ID") and shutil.which(SRUN):
        return SRUN
    return strategy.default_launcher


def rank_environment(config: TrainingConfig) -> dict[str, str]:
    """Variables every rank needs: its Keras backend, and what its strategy asks for
    (variables read before import, Horovod knobs, XLA host devices).

    >>> env = rank_environment(TrainingConfig(strategy="horovod", ranks=2,
    ...                        horovod_fusion_threshold_mb=32))
    >>> env["KERAS_BACKEND"], env["HOROVOD_FUSION_THRESHOLD"]
    ('tensorflow', '33554432')
    """
    strategy = config.strategy_record
    env = {"KERAS_BACKEND": config.engine, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.update(strategy.environment_before_import)
    env.update(strategy.rank_environment(config))
    return env


def _commands(config: TrainingConfig, launcher: str, rank_command: list[str],
              env: dict[str, str]) -> list[tuple[list[str], dict[str, str]]]:
    n = config.ranks
    strategy = config.strategy_record
    if launcher == "horovodrun":
        tool = shutil.which("horovodrun", path=env["PATH"])
        if tool is None:
            raise UnavailableError("horovodrun is not on PATH (install horovod)")
        # its rendezvous server on 127.0.0.1 only (horovodrun itself binds every interface)
        return [([sys.executable, "-m", "accelml.dl.loopback_horovodrun", "-np", str(n),
                  "-H", f"localhost:{n}", "--gloo"] + rank_command, env)]
    if launcher == "mpirun":
        tool = shutil.which("mpirun", path=env["PATH"])
        if tool is None:
            raise UnavailableError("mpirun is not on PATH")
        passed = set(rank_environment(config)) | {"PATH", "PYTHONPATH"} | (
            {TURNS_VARIABLE} & set(env))    # epochs in turn (accelml.dl.turns)
        exported = [arg for name in sorted(passed) for arg in ("-x", name)]
        as_root = ["--allow-run-as-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
        as_root += ["--oversubscribe"] if config.oversubscribe else []
        return [([tool, "-np", str(n), "-bind-to", "none", "-map-by", "slot"] + as_root
                 + exported + rank_command, env)]
    if launcher == SRUN:
        tool = shutil.which(SRUN, path=env["PATH"])
        if tool is None:
            raise UnavailableError("srun is not on PATH (not inside a SLURM installation)")
        # MPI ranks (Horovod's) started by srun itself need SLURM's PMIx
        # (ACCELML_SRUN_MPI overrides it, e.g. pmi2 where Open MPI was built that way).
        mpi = [f"--mpi={env.get('ACCELML_SRUN_MPI', 'pmix')}"] if strategy.mpi_ranks else []
        return [([tool, f"--ntasks={n}", "--kill-on-bad-exit=1"] + mpi + rank_command, env)]
    if strategy.local_process_environment is None:
        return [(rank_command, {**env, RANK_VARIABLE: "0"})]
    addresses = tuple(f"{LOOPBACK}:{port}" for port in free_ports(n))
    return [(rank_command, {**env, RANK_VARIABLE: str(rank),
                      **strategy.local_process_environment(rank, addresses)})
            for rank in range(n)]


def _kill(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILL each launcher and every process it started (ranks in sessions of their own too)."""
    for process in processes:
        kill_tree(process.pid, include_self=process.poll() is None)
    for process in processes:
        process.wait()


ONE_HOST_LAUNCHERS = ("horovodrun", LOCAL_PROCESSES)
"""Launchers that start every rank on this machine (``mpirun`` and ``srun`` place them
on the hosts of the allocation)."""


def one_host_environment(launcher: str) -> dict[str, str]:
    """What keeps the ranks of a one-host run on loopback: gloo and NCCL use the loopback
    interface for their sockets (the rendezvous addresses are 127.0.0.1 already), so no rank
    listens where another machine can reach it. Nothing for launchers that place ranks on
    several hosts.

    >>> one_host_environment("local-processes")["GLOO_SOCKET_IFNAME"]
    'lo'
    >>> one_host_environment("srun")
    {}
    """
    if launcher not in ONE_HOST_LAUNCHERS:
        return {}
    interface = loopback_interface()
    return {"GLOO_SOCKET_IFNAME": interface, "NCCL_SOCKET_IFNAME": interface}


def check_scale(config: TrainingConfig, launcher: str) -> None:
    """A one-line :class:`SpecError` when ``launcher`` would start more ranks on this machine
    than it has cores, unless ``config.oversubscribe`` allows it.

    >>> check_scale(TrainingConfig(strategy="horovod", ranks=10**6), "horovodrun")
    Traceback (most recent call last):
    ...
    accelml.errors.SpecError: 1000000 ranks of horovod on a machine with ...: set oversubscribe = true ...
    """
    processes = config.strategy_record.processes(config.ranks)
    if config.oversubscribe or launcher not in ONE_HOST_LAUNCHERS or processes <= 1:
        return
    cores = usable_cores()
    if processes > cores:
        raise SpecError(f"{processes} ranks of {config.strategy} on a machine with {cores} core(s): "
                        "set oversubscribe = true to run more ranks than cores")


STARTUP_NOISE = re.compile(
    r"^\s*$|^[IWEF]\d{4} |^WARNING: All log messages before absl|oneDNN custom operations|"
    r"To enable the following instructions|rebuild TensorFlow with|cuda drivers|cuInit|"
    r"TF_ENABLE_ONEDNN_OPTS|This TensorFlow binary is optimized|computation placer")
"""Lines libraries print while they start (TensorFlow's, absl's, XLA's): never a reason."""
RANK_PREFIX = re.compile(r"^\[\d+(,\d+)?\]<std(out|err)>:")
"""What ``horovodrun`` puts before each line of a rank's output."""
EXIT_CODE = re.compile(r"(?:Exit code|exit(?:ed)? with status code):?\s*(-?\d+)", re.IGNORECASE)
"""How ``horovodrun`` reports the exit status of the first rank that failed."""


def meaningful_lines(path: str, count: int = 4) -> list[str]:
    r"""The last ``count`` lines of the log at ``path`` that are not start-up noise.

    >>> import tempfile
    >>> log = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
    >>> _ = log.write("I0000 00:00 cudart_stub.cc:31] Could not find cuda drivers\n"
    ...               "[1]<stderr>:ValueError: bad batch\nE0000 00:00 cuda_platform.cc:52] x\n")
    >>> log.close()
    >>> meaningful_lines(log.name)
    ['ValueError: bad batch']
    """
    try:
        with open(path, errors="replace") as handle:
            lines = [RANK_PREFIX.sub("", line.rstrip()) for line in handle.readlines()[-400:]]
    except OSError:
        return []
    return [line.strip() for line in lines if not STARTUP_NOISE.search(line)][-count:]


def killing_signal(codes: list[int | None], logs: list[str]) -> int | None:
    """The signal that ended a launcher or a rank (a negative exit status among ``codes``,
    or a rank's exit status of 128 + signal as ``horovodrun`` reports it in its log), None
    where none did.

    >>> killing_signal([None, -9], [])
    9
    """
    for code in codes:
        if code is not None and code < 0:
            return -code
    for log in logs:
        try:
            with open(log, errors="replace") as handle:
                text = handle.read()[-20000:]
        except OSError:
            continue
        for found in EXIT_CODE.finditer(text):
            code = int(found.group(1))
            if code < 0 or 128 < code < 128 + 65:
                return -code if code < 0 else code - 128
    return None


KILLED_GRACE_S = 3.0
"""How long the other ranks get once one of them was killed by a signal: they cannot finish
without it (each would wait in its next collective until the time limit)."""


def launch(config: TrainingConfig, ranks: int | None = None, launcher: str | None = None, *,
           work_dir: str | None = None, grace_s: float = 20.0,
           extra_env: dict[str, str] | None = None,
           container: Container | None = None) -> TrainingResult:
    """Run ``config`` on ``ranks`` ranks (processes or devices); rank 0's result with every digest.

    ``launcher`` (else ``config.launcher``, else :func:`default_launcher`) starts the ranks.

    ``work_dir`` keeps the config, each rank's result file and the launcher's output
    (a temporary directory, removed on success, when not given).

    ``container`` (else the one the runner named, :func:`accelml.containers.rank_container`):
    each rank runs inside it, the launcher on this host (``srun ... ch-run IMAGE -- python
    -m accelml.dl.rank``), with the launcher's environment passed through to the rank.
    """
    if ranks is not None:
        config = config.replace(ranks=ranks)
    strategy = config.strategy_record
    launcher = launcher or config.launcher or default_launcher(strategy, config.ranks)
    if launcher not in LAUNCHERS:
        raise SpecError(f"launcher must be one of {', '.join(LAUNCHERS)}, not {launcher!r}")
    allowed = strategy.allowed_launchers(config.ranks)
    if launcher not in allowed:
        raise SpecError(f"strategy {config.strategy!r} is launched with "
                        f"{' or '.join(allowed)}, not {launcher!r}")
    check_scale(config, launcher)
    own_dir = work_dir is None
    # a directory of a process killed with SIGKILL is swept when the next case starts
    work_dir = work_dir or make_scratch("accelml-dl-")
    results = os.path.join(work_dir, "ranks")
    os.makedirs(results, exist_ok=True)
    for stale in os.listdir(results):
        os.remove(os.path.join(results, stale))
    config_path = os.path.join(work_dir, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config.to_dict(), handle, indent=1)

    python_dir = os.path.dirname(sys.executable)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env.update(rank_environment(config))
    env.update(extra_env or {})
    env.update(one_host_environment(launcher))
    env.pop(RANK_VARIABLE, None)  # set per process for local processes only
    env["PATH"] = python_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    rank_command = [sys.executable, "-m", "accelml.dl.rank", config_path, results]
    container = container or rank_container(env)
    env.pop(RANK_CONTAINER_VARIABLE, None)   # (the ranks are inside it)
    if container is not None:
        cache = default_cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        wrapped = wrap(container, [container.python, *rank_command[1:]], env, clean=False,
                       binds=case_binds(package_root, work_dir, str(cache)), gpus=config.device == "cuda",
                       workdir=work_dir)
        if wrapped.problem:
            raise UnavailableError(wrapped.problem)
        rank_command, env = list(wrapped.argv), dict(wrapped.environment)

    processes, logs = [], []
    started = time.monotonic()
    # a library that listens on every interface gets a network of its own on one host
    network = (PrivateNetwork.start(die_with_this_process())
               if strategy.private_network and launcher == LOCAL_PROCESSES else None)
    try:
        for index, (command, command_env) in enumerate(_commands(config, launcher, rank_command, env)):
            log_path = os.path.join(work_dir, f"launcher-{index}.log")
            logs.append(log_path)
            preexec = die_with_this_process()
            with open(log_path, "w") as log:
                processes.append(subprocess.Popen(
                    command, env=command_env, stdout=log, stderr=subprocess.STDOUT,
                    cwd=os.getcwd(), start_new_session=True,
                    preexec_fn=preexec if network is None else network.joiner(preexec)))
        first_error_at = killed_at = None
        while None in [p.poll() for p in processes]:   # every one polled: its status is read
            now = time.monotonic()
            if now - started > config.time_limit_s:
                _kill(processes)
                raise TimeLimitExceeded(f"{config.strategy} run on {config.ranks} rank(s) passed "
                                        f"its time limit of {config.time_limit_s:g} s and was "
                                        f"killed (logs: {work_dir})")
            if first_error_at is None and _errors(results):
                first_error_at = now
            if killed_at is None and any(p.returncode is not None and p.returncode < 0
                                         for p in processes):
                killed_at = now   # a rank killed from outside: the others wait for it forever
            if first_error_at is not None and now - first_error_at > grace_s:
                break
            if killed_at is not None and now - killed_at > min(grace_s, KILLED_GRACE_S):
                break
            time.sleep(0.2)
    finally:
        ended = [p.poll() for p in processes]   # before the clean-up kills the rest
        _kill(processes)
        if network is not None:
            network.close()

    errors = _errors(results)
    if errors:
        first = min(errors, key=lambda e: e.written)
        others = sorted(e.rank for e in errors if e is not first)
        also = f" (rank(s) {', '.join(map(str, others))} failed too)" if others else ""
        raise AccelmlError(f"rank {first.rank} of {config.ranks} failed: "
                           f"{first.error}{also} (logs: {work_dir})")
    outputs = {}
    for name in os.listdir(results):
        if name.endswith(".json"):
            with open(os.path.join(results, name)) as handle:
                payload = json.load(handle)
            outputs[payload["rank"]] = TrainingResult.from_dict(payload["result"])
    processes_expected = config.ranks if config.multi_process else 1
    missing = sorted(set(range(processes_expected)) - set(outputs))
    if missing:
        codes = ", ".join("running" if code is None else str(code) for code in ended)
        tail = " | ".join(line for log in logs for line in meaningful_lines(log))
        signum = killing_signal(ended, logs)
        if signum is not None:
            name = signal.Signals(signum).name if signum in signal.valid_signals() else str(signum)
            raise ProcessKilled(f"a rank or launcher was killed by {name} from outside; rank(s) "
                                f"{', '.join(map(str, missing))} of {processes_expected} ended "
                                f"without a result (exit status {codes}): {tail} "
                                f"(logs: {work_dir})", signum)
        raise AccelmlError(f"rank(s) {', '.join(map(str, missing))} of {processes_expected} "
                           f"ended without a result (exit status {codes}): {tail} "
                           f"(logs: {work_dir})")
    digests = tuple(d for rank in sorted(outputs) for d in outputs[rank].rank_digests)
    if len(set(digests)) != 1:
        listed = ", ".join(f"{i}: {d[:12]}" for i, d in enumerate(digests))
        raise AccelmlError(f"final weights differ between ranks/devices ({listed}); "
                           f"the replicas did not stay in sync (logs: {work_dir})")
    if own_dir:
        shutil.rmtree(work_dir, ignore_errors=True)
    listener = strategy.listeners(launcher)
    if network is not None and network.why_not:
        listener = Listener(f"every interface, unauthenticated: {config.strategy}'s library "
                            f"binds them all, and {network.why_not}", False)
    return outputs[0].replace(rank_digests=digests, listeners=listener.where,
                              listeners_authenticated=listener.authenticated)


@dataclass(frozen=True)
class RankError:
    """A rank that wrote an error instead of a result, and when (the first one is the cause)."""

    rank: int
    error: str
    written: float


def _errors(results: str) -> list[RankError]:
    found = []
    for name in os.listdir(results):
        if not name.endswith(".json"):
            continue
        path = os.path.join(results, name)
        with open(path) as handle:
            payload = json.load(handle)
        if not payload["ok"]:
            found.append(RankError(int(payload["rank"]), str(payload["error"]),
                                   os.path.getmtime(path)))
    return found
