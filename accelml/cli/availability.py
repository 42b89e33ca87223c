"""``--only-available``: gate CI on the cases this machine can run (``compare`` and ``check``).

A spec that mixes CPU and GPU cases runs on a CPU-only CI machine too: its GPU cases are
recorded as failed with kind ``unavailable`` (the backend or device is not on this machine,
and why). Without the flag they count as failures (exit 1), as a crash does; with it they
are listed as skipped and leave the exit code alone. Any other failure still exits 1.
Such a case never ran: the progress lines, the table and ``runs`` call it skipped either way.

>>> from accelml.results.records import CaseResult, FailureKind
>>> gpu = CaseResult("r", "a", "gradient_boosting_classifier", "xgboost", "cuda", "bc", "failed",
...                  failure=FailureKind.UNAVAILABLE, reason="needs 1 GPU(s); this machine has 0")
>>> crash = CaseResult("r", "b", "kmeans", "sklearn", "cpu", "bc", "failed", failure=FailureKind.ERROR,
...                    reason="ValueError")
>>> [len(group) for group in split_unavailable([gpu, crash], only_available=True)]
[1, 1]
>>> [len(group) for group in split_unavailable([gpu, crash], only_available=False)]
[2, 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from accelml.report.table import outcome_word
from accelml.results.records import CaseResult, FailureKind

HELP = ("cases this machine cannot run (backend or device unavailable, e.g. GPU cases on a "
        "CPU-only CI runner) are skipped, not failures: they do not make the exit code 1")


def add_only_available(parser: argparse.ArgumentParser) -> None:
    """The ``--only-available`` flag."""
    parser.add_argument("--only-available", action="store_true", help=HELP)


def split_unavailable(results: Iterable[CaseResult], *, only_available: bool
                      ) -> tuple[list[CaseResult], list[CaseResult]]:
    """(the failed results that count, the ones skipped as unavailable here)."""
    failed = [result for result in results if not result.ok]
    if not only_available:
        return failed, []
    skipped = [result for result in failed if result.failure is FailureKind.UNAVAILABLE]
    return [result for result in failed if result.failure is not FailureKind.UNAVAILABLE], skipped


def progress_line(result: CaseResult, done: int, total: int) -> str:
    """The line printed as a case finishes: the case as the dry run names it (strategy,
    ranks and parameters included) and its outcome.

    >>> gpu = CaseResult("r", "a", "kmeans", "sklearn", "cuda", "blobs", "failed",
    ...                  failure=FailureKind.UNAVAILABLE, reason="needs 1 GPU(s)")
    >>> progress_line(gpu, 1, 2)
    '[1/2] kmeans/sklearn/cuda on blobs: skipped (unavailable): needs 1 GPU(s)'
    """
    word = outcome_word(result)
    status = "ok" if result.ok else \
        f"{word if result.skipped else word.upper()} ({result.failure.value}): {result.reason}"
    return f"[{done}/{total}] {result.label}: {status}"
