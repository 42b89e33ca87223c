"""The figures of a report, drawn with matplotlib's object API (Agg; no pyplot, no global state).

Every figure is built from plain frozen dataclasses, so a figure never touches the store:

* :class:`TimeChart` -> :func:`time_figure`: per algorithm, fit / predict median time of each
  backend and device as horizontal bars, the spread of the repeats as error bars and the
  speedup against the reference written beside each bar.
* :class:`ScalingChart` -> :func:`scaling_figure`: the three plots of the data-parallel
  tutorials (epoch time, images/s and speedup against ranks, with the ideal lines) and the
  efficiency written at each point.
* :class:`HeatMap` -> :func:`heatmap_figure`: a matrix of values (e.g. label agreement) with
  the value written in each cell.
* :class:`RatioChart` -> :func:`ratio_figure`: one run against another, time ratio per case.

:func:`figure_svg` gives the text of an ``<svg>`` element to inline in HTML (text stays
text, escaped by matplotlib); :func:`save_figure` writes a PNG or SVG file.

>>> chart = TimeChart("kmeans", (("fit", (
...     Bar("sklearn · cpu", "", 0.50, 0.48, 0.52, 1.0, reference=True),
...     Bar("sklearnex · cpu", "", 0.10, 0.09, 0.12, 5.0))),))
>>> svg = figure_svg(time_figure(chart))
>>> svg.startswith("<svg") and "5.0×" in svg
True
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd")
REFERENCE_COLOUR = "#9a9a9a"
STYLE: dict[Any, Any] = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.fonttype": "none",      # text stays <text> (selectable, crisp), escaped by matplotlib
    "svg.hashsalt": "accelml",   # stable element ids: the same data gives the same file
    "figure.dpi": 100,
    "savefig.dpi": 150,
}
LABEL_LIMIT = 48
LEGEND_LIMIT = 90
"""Legend entries are named by what tells series apart only, so they may be longer than ticks."""


def plain(text: str, limit: int = LABEL_LIMIT) -> str:
    """Text as matplotlib should show it: no mathtext (``$`` escaped), long text shortened.

    >>> plain("a $x$ b")
    'a \\\\$x\\\\$ b'
    >>> plain("x" * 60, 10)
    'xxxxxxxxx…'
    """
    text = str(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("$", r"\$")


def format_speedup(speedup: float | None) -> str:
    """``'3.2×'`` (two significant figures below 10); empty when unknown.

    >>> format_speedup(3.24), format_speedup(0.5), format_speedup(12.7), format_speedup(None)
    ('3.2×', '0.50×', '13×', '')
    """
    if speedup is None or not math.isfinite(speedup):
        return ""
    if speedup >= 10:
        return f"{speedup:.0f}×"
    if speedup >= 1:
        return f"{speedup:.1f}×"
    return f"{speedup:.2f}×"


def speedup_phrase(speedup: float | None) -> str:
    """A speedup in words: ``'3.2× faster'``, ``'2.0× slower'``; empty when unknown.

    >>> speedup_phrase(3.24), speedup_phrase(0.5), speedup_phrase(None)
    ('3.2× faster', '2.0× slower', '')
    """
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return ""
    if speedup >= 1:
        return f"{format_speedup(speedup)} faster"
    return f"{format_speedup(1 / speedup)} slower"


def format_seconds(seconds: float) -> str:
    """Seconds with a unit that keeps 2-3 significant figures.

    >>> format_seconds(0.000512), format_seconds(0.0123), format_seconds(4.56), format_seconds(125)
    ('512 µs', '12.3 ms', '4.56 s', '125 s')
    """
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def time_unit(largest_seconds: float) -> tuple[str, float]:
    """The unit an axis of times up to ``largest_seconds`` reads best in, and its factor.

    >>> time_unit(2.5), time_unit(0.02), time_unit(0.0004)
    (('s', 1.0), ('ms', 1000.0), ('µs', 1000000.0))
    """
    if not math.isfinite(largest_seconds) or largest_seconds >= 1:
        return "s", 1.0
    if largest_seconds >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def relative_luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG 2 relative luminance of an sRGB colour with channels in [0, 1]."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def readable_text_colour(background: tuple[float, float, float]) -> str:
    """Black or white text, whichever contrasts more with ``background`` (WCAG contrast ratio).

    >>> readable_text_colour((0.0, 0.41, 0.22)), readable_text_colour((1.0, 1.0, 0.75))
    ('#ffffff', '#111111')
    """
    luminance = relative_luminance(background)
    against_white = 1.05 / (luminance + 0.05)
    against_black = (luminance + 0.05) / (relative_luminance((17 / 255,) * 3) + 0.05)
    return "#ffffff" if against_white >= against_black else "#111111"


def colour_for(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


# -- time bars ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One case's median time of one phase, its spread and its speedup against the reference."""

    label: str                 # "sklearnex · cpu"
    group: str                 # what else defines the case: dataset, params, ranks ("" if one)
    median: float
    low: float                 # spread shown as the error bar (q1 or minimum)
    high: float                # (q3 or maximum)
    speedup: float | None = None
    reference: bool = False
    noisy: bool = False
    colour_key: str = ""       # bars with the same key get the same colour (the backend)
    samples: tuple[float, ...] = ()   # every counted repeat: drawn as points when few


