"""Start the processes of one training run, gather what they measured, check they agree.

``launch(config, workers, launcher)`` runs ``python -m accelml.dl.worker`` once per rank:

- ``horovodrun``: ``horovodrun -np N -H localhost:N --gloo`` (one host, no MPI needed);
- ``mpirun``: ``mpirun -np N -bind-to none -map-by slot -x ...`` (Open MPI, inside a job);
- ``srun``: ``srun --ntasks N --kill-on-bad-exit=1`` (inside a SLURM allocation; Horovod
  finds its ranks through MPI/PMI, tf.distribute through ``SlurmClusterResolver``);
- ``local-processes``: N plain processes; for ``multiworker`` each gets a ``TF_CONFIG``
  naming N localhost ports. Single-process strategies (and a 1-rank Horovod run, which
  needs no launcher) run this way with N = 1.

The launch fails (``AccelmlError`` with the failing rank's own error) rather than hangs: when
one rank reports an error, the others get ``grace_s`` to finish and are then killed, and
the whole run is killed at ``config.time_limit_s``. Every rank's final-weight digest is
gathered; ranks that disagree make the run fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from accelml.dl.config import LAUNCHERS, TrainingConfig, TrainingResult
from accelml.errors import AccelmlError, SpecError, UnavailableError

_ALLOWED = {
    "horovod": ("horovodrun", "mpirun", "srun"),
    "multiworker": ("local-processes", "srun"),
}


def default_launcher(strategy: str, workers: int = 2) -> str:
    """``srun`` inside a SLURM allocation for multi-process strategies, else the local one.

    One Horovod rank needs no launcher (``hvd.init()`` alone gives size 1).
    """
    if strategy not in _ALLOWED or workers == 1:
        return "local-processes"
    if os.environ.get("SLURM_JOB_ID") and shutil.which("srun"):
        return "srun"
    return "horovodrun" if strategy == "horovod" else "local-processes"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("localhost", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def rank_environment(config: TrainingConfig) -> dict[str, str]:
    """Variables every rank needs: Keras backend, Horovod knobs, XLA host devices.

    >>> env = rank_environment(TrainingConfig(strategy="horovod", workers=2,
    ...                        horovod_fusion_threshold_mb=32))
    >>> env["KERAS_BACKEND"], env["HOROVOD_FUSION_THRESHOLD"]
    ('tensorflow', '33554432')
    """
    env = {"KERAS_BACKEND": config.keras_backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if config.strategy == "multiworker":
        env["TF_USE_LEGACY_KERAS"] = "1"
    if config.horovod_timeline:
        env["HOROVOD_TIMELINE"] = os.path.abspath(config.horovod_timeline)
        env["HOROVOD_TIMELINE_MARK_CYCLES"] = "1" if config.horovod_timeline_mark_cycles else "0"
    if config.horovod_fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(int(config.horovod_fusion_threshold_mb) * 2**20)
    elif config.deterministic and config.strategy == "horovod":
        env["HOROVOD_FUSION_THRESHOLD"] = "0"
    if config.horovod_cycle_time_ms is not None:
        env["HOROVOD_CYCLE_TIME"] = str(config.horovod_cycle_time_ms)
    if config.strategy.startswith("jax") and config.device == "gpu":
        # XLA otherwise takes 75% of each GPU up front, and the recorded peak GPU memory
        # would be that, not what the model needs
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE",
                                                              "false")
    if config.strategy.startswith("jax") and config.device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
        if config.workers > 1:
            flags = os.environ.get("XLA_FLAGS", "")
            env["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count="
                                f"{config.workers}").strip()
    return env


def _commands(config: TrainingConfig, launcher: str, worker: list[str],
              env: dict[str, str]) -> list[tuple[list[str], dict[str, str]]]:
    n = config.workers
    if launcher == "horovodrun":
        tool = shutil.which("horovodrun", path=env["PATH"])
        if tool is None:
            raise UnavailableError("horovodrun is not on PATH (install horovod)")
        return [([tool, "-np", str(n), "-H", f"localhost:{n}", "--gloo"] + worker, env)]
    if launcher == "mpirun":
        tool = shutil.which("mpirun", path=env["PATH"])
        if tool is None:
            raise UnavailableError("mpirun is not on PATH")
        exported = [arg for name in sorted(set(rank_environment(config)) | {"PATH", "PYTHONPATH"})
                    for arg in ("-x", name)]
        as_root = ["--allow-run-as-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
        return [([tool, "-np", str(n), "-bind-to", "none", "-map-by", "slot"] + as_root
                 + exported + worker, env)]
    if launcher == "srun":
        tool = shutil.which("srun", path=env["PATH"])
        if tool is None:
            raise UnavailableError("srun is not on PATH (not inside a SLURM installation)")
        # Horovod's ranks are MPI processes started by srun itself: they need SLURM's PMIx
        # (ACCELML_SRUN_MPI overrides it, e.g. pmi2 where Open MPI was built that way).
        mpi = ([f"--mpi={env.get('ACCELML_SRUN_MPI', 'pmix')}"]
               if config.strategy == "horovod" else [])
        return [([tool, f"--ntasks={n}", "--kill-on-bad-exit=1"] + mpi + worker, env)]
    if config.strategy != "multiworker":
        return [(worker, env)]
    ports = _free_ports(n)
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    return [(worker, {**env, "TF_CONFIG": json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}})})
        for index in range(n)]


def _kill(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for process in processes:
        process.wait()


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return ""


def launch(config: TrainingConfig, workers: int | None = None, launcher: str | None = None, *,
           work_dir: str | None = None, grace_s: float = 20.0,
           extra_env: dict[str, str] | None = None) -> TrainingResult:
    """Run ``config`` on ``workers`` ranks/devices and return rank 0's result with every digest.

    ``launcher`` (else ``config.launcher``, else :func:`default_launcher`) starts the ranks.

    ``work_dir`` keeps the config, each rank's result file and the launcher's output
    (a temporary directory, removed on success, when not given).
    """
    if workers is not None:
        config = config.replace(workers=workers)
    launcher = launcher or config.launcher or default_launcher(config.strategy, config.workers)
    if launcher not in LAUNCHERS:
        raise SpecError(f"launcher must be one of {', '.join(LAUNCHERS)}, not {launcher!r}")
    allowed = _ALLOWED.get(config.strategy, ("local-processes",))
    if config.workers == 1:
        allowed = tuple(allowed) + ("local-processes",)
    if launcher not in allowed:
        raise SpecError(f"strategy {config.strategy!r} is launched with "
                        f"{' or '.join(allowed)}, not {launcher!r}")
    own_dir = work_dir is None
    work_dir = work_dir or tempfile.mkdtemp(prefix="accelml-dl-")
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
    env["PATH"] = python_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    worker = [sys.executable, "-m", "accelml.dl.worker", config_path, results]

    processes, logs = [], []
    started = time.monotonic()
    try:
        for index, (command, command_env) in enumerate(_commands(config, launcher, worker, env)):
            log_path = os.path.join(work_dir, f"launcher-{index}.log")
            logs.append(log_path)
            with open(log_path, "w") as log:
                processes.append(subprocess.Popen(command, env=command_env, stdout=log,
                                                  stderr=subprocess.STDOUT, cwd=os.getcwd(),
                                                  start_new_session=True))
        first_error_at = None
        while any(p.poll() is None for p in processes):
            now = time.monotonic()
            if now - started > config.time_limit_s:
                _kill(processes)
                raise AccelmlError(f"{config.strategy} run on {config.workers} worker(s) passed "
                                   f"its time limit of {config.time_limit_s:.0f}s and was killed "
                                   f"(logs: {work_dir})")
            if first_error_at is None and _errors(results):
                first_error_at = now
            if first_error_at is not None and now - first_error_at > grace_s:
                break
            time.sleep(0.2)
    finally:
        _kill(processes)

    errors = _errors(results)
    if errors:
        first = min(errors, key=lambda e: e["_written"])
        others = sorted(e["rank"] for e in errors if e is not first)
        also = f" (rank(s) {', '.join(map(str, others))} failed too)" if others else ""
        raise AccelmlError(f"rank {first['rank']} of {config.workers} failed: "
                           f"{first['error']}{also} (logs: {work_dir})")
    outputs = {}
    for name in os.listdir(results):
        if name.endswith(".json"):
            with open(os.path.join(results, name)) as handle:
                payload = json.load(handle)
            outputs[payload["rank"]] = TrainingResult.from_dict(payload["result"])
    processes_expected = config.workers if config.multi_process else 1
    missing = sorted(set(range(processes_expected)) - set(outputs))
    if missing:
        codes = ", ".join(str(p.returncode) for p in processes)
        tail = " | ".join(line for log in logs for line in _tail(log).splitlines()[-4:])
        raise AccelmlError(f"rank(s) {', '.join(map(str, missing))} of {processes_expected} "
                           f"ended without a result (exit status {codes}; a negative status "
                           f"is the signal that killed it): {tail} (logs: {work_dir})")
    digests = tuple(d for rank in sorted(outputs) for d in outputs[rank].rank_digests)
    if len(set(digests)) != 1:
        listed = ", ".join(f"{i}: {d[:12]}" for i, d in enumerate(digests))
        raise AccelmlError(f"final weights differ between ranks/devices ({listed}); "
                           f"the replicas did not stay in sync (logs: {work_dir})")
    if own_dir:
        shutil.rmtree(work_dir, ignore_errors=True)
    return outputs[0].replace(rank_digests=digests)


def _errors(results: str) -> list[dict]:
    found = []
    for name in os.listdir(results):
        if not name.endswith(".json"):
            continue
        path = os.path.join(results, name)
        with open(path) as handle:
            payload = json.load(handle)
        if not payload["ok"]:
            payload["_written"] = os.path.getmtime(path)
            found.append(payload)
    return found
