"""Worker job scripts for SLURM and PBS: what a job-queue executor submits, one per worker job.

The scripts are dask-jobqueue's (``SLURMJob`` / ``PBSJob``) with accelml's resource lines:
one job holds ``ranks`` tasks of ``cores`` cores, ``--gres=gpu[:type]:N`` (PBS ``ngpus``),
and its dask worker advertises the pool's dask resources so that only cases of that pool
run on it.

>>> from accelml.executors.resources import Resources
>>> script = worker_job_script("slurm", Resources(cores=7, memory="84GiB", gpus=4, ranks=4,
...                            partition="gpu"), address="tls://login1:8786")
>>> [line for line in script.splitlines() if "ntasks" in line or "gres" in line]
['#SBATCH --ntasks-per-node=4', '#SBATCH --gres=gpu:4']
"""

from __future__ import annotations

import shlex
import sys

from accelml.executors.config import ClusterSettings
from accelml.executors.resources import Resources, memory_megabytes

PLACEHOLDER_ADDRESS = "tls://SCHEDULER-ADDRESS:PORT"
"""Where the real scheduler address goes: it is known only once the scheduler listens."""


def slurm_directives(resources: Resources) -> list[str]:
    """The ``#SBATCH`` options (without the prefix) for one worker job."""
    per_cpu = resources.memory_bytes // resources.cores
    lines = [
        f"--nodes={resources.nodes}",
        f"--ntasks-per-node={resources.ranks_per_node}",
        f"--cpus-per-task={resources.cores}",
        f"--mem-per-cpu={memory_megabytes(per_cpu)}",
    ]
    if resources.gpus:
        kind = f"{resources.gpu_type}:" if resources.gpu_type else ""
        lines.append(f"--gres=gpu:{kind}{resources.gpus}")
    return lines + list(resources.directives)


def pbs_resource_spec(resources: Resources) -> str:
    """The ``#PBS -l select=...`` chunk for one worker job (PBS Pro syntax)."""
    per_node = resources.ranks_per_node
    spec = (f"select={resources.nodes}:ncpus={resources.cores * per_node}:mpiprocs={per_node}"
            f":mem={memory_megabytes(resources.memory_bytes * per_node).lower()}b")
    if resources.gpus:
        spec += f":ngpus={resources.gpus}"
        if resources.gpu_type:
            spec += f":gpu_model={resources.gpu_type}"
    return spec


def prologue_lines(resources: Resources, kind: str = "slurm", launcher: str = "srun",
                   srun_mpi: str | None = None) -> list[str]:
    """Shell lines before the worker starts: exported variables, then the user's lines.

    A multi-rank job also says how its case starts the ranks (``ACCELML_RANK_LAUNCHER``,
    read by :func:`accelml.dl.launch.default_launcher`) and, on SLURM, passes the job's
    cores per task on to ``srun`` (since SLURM 22.05 srun no longer inherits them) and
    names srun's MPI plugin (``SLURM_MPI_TYPE``) so that MPI ranks find each other.
    """
    exports = [f"export {name}={shlex.quote(value)}" for name, value in resources.environment.items()]
    if resources.ranks > 1:
        exports.append(f"export ACCELML_RANK_LAUNCHER={launcher if kind == 'slurm' else 'mpirun'}")
        if kind == "slurm":
            exports.append("export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK}")
            if launcher == "srun" and srun_mpi and "SLURM_MPI_TYPE" not in resources.environment:
                exports.append(f"export SLURM_MPI_TYPE={srun_mpi}")
    return exports + list(resources.prologue)


def job_options(kind: str, resources: Resources, settings: ClusterSettings, *,
                job_name: str, log_directory: str | None = None) -> dict:
    """Keyword arguments of dask-jobqueue's ``SLURMJob``/``PBSJob`` for one pool's jobs."""
    worker_resources = ",".join(f"{name}={value}" for name, value in resources.worker_resources().items())
    options = {
        "cores": resources.cores,
        "memory": f"{resources.memory_bytes * resources.ranks_per_node}B",
        "processes": 1,
        "walltime": resources.walltime,
        "queue": resources.partition,
        "account": resources.account,
        "job_name": job_name,
        "job_script_prologue": prologue_lines(resources, kind, settings.launcher, settings.srun_mpi),
        "worker_extra_args": ["--resources", worker_resources],
        "python": settings.python or sys.executable,
        "interface": settings.interface,
        "death_timeout": 60,
        "log_directory": log_directory,
    }
    if kind == "slurm":
        # dask-jobqueue writes "-n 1", "--cpus-per-task" and "--mem" itself; accelml's own
        # lines replace them so that one job can hold the ranks of a multi-rank case.
        options["job_directives_skip"] = ["-n 1", "--cpus-per-task", "--mem"]
        options["job_extra_directives"] = slurm_directives(resources)
    else:
        options["resource_spec"] = pbs_resource_spec(resources)
        options["job_extra_directives"] = list(resources.directives)
    return options


def import_jobqueue():
    """``dask_jobqueue``, imported without the SIGINT handler it installs on import.

    dask_jobqueue.runner replaces Ctrl-C's KeyboardInterrupt with ``sys.exit()`` (exit
    status 0) for the whole process; accelml keeps Python's own handler so that an
    interrupted comparison cancels its jobs and exits with 130.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        import dask_jobqueue

        return dask_jobqueue
    previous = signal.getsignal(signal.SIGINT)
    try:
        import dask_jobqueue
    finally:
        signal.signal(signal.SIGINT, previous)
    return dask_jobqueue


def job_class(kind: str):
    jobqueue = import_jobqueue()
    if kind == "slurm":
        return jobqueue.slurm.SLURMJob
    if kind == "pbs":
        return jobqueue.pbs.PBSJob
    raise ValueError(f"no job class for cluster kind {kind!r}")


def pool_job_options(kind: str, resources: Resources, settings: ClusterSettings, *, job_name: str,
                     log_directory: str | None, security) -> dict:
    """Everything a pool's job class is built with: :func:`job_options` plus TLS."""
    options = job_options(kind, resources, settings, job_name=job_name, log_directory=log_directory)
    options["security"] = security
    options["protocol"] = "tls://" if security is not None else "tcp://"
    return options


