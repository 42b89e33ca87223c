"""A third party's scheduler: Sun Grid Engine on dask-jobqueue's ``SGEJob`` / ``SGECluster``,
one module registered under ``accelml.schedulers``, with no accelml file touched.

There is no SGE here: its scripts are printed (``slurm-script``) and checked by bash, and a
comparison on it stops at once, before writing anything, saying why (no ``qsub``). The last
test uses the real local SLURM through a third party's record (a site's SLURM that refuses
GPU jobs in its directive mapping) to show that a failed submission reports its real cause.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelml.executors.cluster_settings import SCHEDULERS, load_cluster_settings
from accelml.executors.jobqueue import JobQueueExecutor
from accelml.executors.resources import CaseNeeds

SGE_MODULE = '''
"""Sun Grid Engine for accelml: one module, one record."""

import subprocess

from accelml.executors.cluster_settings import JobQueue, Scheduler
from accelml.executors.jobqueue import JobQueueExecutor
from accelml.executors.resources import memory_megabytes


def job_options(resources):
    slots = resources.cores * resources.ranks_per_node
    spec = f"h_vmem={memory_megabytes(resources.memory_bytes // resources.cores)}"
    if resources.gpus:
        spec += f",gpu={resources.gpus}"
    return {"queue": resources.partition, "project": resources.account,
            "walltime": resources.walltime, "resource_spec": spec,
            "job_extra_directives": [f"-pe smp {slots}", *resources.directives]}


def batch_directives(resources, jobs):
    return ("-N accelml-compare", f"-pe smp {resources.cores * jobs}",
            f"-l h_rt={resources.walltime}", "-cwd", "-j y")


def read_queue(job_name, job_ids):
    out = subprocess.run(["qstat"], capture_output=True, text=True, timeout=60, check=True)
    rows = [line.split() for line in out.stdout.splitlines()[2:]]
    return {row[0]: (row[4], row[7] if len(row) > 7 else "") for row in rows
            if len(row) > 4 and row[0] in job_ids}


SCHEDULER = Scheduler(
    name="sge",
    executor=JobQueueExecutor,
    job_queue=JobQueue(
        job_class="dask_jobqueue.sge:SGEJob", cluster_class="dask_jobqueue.sge:SGECluster",
        submit="qsub", cancel="qdel", status="qstat", directive_prefix="#$",
        job_options=job_options, batch_directives=batch_directives, read_queue=read_queue,
        pending_states=frozenset({"qw", "hqw"}), ending_states=frozenset({"dr"}),
    ),
)
'''

SPEC = '''
[datasets.b]
source = "generated"
generator = "blobs"
n_samples = 50

[[cases]]
algorithm = "kmeans"
backend = ["sklearn", "sklearnex"]
dataset = "b"

[cluster]
kind = "sge"
jobs = 2

[cluster.resources]
cores = 2
memory = "4GiB"
partition = "all.q"
account = "proj1"
walltime = "02:00:00"
prologue = ["module load python"]
'''


@pytest.fixture
def sge(install_plugin):
    install_plugin("acme-sge", {"acme_sge.py": SGE_MODULE}, {"accelml.schedulers": {"sge": "acme_sge:SCHEDULER"}})
    return SCHEDULERS.get("sge")


def accelml(*arguments, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "accelml", *arguments], capture_output=True, text=True,
                          cwd=cwd, env=env, check=False)


def test_the_record_is_found_by_its_entry_point(sge):
    assert SCHEDULERS.origin("sge") == "acme_sge:SCHEDULER"
    assert SCHEDULERS.names()[:3] == ("local", "pbs", "slurm") and "sge" in SCHEDULERS.names()
    assert load_cluster_settings(overrides={"kind": "sge"}).scheduler is sge


def test_slurm_script_prints_sge_job_scripts_with_accelml_resource_lines(sge, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    result = accelml("slurm-script", str(spec), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "submitted with qsub by 'python -m accelml compare --cluster sge'" in out
    assert out.count("#!/usr/bin/env bash") == 2            # one job per pool slot (jobs = 2)
    for line in ("#$ -N accelml-XXXXXX", "#$ -q all.q", "#$ -P proj1", "#$ -l h_vmem=2048M",
                 "#$ -l h_rt=02:00:00", "#$ -pe smp 2", "#$ -cwd", "#$ -j y"):
        assert line in out.splitlines(), line
    assert "#SBATCH" not in out and "#PBS" not in out
    assert "module load python" in out and "--resources pool-" in out and ",RANKS=1" in out
    assert "--tls-ca-file" in out
    script = out.split("# ---- job 1/2 of pool 1\n", 1)[1].split("# ---- job 2/2", 1)[0]
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0

    batch = accelml("slurm-script", str(spec), "--batch", cwd=tmp_path)
    assert batch.returncode == 0, batch.stderr
    assert "as one qsub job" in batch.stdout
    assert {"#$ -pe smp 4", "#$ -l h_rt=02:00:00"} <= set(batch.stdout.splitlines())


def test_compare_on_sge_without_qsub_stops_before_writing_anything(sge, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    empty = tmp_path / "bin"
    empty.mkdir()   # a PATH with no qsub
    results = tmp_path / "results"
    result = accelml("compare", str(spec), "--results-dir", str(results), cwd=tmp_path,
                     env={**os.environ, "PATH": str(empty)})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "accelml compare: error: --cluster sge: 'qsub' is not on PATH on this machine"]
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not results.exists()


STRICT_SLURM_MODULE = '''
"""A site's SLURM without GPUs: its directive mapping refuses a GPU job before sbatch sees it."""

