"""``python -m accelml``: the CLI (:mod:`accelml.cli`, through :func:`accelml.cli.command_line`).

Ctrl-C while Python is still importing accelml ends the process with one line and exit 130,
as it does later, not with a traceback from the middle of an import (the handler is
installed by :mod:`accelml`'s ``__init__`` before its first import).
"""

import os
import sys

from accelml.cli import command_line

_CODE = command_line()
if _CODE > 128:
    # Stopped by a signal and cleaned up: exit with 128 + signal now. A Ctrl-C that landed
    # in code a library ran through PyRun_String (pybind11's exec, during an import) marks
    # the interpreter, which would otherwise end itself by SIGINT (exit status -2) at exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_CODE)
sys.exit(_CODE)