POINTS_BELOW = 5
"""A bar with fewer counted repeats than this shows each repeat as a point, not a spread."""


def _reach(bar: Bar) -> float:
    """Where a bar's drawing ends on the time axis: its whisker, or its farthest repeat when
    the repeats are drawn as points (the axis and the label follow what is drawn)."""
    drawn = bar.samples if 0 < len(bar.samples) < POINTS_BELOW else ()
    return max([bar.high, bar.median, *drawn])


@dataclass(frozen=True)
class TimeChart:
    """The bars of one algorithm, one panel per phase (``fit``, ``predict``)."""

    algorithm: str
    phases: tuple[tuple[str, tuple[Bar, ...]], ...]
    spread: str = "interquartile range of the repeats"


def _colours(keys: list[str], reference_keys: set[str]) -> dict[str, str]:
    colours: dict[str, str] = {}
    for key in keys:
        if key in colours:
            continue
        colours[key] = REFERENCE_COLOUR if key in reference_keys else colour_for(
            sum(1 for k in colours if k not in reference_keys))
    return colours


def time_figure(chart: TimeChart) -> Figure:
    """Horizontal bars of median time per backend/device, error bars, speedup text."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    phases = [(phase, bars) for phase, bars in chart.phases if bars]
    if not phases:
        raise ValueError(f"no timed phase for {chart.algorithm!r}")
    # One row per (group, label) across all phases, so the panels line up.
    rows: list[tuple[str, str]] = []
    for _, bars in phases:
        for bar in bars:
            if (bar.group, bar.label) not in rows:
                rows.append((bar.group, bar.label))
    groups = list(dict.fromkeys(group for group, _ in rows))
    show_groups = len(groups) > 1 or groups[0] != ""
    positions: dict[tuple[str, str], float] = {}
    tick_positions, tick_labels, header_positions = [], [], []
    y = 0.0
    for group in groups:
        if show_groups:
            header_positions.append((y, group))
            y += 0.9
        for row in rows:
            if row[0] == group:
                positions[row] = y
                tick_positions.append(y)
                tick_labels.append(plain(row[1]))
                y += 1.0
        y += 0.4
    all_bars = [bar for _, bars in phases for bar in bars]
    colours = _colours([bar.colour_key or bar.label for bar in all_bars],
                       {bar.colour_key or bar.label for bar in all_bars if bar.reference})

    with rc_context(STYLE):
        height = 1.5 + 0.42 * y
        figure = Figure(figsize=(11, max(2.6, height)), layout="constrained")
        axes = figure.subplots(1, len(phases), sharey=True, squeeze=False)[0]
        for ax, (phase, bars) in zip(axes, phases, strict=True):
            values = [b.median for b in bars if b.median > 0]
            logarithmic = bool(values) and max(values) / min(values) > 30
            unit, factor = time_unit(max(max(b.high, b.median) for b in bars))
            for bar in bars:
                key = bar.colour_key or bar.label
                position = positions[(bar.group, bar.label)]
                error = [[max(bar.median - bar.low, 0.0) * factor],
                         [max(bar.high - bar.median, 0.0) * factor]]
                ax.barh(position, bar.median * factor, height=0.7, color=colours[key],
                        edgecolor="#333333" if bar.reference else "none", linewidth=0.8,
                        hatch="//" if bar.noisy else None)
                if 0 < len(bar.samples) < POINTS_BELOW:
                    # a spread of 2-4 numbers says little: show the repeats themselves
                    ax.plot([sample * factor for sample in bar.samples], [position] * len(bar.samples),
                            linestyle="none", marker="o", markersize=4.5, markerfacecolor="#222222",
                            markeredgecolor="#ffffff", markeredgewidth=0.6,
                            gid=f"repeat-points-{len(bar.samples)}")
                else:
                    ax.errorbar(bar.median * factor, position, xerr=error, fmt="none",
                                ecolor="#222222", elinewidth=1.1, capsize=3)
                text = "reference" if bar.reference else speedup_phrase(bar.speedup)
                text = f"{format_seconds(bar.median)}" + (f" · {text}" if text else "")
                right = _reach(bar)
                if bar.noisy:
                    text += "  (noisy)"
                ax.annotate(text, xy=(right * factor, position),
                            xytext=(5, 0), annotation_clip=False,
                            textcoords="offset points", va="center", fontsize=9,
                            fontweight="normal" if bar.reference else "bold")
            if logarithmic:
                ax.set_xscale("log")
                low = min(min(b.low, b.median) for b in bars if b.median > 0)
                high = max(_reach(b) for b in bars)
                ax.set_xlim(low * factor / 2, high * factor * 12)
            else:
                ax.set_xlim(0, max(_reach(b) for b in bars) * factor * 1.45 or 1.0)
            ax.set_title(f"{plain(phase)} time")
            ax.set_xlabel(f"median time per call [{unit}]"
                          + (" (log scale)" if logarithmic else ""))
            ax.grid(axis="y", visible=False)
        first = axes[0]
        first.set_yticks(tick_positions, tick_labels)
        first.invert_yaxis()
        for position, group in header_positions:
            first.annotate(plain(group, 70), xy=(0, position), xycoords=("axes fraction", "data"),
                           xytext=(-4, 0), textcoords="offset points", ha="right", va="center",
                           fontweight="bold", fontsize=9, color="#333333")
        few = any(0 < len(bar.samples) < POINTS_BELOW for bar in all_bars)
        figure.suptitle(f"{plain(chart.algorithm, 80)}: median time per call "
                        f"(error bars: {chart.spread}"
                        + (f"; points: each repeat, where fewer than {POINTS_BELOW}" if few else "") + ")",
                        fontsize=11)
    return figure


# -- DL scaling ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingPoint:
    ranks: int
    epoch_median: float          # seconds per epoch, warm-up epochs left out
    epoch_low: float
    epoch_high: float
    images_per_second: float
    speedup: float | None        # against the series' 1-rank point
    efficiency: float | None     # speedup / ranks
    step_seconds: float | None = None   # epoch median / training steps an epoch


@dataclass(frozen=True)
class ScalingSeries:
    label: str                   # "keras · horovod · cpu"
    points: tuple[ScalingPoint, ...]


@dataclass(frozen=True)
class ScalingChart:
    title: str                   # "cnn on fashion_mnist"
    series: tuple[ScalingSeries, ...]


def scaling_figure(chart: ScalingChart) -> Figure:
    """Epoch time, images/s and speedup against the number of ranks (with ideal lines)."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    if not any(series.points for series in chart.series):
        raise ValueError(f"no scaling points for {chart.title!r}")
    ranks = sorted({p.ranks for s in chart.series for p in s.points})
    unit, factor = time_unit(max(max(p.epoch_high, p.epoch_median)
                                 for s in chart.series for p in s.points))
    with rc_context(STYLE):
        figure = Figure(figsize=(13, 4.2), layout="constrained")
        time_ax, rate_ax, speed_ax = figure.subplots(1, 3)
        for index, series in enumerate(chart.series):
            points = sorted(series.points, key=lambda p: p.ranks)
            x = [p.ranks for p in points]
            colour = colour_for(index)
            label = plain(series.label, LEGEND_LIMIT)
            time_ax.errorbar(
                x, [p.epoch_median * factor for p in points],
                yerr=[[max(p.epoch_median - p.epoch_low, 0.0) * factor for p in points],
                      [max(p.epoch_high - p.epoch_median, 0.0) * factor for p in points]],
                marker="o", color=colour, capsize=3, label=label)
            rate_ax.plot(x, [p.images_per_second for p in points], marker="o", color=colour,
                         label=label)
            base = next((p for p in points if p.ranks == 1), None)
            if base is not None and base.images_per_second > 0:
                rate_ax.plot(x, [base.images_per_second * w for w in x], linestyle="--",
                             color=colour, alpha=0.5, linewidth=1,
                             label=f"ideal ({label})" if len(chart.series) > 1 else "ideal")
            known = [p for p in points if p.speedup is not None]
            speed_ax.plot([p.ranks for p in known], [p.speedup for p in known], marker="o",
                          color=colour, label=label)
            for point in known:
                if point.efficiency is not None and point.ranks != 1:
                    speed_ax.annotate(f"{point.efficiency:.0%}", xy=(point.ranks, point.speedup),
                                      xytext=(0, -14), textcoords="offset points", ha="center",
                                      fontsize=8, color=colour)
        speed_ax.plot(ranks, ranks, linestyle="--", color="#555555", linewidth=1,
                      label="ideal (speedup = ranks)")
        for ax, title, ylabel in (
            (time_ax, "Epoch time", f"time per epoch [{unit}] (first epoch left out)"),
            (rate_ax, "Throughput", "images per second"),
            (speed_ax, "Speedup (efficiency at each point)", "speedup over 1 rank"),
        ):
            ax.set_title(title)
            ax.set_xlabel("ranks")
            ax.set_ylabel(ylabel)
            ax.set_xscale("log", base=2)
            ax.set_xticks(ranks, [str(w) for w in ranks])
            ax.minorticks_off()
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8, loc="best")
        top = max([max(ranks)] + [p.speedup for s in chart.series for p in s.points
                                    if p.speedup is not None])
        speed_ax.set_ylim(0, top * 1.15)
        figure.suptitle(f"Data-parallel scaling: {plain(chart.title, 80)}", fontsize=12,
                        fontweight="bold")
    return figure


