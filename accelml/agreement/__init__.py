"""The reproducibility core: do two answers agree, and does ``check`` still pass?

One owner for agreement, below :mod:`accelml.report` (which only shows it):

- :mod:`~accelml.agreement.arrays`: how one output array compares with another's (identity,
  label agreement after matching cluster ids, differences after matching signs/rows);
- :mod:`~accelml.agreement.point`: the measure extension point (:class:`Measure`, found by
  module and by the ``accelml.measures`` entry points), with the built-in measures in
  :mod:`accelml.agreement.measures`, one module per family;
- :mod:`~accelml.agreement.matrix`: two results compared through every measure, and the
  agreement matrix of a run (computation only; :mod:`accelml.report.matrix_table` prints it);
- :mod:`~accelml.agreement.baseline`: the baseline file (``--baseline``), and
  :mod:`~accelml.agreement.check`: ``check``, where a case against its baseline entry is one
  more pair run through the same measures, gated by the measures' own tolerances.

A third party's measure imports its record types from here:

>>> from accelml.agreement import Measure, Reading
>>> Reading(0.5).value
0.5
"""

from __future__ import annotations

from accelml.agreement.point import (
    MEASURES,
    Aggregate,
    Bounds,
    Ideal,
    Measure,
    Outputs,
    Pair,
    Reading,
    Tolerance,
    measures,
)

__all__ = ["MEASURES", "Aggregate", "Bounds", "Ideal", "Measure", "Outputs", "Pair", "Reading",
           "Tolerance", "measures"]
