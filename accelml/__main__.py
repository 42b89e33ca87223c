"""``python -m accelml``: the CLI (:mod:`accelml.cli`, through :func:`accelml.cli.command_line`).

Ctrl-C while Python is still importing accelml ends the process with one line and exit 130,
as it does later, not with a traceback from the middle of an import.
"""

import os
import signal
import sys


def _interrupted_while_starting(signum: int, frame: object) -> None:
    print("accelml: interrupted", file=sys.stderr)
    raise SystemExit(128 + signum)


_STARTING = signal.getsignal(signal.SIGINT) is signal.default_int_handler
if _STARTING:        # a SIGINT ignored by the caller (nohup, a background job) stays ignored
    signal.signal(signal.SIGINT, _interrupted_while_starting)

from accelml.cli import command_line  # noqa: E402  (after the handler: its imports take a second)

if _STARTING:
    signal.signal(signal.SIGINT, signal.default_int_handler)
_CODE = command_line()
if _CODE > 128:
    # Stopped by a signal and cleaned up: exit with 128 + signal now. A Ctrl-C that landed
    # in code a library ran through PyRun_String (pybind11's exec, during an import) marks
    # the interpreter, which would otherwise end itself by SIGINT (exit status -2) at exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_CODE)
sys.exit(_CODE)
