"""Cluster settings: packaged YAML < dask config < --cluster-config < spec < flags."""

import argparse

import dask
import pytest

from accelml.errors import SpecError
from accelml.executors.arguments import (
    add_cluster_arguments,
    cluster_settings,
    settings_from_args,
)
from accelml.executors.cluster_settings import load_cluster_settings, packaged_defaults


def parse(argv):
    parser = argparse.ArgumentParser()
    add_cluster_arguments(parser)
    return parser.parse_args(argv)


def test_packaged_defaults_are_local_with_tls_for_job_queues():
    defaults = packaged_defaults()["cluster"]
    settings = load_cluster_settings()
    assert settings.kind == defaults["kind"] == "local"
    assert settings.tls is True
    assert settings.resources.walltime == defaults["resources"]["walltime"]


def test_each_layer_overrides_the_one_below_key_by_key(tmp_path):
    config = tmp_path / "site.yaml"
    config.write_text("accelml:\n  cluster:\n    kind: pbs\n    retries: 5\n"
                      "    resources:\n      partition: from-file\n      account: proj1\n"
                      "      prologue: ['module load Python/3.11']\n")
    with dask.config.set({"accelml.cluster.resources.walltime": "00:20:00",
                          "accelml.cluster.resources.account": "from-dask"}):
        args = parse(["--cluster-config", str(config), "--cluster", "slurm", "--gpus", "2",
                      "--prologue", "conda activate ml"])
        spec = {"jobs": 3, "resources": {"partition": "from-spec", "cores": 4}}
        settings = settings_from_args(args, spec=type("Spec", (), {"cluster": spec})())
    assert settings.kind == "slurm"                          # flag over file
    assert settings.retries == 5                             # file
    assert settings.jobs == 3                                # spec
    assert settings.resources.walltime == "00:20:00"         # dask config
    assert settings.resources.account == "proj1"             # file over dask config
    assert settings.resources.partition == "from-spec"       # spec over file
    assert settings.resources.cores == 4 and settings.resources.gpus == 2
    assert settings.resources.prologue == ("conda activate ml",)   # flag replaces the list


def test_python_api_spelling():
    settings = cluster_settings("slurm", 2, resources={"gpus": 1, "walltime": "00:30:00"}, retries=0)
    assert (settings.kind, settings.jobs, settings.retries, settings.resources.gpus) == ("slurm", 2, 0, 1)


def test_bad_settings_are_one_line_spec_errors_naming_the_key(tmp_path):
    with pytest.raises(SpecError, match=r"^cluster.kind = 'slrum': unknown scheduler 'slrum' "
                                        r"\(did you mean 'slurm'\?\); choose from: local, pbs, slurm$"):
        load_cluster_settings(spec_table={"kind": "slrum"})
    with pytest.raises(SpecError, match=r"\[cluster\]\.nodes: unknown cluster setting"):
        load_cluster_settings(spec_table={"nodes": 2})
    with pytest.raises(SpecError, match=r"command line.resources.walltime = 'soon'"):
        load_cluster_settings(overrides={"resources": {"walltime": "soon"}})
    broken = tmp_path / "broken.yaml"
    broken.write_text("accelml: [1, 2\n")
    with pytest.raises(SpecError, match="broken.yaml: not valid YAML"):
        load_cluster_settings(config_file=broken)
    with pytest.raises(SpecError, match="--job-env 'X': expected NAME=VALUE"):
        settings_from_args(parse(["--job-env", "X"]))


@pytest.mark.parametrize("table, message", [
    ({"jobs": "3"}, r"^cluster.jobs = '3': expected an integer >= 1$"),
    ({"kind": 3}, r"^cluster.kind = 3: unknown scheduler 3; choose from: "),
    ({"tls": "yes"}, r"^cluster.tls = 'yes': expected true or false$"),
    ({"worker-start-timeout": True}, r"^cluster.worker-start-timeout = True: expected seconds > 0$"),
    ({"shared-directory": 5}, r"^cluster.shared-directory = 5: expected text$"),
    ({"python": ["python3"]}, r"^cluster.python = \['python3'\]: expected text$"),
    ({"resources": 5}, r"^\[cluster\].resources: expected a table of resources, got 5$"),
])
def test_a_setting_of_the_wrong_type_is_a_spec_error_naming_it(table, message):
    with pytest.raises(SpecError, match=message):
        load_cluster_settings(spec_table=table)


def test_spec_cluster_table_is_read_from_a_loaded_spec():
    from accelml.spec.load import load_spec_text

    experiment = load_spec_text(
        '[datasets.b]\nsource = "generated"\ngenerator = "blobs"\nn_samples = 50\n'
        '[[cases]]\nalgorithm = "kmeans"\nbackend = "sklearn"\ndataset = "b"\n'
        '[cluster]\nkind = "pbs"\njobs = 2\n[cluster.resources]\nqueue = "workq"\n')
    settings = settings_from_args(parse([]), experiment)
    assert (settings.kind, settings.jobs, settings.resources.partition) == ("pbs", 2, "workq")
    with pytest.raises(SpecError, match="cluster"):
        load_spec_text('[datasets.b]\nsource = "generated"\ngenerator = "blobs"\n'
                       '[[cases]]\nalgorithm = "kmeans"\nbackend = "sklearn"\ndataset = "b"\n'
                       '[cluster]\nkind = "condor"\n')


def test_a_job_queue_without_its_commands_is_unavailable_with_the_reason(tmp_path, monkeypatch):
    from accelml.errors import UnavailableError
    from accelml.executors.jobqueue import JobQueueExecutor

    monkeypatch.setenv("PATH", str(tmp_path))   # no sbatch, no qsub
    for kind, command in (("slurm", "sbatch"), ("pbs", "qsub")):
        with pytest.raises(UnavailableError, match=f"--cluster {kind}: '{command}' is not on PATH"):
            with JobQueueExecutor(load_cluster_settings(overrides={"kind": kind})):
                pass


def test_executor_from_args_picks_the_kind_and_progress_reads_as_one_line():
    from accelml.executors.arguments import executor_from_args
    from accelml.executors.jobqueue import FanOutProgress, JobQueueExecutor
    from accelml.executors.local_cluster import LocalExecutor

    assert isinstance(executor_from_args(parse(["--jobs", "2"])), LocalExecutor)
    executor = executor_from_args(parse(["--cluster", "pbs", "--queue", "workq"]))
    assert isinstance(executor, JobQueueExecutor) and executor.settings.resources.partition == "workq"
    snapshot = FanOutProgress(jobs_queued=2, jobs_running=1, workers_up=1, cases_running=1,
                              cases_waiting=4, cases_done=3, cases_failed=1, cases_total=8, workers_lost=1)
    assert snapshot.line() == ("jobs: 2 queued, 1 running | workers up: 1 | cases: 1 running, "
                               "4 waiting, 3/8 done, 1 failed | workers lost: 1")
