"""accelml: how much faster is it on another backend, device or scale, and is the answer the same?

>>> import accelml
>>> from sklearn.datasets import make_blobs
>>> X, _ = make_blobs(n_samples=200, centers=3, random_state=0)
>>> est = accelml.Estimator("kmeans", backend="sklearn", n_clusters=3, random_state=0, n_init=1)
>>> est.fit(X).predict(X).shape
(200,)

``accelml.backends()`` says what this machine can run: one :class:`accelml.probe.Availability`
per backend and device, strategy library and tool (:func:`accelml.machine.probe_all`).

``import accelml`` stays cheap: each public name is listed in ``_LAZY`` (name -> module,
attribute) and its module is imported with :func:`importlib.import_module` when the name is
first used, so heavy libraries load only for the names that need them.

Started as ``python -m accelml`` (or the ``accelml`` script), this package installs its
Ctrl-C handler before anything else is imported (only modules Python has loaded already, and
the built-in ``_signal``): a Ctrl-C while Python still loads accelml says ``accelml:
interrupted`` and exits 130, with no traceback from the middle of an import;
:func:`accelml.cli.command_line` puts Python's own handler back as it starts. Imported as a
library, accelml leaves the signal handlers alone.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # built in; signal would import enum first
import os
import sys


def interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C while ``python -m accelml`` loads: one line and exit 130 at once."""
    os.write(2, b"accelml: interrupted\n")
    os._exit(128 + signum)


def started_as_command(argv: list[str]) -> bool:
    """Whether the interpreter's command line (``sys.orig_argv``) runs ``-m accelml`` or the
    ``accelml`` script.

    >>> started_as_command(["python", "-X", "dev", "-m", "accelml", "compare"])
    True
    >>> started_as_command(["python", "/venv/bin/accelml", "report"]), started_as_command(["python", "x.py"])
    (True, False)
    >>> started_as_command(["python", "-m", "accelml.dl.rank"]), started_as_command(["python", "-c", "1"])
    (False, False)
    """
    arguments = iter(argv[1:])
    for arg in arguments:
        if arg in ("-X", "-W"):        # options whose value is the next argument
            next(arguments, None)
        elif arg.startswith("-m"):
            return (arg[2:] or next(arguments, None)) == "accelml"
        elif arg.startswith("-c"):
            return False
        elif not arg.startswith("-"):  # the script
            return os.path.basename(arg) == "accelml"
    return False


if started_as_command(getattr(sys, "orig_argv", [])) \
        and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    # (a SIGINT ignored by the caller, as nohup or a background job does, stays ignored)
    _signal.signal(_signal.SIGINT, interrupted_while_starting)

import importlib  # noqa: E402  (after the handler)
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:  # what type checkers see of the names _LAZY imports on first use ("as": re-exported)
    from accelml.comparison import compare as compare
    from accelml.errors import AccelmlError as AccelmlError
    from accelml.errors import SpecError as SpecError
    from accelml.errors import UnavailableError as UnavailableError
    from accelml.estimators import Estimator as Estimator
    from accelml.machine import probe_all

    backends = probe_all

__version__ = "0.1.0"

_LAZY = {
    "Estimator": ("accelml.estimators", "Estimator"),
    "backends": ("accelml.machine", "probe_all"),
    "compare": ("accelml.comparison", "compare"),
    "AccelmlError": ("accelml.errors", "AccelmlError"),
    "SpecError": ("accelml.errors", "SpecError"),
    "UnavailableError": ("accelml.errors", "UnavailableError"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    """The public ``name``, its module imported on first use (the table ``_LAZY``)."""
    if name in _LAZY:
        module_name, attribute = _LAZY[name]
        return getattr(importlib.import_module(module_name), attribute)
    raise AttributeError(f"module 'accelml' has no attribute {name!r}")
