"""``--cluster pbs``: worker jobs submitted with ``qsub`` through dask-jobqueue's ``PBSJob`` (PBS Pro syntax).

One job is one ``select`` chunk per node with the cores of all its ranks (``ncpus``),
``mpiprocs`` ranks, their memory and ``ngpus``; a multi-rank case starts its ranks with ``mpirun``.

>>> from accelml.executors.resources import CaseNeeds, Resources
>>> pbs_resource_spec(Resources(memory="1GiB", gpu_type="a100").for_case(CaseNeeds(gpus=2, ranks=2, cores=4)))
'select=1:ncpus=8:mpiprocs=2:mem=2048mb:ngpus=2:gpu_model=a100'
"""

from __future__ import annotations

import subprocess

from accelml.executors.cluster_settings import JobOptions, JobQueue, QueueStates, Scheduler
from accelml.executors.jobqueue import JobQueueExecutor
from accelml.executors.resources import Resources, memory_megabytes


def _megabytes(n_bytes: int) -> str:
    return f"{memory_megabytes(n_bytes).lower()}b"


def pbs_resource_spec(resources: Resources) -> str:
    """The ``#PBS -l select=...`` chunk for one worker job."""
    per_node = resources.ranks_per_node
    spec = (f"select={resources.nodes}:ncpus={resources.cores * per_node}:mpiprocs={per_node}"
            f":mem={_megabytes(resources.memory_bytes * per_node)}")
    if resources.gpus:
        spec += f":ngpus={resources.gpus}"
        if resources.gpu_type:
            spec += f":gpu_model={resources.gpu_type}"
    return spec


def job_options(resources: Resources) -> JobOptions:
    """``PBSJob`` keywords."""
    return {
        "queue": resources.partition,
        "account": resources.account,
        "walltime": resources.walltime,
        "resource_spec": pbs_resource_spec(resources),
        "job_extra_directives": list(resources.directives),
    }


def batch_directives(resources: Resources, jobs: int) -> tuple[str, ...]:
    """One chunk with the cores and memory of ``jobs`` cases at once; output joined into one file."""
    select = f"select=1:ncpus={resources.cores * jobs}:mem={_megabytes(resources.memory_bytes * jobs)}"
    if resources.gpus:
        select += f":ngpus={resources.gpus}"
    lines = ["-N accelml-compare", f"-l {select}", f"-l walltime={resources.walltime}", "-j oe"]
    if resources.partition:
        lines.append(f"-q {resources.partition}")
    if resources.account:
        lines.append(f"-A {resources.account}")
    return tuple(lines)


def parse_qstat(text: str) -> QueueStates:
    """Plain ``qstat JOBID...`` output (PBS Pro / Torque) -> ``{job id: (state letter, queue)}``.

    >>> sample = '''Job id            Name             User              Time Use S Queue
    ... ----------------  ---------------- ----------------  -------- - -----
    ... 1234.pbs01        accelml-1a2b     alice             00:00:01 R workq
    ... 1235.pbs01        accelml-1a2b     alice                    0 Q workq
    ... '''
    >>> parse_qstat(sample)
    {'1234.pbs01': ('R', 'workq'), '1235.pbs01': ('Q', 'workq')}
    """
    states = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and not line.startswith(("Job", "---")) and len(parts[-2]) == 1:
            states[parts[0]] = (parts[-2], parts[-1])
    return states


def read_queue(job_name: str, job_ids: tuple[str, ...]) -> QueueStates:
    """This run's jobs, by id: ``qstat`` exits non-zero when one of them has already left
    (the others are still listed), and with "Unknown Job" when all have."""
    if not job_ids:
        return {}
    out = subprocess.run(["qstat", *job_ids], capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0 and not out.stdout.strip() and "Unknown Job" not in out.stderr:
        raise subprocess.CalledProcessError(out.returncode, out.args, out.stdout, out.stderr)
    return parse_qstat(out.stdout)


SCHEDULER = Scheduler(
    name="pbs",
    executor=JobQueueExecutor,
    job_queue=JobQueue(
        job_class="dask_jobqueue.pbs:PBSJob",
        cluster_class="dask_jobqueue.pbs:PBSCluster",
        submit="qsub", cancel="qdel", status="qstat",
        directive_prefix="#PBS",
        job_options=job_options,
        batch_directives=batch_directives,
        batch_prologue=('cd "${PBS_O_WORKDIR:-.}"',),
        read_queue=read_queue,
        pending_states=frozenset({"Q", "H", "W", "T", "S"}),
        ending_states=frozenset({"E"}),
        config_section="pbs",
    ),
)
