"""The report of one stored run, the API of ``python -m accelml report``: load it, write it.

Everything is read from the results store (:mod:`accelml.results.store`); nothing is
re-measured. The table is the one ``compare`` prints (:mod:`accelml.report.table`), the
speedups are :mod:`accelml.report.speed`'s and the agreement matrix is
:mod:`accelml.agreement.matrix`'s; a report adds on top (:class:`accelml.report.report_model.RunReport`):

* the geometric-mean speedup of each backend and device against the reference, per phase;
* the failed cases (how many, which, why) and planned cases without a result;
* ``against``: the same cases in another run (:mod:`accelml.report.against`);
* the figures (:mod:`accelml.report.figures`, drawn by :mod:`accelml.report.plots`), the
  CSV/JSON exports (:mod:`accelml.report.export`) and the self-contained HTML page
  (:mod:`accelml.report.html`).

The API equivalent of ``python -m accelml report RUN_ID --html out.html``::

    from accelml.report import report
    rep = report("latest", results_dir="accelml-results", html="out.html", plots_dir="plots/",
                 csv="table.csv", json="table.json", against=None)
    print(rep.text())
    rep.speedups            # geometric mean per backend/device and phase
    rep.failed              # the failed CaseResults

>>> import tempfile
>>> from accelml.results.store import ResultsStore
>>> load_report("latest", ResultsStore(tempfile.mkdtemp()).directory)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
accelml.errors.StoreError: no runs in ...results.sqlite yet: run `python -m accelml compare` first
"""

from __future__ import annotations

import os

from accelml.errors import AccelmlError
from accelml.report.against import compare_runs
from accelml.report.html import write_html
from accelml.report.report_model import RunReport
from accelml.report.runs import LATEST, open_store, resolve_run
from accelml.report.speed import geometric_mean_speedups
from accelml.report.table import build_rows

__all__ = ["LATEST", "RunReport", "load_report", "report"]


def load_report(run_id: str = LATEST, results_dir: str | os.PathLike[str] | None = None, *,
                reference: str | None = None, against: str | None = None,
                against_dir: str | os.PathLike[str] | None = None) -> RunReport:
    """Read a run (and optionally the run to compare it with) from the store into a report."""
    store = open_store(results_dir)
    run = resolve_run(store, run_id)
    results = store.case_results(run.run_id)
    backends = sorted({result.backend for result in results})
    if reference is not None and reference not in backends:
        raise AccelmlError(f"--reference {reference}: not a backend of run {run.run_id}; "
                           f"its backends: {', '.join(backends) or 'none (no stored case)'}")
    reference = reference or run.reference_backend
    rows = build_rows(store, results, reference)
    comparison, other_store = None, None
    if against is not None:
        other_store = store if against_dir is None else open_store(against_dir)
        other_run = resolve_run(other_store, against)
        if other_run.run_id == run.run_id and other_store.database == store.database:
            raise AccelmlError(f"--against {against}: that is run {run.run_id} itself")
        comparison = compare_runs(run, results, other_run,
                                  other_store.case_results(other_run.run_id),
                                  str(other_store.directory) if against_dir is not None else "")
    return RunReport(store, run, tuple(results), reference, tuple(rows),
                     geometric_mean_speedups(results, reference), comparison, other_store)


def report(run_id: str = LATEST, results_dir: str | os.PathLike[str] | None = None, *,
           reference: str | None = None, against: str | None = None,
           against_dir: str | os.PathLike[str] | None = None,
           html: str | os.PathLike[str] | None = None,
           plots_dir: str | os.PathLike[str] | None = None,
           plot_format: str = "png", csv: str | os.PathLike[str] | None = None,
           json: str | os.PathLike[str] | None = None) -> RunReport:
    """The API equivalent of ``python -m accelml report``: load the run, write what is asked."""
    result = load_report(run_id, results_dir, reference=reference, against=against,
                         against_dir=against_dir)
    if html is not None:
        write_html(result, html)
    if plots_dir is not None:
        result.write_plots(plots_dir, plot_format)
    if csv is not None:
        result.write_csv(csv)
    if json is not None:
        result.write_json(json)
    return result
