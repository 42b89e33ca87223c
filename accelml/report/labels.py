"""Which parameters a report names cases by: only those that tell its cases apart
(:func:`varying_params`), given to :func:`accelml.cases.case_label`, the one case label.
"""

from __future__ import annotations

from collections.abc import Iterable

from accelml.results.records import CaseResult


def varying_params(results: Iterable[CaseResult]) -> tuple[str, ...]:
    """The parameter names whose value is not the same in every one of ``results``.

    >>> from accelml.results.records import CaseResult
    >>> def case(**params):
    ...     return CaseResult("r", "c", "kmeans", "sklearn", "cpu", "d", "ok",
    ...                       params=tuple(sorted(params.items())))
    >>> varying_params([case(n_clusters=8, tol=0.1), case(n_clusters=16, tol=0.1)])
    ('n_clusters',)
    """
    results = list(results)
    names = sorted({name for result in results for name, _ in result.params})
    return tuple(name for name in names
                 if len({repr(result.params_dict.get(name, "<unset>")) for result in results}) > 1)


def params_text(result: CaseResult, names: Iterable[str] | None = None) -> str:
    """``"k=v k2=v2"`` of the case's parameters (only ``names`` when given)."""
    wanted = None if names is None else set(names)
    return " ".join(f"{key}={value}" for key, value in result.params
                    if wanted is None or key in wanted)
