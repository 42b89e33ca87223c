"""Errors a user can cause. The CLI prints them as one line, never a traceback."""


class AccelmlError(Exception):
    """A problem the user can fix: bad input, a missing dependency, a bad choice.

    ``exit_code`` is what the CLI exits with when this reaches it.
    """

    exit_code = 1


class SpecError(AccelmlError):
    """An experiment spec (or command-line equivalent) that does not parse or validate."""

    exit_code = 2


class UnavailableError(AccelmlError):
    """A backend, device or tool that this machine cannot provide (the message says why)."""

    exit_code = 2
