"""The time chart's labels stay on the chart whatever the repeats did."""

from __future__ import annotations

import statistics

from accelml.report.plots import Bar, TimeChart, figure_svg, time_figure


def _bar(label: str, samples: list[float], **kwargs) -> Bar:
    quartiles = statistics.quantiles(samples, n=4)
    return Bar(label=label, group="", median=statistics.median(samples), low=quartiles[0],
               high=quartiles[2], colour_key=label, samples=tuple(samples), **kwargs)


def test_a_repeat_far_past_the_whiskers_keeps_its_bar_labelled():
    # one slow repeat in five (a page fault, a neighbour's job) is past q3 and is not drawn
    reference = _bar("sklearn · cpu", [0.010, 0.0101, 0.0099, 0.0102, 0.0100], reference=True,
                     speedup=1.0)
    outlier = _bar("sklearnex · cpu", [0.005, 0.0051, 0.0049, 0.0050, 0.250], speedup=2.0,
                   noisy=True)
    svg = figure_svg(time_figure(TimeChart("kmeans", (("fit", (reference, outlier)),))))
    assert "reference" in svg
    assert "2.0× faster" in svg and "(noisy)" in svg

