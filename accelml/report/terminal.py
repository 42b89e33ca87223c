"""The parts of the terminal report that are not the comparison table: speedups, scaling, and
one run against another.

>>> speedup_text("sklearn", ())
'geometric-mean speedup against sklearn: no case has a reference case'
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelml.report import plots
from accelml.report.compare_runs import RunComparison
from accelml.report.speed import PHASES, EngineComparison, GeometricMeanSpeedup, worker_unit
from accelml.results.records import RunRecord


def speedup_text(reference: str | None, speedups: Sequence[GeometricMeanSpeedup]) -> str:
    """The geometric-mean speedup of each backend, device and phase against the reference."""
    if not reference:
        return "no reference backend: no speedups"
    if not speedups:
        return f"geometric-mean speedup against {reference}: no case has a reference case"
    lines = [(f"geometric-mean speedup against {reference} "
             "(reference median / case median; >1 is faster):")]
    for entry in speedups:
        lines.append(f"  {entry.backend:<12} {entry.device:<6} {entry.phase:<8} "
                     f"{plots.format_speedup(entry.value):>7}  over {entry.cases} case(s), "
                     f"range {entry.minimum:.2f}-{entry.maximum:.2f}")
    return "\n".join(lines)


def scaling_text(charts: Sequence[plots.ScalingChart]) -> str:
    """Speedup and efficiency over 1 worker of every data-parallel series (empty if none)."""
    lines = []
    for chart in charts:
        for series in chart.series:
            cells = [f"{p.workers} workers {plots.format_speedup(p.speedup)} "
                     f"(efficiency {p.efficiency:.0%})"
                     for p in series.points
                     if p.workers > 1 and p.speedup is not None and p.efficiency is not None]
            if cells:
                lines.append(f"  {chart.title} · {series.label}: " + ", ".join(cells))
    if not lines:
        return ""
    return "\n".join(["data-parallel scaling (epoch time over the 1-worker case):", *lines])


def engines_text(comparisons: Sequence[EngineComparison]) -> str:
    """Each cross-strategy pair's images/s per GPU, with the engines' ratio on 1 GPU (empty if
    none): a reader tells a strategy's overhead apart from its engine's."""
    if not comparisons:
        return ""
    units = {worker_unit(comparison.device) for comparison in comparisons}
    unit = units.pop() if len(units) == 1 else "worker"
    return "\n".join([f"speed per {unit} across strategies (images/s per {unit}; the "
                      f"1-{unit} ratio is the engines', what changes at N the strategies'):",
                      *(f"  {comparison.text()}" for comparison in comparisons)])


def against_text(run: RunRecord, against: RunComparison) -> str:
    """Each case's time ratio in the other run, the geometric means and the environment."""
    lines = [(f"against run {against.other.run_id} (ratio = other / this time; <1: other "
             "is faster):")]
    width = max([len(c.label) for c in against.cases] + [10])
    if not against.cases:
        lines.append("  no case in common (were they run from different specs?)")
    for case in against.cases:
        cells = []
        for phase in PHASES:
            value = case.ratio(phase)
            if value is not None:
                noise = " (within noise)" if case.is_distinct(phase) is False else ""
                cells.append(f"{phase} {value:.3g}{noise}")
        status = "" if case.this_status == case.other_status == "ok" else \
            f"  status {case.this_status} / {case.other_status}"
        env = "  (environment differs)" if case.environment_differs else ""
        lines.append(f"  {case.label:<{width}}  {', '.join(cells) or '-'}{status}{env}")
    for phase in PHASES:
        value = against.geometric_mean_ratio(phase)
        if math.isfinite(value):
            lines.append(f"  geometric mean {phase} ratio: {value:.3g}")
    if against.only_here:
        lines.append(f"  only in {run.run_id}: " + "; ".join(against.only_here))
    if against.only_there:
        lines.append(f"  only in {against.other.run_id}: " + "; ".join(against.only_there))
    if against.environment_differences:
        lines.append(f"  environments differ ({run.env_hash} vs {against.other.env_hash}):")
        for difference in against.environment_differences:
            mark = "" if difference.in_hash else " (not part of the hash)"
            lines.append(f"    {difference.field}: {difference.this} -> {difference.other}{mark}")
    else:
        lines.append(f"  same environment ({run.env_hash})")
    return "\n".join(lines)
