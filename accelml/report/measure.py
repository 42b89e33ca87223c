"""Where third-party measure plug-ins written before :mod:`accelml.agreement` import from:
the measure extension point now lives in :mod:`accelml.agreement.point` (import it from
:mod:`accelml.agreement`); these names stay for those plug-ins.

>>> from accelml.report.measure import Measure
>>> Measure.__module__
'accelml.agreement.point'
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
    ScoreDifference,
    Tolerance,
    measures,
)

__all__ = ["MEASURES", "Aggregate", "Bounds", "Ideal", "Measure", "Outputs", "Pair", "Reading",
           "ScoreDifference", "Tolerance", "measures"]