# -- heat map -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HeatMap:
    """A matrix of values in [vmin, vmax]; ``None`` cells are left blank."""

    title: str
    row_labels: tuple[str, ...]
    column_labels: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    cell_text: tuple[tuple[str, ...], ...]
    colourbar_label: str
    vmin: float = 0.0
    vmax: float = 1.0
    higher_is_better: bool = True


def heatmap_figure(heatmap: HeatMap) -> Figure:
    """The matrix as coloured cells with each value written in its cell."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    rows, columns = len(heatmap.row_labels), len(heatmap.column_labels)
    if not rows or not columns:
        raise ValueError(f"empty heat map {heatmap.title!r}")
    matrix = np.array([[np.nan if v is None else float(v) for v in row] for row in heatmap.values],
                      dtype=float)
    with rc_context(STYLE):
        longest = max(len(plain(label, 64)) for label in heatmap.row_labels)
        figure = Figure(figsize=(1.6 + 0.075 * longest + 1.45 * columns,
                                 max(2.6, 1.5 + 0.45 * rows)), layout="constrained")
        ax = figure.subplots()
        cmap = "RdYlGn" if heatmap.higher_is_better else "RdYlGn_r"
        image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=heatmap.vmin,
                          vmax=heatmap.vmax, aspect="auto")
        colour_map, norm = image.get_cmap(), image.norm
        ax.set_xticks(range(columns), [plain(label, 28) for label in heatmap.column_labels])
        ax.xaxis.tick_top()
        ax.set_yticks(range(rows), [plain(label, 64) for label in heatmap.row_labels])
        ax.grid(False)
        for i in range(rows):
            for j in range(columns):
                text = heatmap.cell_text[i][j]
                if text:
                    value = matrix[i, j]
                    # dark cells get white text: the colour contrasting most with the cell's own
                    colour = "#555555" if value != value else readable_text_colour(
                        tuple(colour_map(norm(value))[:3]))
                    ax.text(j, i, plain(text, 20), ha="center", va="center", fontsize=8.5,
                            color=colour)
        figure.colorbar(image, ax=ax, label=plain(heatmap.colourbar_label), shrink=0.9)
        ax.set_title(plain(heatmap.title, 90), pad=12)
    return figure


# -- one run against another --------------------------------------------------------------


@dataclass(frozen=True)
class RatioChart:
    """Time of each case in run B divided by the same case in run A (below 1: B is faster)."""

    title: str
    labels: tuple[str, ...]
    ratios: tuple[float, ...]
    phase: str = "fit"


def ratio_figure(chart: RatioChart) -> Figure:
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    if not chart.labels:
        raise ValueError("no common cases to compare")
    with rc_context(STYLE):
        figure = Figure(figsize=(9, 1.4 + 0.36 * len(chart.labels)), layout="constrained")
        ax = figure.subplots()
        positions = range(len(chart.labels))
        colours = ["#55a868" if r < 1 else "#c44e52" for r in chart.ratios]
        ax.barh(list(positions), [math.log2(r) for r in chart.ratios], color=colours, height=0.6)
        ax.axvline(0, color="#333333", linewidth=1)
        for position, ratio in zip(positions, chart.ratios, strict=True):
            ax.annotate(f"{ratio:.2f}", xy=(math.log2(ratio), position),
                        xytext=(4 if ratio >= 1 else -4, 0), textcoords="offset points",
                        ha="left" if ratio >= 1 else "right", va="center", fontsize=8)
        ax.set_yticks(list(positions), [plain(label, 60) for label in chart.labels])
        ax.invert_yaxis()
        limit = max(1.0, max(abs(math.log2(r)) for r in chart.ratios) * 1.3)
        ax.set_xlim(-limit, limit)
        ticks = [t for t in range(-int(limit), int(limit) + 1)]
        ax.set_xticks(ticks, [f"{2.0 ** t:g}" for t in ticks])
        ax.set_xlabel("time ratio, other run / this run (log scale; below 1: other run faster)")
        figure.suptitle(plain(chart.title, 100), fontsize=11, fontweight="bold")
        ax.grid(axis="y", visible=False)
    return figure


# -- output -------------------------------------------------------------------------------


def figure_svg(figure: Figure) -> str:
    """The figure as an ``<svg>`` element to inline in an HTML page (XML prolog stripped)."""
    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context(STYLE):
        figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg"):].strip()


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write the figure as PNG or SVG (chosen by the file's suffix)."""
    from matplotlib import rc_context

    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"plot files are .png or .svg, not {path.suffix!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with rc_context(STYLE):
        figure.savefig(path, format=path.suffix.lower()[1:])
    return path
