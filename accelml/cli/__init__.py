"""``python -m accelml COMMAND``: one module per command.

Each command module defines ``add_arguments(parser)`` and ``run(args) -> int``, and
imports what its command needs at module level; its one line of help is here
(:data:`COMMAND_HELP`). Only the module of the command being run is imported:
``python -m accelml run-case`` (the process every case runs in) does not load the report,
and neither does ``compare --help`` load the runner's case process. ``python -m accelml
--help`` imports no command module at all (it lists them from :data:`COMMAND_HELP`).

Output piped into a reader that stops early (``compare --dry-run | head -c 10``) ends the
command quietly, exit 141 (128 + SIGPIPE, as a Unix tool killed by the signal), with no
traceback.

>>> build_parser("backends").parse_args(["backends"]).command
'backends'
>>> main(["--version"])
Traceback (most recent call last):
SystemExit: 0
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from accelml import __version__, interrupted_while_starting
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

COMMAND_HELP = {
    "compare": "run an experiment spec (default: the embedded one) and print the comparison table",
    "run-case": "run one case in this process (JSON in, JSON out); used by compare for isolation",
    "report": "report a stored run: table, speedups, failures; HTML with plots, CSV/JSON, run vs run",
    "check": "check that a spec (or stored run) still gives the answers of a committed baseline",
    "backends": "show which backends, devices and launchers this machine can run, with versions",
    "slurm-script": ("print the batch job scripts (sbatch, PBS or a scheduler plug-in's) that "
                     "'compare --cluster KIND' would submit"),
    "runs": "list the runs of a results store (ids for report, export and --resume)",
    "export": "write the cases (or timed repeats) of one or more runs as one CSV or Parquet table",
}
"""Each command's one line of help, listed by ``python -m accelml --help`` without importing
any command module."""


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
    is imported). Without ``command`` the commands are listed with their help only: no
    command module is imported, their arguments are not known."""
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
        sub = subparsers.add_parser(name, help=COMMAND_HELP[name], description=COMMAND_HELP[name])
        if command is None:
            continue
        module = importlib.import_module(module_name)
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


SIGPIPE_EXIT = 128 + 13
"""The exit status of a command whose reader closed the pipe (128 + SIGPIPE)."""


def command_line() -> int:
    """``python -m accelml``: :func:`main` on ``sys.argv``, ending quietly (exit
    :data:`SIGPIPE_EXIT`) when the reader of its output closes the pipe early."""
    if signal.getsignal(signal.SIGINT) is interrupted_while_starting:
        # loaded under accelml's start-up handler: a Ctrl-C from now on ends the command
        # through its clean-up (KeyboardInterrupt)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        try:
            return main()
        finally:   # what is still buffered (also after --help) fails here, not at exit
            sys.stdout.flush()
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of stdout closed it: whatever is still buffered goes nowhere (Python would
    otherwise report a second BrokenPipeError when it flushes at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_EXIT
