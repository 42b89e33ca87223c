"""``python -m accelml slurm-script SPEC``: print the job scripts a comparison would submit."""

from __future__ import annotations

import argparse

from accelml.executors.arguments import add_cluster_arguments, settings_from_args
from accelml.executors.preview import (
    batch_preview,
    previewed_scheduler,
    worker_jobs_preview,
)
from accelml.spec.load import load_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", default=None,
                        help="experiment spec (TOML); default: the embedded smoke spec")
    parser.add_argument("--batch", action="store_true",
                        help="print one batch job that runs the whole comparison on one node "
                             "instead of the worker jobs")
    add_cluster_arguments(parser)


def run(args: argparse.Namespace) -> int:
    experiment = load_spec(args.spec)
    settings = settings_from_args(args, experiment)
    scheduler = previewed_scheduler(settings)
    if scheduler.name != settings.kind:  # e.g. local: the site's config of the previewed scheduler applies
        args.cluster = scheduler.name
        settings = settings_from_args(args, experiment)
    if args.batch:
        print(batch_preview(scheduler, args.spec, experiment, settings), end="")
    else:
        print(worker_jobs_preview(scheduler, experiment, settings), end="")
    return 0
