"""``--cluster slurm``: worker jobs submitted with ``sbatch`` through dask-jobqueue's ``SLURMJob``.

One job holds ``ranks`` tasks of ``cores`` cores each (``--ntasks-per-node``,
``--cpus-per-task``, ``--mem-per-cpu``) and ``--gres=gpu[:type]:N``; a multi-rank case starts
its ranks with ``srun`` (or ``mpirun``, ``--launcher``) inside the job.

>>> from accelml.executors.resources import CaseNeeds, Resources
>>> job = Resources(cores=7, memory="12GiB", gpu_type="v100").for_case(CaseNeeds(gpus=4, ranks=4))
>>> slurm_directives(job)
['--nodes=1', '--ntasks-per-node=4', '--cpus-per-task=7', '--mem-per-cpu=1756M', '--gres=gpu:v100:4']
"""

from __future__ import annotations

import subprocess

from accelml.executors.cluster_settings import (
    ClusterSettings,
    JobOptions,
    JobQueue,
    QueueStates,
    Scheduler,
)
from accelml.executors.jobqueue import JobQueueExecutor
from accelml.executors.resources import Resources, memory_megabytes
from accelml.probe import probe_slurm


def _gres(resources: Resources) -> str:
    kind = f"{resources.gpu_type}:" if resources.gpu_type else ""
    return f"--gres=gpu:{kind}{resources.gpus}"


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
        lines.append(_gres(resources))
    return lines + list(resources.directives)


def job_options(resources: Resources) -> JobOptions:
    """``SLURMJob`` keywords: dask-jobqueue writes ``-n 1``, ``--cpus-per-task`` and ``--mem``
    itself; accelml's own lines replace them so that one job can hold the ranks of a
    multi-rank case."""
    return {
        "queue": resources.partition,
        "account": resources.account,
        "walltime": resources.walltime,
        "job_directives_skip": ["-n 1", "--cpus-per-task", "--mem"],
        "job_extra_directives": slurm_directives(resources),
    }


def batch_directives(resources: Resources, jobs: int) -> tuple[str, ...]:
    """One node, one task with the cores and memory of ``jobs`` cases at once."""
    lines = ["--job-name=accelml-compare", "--nodes=1", "--ntasks=1",
             f"--cpus-per-task={resources.cores * jobs}",
             f"--mem={memory_megabytes(resources.memory_bytes * jobs)}",
             f"--time={resources.walltime}", "--output=accelml-compare-%j.out"]
    if resources.gpus:
        lines.append(_gres(resources))
    if resources.partition:
        lines.append(f"--partition={resources.partition}")
    if resources.account:
        lines.append(f"--account={resources.account}")
    return tuple(lines)


def rank_launcher(settings: ClusterSettings) -> str:
    return settings.launcher


def rank_exports(resources: Resources, settings: ClusterSettings) -> tuple[str, ...]:
    """srun no longer inherits the job's cores per task (SLURM 22.05); srun's MPI plugin
    (``SLURM_MPI_TYPE``) lets MPI ranks started by srun find each other."""
    lines = ["export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK}"]
    if settings.launcher == "srun" and settings.srun_mpi and "SLURM_MPI_TYPE" not in resources.environment:
        lines.append(f"export SLURM_MPI_TYPE={settings.srun_mpi}")
    return tuple(lines)


def parse_squeue(text: str) -> QueueStates:
    """``squeue --format=%i|%T|%R`` lines -> ``{job id: (state, reason)}``.

    >>> parse_squeue("12|PENDING|(Resources)\\n13|RUNNING|node1\\n")
    {'12': ('PENDING', '(Resources)'), '13': ('RUNNING', 'node1')}
    """
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and parts[0]:
            states[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return states


def read_queue(job_name: str, job_ids: tuple[str, ...]) -> QueueStates:
    """This run's jobs, by name (``squeue --name``), so that jobs it has lost track of are seen too."""
    out = subprocess.run(["squeue", "--noheader", f"--name={job_name}", "--format=%i|%T|%R"],
                         capture_output=True, text=True, timeout=60, check=True)
    return parse_squeue(out.stdout)


def probe() -> str | None:
    slurm = probe_slurm()
    return None if slurm.available else slurm.detail


SCHEDULER = Scheduler(
    name="slurm",
    executor=JobQueueExecutor,
    job_queue=JobQueue(
        job_class="dask_jobqueue.slurm:SLURMJob",
        cluster_class="dask_jobqueue.slurm:SLURMCluster",
        submit="sbatch", cancel="scancel", status="squeue",
        directive_prefix="#SBATCH",
        job_options=job_options,
        batch_directives=batch_directives,
        read_queue=read_queue,
        pending_states=frozenset({"PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD"}),
        ending_states=frozenset({"COMPLETING"}),
        rank_launcher=rank_launcher,
        rank_exports=rank_exports,
        probe=probe,
        config_section="slurm",
    ),
)
