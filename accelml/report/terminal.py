"""The parts of the terminal report that are not the comparison table: speedups, scaling, and
one run against another.

>>> speedup_text("sklearn", ())
'geometric-mean speedup against sklearn: no case has a reference case'
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from accelml.report import plots
from accelml.report.against import RunComparison
from accelml.report.crossover import Crossover
from accelml.report.speed import PHASES, EngineComparison, GeometricMeanSpeedup, rank_unit
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
    """Speedup and efficiency over 1 rank of every data-parallel series (empty if none),
    and where the steps are known, what a step costs beyond the 1-rank step.

    >>> point = plots.ScalingPoint
    >>> chart = plots.ScalingChart("cnn on images", (plots.ScalingSeries("horovod", (
    ...     point(1, 0.465, 0.46, 0.47, 1.3e5, 1.0, 1.0, 0.000496),
    ...     point(4, 0.450, 0.44, 0.46, 1.3e5, 1.03, 0.26, 0.00192))),))
    >>> print(scaling_text([chart]).splitlines()[1].split("; ")[1])
    a step 1.92 ms against 496 µs, +1.42 ms of collective and host work)
    """
    lines = []
    for chart in charts:
        for series in chart.series:
            one = next((p for p in series.points if p.ranks == 1), None)
            cells = [f"{p.ranks} ranks {plots.format_speedup(p.speedup)} "
                     f"(efficiency {p.efficiency:.0%}{_step_beyond(p, one)})"
                     for p in series.points
                     if p.ranks > 1 and p.speedup is not None and p.efficiency is not None]
            if cells:
                lines.append(f"  {chart.title} · {series.label}: " + ", ".join(cells))
    if not lines:
        return ""
    return "\n".join(["data-parallel scaling (epoch time over the 1-rank case; a step: its "
                      "time at N ranks against 1):", *lines])


def _step_beyond(point: plots.ScalingPoint, one: plots.ScalingPoint | None) -> str:
    """'; a step 1.92 ms against 496 µs, +1.42 ms ...': measured per-step times, and what the
    N-rank step spends beyond the 1-rank one (the same work per rank, plus the gradient
    collective and the host work around it)."""
    if one is None or point.step_seconds is None or one.step_seconds is None:
        return ""
    beyond = point.step_seconds - one.step_seconds
    sign = "+" if beyond >= 0 else "-"
    return (f"; a step {plots.format_seconds(point.step_seconds)} against "
            f"{plots.format_seconds(one.step_seconds)}, {sign}"
            f"{plots.format_seconds(abs(beyond))} of collective and host work")


def _workers(count: int, device: str) -> str:
    unit = "CPU worker" if device == "cpu" else "GPU"
    return f"{count} {unit}{'s' if count != 1 else ''}"


def format_rows(rows: float) -> str:
    """A row count as people say it.

    >>> format_rows(40_000_000), format_rows(2_750), format_rows(12)
    ('40M', '2.75k', '12')
    """
    if rows >= 1e6:
        return f"{rows / 1e6:.3g}M"
    if rows >= 1e3:
        return f"{rows / 1e3:.3g}k"
    return f"{rows:.0f}"


def crossover_lines(crossover: Crossover) -> tuple[str, str, str]:
    """What was measured, whether and from where N workers pay, and the estimate's basis.

    >>> from accelml.report.crossover import solve
    >>> from accelml.results.records import BoostingRounds
    >>> found = solve(40_000_000, 4, BoostingRounds(500, 1.0, 0.053), BoostingRounds(500, 1.8, 0.02))
    >>> measured, verdict, basis = crossover_lines(found)
    >>> verdict
    '4 GPUs pay from ~3.59M rows'
    >>> for part in basis.split("; "):
    ...     print(part)
    estimated from 1 and 4 GPUs at 40M rows, 500 rounds
    model: a round = 9 ms + 1.1 ms per million rows per GPU, the same at 1 and 4 GPUs
    set-up as measured, growing with each GPU's rows at 1 GPU's measured cost per row
    """
    one, many = _workers(1, crossover.device), _workers(crossover.workers, crossover.device)
    group = " · ".join(part for part in (crossover.algorithm, crossover.backend, crossover.device)
                       if part)
    measured = (f"{group + ': ' if group else ''}per round {one} "
                f"{plots.format_seconds(crossover.per_round_one)}, {many} "
                f"{plots.format_seconds(crossover.per_round_many)} at "
                f"{format_rows(crossover.measured_rows)} rows; set-up "
                f"{plots.format_seconds(crossover.setup_one)} / "
                f"{plots.format_seconds(crossover.setup_many)}")
    if crossover.pays_from_rows == 0:
        verdict = f"{many} pay at every size"
    elif crossover.pays_from_rows is not None:
        verdict = f"{many} pay from ~{format_rows(crossover.pays_from_rows)} rows"
    elif crossover.pays_below_rows is not None:
        verdict = f"{many} pay only below ~{format_rows(crossover.pays_below_rows)} rows"
    else:
        verdict = f"{many} do not pay at any size under this model"
    unit = "GPU" if crossover.device != "cpu" else "worker"
    sizes = ", ".join(format_rows(rows) for rows in crossover.rows)
    basis = (f"estimated from 1 and {crossover.workers} {unit}s at {sizes} rows, "
             f"{crossover.rounds} rounds; model: a round = "
             f"{plots.format_seconds(crossover.floor_seconds)} + "
             f"{plots.format_seconds(crossover.seconds_per_row * 1e6)} per million rows per {unit}, "
             f"the same at 1 and {crossover.workers} {unit}s; set-up "
             + (f"as measured, growing with each {unit}'s rows at 1 {unit}'s measured cost per row"
                if len(crossover.rows) == 1 else "a line through the sizes"))
    return measured, verdict, basis


def crossover_text(crossovers: Sequence[Crossover]) -> str:
    """Each boosting scaling group's per-round costs and crossover (empty if none)."""
    if not crossovers:
        return ""
    lines = ["boosting on several workers: set-up and per-round cost (per round = (fit - setup) "
             "/ rounds), and from how many rows they pay (estimated):"]
    for crossover in crossovers:
        measured, verdict, basis = crossover_lines(crossover)
        lines += [f"  {measured}", f"    {verdict} ({basis})"]
    return "\n".join(lines)
