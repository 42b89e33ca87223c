"""Job scripts: what SLURM and PBS would be given. No PBS server here: PBS is tested through
the generated scripts only (their directives, and that bash accepts them)."""

import subprocess
from pathlib import Path

import pytest

from accelml.cli import main
from accelml.executors.cluster_settings import SCHEDULERS, ClusterSettings
from accelml.executors.resources import CaseNeeds, Resources
from accelml.executors.scripts import (
    batch_script,
    placeholder_security,
    worker_job_script,
)

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((REPO / "slurm").glob("*.sbatch")) + sorted((REPO / "slurm").glob("*.pbs"))
SLURM, PBS = SCHEDULERS.get("slurm"), SCHEDULERS.get("pbs")
HOROVOD_JOB = Resources(cores=7, memory="12GiB", partition="gpu", account="proj1",
                        prologue=("module load Horovod/0.28.1",),
                        environment={"NCCL_DEBUG": "WARN", "HOROVOD_GPU_OPERATIONS": "NCCL"},
                        directives=("--constraint=v100",)).for_case(CaseNeeds(gpus=4, ranks=4))


def directives(script, prefix):
    return [line[len(prefix):].strip() for line in script.splitlines() if line.startswith(prefix)]


def bash_accepts(script, tmp_path):
    path = tmp_path / "job.sh"
    path.write_text(script)
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_slurm_worker_job_holds_all_ranks_of_a_multi_rank_case(tmp_path):
    settings = ClusterSettings(kind="slurm", launcher="mpirun")
    script = worker_job_script(SLURM, HOROVOD_JOB, settings, security=placeholder_security("/home/u/run"))
    lines = directives(script, "#SBATCH")
    for expected in ("--nodes=1", "--ntasks-per-node=4", "--cpus-per-task=7", "--mem-per-cpu=1756M",
                     "--gres=gpu:4", "-p gpu", "-A proj1", "-t 01:00:00", "--constraint=v100"):
        assert expected in lines
    assert "-n 1" not in lines  # dask-jobqueue's one-task line is replaced
    assert "export NCCL_DEBUG=WARN" in script and "export ACCELML_RANK_LAUNCHER=mpirun" in script
    assert "export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK}" in script
    assert "SLURM_MPI_TYPE" not in script    # mpirun starts the ranks, not srun
    srun_script = worker_job_script(SLURM, HOROVOD_JOB, ClusterSettings(kind="slurm"))
    assert "export ACCELML_RANK_LAUNCHER=srun" in srun_script and "export SLURM_MPI_TYPE=pmix" in srun_script
    assert script.index("module load Horovod/0.28.1") < script.index("distributed.cli.dask_worker")
    worker = script.splitlines()[-1]
    assert f"--resources {HOROVOD_JOB.pool_tag}=1,RANKS=4,GPU=4" in worker
    assert "--tls-ca-file /home/u/run/tls-XXXXXXXX/ca.pem" in worker and "--protocol tls://" in worker
    bash_accepts(script, tmp_path)


def test_pbs_worker_job_script(tmp_path):
    resources = Resources.from_mapping({"queue": "workq", "account": "proj1", "walltime": "02:00:00",
                                        "gpu-type": "a100", "directives": ["-m abe"],
                                        "prologue": ["conda activate ml"]})
    job = resources.for_case(CaseNeeds(gpus=2, ranks=2, cores=4))
    script = worker_job_script(PBS, job, ClusterSettings(kind="pbs"),
                               security=placeholder_security("/home/u/run"))
    lines = directives(script, "#PBS")
    assert "-l select=1:ncpus=8:mpiprocs=2:mem=4096mb:ngpus=2:gpu_model=a100" in lines
    assert "-q workq" in lines and "-A proj1" in lines and "-l walltime=02:00:00" in lines
    assert "-m abe" in lines
    assert "export ACCELML_RANK_LAUNCHER=mpirun" in script
    assert "conda activate ml" in script
    assert f"--resources {job.pool_tag}=1,RANKS=2,GPU=2" in script
    assert "--tls-key /home/u/run/tls-XXXXXXXX/key.pem" in script
    bash_accepts(script, tmp_path)


