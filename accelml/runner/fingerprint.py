"""The environment fingerprint stored with every result (its hash names the environment).

>>> env = fingerprint(threads=1)
>>> env.threads, len(env.env_hash)
(1, 16)
>>> dict(env.libraries)["numpy"] != ""
True
>>> {"numpy", "scikit-learn", "xgboost"} <= set(environment_libraries())
True
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys

from accelml.cases import Container
from accelml.containers import RANK_CONTAINER_VARIABLE, rank_container, running_image, wrap
from accelml.dl.strategies import strategy_libraries
from accelml.errors import AccelmlError, UnavailableError
from accelml.estimators import BACKENDS
from accelml.probe import list_gpus, usable_cores
from accelml.results.records import Environment, GPUDevice

CORE_LIBRARIES = (
    "accelml", "numpy", "scipy", "dask", "distributed", "dask-jobqueue", "threadpoolctl", "pandas",
)
"""accelml's own distributions; each backend and strategy adds the libraries it declares."""


def environment_libraries() -> tuple[str, ...]:
    """Distributions whose versions name an environment: accelml's core, every backend's and
    every strategy's declared libraries (those not installed are left out of a fingerprint)."""
    declared = {library for backend in BACKENDS.records() for library in backend.libraries}
    return tuple(sorted({*CORE_LIBRARIES, *declared, *strategy_libraries()}))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library_versions() -> tuple[tuple[str, str], ...]:
    found = []
    for name in environment_libraries():
        try:
            found.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(sorted(found))


def fingerprint(threads: int | None = None) -> Environment:
    """Versions, CPU, cores, GPUs (through NVML), hostname and SLURM job id of this process,
    and the container image it runs in: inside one, the libraries are the image's own. A
    case process that stays on the host while its ranks run in an image (srun, mpirun)
    answers with the image's fingerprint (:func:`fingerprint_inside`)."""
    container = rank_container()
    if container is not None:
        return fingerprint_inside(container, threads)
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except ImportError:
        physical = None
    gpus, _ = list_gpus()
    return Environment(
        python=platform.python_version(),
        platform=f"{sys.platform}-{platform.machine()}-{platform.libc_ver()[0] or 'unknown'}"
                 f"-{platform.release()}",
        cpu_model=cpu_model(),
        logical_cores=os.cpu_count() or 1,
        physical_cores=physical,
        usable_cores=usable_cores(),
        libraries=library_versions(),
        gpus=tuple(GPUDevice(gpu.model, gpu.driver, gpu.memory_mib) for gpu in gpus),
        hostname=socket.gethostname(),
        slurm_job_id=os.environ.get("SLURM_JOB_ID"),
        threads=threads,
        container=running_image(),
    )


def fingerprint_inside(container: Container, threads: int | None) -> Environment:
    """The fingerprint a process in ``container`` takes (``python -m accelml.runner.fingerprint``
    run there)."""
    environment = {name: value for name, value in os.environ.items() if name != RANK_CONTAINER_VARIABLE}
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    wrapped = wrap(container, [container.python, "-m", "accelml.runner.fingerprint", str(threads or "")],
                   environment, binds=[package_root])
    if wrapped.problem:
        raise UnavailableError(wrapped.problem)
    out = subprocess.run(wrapped.argv, env=dict(wrapped.environment), capture_output=True, text=True,
                         timeout=300, check=False, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise AccelmlError(f"the environment fingerprint in {container.label} failed: "
                           + (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1])
    return Environment.from_dict(json.loads(out.stdout.strip().splitlines()[-1]))


def other_runs() -> list[int]:
    """Process ids of accelml comparisons (``accelml compare``, case processes) on this machine
    that this process neither is, started, nor was started by: runs whose timings share the
    cores with this one's.

    >>> other_runs() == [] or all(isinstance(pid, int) for pid in other_runs())
    True
    """
    import psutil

    me = psutil.Process()
    related = {me.pid} | {p.pid for p in me.children(recursive=True)} | {p.pid for p in me.parents()}
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        arguments = process.info["cmdline"] or []
        if process.info["pid"] in related or not any(a in ("compare", "run-case") for a in arguments):
            continue
        if any(a == "accelml" or a.endswith(os.sep + "accelml") for a in arguments):
            found.append(int(process.info["pid"]))
    return sorted(found)


if __name__ == "__main__":   # the fingerprint of this process as JSON (fingerprint_inside)
    print(json.dumps(fingerprint(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else None).to_dict()))
