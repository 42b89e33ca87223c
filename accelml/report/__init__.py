"""Reports, built only from the results store (:mod:`accelml.results.store`).

- :mod:`accelml.report.speed`: speedup against a reference backend, scaling over workers.
- :mod:`accelml.report.table`: the comparison table (terminal text and JSON), with agreement
  of each case's predictions with its reference case.
- :mod:`accelml.report.repro`: the agreement matrix (run-to-run, cross-backend, -device, -scale).
- :mod:`accelml.report.render`: the full report (:func:`report`, :func:`load_report`): HTML,
  plots, CSV and JSON.

``report`` and ``load_report`` are importable from here; they are loaded on first use, so
``import accelml.report`` stays light (no plotting or templating libraries).
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_report", "report"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from accelml.report import render

        return getattr(render, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
