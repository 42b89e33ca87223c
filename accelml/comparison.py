"""The Python API: :func:`compare` on in-memory data, and the :class:`Comparison` it returns
(also the view of any stored run)::

    import accelml
    res = accelml.compare("kmeans", ["sklearn", "sklearnex"], data=(X, None), repeats=5,
                          params={"n_clusters": 8, "random_state": 0})
    print(res.table())
    res.speedup(reference="sklearn")     # {"sklearnex/cpu": 3.1, ...}  (main phase, reference / case)
    res.agreement(reference="sklearn")   # {"sklearnex/cpu": Agreement(kind="labels", value=1.0)}
    print(res.agreement_matrix().format())   # run-to-run, cross-backend/device/scale agreement
    res.report(html="report.html")       # the full report (accelml.report.render.report)

:func:`compare` builds the spec document of its arguments (validated by
:func:`accelml.spec.load.parse_spec`, stored as TOML by :func:`accelml.spec.reference.toml_document`)
and runs it with :func:`accelml.orchestration.run_experiment`.

>>> import numpy as np
>>> X = np.random.default_rng(0).normal(size=(300, 3))
>>> res = compare("kmeans", ["sklearn"], data=(X, None), repeats=2,
...               params={"n_clusters": 3, "random_state": 0, "n_init": 1})
>>> [(r.backend, r.status, r.repeats) for r in res.results]
[('sklearn', 'ok', 2)]
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from accelml.agreement.matrix import agreement_matrix
from accelml.cases import INTERLEAVED
from accelml.errors import AccelmlError, SpecError
from accelml.executors.arguments import cluster_settings, progress_for
from accelml.orchestration import Progress, run_experiment
from accelml.report.frame import (
    FRAME_COLUMNS,
    SAMPLE_COLUMNS,
    case_records,
    frame,
    sample_records,
)
from accelml.report.layout import html_table
from accelml.report.matrix_table import ShownMatrix
from accelml.report.render import RunReport
from accelml.report.render import report as render_report
from accelml.report.speed import PHASES, main_phase, speedups
from accelml.report.table import (
    Agreement,
    Row,
    build_rows,
    fit_table,
    legend,
    render_text,
    to_json,
)
from accelml.results.records import CaseResult, RunRecord
from accelml.results.store import ResultsStore, array_digest
from accelml.spec.load import parse_spec
from accelml.spec.reference import toml_document

if TYPE_CHECKING:
    import pandas as pd




def _spec_value(value: object, where: str) -> object:
    """``value`` as a spec holds it (a list for a tuple, a float for a NumPy float); a value
    no spec can hold (not finite, or of another type) is a :class:`SpecError` naming ``where``."""
    if isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(f"{where} = {value!r}: only finite numbers can be compared")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_spec_value(item, where) for item in value]
    raise SpecError(f"{where} = {value!r}: expected a number, string, boolean or list of them "
                    "(leave a parameter out to get its default)")


def _save_data(directory: Path, X: ArrayLike, y: ArrayLike | None) -> str:
    """Keep the caller's arrays as an ``.npz`` file (named by their digests) for the cases."""
    features = np.asarray(X)
    labels = None if y is None else np.asarray(y)
    digest = array_digest(features)[:16] + ("" if labels is None else array_digest(labels)[:16])
    path = directory / "inputs" / f"{digest}.npz"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.npz")
        arrays = {"X": features} if labels is None else {"X": features, "y": labels}
        np.savez(partial, allow_pickle=False, **arrays)
        partial.replace(path)
    return str(path)


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare` (or of any stored run): table, speedups, agreement."""

    store: ResultsStore
    run: RunRecord
    results: tuple[CaseResult, ...] = field(default=())
    removal: Callable[[], object] | None = field(default=None, repr=False, compare=False)
    """Removes a temporary store (:func:`compare` without ``results_dir``): called by
    :meth:`close`, else once nothing refers to the store, else at the interpreter's exit."""

    def close(self) -> None:
        """Remove the temporary store :func:`compare` made (the caller's data copied into
        it, the SQLite file, the arrays); a store in ``results_dir`` or one kept with
        ``keep=True`` stays. Also what leaving a ``with`` block does."""
        if self.removal is not None:
            self.removal()

    def __enter__(self) -> Comparison:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @classmethod
    def from_store(cls, store: ResultsStore, run_id: str) -> Comparison:
        run = store.get_run(run_id)
        return cls(store, run, tuple(store.case_results(run.run_id)))

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        return tuple(r for r in self.results if not r.ok)

    def _label(self, result: CaseResult) -> str:
        label = f"{result.backend}/{result.device}"
        if result.ranks != 1:
            label += f"/x{result.ranks}"
        if len({r.dataset for r in self.results}) > 1:
            label += f"/{result.dataset}"
        if len({r.params for r in self.results}) > 1 and result.params:
            label += "/" + ",".join(f"{k}={v}" for k, v in result.params)
        return label

    def _reference(self, reference: str | None) -> str:
        reference = reference or self.run.reference_backend or self.results[0].backend
        if reference not in {r.backend for r in self.results}:
            raise AccelmlError(f"reference backend {reference!r} is not in this comparison")
        return reference

    def rows(self, reference: str | None = None) -> list[Row]:
        return build_rows(self.store, self.results, self._reference(reference))

    def table(self, reference: str | None = None, width: int | None = None) -> str:
        """The comparison table as text, at most ``width`` wide (None: its natural width)."""
        return render_text(self.rows(reference), title=f"run {self.run_id}", width=width)

    def speedup(self, reference: str | None = None, phase: str | None = None) -> dict[str, float]:
        """label -> reference median time / this case's median time (2.0: twice as fast), for
        ``phase`` or, by default, each case's main phase (predict for neighbours, else fit)."""
        if phase is not None and phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; phases: {', '.join(PHASES)}")
        found = {name: speedups(self.results, self._reference(reference), name)
                 for name in PHASES}
        return {self._label(r): found[phase or main_phase(r)][r.case_id].value
                for r in self.results if r.case_id in found[phase or main_phase(r)]}

    def agreement(self, reference: str | None = None) -> dict[str, Agreement]:
        """label -> :class:`accelml.report.table.Agreement` with the reference case: one
        figure per case (the table's agreement column). For every measure (run-to-run,
        cross-backend, cross-device, cross-scale) use :meth:`agreement_matrix`."""
        return {self._label(r): row.agreement
                for r, row in zip(self.results, self.rows(reference), strict=True)
                if row.agreement is not None}

    def agreement_matrix(self, reference: str | None = None, *,
                         against: Comparison | tuple[ResultsStore, str] | None = None
                         ) -> ShownMatrix:
        """The run's :class:`accelml.agreement.matrix.AgreementMatrix` (``.format()``,
        ``.rows()``, ``.to_dict()``); ``against`` (another Comparison, or ``(store,
        run_id)``) adds the cross-run comparison, case by case id."""
        if isinstance(against, Comparison):
            against = (against.store, against.run_id)
        return ShownMatrix.of(agreement_matrix(
            self.store, self.run_id, self._reference(reference) if self.results else reference,
            against=against, deterministic=self.run.deterministic))

    def report(self, **options: Any) -> RunReport:
        """The full report of this run (:func:`accelml.report.render.report`): ``html=``,
        ``plots_dir=``, ``csv=``, ``json=`` write files; ``reference=``, ``against=``."""
        return render_report(self.run_id, self.store.directory, **options)

    def to_json(self, reference: str | None = None) -> dict[str, Any]:
        return to_json(self.run, list(self.results), self.rows(reference))

    def to_frame(self, reference: str | None = None, *, samples: bool = False) -> pd.DataFrame:
        """The comparison as a tidy pandas DataFrame: one row per case with units in the
        column names (``fit_median_s``, ``speedup``, ``peak_host_memory_bytes``;
        :data:`accelml.report.frame.FRAME_COLUMNS`), or with ``samples=True`` one row per
        timed repeat (``phase``, ``repeat``, ``seconds``, ``warmup``;
        :data:`accelml.report.frame.SAMPLE_COLUMNS`)."""
        if samples:
            return frame((record for result in self.results
                          for record in sample_records(result, self.run)), SAMPLE_COLUMNS)
        return frame(case_records(self.run, self.rows(reference), self.results), FRAME_COLUMNS)

    def _repr_html_(self) -> str:
        """The comparison table in a notebook, at its natural width."""
        rows = self.rows()
        return html_table(fit_table(rows), f"{self.run.spec_name}: run {self.run_id}",
                          legend(rows).splitlines())


def compare(
    algorithm: str | Sequence[str],
    backends: Sequence[str],
    data: tuple[ArrayLike, ArrayLike | None],
    *,
    devices: Sequence[str] = ("cpu",),
    params: Mapping[str, object] | None = None,
    repeats: int | tuple[int, int] = 5,
    warmup: int = 1,
    target: float = 0.05,
    reference: str | None = None,
    time_limit: float = 600.0,
    threads: int | None = None,
    results_dir: str | Path | None = None,
    name: str = "compare",
    deterministic: bool = False,
    cluster: str | None = None,
    jobs: int | None = None,
    resources: Mapping[str, object] | None = None,
    progress: Progress | None = None,
    keep: bool = False,
    measurement: str = INTERLEAVED,
) -> Comparison:
    """Compare ``algorithm`` on several backends on in-memory ``data = (X, y)`` (y may be None).

    ``repeats``: a fixed count, or ``(min, max)`` for adaptive repeats that stop once the
    median's confidence interval is within ``target`` (relative). Each case runs in its own
    process; results go to ``results_dir``, by default to a new temporary directory (mode
    0700, holding a copy of ``data``) that is removed by ``close()``, at the end of a ``with``
    block, once the comparison is no longer referred to, or at the interpreter's exit,
    whichever comes first; ``keep=True`` keeps it (``res.store.directory`` says where).
    A comparison that raises leaves no temporary directory behind.
    ``deterministic=True`` runs in deterministic mode (see :func:`run_experiment`).
    ``cluster`` ("local", "slurm", "pbs" or a scheduler plug-in's name), ``jobs`` (cases at once) and ``resources`` (per
    worker job: ``{"cores": 4, "gpus": 1, "partition": "gpu", "walltime": "01:00:00"}``)
    choose where cases run, over accelml's cluster config, as ``--cluster``, ``--jobs`` and
    the resource flags do (:func:`accelml.executors.arguments.cluster_settings`); on a
    cluster, job and worker counts are printed to stderr unless ``progress`` is given.
    ``measurement``: ``"interleaved"`` (the reference backend's case and each case compared
    with it take timed rounds in turn, the speed-up from the paired rounds) or ``"isolated"``.
    """
    algorithms = [algorithm] if isinstance(algorithm, str) else list(algorithm)
    if isinstance(backends, str):
        backends = [backends]
    temporary = results_dir is None
    directory = Path(results_dir) if results_dir is not None else Path(
        tempfile.mkdtemp(prefix="accelml-compare-"))
    try:
        store = ResultsStore(directory)
        X, y = data
        dataset: dict[str, object] = {"source": "file", "path": _save_data(directory, X, y)}
        if y is None:
            dataset["task"] = "clustering"
        case: dict[str, object] = {"algorithm": _spec_value(algorithms, "algorithm"),
                                   "backend": _spec_value(list(backends), "backends"),
                                   "device": _spec_value(list(devices), "devices"),
                                   "dataset": "data"}
        if params:
            case["params"] = {key: _spec_value(value, f"params.{key}")
                              for key, value in params.items() if value is not None}
        document: dict[str, object] = {
            "name": _spec_value(name, "name"),
            "reference": _spec_value(reference or backends[0], "reference"),
            "warmup": int(warmup), "time_limit": float(time_limit),
            "measurement": _spec_value(measurement, "measurement"),
            "repeats": int(repeats) if isinstance(repeats, int) else {
                "min": int(repeats[0]), "max": int(repeats[1]), "target": float(target)},
        }
        if threads is not None:
            document["threads"] = int(threads)
        document["datasets"] = {"data": dataset}
        document["cases"] = [case]
        experiment = parse_spec(document, f"<compare {name}>", directory, toml_document(document))
        settings = cluster_settings(cluster, jobs, resources=resources)
        run = run_experiment(experiment, store, settings=settings, progress=progress_for(settings, progress),
                             deterministic=deterministic)
    except BaseException:
        if temporary and not keep:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    comparison = Comparison.from_store(store, run.run_id)
    if not temporary or keep:
        return comparison
    removal = weakref.finalize(store, shutil.rmtree, str(directory), True)
    return dataclasses.replace(comparison, removal=removal)