def test_batch_scripts_for_a_whole_comparison(tmp_path):
    settings = ClusterSettings(kind="slurm", resources=Resources(cores=2, memory="1GiB", gpus=1,
                                                                 partition="gpu"))
    slurm = batch_script(SLURM, "experiments/smoke.toml", settings, jobs=3)
    assert {"--cpus-per-task=6", "--mem=3072M", "--gres=gpu:1", "--partition=gpu"} <= set(
        directives(slurm, "#SBATCH"))
    assert slurm.rstrip().endswith("compare experiments/smoke.toml --cluster local --jobs 3")
    pbs = batch_script(PBS, "experiments/smoke.toml", settings, jobs=3)
    assert "-l select=1:ncpus=6:mem=3072mb:ngpus=1" in directives(pbs, "#PBS")
    assert 'cd "${PBS_O_WORKDIR:-.}"' in pbs
    for script in (slurm, pbs):
        bash_accepts(script, tmp_path)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: path.name)
def test_shipped_templates_are_valid_bash_with_the_tutorial_settings(template):
    text = template.read_text()
    assert subprocess.run(["bash", "-n", str(template)]).returncode == 0
    if "horovod" in template.name:
        assert "HOROVOD_GPU_OPERATIONS=NCCL" in text and "NCCL_DEBUG=WARN" in text
        assert ("mpiexec -np" in text or "mpirun -np" in text or "srun --ntasks" in text)
    prefix = "#SBATCH" if template.suffix == ".sbatch" else "#PBS"
    assert directives(text, prefix)


def test_slurm_script_command_prints_every_worker_job(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text('[datasets.b]\nsource = "generated"\ngenerator = "blobs"\nn_samples = 50\n'
                    '[[cases]]\nalgorithm = "kmeans"\nbackend = ["sklearn", "sklearnex"]\ndataset = "b"\n'
                    '[cluster]\nkind = "slurm"\njobs = 2\n[cluster.resources]\npartition = "debug"\n')
    assert main(["slurm-script", str(spec), "--walltime", "02:00:00", "--cluster", "pbs"]) == 0
    out = capsys.readouterr().out
    assert out.count("#!/usr/bin/env bash") == 2
    assert out.count("#PBS -l walltime=02:00:00") == 2 and "#PBS -q debug" in out
    assert "-0 --nthreads" in out and "-1 --nthreads" in out
    assert main(["slurm-script", str(spec), "--batch"]) == 0
    batch = capsys.readouterr().out
    assert "#SBATCH --partition=debug" in batch and f"compare {spec} --cluster local --jobs 2" in batch
    assert main(["slurm-script", str(spec), "--memory", "lots"]) == 2
    assert "accelml slurm-script: error: " in capsys.readouterr().err


@pytest.mark.slurm
def test_sbatch_accepts_the_generated_and_shipped_cpu_scripts(slurm_available, tmp_path):
    """``sbatch --test-only`` validates a script against the real controller without running it."""
    settings = ClusterSettings(kind="slurm", resources=Resources(partition=slurm_available))
    scripts = {
        "worker": worker_job_script(SLURM, settings.resources.for_case(CaseNeeds(ranks=2)), settings),
        "batch": batch_script(SLURM, "experiments/smoke.toml", settings, jobs=2),
        "compare.sbatch": (REPO / "slurm" / "compare.sbatch").read_text(),
    }
    for name, script in scripts.items():
        path = tmp_path / f"{name}.sh"
        path.write_text(script)
        result = subprocess.run(["sbatch", "--test-only", str(path)], capture_output=True, text=True,
                                cwd=tmp_path)
        assert result.returncode == 0, f"{name}: {result.stderr}"
        assert "to start at" in result.stderr, f"{name}: {result.stderr}"
