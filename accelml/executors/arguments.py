"""The cluster choice on the command line, in the Python API and in the spec, in one place.

Command modules call :func:`add_cluster_arguments` in ``add_arguments`` and
:func:`executor_from_args` in ``run``::

    def add_arguments(parser):
        ...
        add_cluster_arguments(parser)

    def run(args):
        experiment = load_spec(args.spec)
        with executor_from_args(args, experiment, progress=print_progress) as executor:
            for outcome in executor.map(execute_case, tasks):
                ...

The Python API takes the same settings as keywords (:func:`cluster_settings`); the spec
takes a ``[cluster]`` table with a ``[cluster.resources]`` sub-table::

    [cluster]
    kind = "slurm"          # local | slurm | pbs | a scheduler plug-in's name
    jobs = 4
    retries = 2
    [cluster.resources]     # dask-jobqueue's key names; the site's jobqueue.yaml fills the rest
    queue = "gpu"
    walltime = "02:00:00"
    job-script-prologue = ["module load Horovod/0.28.1", "conda activate accelml"]

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_cluster_arguments(parser)
>>> args = parser.parse_args(["--cluster", "slurm", "--jobs", "4", "--gpus", "1", "--partition", "gpu"])
>>> settings = settings_from_args(args)
>>> settings.kind, settings.jobs, settings.resources.gpus, settings.resources.partition
('slurm', 4, 1, 'gpu')
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TextIO

from accelml.cases import Experiment
from accelml.errors import SpecError
from accelml.executors import Executor, make_executor, submits_jobs
from accelml.executors.cluster_settings import LAUNCHERS, ClusterSettings, load_cluster_settings
from accelml.executors.interface import FanOutProgress, ProgressCallback

_RESOURCE_FLAGS = ("cores", "memory", "gpus", "gpu_type", "walltime", "partition", "account")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--cluster``, ``--jobs`` and the per-job resource flags, in their own help group."""
    group = parser.add_argument_group(
        "cluster", "where cases run; defaults come from accelml's cluster config "
        "(~/.config/dask/accelml.yaml), then --cluster-config, then the spec's [cluster] table")
    group.add_argument("--cluster", default=None, metavar="KIND",
                       help="local: a dask LocalCluster here (default); slurm / pbs: worker jobs "
                            "through dask-jobqueue; or the name of an installed scheduler plug-in")
    group.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                       help="cases at once: worker jobs on a batch system, worker threads locally")
    group.add_argument("--cluster-config", default=None, metavar="FILE",
                       help="a dask-style YAML file with an 'accelml: cluster:' section")
    group.add_argument("--cores", type=positive_int, default=None, metavar="N",
                       help="cores per rank in each worker job")
    group.add_argument("--memory", default=None, metavar="SIZE", help="memory per rank, e.g. 4GiB")
    group.add_argument("--gpus", type=non_negative_int, default=None, metavar="N",
                       help="GPUs per worker job of a GPU case (--gres=gpu:N / ngpus=N), at "
                            "least one per rank; CPU cases never get GPUs")
    group.add_argument("--gpu-type", default=None, metavar="TYPE", help="e.g. a100: --gres=gpu:a100:N")
    group.add_argument("--walltime", default=None, metavar="HH:MM:SS", help="per worker job")
    group.add_argument("--partition", "--queue", dest="partition", default=None, metavar="NAME",
                       help="SLURM partition / PBS queue")
    group.add_argument("--account", default=None, metavar="NAME", help="account to charge")
    group.add_argument("--directive", dest="directives", action="append", default=None, metavar="LINE",
                       help="extra directive line ('#SBATCH', '#PBS', ...), without the prefix (repeatable)")
    group.add_argument("--prologue", action="append", default=None, metavar="LINE",
                       help="shell line run before the worker starts, e.g. 'module load "
                            "Horovod' (repeatable)")
    group.add_argument("--job-env", dest="environment", action="append", default=None,
                       metavar="NAME=VALUE", help="variable exported in each job (repeatable)")
    group.add_argument("--retries", type=non_negative_int, default=None, metavar="N",
                       help="re-runs of a case whose worker was lost or whose process, rank or "
                            "launcher was killed (default 2)")
    group.add_argument("--launcher", choices=LAUNCHERS, default=None,
                       help="how a multi-rank case starts its ranks in its SLURM job")
    group.add_argument("--no-tls", dest="tls", action="store_false", default=None,
                       help="scheduler without TLS (only on a cluster no one else can reach)")
    group.add_argument("--dashboard", action="store_true", default=None,
                       help="keep dask's dashboard (on 127.0.0.1 only; default: no HTTP server)")


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (argparse turns the error into its one line)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, not {text}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, not {text}")
    return value


