"""The site's dask-jobqueue config (``jobqueue.slurm`` in ``$DASK_CONFIG``/``~/.config/dask``)
applies to accelml's job-queue clusters: walltime, queue, account, prologue and directives
reach the worker and batch job scripts; accelml's own layers override it with one warning line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cloudpickle
import dask
import pytest

from accelml.executors.cluster_settings import load_cluster_settings, site_jobqueue_config
from accelml.executors.jobqueue import JobQueueExecutor
from accelml.executors.jobqueue_adapter import import_jobqueue

from . import casefunctions
from .casefunctions import job_facts

cloudpickle.register_pickle_by_value(casefunctions)
REPO = Path(__file__).resolve().parents[2]
SITE_YAML = """\
jobqueue:
  slurm:
    walltime: '02:30:00'
    queue: debug
    processes: 4
    job-script-prologue:
      - export ACCELML_SITE_PROLOGUE=yes
    job-extra-directives:
      - --comment=site-directive
"""
SPEC = ('[datasets.b]\nsource = "generated"\ngenerator = "blobs"\nn_samples = 50\n'
        '[[cases]]\nalgorithm = "kmeans"\nbackend = "sklearn"\ndataset = "b"\n'
        '[cluster]\nkind = "slurm"\n[cluster.resources]\njob-script-prologue = ["echo from-spec"]\n')


def run_cli(tmp_path, *arguments):
    site = tmp_path / "site-config"
    site.mkdir(exist_ok=True)
    (site / "jobqueue.yaml").write_text(SITE_YAML)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    env = dict(os.environ, DASK_CONFIG=str(site), PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "accelml", "slurm-script", str(spec), *arguments],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def warning_lines(stderr):
    return [line for line in stderr.splitlines() if "dask-jobqueue config" in line]


def test_site_config_fills_the_worker_and_batch_scripts(tmp_path):
    worker = run_cli(tmp_path)
    assert worker.returncode == 0, worker.stderr
    assert "#SBATCH -t 02:30:00" in worker.stdout and "#SBATCH -p debug" in worker.stdout
    assert "#SBATCH --comment=site-directive" in worker.stdout
    # the site's prologue first, then the spec's (accelml's key spelled as dask-jobqueue spells it)
    assert worker.stdout.index("export ACCELML_SITE_PROLOGUE=yes") < worker.stdout.index("echo from-spec")
    # a site key accelml sets itself for each job is named, not silently dropped
    [line] = warning_lines(worker.stderr)
    assert "not applied" in line and "processes" in line and "overridden" not in line

    batch = run_cli(tmp_path, "--batch")
    assert batch.returncode == 0, batch.stderr
    for expected in ("#SBATCH --time=02:30:00", "#SBATCH --partition=debug",
                     "#SBATCH --comment=site-directive", "export ACCELML_SITE_PROLOGUE=yes"):
        assert expected in batch.stdout, expected


def test_an_override_of_a_site_value_is_one_warning_line(tmp_path):
    result = run_cli(tmp_path, "--walltime", "03:00:00")
    assert result.returncode == 0, result.stderr
    assert "#SBATCH -t 03:00:00" in result.stdout and "02:30:00" not in result.stdout
    [line] = warning_lines(result.stderr)
    assert "walltime '02:30:00' by command line ('03:00:00')" in line


def test_dask_jobqueue_defaults_are_not_site_settings():
    """dask-jobqueue's packaged defaults (walltime 00:30:00), loaded once it is imported, are not
    the site's: accelml's own default stays."""
    import dask_jobqueue  # noqa: F401  (loads its defaults into dask.config)

    assert site_jobqueue_config("slurm").values == {}
    assert load_cluster_settings(spec_table={"kind": "slurm"}).resources.walltime == "01:00:00"


@pytest.mark.slurm
def test_site_config_reaches_the_real_slurm_job(slurm_available, tmp_path, capsys):
    site = {"jobqueue.slurm.walltime": "02:30:00",
            "jobqueue.slurm.job-script-prologue": ["export ACCELML_SITE_PROLOGUE=yes"]}
    # dask-jobqueue's defaults first: a dask.config.set of "jobqueue.*" made before they load
    # deletes the whole "jobqueue" key on exit, defaults included, for every later test of this
    # process (8 SLURM tests failed with KeyError 'jobqueue' when xdist ran them after this one)
    import_jobqueue()
    with dask.config.set(site):
        settings = load_cluster_settings(spec_table={"kind": "slurm", "worker-start-timeout": 300,
                                                     "shared-directory": str(tmp_path / "jobs")})
        with JobQueueExecutor(settings) as executor:
            [outcome] = list(executor.map(job_facts, ["one"]))
    assert outcome.ok, outcome.error
    assert outcome.result["time_limit"] == "02:30:00"
    assert outcome.result["site_prologue"] == "yes"
