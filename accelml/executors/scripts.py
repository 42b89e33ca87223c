"""Worker job scripts: what a job-queue executor submits, one per worker job, for any scheduler.

A script is dask-jobqueue's (the scheduler record's ``job_class``, e.g. ``SLURMJob``) with
accelml's lines: the scheduler's directive mapping of the job's :class:`Resources`
(``JobQueue.job_options``), the exported environment, how a multi-rank case starts its
ranks, the user's prologue, and a dask worker that advertises the pool's dask resources so
that only cases of that pool run on it.

>>> from accelml.executors.cluster_settings import SCHEDULERS
>>> script = worker_job_script(SCHEDULERS.get("slurm"), Resources(cores=7, memory="84GiB", gpus=4,
...                            ranks=4, partition="gpu"), address="tls://login1:8786")
>>> [line for line in script.splitlines() if "ntasks" in line or "gres" in line]
['#SBATCH --ntasks-per-node=4', '#SBATCH --gres=gpu:4']
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from typing import TYPE_CHECKING

from accelml.executors.cluster_settings import ClusterSettings, JobQueue, Scheduler
from accelml.executors.dashboard import worker_arguments
from accelml.executors.jobqueue_adapter import job_script
from accelml.executors.resources import Resources

if TYPE_CHECKING:  # annotations only: distributed is imported when it is used
    from distributed.security import Security

PLACEHOLDER_ADDRESS = "tls://SCHEDULER-ADDRESS:PORT"
"""Where the real scheduler address goes: it is known only once the scheduler listens."""
RANK_LAUNCHER_VARIABLE = "ACCELML_RANK_LAUNCHER"
"""Tells a multi-rank case how to start its ranks (read by :func:`accelml.dl.launch.default_launcher`)."""


def prologue_lines(queue: JobQueue, resources: Resources, settings: ClusterSettings) -> list[str]:
    """Shell lines before the worker starts: exported variables, then the user's lines.

    A multi-rank job also says how its case starts the ranks (:data:`RANK_LAUNCHER_VARIABLE`,
    the scheduler's ``rank_launcher``) and adds the scheduler's ``rank_exports``.
    """
    exports = [f"export {name}={shlex.quote(value)}" for name, value in resources.environment.items()]
    if resources.ranks > 1:
        exports.append(f"export {RANK_LAUNCHER_VARIABLE}={queue.rank_launcher(settings)}")
        exports += queue.rank_exports(resources, settings)
    return exports + list(resources.prologue)


def job_options(queue: JobQueue, resources: Resources, settings: ClusterSettings, *, job_name: str,
                log_directory: str | None = None, security: Security | None = None) -> dict[str, object]:
    """Keyword arguments of the scheduler's job class for one pool's jobs: accelml's generic
    ones (cores, memory, prologue, worker arguments, TLS) and the scheduler's directive mapping."""
    worker_resources = ",".join(f"{name}={value}" for name, value in resources.worker_resources().items())
    return {
        "cores": resources.cores,
        "memory": f"{resources.memory_bytes * resources.ranks_per_node}B",
        "processes": 1,
        "job_name": job_name,
        "job_script_prologue": prologue_lines(queue, resources, settings),
        "worker_extra_args": ["--resources", worker_resources, *worker_arguments(settings.dashboard)],
        "python": settings.python or sys.executable,
        "interface": settings.interface,
        "death_timeout": 60,
        "log_directory": log_directory,
        "security": security,
        "protocol": "tls://" if security is not None else "tcp://",
        **queue.job_options(resources),
    }


def placeholder_security(directory: str) -> Security:
    """A ``Security`` naming where a run's certificate files will be (they do not exist yet)."""
    from distributed.security import Security

    files = {"ca": f"{directory}/tls-XXXXXXXX/ca.pem", "cert": f"{directory}/tls-XXXXXXXX/cert.pem",
             "key": f"{directory}/tls-XXXXXXXX/key.pem"}
    return Security(require_encryption=True, tls_ca_file=files["ca"],
                    **{f"tls_{role}_{part}": files[part] for role in ("client", "scheduler", "worker")
                       for part in ("cert", "key")})


def worker_job_script(scheduler: Scheduler, resources: Resources, settings: ClusterSettings | None = None, *,
                      address: str = PLACEHOLDER_ADDRESS, job_name: str = "accelml-worker",
                      worker_name: str | None = None, log_directory: str | None = None,
                      security: Security | None = None) -> str:
    """The text of one worker job script, built exactly as the executor builds it.

    Without a running scheduler the address is :data:`PLACEHOLDER_ADDRESS`; with TLS the
    ``--tls-*`` arguments name the run's private certificate directory. The log directory
    is named, not created.
    """
    queue = scheduler.queue()
    settings = settings or ClusterSettings(kind=scheduler.name)
    name = worker_name or f"{resources.pool_tag}-0"
    if log_directory is None:
        return job_script(queue, address, name, job_options(queue, resources, settings, job_name=job_name,
                                                            security=security))
    with tempfile.TemporaryDirectory(prefix="accelml-logs-") as stand_in:
        # dask-jobqueue creates the log directory it is given: give it one to throw away
        options = job_options(queue, resources, settings, job_name=job_name, log_directory=stand_in,
                              security=security)
        return job_script(queue, address, name, options).replace(stand_in, log_directory)


def batch_script(scheduler: Scheduler, spec_path: str, settings: ClusterSettings, *, jobs: int,
                 extra_arguments: tuple[str, ...] = ()) -> str:
    """One batch job that runs a whole ``accelml compare`` on the node it gets (LocalCluster).

    It asks for ``jobs`` times the cores and memory of ``settings.resources`` so that
    ``--jobs`` cases run side by side, its GPUs, and runs the prologue first.
    """
    queue = scheduler.queue()
    resources = settings.resources
    python = settings.python or sys.executable
    command = [python, "-m", "accelml", "compare", spec_path, "--cluster", "local", "--jobs", str(jobs),
               *extra_arguments]
    directives = [*queue.batch_directives(resources, jobs), *resources.directives]
    lines = ["#!/usr/bin/env bash", *(f"{queue.directive_prefix} {line}" for line in directives),
             "", "set -euo pipefail", *queue.batch_prologue,
             *prologue_lines(queue, resources, settings),
             "# every case still runs in its own process; --jobs cases at once on this node",
             " ".join(shlex.quote(part) for part in command), ""]
    return "\n".join(lines)
