"""The figures of a report, as plain chart records (:mod:`accelml.report.plots` draws them).

* :func:`time_charts`: one chart per algorithm, fit and predict bars of each backend/device;
* :func:`scaling_charts`: one chart per model and data set, a series per backend/device/strategy
  over ranks (epoch time, throughput, speedup and efficiency against 1 rank);
* :func:`agreement_heatmap`: the agreement matrix, a row per case and a column per kind of
  comparison; each cell is the comparison's headline measure (:mod:`accelml.agreement.point`);
* :func:`ratio_chart`: one run against another, the time ratio of each case.

:func:`report_figures` lists them in page order, each with a file-safe name, not yet drawn.

>>> slug("<script>alert(1)</script>"), slug("k-means on digits")
('script-alert-1-script', 'k-means-on-digits')
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from accelml.agreement.matrix import AgreementMatrix, PairAgreement, RunToRun
from accelml.cases import canonical_json, case_label
from accelml.errors import AccelmlError
from accelml.report import plots
from accelml.report.against import RunComparison
from accelml.report.labels import params_text, varying_params
from accelml.report.speed import PHASES, scaling, speedups
from accelml.results.records import CaseResult, RunRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class NamedFigure:
    """A figure of the report: file-safe name, section, title, caption, and how to draw it."""

    name: str
    section: str                  # "time", "scaling", "agreement", "against"
    title: str
    caption: str
    draw: Callable[[], Figure] = field(repr=False, compare=False)


def slug(text: str) -> str:
    """A file-name-safe version of a user string."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-.")[:60] or "x"


def _variant(result: CaseResult, varying: list[str], names: tuple[str, ...]) -> str:
    parts = []
    if "dataset" in varying:
        parts.append(result.dataset)
    if "params" in varying:
        parts.append(params_text(result, names) or "default params")
    if "ranks" in varying:
        parts.append(f"{result.ranks} rank(s)")
    return ", ".join(parts)


def time_charts(results: Sequence[CaseResult], reference: str | None) -> list[plots.TimeChart]:
    """One chart per algorithm: fit and predict bars of each backend/device."""
    timed = [r for r in results
             if r.ok and (r.timing("fit") is not None or r.timing("predict") is not None)]
    found = {phase: speedups(results, reference, phase) if reference else {}
             for phase in ("fit", "predict")}
    charts = []
    for algorithm in dict.fromkeys(r.algorithm for r in timed):
        cases = [r for r in timed if r.algorithm == algorithm]
        varying = [name for name, values in (("dataset", [r.dataset for r in cases]),
                                             ("params", [r.params for r in cases]),
                                             ("ranks", [r.ranks for r in cases]))
                   if len({repr(value) for value in values}) > 1]
        names = varying_params(cases)
        datasets = sorted({r.dataset for r in cases})
        title = algorithm + (f" on {datasets[0]}" if len(datasets) == 1 else "")
        phases = []
        for phase in ("fit", "predict"):
            bars = []
            for result in cases:
                timing = result.timing(phase)
                if timing is None:
                    continue
                value = found[phase].get(result.case_id)
                bars.append(plots.Bar(
                    label=f"{result.backend} · {result.device}"
                          + (f" ×{result.ranks}" if result.ranks != 1 else ""),
                    group=_variant(result, varying, names), median=timing.median,
                    low=timing.q1, high=timing.q3,
                    speedup=None if value is None else value.value,
                    reference=value is not None and value.reference_case_id == result.case_id,
                    noisy=timing.noisy, colour_key=result.backend, samples=tuple(timing.samples)))
            phases.append((phase, tuple(bars)))
        charts.append(plots.TimeChart(title, tuple(phases)))
    return charts


def _scaling_points(cases: list[CaseResult]) -> tuple[plots.ScalingPoint, ...]:
    """The points of one series; speedup and efficiency against the series' own 1-rank case.

    The values are :func:`accelml.report.speed.scaling`'s (t(1) / t(N), and that over N;
    from the paired epochs of cases that took them in turn); the baseline is the 1-rank
    case of the same strategy when the run has one, so each curve starts at 1 and agrees
    with the epoch times drawn beside it.
    """
    cases = sorted(cases, key=lambda r: r.ranks)
    found = scaling(cases) if cases[0].ranks == 1 else {}
    points = []
    for result in cases:
        timing = result.timing("epoch")
        if timing is None:
            continue
        value = found.get(result.case_id)
        points.append(plots.ScalingPoint(
            result.ranks, timing.median, timing.q1, timing.q3,
            result.dl.images_per_second if result.dl is not None else math.nan,
            None if value is None else value.speedup, None if value is None else value.efficiency,
            _step_seconds(result, timing.median)))
    return tuple(points)