import dataclasses
import os

from accelml.executors.schedulers.slurm import SCHEDULER as SLURM, job_options as slurm_job_options


def job_options(resources):
    if resources.gpus:
        raise ValueError("this site has no GPU partition")
    return slurm_job_options(resources)


SCHEDULER = dataclasses.replace(
    SLURM, name="slurm-cpu", job_queue=dataclasses.replace(SLURM.job_queue, job_options=job_options))


def job_id(label):
    """A case function the worker jobs can import (this module is on their PYTHONPATH)."""
    return os.environ.get("SLURM_JOB_ID")
'''


@pytest.mark.slurm
def test_a_failed_submission_reports_its_real_cause(slurm_available, install_plugin, tmp_path):
    """Three pools, none can start: sbatch's own refusal (more memory than the node has) is
    quoted as sbatch's; the directive mapping's error is reported as itself, not as sbatch's;
    the case that fits the node still runs."""
    install_plugin("acme-slurm-cpu", {"acme_slurm_cpu.py": STRICT_SLURM_MODULE},
                   {"accelml.schedulers": {"slurm-cpu": "acme_slurm_cpu:SCHEDULER"}})
    settings = load_cluster_settings(spec_table={"kind": "slurm-cpu", "shared-directory": str(tmp_path / "jobs"),
                                                 "worker-start-timeout": 300})
    needs = [CaseNeeds(memory_bytes=2**50), CaseNeeds(gpus=1), CaseNeeds()]
    job_id = importlib.import_module("acme_slurm_cpu").job_id
    with JobQueueExecutor(settings) as executor:
        huge, gpu, fits = sorted(executor.map(job_id, ["huge", "gpu", "fits"], needs=needs),
                                 key=lambda outcome: outcome.index)
        job_name = executor.job_name
    assert huge.error.startswith("sbatch refused the worker job (1 task, 1 core(s)/rank, 1073741824MiB/rank")
    assert huge.error.endswith("Requested node configuration is not available")
    assert gpu.error.startswith("could not write the worker job script (1 task, 1 core(s)/rank")
    assert gpu.error.endswith(": ValueError: this site has no GPU partition")
    assert "sbatch" not in gpu.error
    assert fits.ok and fits.result
    squeue = subprocess.run(["squeue", "--noheader", f"--name={job_name}"], capture_output=True, text=True,
                            check=True)
    assert squeue.stdout.strip() == ""
    assert Path(tmp_path / "jobs" / job_name / "logs").is_dir()   # kept: the run had failures
