"""Reports, built only from the results store (:mod:`accelml.results.store`).

Layers, each importing only those below it:

- :mod:`~accelml.agreement.arrays`: how one output array compares with another's;
  :mod:`~accelml.agreement.point`: the measure extension point (:class:`Measure`), with the
  built-in measures in :mod:`accelml.agreement.measures`, one module per family.
- :mod:`~accelml.agreement.matrix`: comparisons of two results and the agreement matrix of a run
  (run-to-run, cross-backend, -device, -scale), every registered measure computed there.
- :mod:`~accelml.report.speed`: speedup against a reference backend, scaling over ranks;
  :mod:`~accelml.report.table`: the comparison table (terminal text and JSON), whose agreement
  column is repro's headline measure.
- :mod:`~accelml.agreement.baseline`: reproducibility baselines and ``check``.
- the full report: :mod:`~accelml.report.runs` (which run), :mod:`~accelml.report.environment`,
  :mod:`~accelml.report.labels`, :mod:`~accelml.report.against` (run vs run),
  :mod:`~accelml.report.export` (CSV/JSON), :mod:`~accelml.report.figures` (drawn by
  :mod:`~accelml.report.plots`), :mod:`~accelml.report.terminal`,
  :mod:`~accelml.report.report_model` (:class:`RunReport`), :mod:`~accelml.report.html` and
  :mod:`~accelml.report.render` (:func:`report`, :func:`load_report`).

Importing the package is light: matplotlib and Jinja2 are loaded when a figure or page is drawn.

>>> from accelml.report import load_report, report
>>> callable(load_report) and callable(report)
True
"""

from __future__ import annotations

from accelml.agreement.point import MEASURES, Measure
from accelml.report.render import load_report, report
from accelml.report.report_model import RunReport

__all__ = ["MEASURES", "Measure", "RunReport", "load_report", "report"]