def _step_seconds(result: CaseResult, epoch_seconds: float) -> float | None:
    """The time of one training step: the epoch's median over its steps (an epoch's images,
    ``images_per_second`` times its seconds, in global batches of ``per_rank_batch_size x
    ranks`` images)."""
    dl = result.dl
    if dl is None or dl.global_batch_size < 1 or not math.isfinite(dl.images_per_second):
        return None
    steady = [epoch.seconds for epoch in dl.epochs[dl.warmup_epochs:]]
    if not steady:
        return None
    steps = round(dl.images_per_second * sum(steady) / len(steady) / dl.global_batch_size)
    return epoch_seconds / steps if steps > 0 else None


def scaling_charts(results: Sequence[CaseResult]) -> list[plots.ScalingChart]:
    """One chart per model and dataset: a series per backend/device/strategy over ranks."""
    trained = [r for r in results if r.ok and r.timing("epoch") is not None]
    groups: dict[tuple[str, str, str, str, str], list[CaseResult]] = {}
    for result in trained:
        groups.setdefault((result.algorithm, result.dataset, result.backend, result.device,
                           canonical_json(dict(result.params))), []).append(result)
    found: dict[tuple[str, str], list[tuple[str, str | None, list[CaseResult]]]] = {}
    for (algorithm, dataset, backend, device, _), members in groups.items():
        single = [r for r in members if r.ranks == 1]
        strategies = list(dict.fromkeys(r.strategy for r in members if r.ranks > 1))
        for strategy in strategies or [None]:
            points = [r for r in members if r.ranks > 1 and r.strategy == strategy]
            base = [r for r in single if r.strategy == strategy] or single
            series_cases = base[:1] + points
            if len({r.ranks for r in series_cases}) >= 2:
                found.setdefault((algorithm, dataset), []).append(
                    (f"{backend} · {device}", strategy, series_cases))
    charts: dict[tuple[str, str], list[plots.ScalingSeries]] = {}
    for key, series_list in found.items():
        # Name a series by what tells it apart only: backend/device, strategy and the
        # parameters whose values differ between the series (the chart's title says the rest).
        names = varying_params(cases[0] for _, _, cases in series_list)
        parts = [(label, strategy or "", params_text(cases[0], names)) for label, strategy, cases in series_list]
        differ = [len({part[index] for part in parts}) > 1 for index in range(3)]
        if not any(differ):      # one series: say what it is (its parameters are in the title's run)
            differ = [True, True, False]
        for (_, _, cases), named in zip(series_list, parts, strict=True):
            shown = [text for text, keep in zip(named, differ, strict=True) if keep and text]
            charts.setdefault(key, []).append(plots.ScalingSeries(" · ".join(shown), _scaling_points(cases)))
    return [plots.ScalingChart(f"{algorithm} on {dataset}", tuple(series))
            for (algorithm, dataset), series in charts.items()]


def _run_to_run_cell(entry: RunToRun) -> tuple[float | None, str]:
    if entry.identical is None:
        return None, "not repeated" if entry.repeats < 2 else "–"
    if entry.identical:
        return 1.0, f"identical ({entry.repeats}×)"
    text = f"{entry.distinct} of {entry.repeats} differ"
    return 0.0 if entry.unexpected else 0.5, text + (" !" if entry.unexpected else "")


def _comparison_cell(comparison: PairAgreement) -> tuple[float | None, str]:
    if comparison.bitwise_identical:
        return 1.0, "identical"
    found = comparison.headline
    if found is None:
        return None, "n/a"
    measure, reading = found
    mark = " !" if comparison.unexpected else ""
    return measure.ideal.closeness(reading.value), measure.headline_text(reading) + mark


