"""``python -m accelml COMMAND``: one module per command.

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. Modules import heavy libraries inside ``run`` so that
``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from accelml.errors import AccelmlError

COMMAND_MODULES = {
    "compare": "accelml.cli.compare",
    "run-case": "accelml.cli.run_case",
    "report": "accelml.cli.report",
    "check": "accelml.cli.check",
    "backends": "accelml.cli.backends",
    "slurm-script": "accelml.cli.slurm_script",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m accelml",
        description="How much faster is it on another backend, device or scale, "
        "and is the answer still the same?",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMAND_MODULES.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except AccelmlError as error:
        print(f"accelml {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(f"accelml {args.command}: interrupted", file=sys.stderr)
        return 130
