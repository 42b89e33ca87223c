"""``python -m accelml COMMAND``: one module per command.

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``, and imports what its command needs at module level. Only the module
of the command being run is imported: ``python -m accelml run-case`` (the process every
case runs in) does not load the report, and neither does ``compare --help`` load the
runner's case process. ``python -m accelml --help`` imports every command module to list
them; none of them imports TensorFlow, JAX or torch.

>>> build_parser("backends").parse_args(["backends"]).command
'backends'
>>> main(["--version"])
Traceback (most recent call last):
SystemExit: 0
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from accelml import __version__
from accelml.errors import AccelmlError

COMMAND_MODULES = {
    "compare": "accelml.cli.compare",
    "run-case": "accelml.cli.run_case",
    "report": "accelml.cli.report",
    "check": "accelml.cli.check",
    "backends": "accelml.cli.backends",
    "slurm-script": "accelml.cli.slurm_script",
    "runs": "accelml.cli.runs",
    "export": "accelml.cli.export",
}


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming ``--help``, exit 2 (not the usage block).

    >>> OneLineParser(prog="p").parse_args(["--nope"])
    Traceback (most recent call last):
    ...
    SystemExit: 2
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or with ``command`` of that one only (its module alone
    is imported)."""
    parser = OneLineParser(
        prog="python -m accelml",
        description="How much faster is it on another backend, device or scale, "
        "and is the answer still the same?",
    )
    parser.add_argument("--version", action="version", version=f"accelml {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMAND_MODULES.items():
        if command is not None and name != command:
            continue
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        run: Callable[[argparse.Namespace], int] = module.run
        sub.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = arguments[0] if arguments and arguments[0] in COMMAND_MODULES else None
    try:
        parser = build_parser(command)     # imports the command's module: a second or so
        args = parser.parse_args(arguments)
    except KeyboardInterrupt:
        print(f"accelml {command}: interrupted" if command else "accelml: interrupted",
              file=sys.stderr)
        return 130
    if args.command is None:
        print(f"{parser.prog}: error: no command given; one of {', '.join(COMMAND_MODULES)} "
              f"(see {parser.prog} --help)", file=sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except AccelmlError as error:
        print(f"accelml {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(f"accelml {args.command}: interrupted", file=sys.stderr)
        return 130
