"""Errors a user can cause. The CLI prints them as one line, never a traceback."""


class AccelmlError(Exception):
    """A problem the user can fix: bad input, a missing dependency, a bad choice.

    ``exit_code`` is what the CLI exits with when this reaches it: 2, as for every error a
    user can cause (1 is kept for "it ran, and something failed or drifted").
    """

    exit_code = 2


class SpecError(AccelmlError):
    """An experiment spec (or command-line equivalent) that does not parse or validate."""

    exit_code = 2


class UnavailableError(AccelmlError):
    """A backend, device or tool that this machine cannot provide (the message says why)."""

    exit_code = 2


class StoreError(AccelmlError):
    """A results store that is missing, unreadable or corrupt, or a run it does not hold: the
    message names the file and what is wrong with it."""