def _environment(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    result = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SpecError(f"--job-env {pair!r}: expected NAME=VALUE")
        result[name] = value
    return result


def cluster_table_of(spec: Experiment | None) -> Mapping[str, object] | None:
    """The spec's ``[cluster]`` table, if it has one."""
    return spec.cluster if spec is not None else None


def settings_from_args(args: argparse.Namespace, spec: Experiment | None = None) -> ClusterSettings:
    """Cluster settings from every layer: config files, the spec's [cluster] table, the flags."""
    resources: dict[str, object] = {name: getattr(args, name, None) for name in _RESOURCE_FLAGS}
    resources["directives"] = getattr(args, "directives", None)
    resources["prologue"] = getattr(args, "prologue", None)
    resources["environment"] = _environment(getattr(args, "environment", None))
    overrides = {
        "kind": getattr(args, "cluster", None),
        "jobs": getattr(args, "jobs", None),
        "retries": getattr(args, "retries", None),
        "tls": getattr(args, "tls", None),
        "dashboard": getattr(args, "dashboard", None),
        "launcher": getattr(args, "launcher", None),
        "resources": {key: value for key, value in resources.items() if value is not None},
    }
    spec_table = cluster_table_of(spec)
    try:
        return load_cluster_settings(spec_table=spec_table, overrides=overrides,
                                     config_file=getattr(args, "cluster_config", None))
    except SpecError as error:
        where = spec.path if spec is not None else None
        message = str(error)
        if where and message.startswith("[cluster]"):
            raise SpecError(f"{where}: {message}") from None
        raise


def cluster_settings(cluster: str | None = None, jobs: int | None = None, *,
                     resources: Mapping[str, object] | None = None, spec: Experiment | None = None,
                     config_file: str | None = None, **settings: object) -> ClusterSettings:
    """The Python API's spelling: ``cluster_settings("slurm", 4, resources={"gpus": 1})``.

    Keywords (``retries``, ``tls``, ``launcher``, ``shared_directory``, ...) are the keys of
    the ``[cluster]`` table.

    >>> cluster_settings("pbs", 2, resources={"queue": "workq"}).resources.partition
    'workq'
    """
    overrides = dict(settings, kind=cluster, jobs=jobs, resources=resources)
    return load_cluster_settings(spec_table=cluster_table_of(spec), overrides=overrides,
                                 config_file=config_file)


def progress_printer(stream: TextIO | None = None) -> ProgressCallback:
    """A progress callback that prints each change of the job/worker/case counts as one line."""

    def show(progress: FanOutProgress) -> None:
        print(f"accelml: {progress.line()}", file=stream or sys.stderr, flush=True)

    return show


def progress_for(settings: ClusterSettings | None,
                 progress: ProgressCallback | None = None) -> ProgressCallback | None:
    """``progress``, or where cases run in batch jobs and none is given, :func:`progress_printer`."""
    if progress is None and submits_jobs(settings):
        return progress_printer()
    return progress


def executor_from_args(args: argparse.Namespace, spec: Experiment | None = None,
                       progress: ProgressCallback | None = None) -> Executor:
    """The executor the flags, the spec and the config files ask for (a context manager)."""
    settings = settings_from_args(args, spec)
    return make_executor(settings, progress=progress_for(settings, progress))
