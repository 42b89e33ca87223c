"""``python -m accelml slurm-script SPEC``: print the job scripts a comparison would submit."""

from __future__ import annotations

HELP = "print the sbatch (or PBS) job scripts that 'compare --cluster slurm|pbs' would submit"


def add_arguments(parser) -> None:
    from accelml.executors.arguments import add_cluster_arguments

    parser.add_argument("spec", nargs="?", default=None,
                        help="experiment spec (TOML); default: the embedded smoke spec")
    parser.add_argument("--batch", action="store_true",
                        help="print one batch job that runs the whole comparison on one node "
                             "instead of the worker jobs")
    add_cluster_arguments(parser)


def run(args) -> int:
    from accelml.executors.arguments import settings_from_args
    from accelml.executors.preview import batch_preview, worker_jobs_preview
    from accelml.spec.load import load_spec

    experiment = load_spec(args.spec)
    settings = settings_from_args(args, experiment)
    kind = settings.kind if settings.kind != "local" else "slurm"
    if args.batch:
        print(batch_preview(kind, args.spec, experiment, settings), end="")
    else:
        print(worker_jobs_preview(kind, experiment, settings), end="")
    return 0
