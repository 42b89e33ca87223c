"""One run against another (another machine, or before/after an upgrade): the time ratio of
each case both have, and the environment fields that differ.

Cases are paired by case id, else by what defines them (algorithm, backend, device,
ranks, strategy, data set, parameters). ``ratio = other median / this median``, so below 1
the other run is faster; a ratio whose two medians' confidence intervals overlap is within noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from accelml.cases import canonical_json
from accelml.report.environment import EnvironmentDifference, environment_differences
from accelml.report.speed import PHASES, geometric_mean
from accelml.results.records import CaseResult, RunRecord


@dataclass(frozen=True)
class CaseRatio:
    """One case in both runs: ``ratios[phase] = other median / this median`` (<1: other faster)."""

    label: str
    case_id: str
    other_case_id: str
    this_status: str
    other_status: str
    this_medians: tuple[tuple[str, float], ...]
    other_medians: tuple[tuple[str, float], ...]
    ratios: tuple[tuple[str, float], ...]
    this_env_hash: str | None
    other_env_hash: str | None
    distinct: tuple[tuple[str, bool | None], ...] = ()   # the medians' intervals do not overlap

    def ratio(self, phase: str) -> float | None:
        return dict(self.ratios).get(phase)

    def is_distinct(self, phase: str) -> bool | None:
        """True when the two medians' confidence intervals do not overlap (None if unknown)."""
        return dict(self.distinct).get(phase)

    @property
    def environment_differs(self) -> bool:
        return self.this_env_hash != self.other_env_hash

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "case_id": self.case_id, "other_case_id": self.other_case_id,
                "this_status": self.this_status, "other_status": self.other_status,
                "this_medians": dict(self.this_medians), "other_medians": dict(self.other_medians),
                "ratios": dict(self.ratios), "distinct": dict(self.distinct),
                "this_env_hash": self.this_env_hash,
                "other_env_hash": self.other_env_hash}


@dataclass(frozen=True)
class RunComparison:
    """This run against another one: the ratio of each common case and how environments differ."""

    this: RunRecord
    other: RunRecord
    cases: tuple[CaseRatio, ...]
    only_here: tuple[str, ...]          # labels of cases the other run lacks
    only_there: tuple[str, ...]
    environment_differences: tuple[EnvironmentDifference, ...]
    other_results_dir: str = ""

    @property
    def environments_differ(self) -> bool:
        return bool(self.environment_differences) or any(c.environment_differs for c in self.cases)

    def geometric_mean_ratio(self, phase: str) -> float:
        return geometric_mean(ratio for c in self.cases if (ratio := c.ratio(phase)) is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "this_run": self.this.run_id, "other_run": self.other.run_id,
            "other_results_dir": self.other_results_dir,
            "this_env_hash": self.this.env_hash, "other_env_hash": self.other.env_hash,
            "environment_differences": [d.to_dict() for d in self.environment_differences],
            "cases": [c.to_dict() for c in self.cases],
            "geometric_mean_ratio": {phase: self.geometric_mean_ratio(phase)
                                     for phase in PHASES},
            "only_here": list(self.only_here), "only_there": list(self.only_there),
        }


def _identity(result: CaseResult) -> str:
    return canonical_json([result.algorithm, result.backend, result.device, result.ranks,
                           result.strategy, result.dataset, dict(result.params)])


def compare_runs(this_run: RunRecord, these: list[CaseResult], other_run: RunRecord,
                 others: list[CaseResult], other_results_dir: str = "") -> RunComparison:
    """Pair the cases of two runs (by case id, else by what defines them) and take time ratios."""
    by_id = {r.case_id: r for r in others}
    by_identity = {_identity(r): r for r in others}
    paired, used = [], set()
    for result in these:
        match = by_id.get(result.case_id) or by_identity.get(_identity(result))
        if match is None or match.case_id in used:
            continue
        used.add(match.case_id)
        mine, theirs, ratios, distinct = [], [], [], []
        for phase in PHASES:
            a, b = result.timing(phase), match.timing(phase)
            if a is not None and result.ok:
                mine.append((phase, a.median))
            if b is not None and match.ok:
                theirs.append((phase, b.median))
            if a is not None and b is not None and result.ok and match.ok and a.median > 0:
                ratios.append((phase, b.median / a.median))
                bounds = (a.ci_low, a.ci_high, b.ci_low, b.ci_high)
                known = all(math.isfinite(x) for x in bounds) and min(a.count, b.count) > 1
                distinct.append((phase, (b.ci_high < a.ci_low or a.ci_high < b.ci_low)
                                 if known else None))
        paired.append(CaseRatio(result.label, result.case_id, match.case_id,
                                _status(result), _status(match), tuple(mine), tuple(theirs),
                                tuple(ratios), result.env_hash, match.env_hash, tuple(distinct)))
    paired_ids = {c.case_id for c in paired}
    return RunComparison(
        this=this_run, other=other_run, cases=tuple(paired),
        only_here=tuple(r.label for r in these if r.case_id not in paired_ids),
        only_there=tuple(r.label for r in others if r.case_id not in used),
        environment_differences=environment_differences(this_run.environment,
                                                        other_run.environment),
        other_results_dir=other_results_dir)


def _status(result: CaseResult) -> str:
    return "ok" if result.ok else f"failed ({result.failure.value})"
