"""``python -m accelml run-case INPUT.json [--output RESULT.json]``: run one case in this process.

This is the isolated per-case process that ``compare`` starts for every case (through
:func:`accelml.runner.process.execute_case`); it is not meant to be typed by hand. INPUT is
the JSON payload written by the client; the result JSON goes to ``--output`` (atomically)
or to standard output.
"""

from __future__ import annotations

import argparse

from accelml.errors import AccelmlError
from accelml.runner.run_case import main


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="the case payload (JSON) written by the client")
    parser.add_argument("--output", "-o", default=None,
                        help="where to write the result JSON (default: standard output)")


def run(args: argparse.Namespace) -> int:
    # The case's own failures come back inside its result; what escapes is a payload that
    # cannot be read or decoded, or an output that cannot be written.
    try:
        return main(args.input, args.output)
    except OSError as error:
        raise AccelmlError(f"{error.filename or args.input}: {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError) as error:
        raise AccelmlError(f"{args.input}: not a case payload ({type(error).__name__}: {error})") from None