def agreement_heatmap(results: Sequence[CaseResult], matrix: AgreementMatrix,
                      reference: str | None) -> plots.HeatMap | None:
    """The agreement matrix as a heat map: a row per case, a column per kind of comparison."""
    ok = [r for r in results if r.ok]
    if not ok:
        return None
    kinds = ["run-to-run"]
    entries: dict[tuple[str, str], tuple[float | None, str]] = {}
    for entry in matrix.run_to_run:
        entries[(entry.case.case_id, "run-to-run")] = _run_to_run_cell(entry)
    for kind, comparisons in (("cross-backend", matrix.cross_backend),
                              ("cross-device", matrix.cross_device),
                              ("cross-scale", matrix.cross_scale),
                              ("cross-strategy", matrix.cross_strategy),
                              ("cross-run", matrix.cross_run)):
        if not comparisons:
            continue
        kinds.append(kind)
        for comparison in comparisons:
            if kind != "cross-run":
                entries.setdefault((comparison.a.case_id, kind), (None, "reference"))
            entries[(comparison.b.case_id if kind != "cross-run" else comparison.a.case_id,
                     kind)] = _comparison_cell(comparison)
    labels, values, texts = [], [], []
    names = varying_params(ok)   # as the rest of the page: parameters only where cases differ
    for result in ok:
        labels.append(case_label(result, result.dataset, params=names))
        cells = [entries.get((result.case_id, kind), (None, "–")) for kind in kinds]
        values.append(tuple(value for value, _ in cells))
        texts.append(tuple(text for _, text in cells))
    return plots.HeatMap(
        title="Agreement" + (f" (reference backend: {reference})" if reference else ""),
        row_labels=tuple(labels), column_labels=tuple(kinds), values=tuple(values),
        cell_text=tuple(texts), colourbar_label="agreement (1 = identical)", vmin=0.9, vmax=1.0)


def ratio_chart(run: RunRecord, against: RunComparison | None, phase: str
                ) -> plots.RatioChart | None:
    """The time ratio of each case of two runs for one phase (None without ``against``)."""
    if against is None:
        return None
    ratios = [(case.label, ratio) for case in against.cases
              if (ratio := case.ratio(phase)) is not None]
    if not ratios:
        return None
    return plots.RatioChart(
        f"{phase} time, run {against.other.run_id} / run {run.run_id}",
        tuple(label for label, _ in ratios), tuple(ratio for _, ratio in ratios), phase)


def report_figures(run: RunRecord, results: Sequence[CaseResult], reference: str | None,
                   against: RunComparison | None, matrix: AgreementMatrix | None
                   ) -> list[NamedFigure]:
    """Every figure of a report, in page order, not yet drawn (no heat map without ``matrix``)."""
    figures: list[NamedFigure] = []
    names: set[str] = set()

    def add(name: str, section: str, title: str, caption: str, draw: Callable[[], Figure]) -> None:
        unique, index = slug(name), 2
        while unique in names:
            unique, index = f"{slug(name)}-{index}", index + 1
        names.add(unique)
        figures.append(NamedFigure(unique, section, title, caption, draw))

    for time_chart in time_charts(results, reference):
        add(f"time-{time_chart.algorithm}", "time", time_chart.algorithm,
            "Median time per call of each backend and device; error bars: interquartile "
            "range of the counted repeats (warm-up excluded); the figure beside each bar is "
            "the speedup against the reference backend (hatched: noisy).",
            partial(plots.time_figure, time_chart))
    for scaling_chart in scaling_charts(results):
        add(f"scaling-{scaling_chart.title}", "scaling", scaling_chart.title,
            "Epoch time (first epoch left out, error bars: interquartile range of the "
            "epochs), throughput in images per second and speedup over 1 rank; dashed: "
            "ideal linear scaling; percentages: parallel efficiency (speedup / ranks).",
            partial(plots.scaling_figure, scaling_chart))
    heatmap = None if matrix is None else agreement_heatmap(results, matrix, reference)
    if heatmap is not None:
        add("agreement", "agreement", "Agreement matrix",
            "Each row is a case; each column a kind of comparison. Run-to-run: were the "
            "counted repeats bitwise identical. Cross-backend / device / scale: the case "
            "against its reference case, by its headline measure (label agreement for labels, "
            "1 − max |Δ| for continuous outputs, 1 − |Δ accuracy| for deep learning). "
            "Red: below 90% or not reproducible.",
            partial(plots.heatmap_figure, heatmap))
    for phase in PHASES:
        chart = ratio_chart(run, against, phase)
        if chart is not None:
            add(f"against-{phase}", "against", chart.title,
                "Time ratio of each case, other run / this run, on a log scale: bars to the "
                "left (green) are faster in the other run.",
                partial(plots.ratio_figure, chart))
    return figures


def write_plots(figures: Sequence[NamedFigure], directory: str | os.PathLike[str],
                fmt: str = "png") -> list[Path]:
    """Write every figure as ``<name>.<fmt>`` (png or svg) into ``directory``."""
    if fmt not in ("png", "svg"):
        raise AccelmlError(f"plot format {fmt!r}: expected png or svg")
    return [plots.save_figure(figure.draw(), Path(directory) / f"{figure.name}.{fmt}")
            for figure in figures]