def engines_text(comparisons: Sequence[EngineComparison]) -> str:
    """Each cross-strategy pair's images/s per GPU, with the engines' ratio on 1 GPU (empty if
    none): a reader tells a strategy's overhead apart from its engine's."""
    if not comparisons:
        return ""
    units = {rank_unit(comparison.device) for comparison in comparisons}
    unit = units.pop() if len(units) == 1 else "rank"
    return "\n".join([f"speed per {unit} across strategies (images/s per {unit}; the "
                      f"1-{unit} ratio is the engines', what changes at N the strategies'):",
                      *(f"  {comparison.text()}" for comparison in comparisons)])


def paths_text(paths: Sequence[tuple[str, str]], width: int | None = None) -> str:
    """How each training case's step ran, from (case label, recorded path) pairs (the path:
    capture, compiling, reduction, and where measured a step timed phase by phase), one entry
    a case, wrapped at ``width`` (None: one line each); empty if none.

    >>> paths_text([])
    ''
    >>> print(paths_text([("cnn x2 [horovod]", "CUDA graphs (auto)")]))
    how each training ran (its step's recorded path):
      cnn x2 [horovod]: CUDA graphs (auto)
    """
    if not paths:
        return ""
    lines = [f"  {label}: {path}" for label, path in paths]
    if width is not None:
        lines = [textwrap.fill(line, width, subsequent_indent="      ", break_on_hyphens=False)
                 for line in lines]
    return "\n".join(["how each training ran (its step's recorded path):", *lines])


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