def placeholder_security(directory: str):
    """A ``Security`` naming where a run's certificate files will be (they do not exist yet)."""
    from distributed.security import Security

    files = {"ca": f"{directory}/tls-XXXXXXXX/ca.pem", "cert": f"{directory}/tls-XXXXXXXX/cert.pem",
             "key": f"{directory}/tls-XXXXXXXX/key.pem"}
    return Security(require_encryption=True, tls_ca_file=files["ca"],
                    **{f"tls_{role}_{part}": files[part] for role in ("client", "scheduler", "worker")
                       for part in ("cert", "key")})


def worker_job_script(kind: str, resources: Resources, settings: ClusterSettings | None = None, *,
                      address: str = PLACEHOLDER_ADDRESS, job_name: str = "accelml-worker",
                      worker_name: str | None = None, log_directory: str | None = None,
                      security=None) -> str:
    """The text of one worker job script, built exactly as the executor builds it.

    Without a running scheduler the address is :data:`PLACEHOLDER_ADDRESS`; with TLS the
    ``--tls-*`` arguments name the run's private certificate directory.
    """
    settings = settings or ClusterSettings(kind=kind)
    options = pool_job_options(kind, resources, settings, job_name=job_name,
                               log_directory=log_directory, security=security)
    if log_directory is not None:
        # dask-jobqueue creates the log directory when it builds a job; do not, for a preview
        options["log_directory"] = None
        script = job_class(kind)(address, name=worker_name or f"{resources.pool_tag}-0", **options).job_script()
        return _with_log_lines(kind, script, log_directory, job_name)
    return job_class(kind)(address, name=worker_name or f"{resources.pool_tag}-0", **options).job_script()


def _with_log_lines(kind: str, script: str, log_directory: str, job_name: str) -> str:
    """The ``-e``/``-o`` lines dask-jobqueue writes when it has a log directory."""
    if kind == "slurm":
        extra = [f"#SBATCH -e {log_directory}/{job_name}-%J.err", f"#SBATCH -o {log_directory}/{job_name}-%J.out"]
        anchor = f"#SBATCH -J {job_name}"
    else:
        extra = [f"#PBS -e {log_directory}/", f"#PBS -o {log_directory}/"]
        anchor = next(line for line in script.splitlines() if line.startswith("#PBS -l walltime"))
    return script.replace(anchor, "\n".join([anchor, *extra]), 1)


def batch_script(kind: str, spec_path: str, settings: ClusterSettings, *, jobs: int,
                 extra_arguments: tuple[str, ...] = ()) -> str:
    """One batch job that runs a whole ``accelml compare`` on the node it gets (LocalCluster).

    It asks for ``jobs`` cores per rank-slot so that ``--jobs`` cases run side by side,
    the GPUs of ``settings.resources``, and runs the prologue first.
    """
    resources = settings.resources
    cores = resources.cores * jobs
    python = settings.python or sys.executable
    command = [python, "-m", "accelml", "compare", spec_path, "--cluster", "local", "--jobs", str(jobs),
               *extra_arguments]
    lines = ["#!/usr/bin/env bash"]
    if kind == "slurm":
        lines += ["#SBATCH --job-name=accelml-compare", "#SBATCH --nodes=1", "#SBATCH --ntasks=1",
                  f"#SBATCH --cpus-per-task={cores}",
                  f"#SBATCH --mem={memory_megabytes(resources.memory_bytes * jobs)}",
                  f"#SBATCH --time={resources.walltime}", "#SBATCH --output=accelml-compare-%j.out"]
        if resources.gpus:
            kind_part = f"{resources.gpu_type}:" if resources.gpu_type else ""
            lines.append(f"#SBATCH --gres=gpu:{kind_part}{resources.gpus}")
        if resources.partition:
            lines.append(f"#SBATCH --partition={resources.partition}")
        if resources.account:
            lines.append(f"#SBATCH --account={resources.account}")
        lines += [f"#SBATCH {line}" for line in resources.directives]
    else:
        select = f"select=1:ncpus={cores}:mem={memory_megabytes(resources.memory_bytes * jobs).lower()}b"
        if resources.gpus:
            select += f":ngpus={resources.gpus}"
        lines += ["#PBS -N accelml-compare", f"#PBS -l {select}", f"#PBS -l walltime={resources.walltime}",
                  "#PBS -j oe"]
        if resources.partition:
            lines.append(f"#PBS -q {resources.partition}")
        if resources.account:
            lines.append(f"#PBS -A {resources.account}")
        lines += [f"#PBS {line}" for line in resources.directives]
    lines += ["", "set -euo pipefail"]
    if kind == "pbs":
        lines.append('cd "${PBS_O_WORKDIR:-.}"')
    lines += prologue_lines(resources, kind, settings.launcher, settings.srun_mpi)
    lines += ["# every case still runs in its own process; --jobs cases at once on this node",
              " ".join(shlex.quote(part) for part in command), ""]
    return "\n".join(lines)
