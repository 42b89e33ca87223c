"""The report of one stored run: terminal text, CSV/JSON of the table, plots, HTML, run vs run.

Everything is read from the results store (:mod:`accelml.results.store`); nothing is
re-measured. The table is the one ``compare`` prints (:mod:`accelml.report.table`), the
speedups are :mod:`accelml.report.speed`'s and the agreement matrix is
:mod:`accelml.report.repro`'s; this module adds what a report needs on top:

* the geometric-mean speedup of each backend and device against the reference, per phase;
* the failed cases (how many, which, why) and planned cases without a result;
* ``against``: the same cases in another run (another machine, or before/after an upgrade),
  the time ratio of each case and the environment fields that differ;
* the figures (:mod:`accelml.report.plots`) and the self-contained HTML page
  (:mod:`accelml.report.html`).

The API equivalent of ``python -m accelml report RUN_ID --html out.html``::

    from accelml.report.render import report
    rep = report("latest", results_dir="accelml-results", html="out.html", plots="plots/",
                 csv="table.csv", json="table.json", against=None)
    print(rep.text())
    rep.speedups            # geometric mean per backend/device and phase
    rep.failed              # the failed CaseResults

>>> import tempfile
>>> from accelml.results.store import ResultsStore
>>> load_report("latest", ResultsStore(tempfile.mkdtemp()).directory)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
accelml.errors.AccelmlError: no runs in ...results.sqlite yet: run `python -m accelml compare` first
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from accelml.errors import AccelmlError
from accelml.report import plots
from accelml.report.speed import speedups
from accelml.report.table import Row, build_rows, render_text
from accelml.cases import canonical_json
from accelml.results.records import CaseResult, Environment, RunRecord
from accelml.results.store import ResultsStore

PHASES = ("fit", "predict", "epoch")
LATEST = "latest"


# -- geometric-mean speedups -----------------------------------------------------------------


@dataclass(frozen=True)
class GeometricMeanSpeedup:
    """exp(mean(log speedup)) over the cases of one backend/device that have a reference case."""

    backend: str
    device: str
    phase: str
    value: float
    cases: int
    minimum: float
    maximum: float

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device, "phase": self.phase,
                "value": self.value, "cases": self.cases, "minimum": self.minimum,
                "maximum": self.maximum}


def geometric_mean(values: Iterable[float]) -> float:
    """The geometric mean of the positive, finite values (NaN when there are none).

    >>> round(geometric_mean([2.0, 8.0]), 6)
    4.0
    """
    values = [v for v in values if v > 0 and math.isfinite(v)]
    if not values:
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geometric_mean_speedups(results: Iterable[CaseResult], reference: str | None
                            ) -> tuple[GeometricMeanSpeedup, ...]:
    """One entry per (backend, device, phase) with at least one case measured against the reference.

    The reference cases themselves (speedup 1 by definition) are left out.
    """
    if not reference:
        return ()
    results = list(results)
    by_id = {result.case_id: result for result in results}
    found = []
    for phase in PHASES:
        groups: dict[tuple[str, str], list[float]] = {}
        for case_id, value in speedups(results, reference, phase).items():
            if value.reference_case_id == case_id:
                continue
            result = by_id[case_id]
            groups.setdefault((result.backend, result.device), []).append(value.value)
        for (backend, device), values in groups.items():
            found.append(GeometricMeanSpeedup(backend, device, phase, geometric_mean(values),
                                              len(values), min(values), max(values)))
    order = {phase: index for index, phase in enumerate(PHASES)}
    return tuple(sorted(found, key=lambda s: (s.backend, s.device, order[s.phase])))


# -- environments ----------------------------------------------------------------------------


HASHED_FIELDS = ("python", "platform", "cpu_model", "logical_cores", "physical_cores",
                 "libraries", "gpus")


@dataclass(frozen=True)
class EnvironmentDifference:
    """One field (or library) whose value differs between two environments."""

    field: str                  # "cpu_model", "library scikit-learn-intelex", ...
    this: str
    other: str
    in_hash: bool               # part of what names the environment (env_hash)

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "this": self.this, "other": self.other,
                "in_hash": self.in_hash}


def _gpu_text(environment: Environment) -> str:
    if not environment.gpus:
        return "none"
    return ", ".join(f"{gpu.model} (driver {gpu.driver}, {gpu.memory_mib} MiB)"
                     for gpu in environment.gpus)


def environment_fields(environment: Environment) -> list[tuple[str, str]]:
    """The fields of an environment as (name, text) rows for a table, libraries left out."""
    def text(value: Any) -> str:
        return "–" if value is None or value == "" else str(value)

    return [
        ("environment hash", environment.env_hash),
        ("hostname", text(environment.hostname)),
        ("SLURM job", text(environment.slurm_job_id)),
        ("python", environment.python),
        ("platform", environment.platform),
        ("CPU", environment.cpu_model),
        ("cores (logical / physical / usable)",
         f"{environment.logical_cores} / {text(environment.physical_cores)} / "
         f"{environment.usable_cores}"),
        ("threads per case", text(environment.threads)),
        ("GPUs", _gpu_text(environment)),
    ]


def environment_differences(this: Environment | None, other: Environment | None
                            ) -> tuple[EnvironmentDifference, ...]:
    """The fields (and library versions) that differ between two environments.

    >>> from accelml.results.records import Environment
    >>> a = Environment("3.11.9", "linux", "Xeon", 8, 4, 8, (("numpy", "2.4.6"),), hostname="a")
    >>> b = Environment("3.11.9", "linux", "Xeon", 8, 4, 8, (("numpy", "2.5.0"),), hostname="b")
    >>> [(d.field, d.this, d.other, d.in_hash) for d in environment_differences(a, b)]
    [('hostname', 'a', 'b', False), ('library numpy', '2.4.6', '2.5.0', True)]
    """
    if this is None or other is None:
        if this is other:
            return ()
        return (EnvironmentDifference("environment", "recorded" if this else "not recorded",
                                      "recorded" if other else "not recorded", True),)
    found = []
    for name in ("hostname", "slurm_job_id", "python", "platform", "cpu_model", "logical_cores",
                 "physical_cores", "usable_cores", "threads"):
        a, b = getattr(this, name), getattr(other, name)
        if a != b:
            found.append(EnvironmentDifference(name, "–" if a is None else str(a),
                                               "–" if b is None else str(b),
                                               name in HASHED_FIELDS))
    if this.gpus != other.gpus:
        found.append(EnvironmentDifference("gpus", _gpu_text(this), _gpu_text(other), True))
    mine, theirs = dict(this.libraries), dict(other.libraries)
    for library in sorted(set(mine) | set(theirs)):
        if mine.get(library) != theirs.get(library):
            found.append(EnvironmentDifference(f"library {library}",
                                               mine.get(library, "not installed"),
                                               theirs.get(library, "not installed"), True))
    return tuple(found)


# -- one run against another ---------------------------------------------------------------


@dataclass(frozen=True)
class CaseRatio:
    """One case in both runs: ``ratios[phase] = other median / this median`` (<1: other faster)."""

    label: str
    case_id: str
    other_case_id: str
    this_status: str
    other_status: str
    this_medians: tuple[tuple[str, float], ...]
    other_medians: tuple[tuple[str, float], ...]
    ratios: tuple[tuple[str, float], ...]
    this_env_hash: str | None
    other_env_hash: str | None
    distinct: tuple[tuple[str, bool | None], ...] = ()   # the medians' intervals do not overlap

    def ratio(self, phase: str) -> float | None:
        return dict(self.ratios).get(phase)

    def is_distinct(self, phase: str) -> bool | None:
        """True when the two medians' confidence intervals do not overlap (None if unknown)."""
        return dict(self.distinct).get(phase)

    @property
    def environment_differs(self) -> bool:
        return self.this_env_hash != self.other_env_hash

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "case_id": self.case_id, "other_case_id": self.other_case_id,
                "this_status": self.this_status, "other_status": self.other_status,
                "this_medians": dict(self.this_medians), "other_medians": dict(self.other_medians),
                "ratios": dict(self.ratios), "distinct": dict(self.distinct),
                "this_env_hash": self.this_env_hash,
                "other_env_hash": self.other_env_hash}


@dataclass(frozen=True)
class RunComparison:
    """This run against another one: the ratio of each common case and how environments differ."""

    this: RunRecord
    other: RunRecord
    cases: tuple[CaseRatio, ...]
    only_here: tuple[str, ...]          # labels of cases the other run lacks
    only_there: tuple[str, ...]
    environment_differences: tuple[EnvironmentDifference, ...]
    other_results_dir: str = ""

    @property
    def environments_differ(self) -> bool:
        return bool(self.environment_differences) or any(c.environment_differs for c in self.cases)

    def geometric_mean_ratio(self, phase: str) -> float:
        return geometric_mean(c.ratio(phase) for c in self.cases if c.ratio(phase) is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "this_run": self.this.run_id, "other_run": self.other.run_id,
            "other_results_dir": self.other_results_dir,
            "this_env_hash": self.this.env_hash, "other_env_hash": self.other.env_hash,
            "environment_differences": [d.to_dict() for d in self.environment_differences],
            "cases": [c.to_dict() for c in self.cases],
            "geometric_mean_ratio": {phase: self.geometric_mean_ratio(phase)
                                     for phase in PHASES},
            "only_here": list(self.only_here), "only_there": list(self.only_there),
        }


def case_label(result: CaseResult, *, dataset: bool = True,
               params: Iterable[str] | None = None) -> str:
    """``kmeans · sklearnex · cpu ×4 [horovod] · digits · n_clusters=8``.

    ``params`` names the parameters to show (default: all of them).
    """
    parts = [result.algorithm, result.backend, result.device]
    text = " · ".join(parts)
    if result.workers != 1:
        text += f" ×{result.workers}"
    if result.strategy:
        text += f" [{result.strategy}]"
    if dataset:
        text += f" · {result.dataset}"
    shown = params_text(result, params)
    return text + (f" · {shown}" if shown else "")


def _identity(result: CaseResult) -> str:
    return canonical_json([result.algorithm, result.backend, result.device, result.workers,
                           result.strategy, result.dataset, dict(result.params)])


def compare_runs(this_run: RunRecord, these: list[CaseResult], other_run: RunRecord,
                 others: list[CaseResult], other_results_dir: str = "") -> RunComparison:
    """Pair the cases of two runs (by case id, else by what defines them) and take time ratios."""
    by_id = {r.case_id: r for r in others}
    by_identity = {_identity(r): r for r in others}
    paired, used = [], set()
    for result in these:
        match = by_id.get(result.case_id) or by_identity.get(_identity(result))
        if match is None or match.case_id in used:
            continue
        used.add(match.case_id)
        mine, theirs, ratios, distinct = [], [], [], []
        for phase in PHASES:
            a, b = result.timing(phase), match.timing(phase)
            if a is not None and result.ok:
                mine.append((phase, a.median))
            if b is not None and match.ok:
                theirs.append((phase, b.median))
            if a is not None and b is not None and result.ok and match.ok and a.median > 0:
                ratios.append((phase, b.median / a.median))
                bounds = (a.ci_low, a.ci_high, b.ci_low, b.ci_high)
                known = all(math.isfinite(x) for x in bounds) and min(a.count, b.count) > 1
                distinct.append((phase, (b.ci_high < a.ci_low or a.ci_high < b.ci_low)
                                 if known else None))
        paired.append(CaseRatio(case_label(result), result.case_id, match.case_id,
                                _status(result), _status(match), tuple(mine), tuple(theirs),
                                tuple(ratios), result.env_hash, match.env_hash, tuple(distinct)))
    paired_ids = {c.case_id for c in paired}
    return RunComparison(
        this=this_run, other=other_run, cases=tuple(paired),
        only_here=tuple(case_label(r) for r in these if r.case_id not in paired_ids),
        only_there=tuple(case_label(r) for r in others if r.case_id not in used),
        environment_differences=environment_differences(this_run.environment,
                                                        other_run.environment),
        other_results_dir=other_results_dir)


def _status(result: CaseResult) -> str:
    return "ok" if result.ok else f"failed ({result.failure.value})"


# -- the table as flat records (CSV / JSON) --------------------------------------------------


COLUMNS: tuple[tuple[str, type], ...] = (
    ("case_id", str), ("algorithm", str), ("dataset", str), ("backend", str), ("device", str),
    ("workers", int), ("params", str),
    *((f"{phase}_{part}", int if part == "n" else float)
      for phase in PHASES for part in ("median", "q1", "q3", "n")),
    ("speedup", float), ("speedup_low", float), ("speedup_high", float), ("efficiency", float),
    ("score_name", str), ("score", float), ("agreement_kind", str), ("agreement", float),
    ("is_reference", bool), ("noisy", bool), ("status", str), ("reason", str),
)
"""The columns of the exported table, in order, with their types (times in seconds;
``params`` is canonical JSON; empty cells / ``null`` where a value does not apply)."""


def _finite(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by ``None`` (strict JSON has neither).

    >>> json_safe({"a": [1.0, float("nan")], "b": (float("inf"),)})
    {'a': [1.0, None], 'b': [None]}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def table_records(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """The comparison table as flat records with the keys of :data:`COLUMNS`."""
    records = []
    for row in rows:
        record: dict[str, Any] = {
            "case_id": row.case_id, "algorithm": row.algorithm, "dataset": row.dataset,
            "backend": row.backend, "device": row.device, "workers": row.workers,
            "params": canonical_json(row.params),
        }
        for phase in PHASES:
            cell = getattr(row, phase)
            for part in ("median", "q1", "q3"):
                record[f"{phase}_{part}"] = None if cell is None else _finite(getattr(cell, part))
            record[f"{phase}_n"] = None if cell is None else cell.count
        record.update(
            speedup=_finite(row.speedup), speedup_low=_finite(row.speedup_low),
            speedup_high=_finite(row.speedup_high), efficiency=_finite(row.efficiency),
            score_name=row.score_name, score=_finite(row.score),
            agreement_kind=None if row.agreement is None else row.agreement.kind,
            agreement=None if row.agreement is None else _finite(row.agreement.value),
            is_reference=row.is_reference, noisy=row.noisy, status=row.status,
            reason=row.reason or None)
        records.append(record)
    return records


def write_csv(records: list[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write table records as CSV (header = :data:`COLUMNS`; empty cell for a missing value)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[name for name, _ in COLUMNS])
        writer.writeheader()
        for record in records:
            writer.writerow({key: "" if value is None else value for key, value in record.items()})
    return path


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a table written by :func:`write_csv` back into typed records."""
    types = dict(COLUMNS)

    def parse(name: str, text: str) -> Any:
        if text == "":
            return None
        kind = types.get(name, str)
        if kind is bool:
            return text == "True"
        return kind(text)

    with open(path, newline="", encoding="utf-8") as handle:
        return [{name: parse(name, text) for name, text in row.items()}
                for row in csv.DictReader(handle)]


# -- figures ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamedFigure:
    """A figure of the report: file-safe name, section, title, caption, and how to draw it."""

    name: str
    section: str                  # "time", "scaling", "agreement", "against"
    title: str
    caption: str
    draw: Callable[[], Any] = field(repr=False, compare=False)


def slug(text: str) -> str:
    """A file-name-safe version of a user string.

    >>> slug("<script>alert(1)</script>"), slug("k-means on digits")
    ('script-alert-1-script', 'k-means-on-digits')
    """
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-.")[:60] or "x"


# -- the report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunReport:
    """Everything shown about one run, built from the store by :func:`load_report`."""

    store: ResultsStore = field(repr=False, compare=False)
    run: RunRecord
    results: tuple[CaseResult, ...]
    reference: str | None
    rows: tuple[Row, ...]
    speedups: tuple[GeometricMeanSpeedup, ...]
    against: RunComparison | None = None
    against_store: ResultsStore | None = field(default=None, repr=False, compare=False)

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        return tuple(result for result in self.results if not result.ok)

    @property
    def missing(self) -> tuple[str, ...]:
        """Planned case ids that have no stored result (an interrupted or running run)."""
        stored = {result.case_id for result in self.results}
        return tuple(case_id for case_id in self.run.case_ids if case_id not in stored)

    @property
    def environments(self) -> tuple[tuple[Environment, tuple[str, ...]], ...]:
        """Each distinct environment (the run's first) with the labels of its cases."""
        found: dict[str, tuple[Environment, list[str]]] = {}
        if self.run.environment is not None:
            found[self.run.environment.env_hash] = (self.run.environment, [])
        for result in self.results:
            if result.environment is None:
                continue
            entry = found.setdefault(result.env_hash, (result.environment, []))
            entry[1].append(case_label(result))
        return tuple((env, tuple(labels)) for env, labels in found.values())

    def records(self) -> list[dict[str, Any]]:
        """The table as flat records (the CSV / JSON export)."""
        return table_records(self.rows)

    def to_dict(self) -> dict[str, Any]:
        """What ``--json`` writes: the run, the table, speedups, failures and ``against``."""
        run = {key: value for key, value in self.run.to_dict().items() if key != "spec_text"}
        return json_safe({
            "run": run,
            "reference": self.reference,
            "columns": [name for name, _ in COLUMNS],
            "rows": self.records(),
            "geometric_mean_speedups": [s.to_dict() for s in self.speedups],
            "failed": [{"case_id": r.case_id, "label": case_label(r),
                        "failure": r.failure.value, "reason": r.reason} for r in self.failed],
            "missing": list(self.missing),
            "against": None if self.against is None else self.against.to_dict(),
        })

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n",
                        encoding="utf-8")
        return path

    def write_csv(self, path: str | os.PathLike[str]) -> Path:
        return write_csv(self.records(), path)

    # -- agreement ---------------------------------------------------------------------------

    def agreement(self):
        """The run's agreement matrix (:func:`accelml.report.repro.agreement_matrix`)."""
        from accelml.report.repro import agreement_matrix

        against = None
        if self.against is not None and self.against_store is not None:
            against = (self.against_store, self.against.other.run_id)
        return agreement_matrix(self.store, self.run.run_id, self.reference, against=against)

    # -- figures ---------------------------------------------------------------------------

    def time_charts(self) -> list[plots.TimeChart]:
        """One chart per algorithm: fit and predict bars of each backend/device."""
        timed = [r for r in self.results
                 if r.ok and (r.timing("fit") is not None or r.timing("predict") is not None)]
        found = {phase: speedups(self.results, self.reference, phase) if self.reference else {}
                 for phase in ("fit", "predict")}
        charts = []
        for algorithm in dict.fromkeys(r.algorithm for r in timed):
            cases = [r for r in timed if r.algorithm == algorithm]
            varying = [name for name, get in (("dataset", lambda r: r.dataset),
                                              ("params", lambda r: r.params),
                                              ("workers", lambda r: r.workers))
                       if len({repr(get(r)) for r in cases}) > 1]
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
                              + (f" ×{result.workers}" if result.workers != 1 else ""),
                        group=_variant(result, varying, names), median=timing.median,
                        low=timing.q1, high=timing.q3,
                        speedup=None if value is None else value.value,
                        reference=value is not None and value.reference_case_id == result.case_id,
                        noisy=timing.noisy, colour_key=result.backend))
                phases.append((phase, tuple(bars)))
            charts.append(plots.TimeChart(title, tuple(phases)))
        return charts

    def scaling_charts(self) -> list[plots.ScalingChart]:
        """One chart per model and dataset: a series per backend/device/strategy over workers."""
        trained = [r for r in self.results if r.ok and r.timing("epoch") is not None]
        groups: dict[tuple, list[CaseResult]] = {}
        for result in trained:
            key = (result.algorithm, result.dataset, result.backend, result.device,
                   canonical_json(dict(result.params)))
            groups.setdefault(key, []).append(result)
        found: dict[tuple[str, str], list[tuple[str, str | None, list[CaseResult]]]] = {}
        for (algorithm, dataset, backend, device, _), members in groups.items():
            single = [r for r in members if r.workers == 1]
            strategies = list(dict.fromkeys(r.strategy for r in members if r.workers > 1))
            for strategy in strategies or [None]:
                points = [r for r in members if r.workers > 1 and r.strategy == strategy]
                base = [r for r in single if r.strategy == strategy] or single
                series_cases = base[:1] + points
                if len({r.workers for r in series_cases}) >= 2:
                    found.setdefault((algorithm, dataset), []).append(
                        (f"{backend} · {device}", strategy, series_cases))
        charts: dict[tuple[str, str], list[plots.ScalingSeries]] = {}
        for key, series_list in found.items():
            # Name a series by what tells it apart: strategy, and parameters that differ.
            names = varying_params(r for _, _, cases in series_list for r in cases
                                   if r.workers == 1)
            for label, strategy, cases in series_list:
                label += f" · {strategy}" if strategy else ""
                extra = params_text(cases[0], names)
                charts.setdefault(key, []).append(plots.ScalingSeries(
                    label + (f" · {extra}" if extra else ""), _scaling_points(cases)))
        return [plots.ScalingChart(f"{algorithm} on {dataset}", tuple(series))
                for (algorithm, dataset), series in charts.items()]

    def agreement_heatmap(self, matrix=None) -> plots.HeatMap | None:
        """The agreement matrix as a heat map: a row per case, a column per kind of comparison."""
        matrix = self.agreement() if matrix is None else matrix
        ok = [r for r in self.results if r.ok]
        if not ok:
            return None
        several_datasets = len({r.dataset for r in ok}) > 1
        kinds = ["run-to-run"]
        entries: dict[tuple[str, str], tuple[float | None, str]] = {}
        for entry in matrix.run_to_run:
            entries[(entry.case.case_id, "run-to-run")] = _run_to_run_cell(entry)
        for kind, comparisons in (("cross-backend", matrix.cross_backend),
                                  ("cross-device", matrix.cross_device),
                                  ("cross-scale", matrix.cross_scale),
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
        short = [_short_label(result, several_datasets) for result in ok]
        for result, label in zip(ok, short):
            twins = [r for r, other in zip(ok, short) if other == label]
            extra = params_text(result, varying_params(twins)) if len(twins) > 1 else ""
            labels.append(label + (f" · {extra}" if extra else ""))   # a params grid: which point
            row_values, row_texts = [], []
            for kind in kinds:
                value, text = entries.get((result.case_id, kind), (None, "–"))
                row_values.append(value)
                row_texts.append(text)
            values.append(tuple(row_values))
            texts.append(tuple(row_texts))
        return plots.HeatMap(
            title="Agreement" + (f" (reference backend: {self.reference})"
                                 if self.reference else ""),
            row_labels=tuple(labels), column_labels=tuple(kinds), values=tuple(values),
            cell_text=tuple(texts),
            colourbar_label="agreement (1 = identical)",
            vmin=0.9, vmax=1.0)

    def ratio_chart(self, phase: str) -> plots.RatioChart | None:
        if self.against is None:
            return None
        cases = [c for c in self.against.cases if c.ratio(phase) is not None]
        if not cases:
            return None
        return plots.RatioChart(
            f"{phase} time, run {self.against.other.run_id} / run {self.run.run_id}",
            tuple(c.label for c in cases), tuple(c.ratio(phase) for c in cases), phase)

    def figures(self, matrix=None, *, include_agreement: bool = True) -> list[NamedFigure]:
        """Every figure of the report, in page order, not yet drawn.

        ``matrix`` is the agreement matrix when the caller has it already (computed if not).
        """
        figures: list[NamedFigure] = []
        names: set[str] = set()

        def add(name: str, section: str, title: str, caption: str, draw) -> None:
            unique, index = slug(name), 2
            while unique in names:
                unique, index = f"{slug(name)}-{index}", index + 1
            names.add(unique)
            figures.append(NamedFigure(unique, section, title, caption, draw))

        for chart in self.time_charts():
            add(f"time-{chart.algorithm}", "time", chart.algorithm,
                "Median time per call of each backend and device; error bars: interquartile "
                "range of the counted repeats (warm-up excluded); the figure beside each bar is "
                "the speedup against the reference backend (hatched: noisy).",
                lambda chart=chart: plots.time_figure(chart))
        for chart in self.scaling_charts():
            add(f"scaling-{chart.title}", "scaling", chart.title,
                "Epoch time (first epoch left out, error bars: interquartile range of the "
                "epochs), throughput in images per second and speedup over 1 worker; dashed: "
                "ideal linear scaling; percentages: parallel efficiency (speedup / workers).",
                lambda chart=chart: plots.scaling_figure(chart))
        heatmap = self.agreement_heatmap(matrix) if include_agreement else None
        if heatmap is not None:
            add("agreement", "agreement", "Agreement matrix",
                "Each row is a case; each column a kind of comparison. Run-to-run: were the "
                "counted repeats bitwise identical. Cross-backend / device / scale: the case "
                "against its reference case (label agreement for labels, 1 − max relative "
                "difference for continuous outputs). Red: below 90% or not reproducible.",
                lambda heatmap=heatmap: plots.heatmap_figure(heatmap))
        for phase in PHASES:
            chart = self.ratio_chart(phase)
            if chart is not None:
                add(f"against-{phase}", "against", chart.title,
                    "Time ratio of each case, other run / this run, on a log scale: bars to the "
                    "left (green) are faster in the other run.",
                    lambda chart=chart: plots.ratio_figure(chart))
        return figures

    def write_plots(self, directory: str | os.PathLike[str], fmt: str = "png") -> list[Path]:
        """Write every figure as ``<name>.<fmt>`` (png or svg) into ``directory``."""
        if fmt not in ("png", "svg"):
            raise AccelmlError(f"plot format {fmt!r}: expected png or svg")
        directory = Path(directory)
        written = []
        for figure in self.figures():
            written.append(plots.save_figure(figure.draw(), directory / f"{figure.name}.{fmt}"))
        return written

    def write_html(self, path: str | os.PathLike[str]) -> Path:
        from accelml.report.html import render_html

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_html(self), encoding="utf-8")
        return path

    # -- terminal ----------------------------------------------------------------------------

    def title(self) -> str:
        return f"{self.run.spec_name}: run {self.run.run_id}"

    def text(self, width: int | None = None) -> str:
        """The terminal report: compare's table, speedups, failures, environment, against."""
        width = width or 160
        parts = [render_text(list(self.rows), self.title(), width).rstrip()]
        header = (f"run {self.run.run_id} ({self.run.status}), spec {self.run.spec_name}"
                  f"{' (' + self.run.spec_path + ')' if self.run.spec_path else ''}, "
                  f"started {self.run.created_at or '?'}; {len(self.results)} of "
                  f"{self.run.planned_cases} planned case(s) stored")
        parts.insert(0, header)
        scaling_text = self.scaling_text()
        if self.speedups or not scaling_text:
            parts.append(self.speedup_text())
        parts.append(scaling_text)
        if self.failed:
            lines = [f"{len(self.failed)} of {len(self.results)} case(s) FAILED:"]
            lines += [f"  {r.case_id} {case_label(r)}: {r.failure.value}: {r.reason}"
                      for r in self.failed]
            parts.append("\n".join(lines))
        if self.missing:
            parts.append(f"{len(self.missing)} planned case(s) have no result (the run is "
                         f"{self.run.status}); finish with: python -m accelml compare --resume "
                         f"{self.run.run_id}")
        for environment, labels in self.environments:
            text = ", ".join(f"{name} {value}" for name, value in environment_fields(environment))
            parts.append(f"environment: {text}")
        if self.against is not None:
            parts.append(self.against_text())
        return "\n\n".join(part for part in parts if part)

    def speedup_text(self) -> str:
        if not self.reference:
            return "no reference backend: no speedups"
        if not self.speedups:
            return f"geometric-mean speedup against {self.reference}: no case has a reference case"
        lines = [f"geometric-mean speedup against {self.reference} "
                 "(reference median / case median; >1 is faster):"]
        for entry in self.speedups:
            lines.append(f"  {entry.backend:<12} {entry.device:<6} {entry.phase:<8} "
                         f"{plots.format_speedup(entry.value):>7}  over {entry.cases} case(s), "
                         f"range {entry.minimum:.2f}-{entry.maximum:.2f}")
        return "\n".join(lines)

    def scaling_text(self) -> str:
        """Speedup and efficiency over 1 worker of every data-parallel series (empty if none)."""
        lines = []
        for chart in self.scaling_charts():
            for series in chart.series:
                cells = [f"{p.workers} workers {plots.format_speedup(p.speedup)} "
                         f"(efficiency {p.efficiency:.0%})"
                         for p in series.points if p.workers > 1 and p.speedup is not None]
                if cells:
                    lines.append(f"  {chart.title} · {series.label}: " + ", ".join(cells))
        if not lines:
            return ""
        return "\n".join(["data-parallel scaling (epoch time over the 1-worker case):", *lines])

    def against_text(self) -> str:
        against = self.against
        lines = [f"against run {against.other.run_id} (ratio = other / this time; <1: other "
                 "is faster):"]
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
            lines.append(f"  only in {self.run.run_id}: " + "; ".join(against.only_here))
        if against.only_there:
            lines.append(f"  only in {against.other.run_id}: " + "; ".join(against.only_there))
        if against.environment_differences:
            lines.append(f"  environments differ ({self.run.env_hash} vs "
                         f"{against.other.env_hash}):")
            for difference in against.environment_differences:
                mark = "" if difference.in_hash else " (not part of the hash)"
                lines.append(f"    {difference.field}: {difference.this} -> "
                             f"{difference.other}{mark}")
        else:
            lines.append(f"  same environment ({self.run.env_hash})")
        return "\n".join(lines)


def varying_params(results: Iterable[CaseResult]) -> tuple[str, ...]:
    """The parameter names whose value is not the same in every one of ``results``.

    >>> from accelml.results.records import CaseResult
    >>> def case(**params):
    ...     return CaseResult("r", "c", "kmeans", "sklearn", "cpu", "d", "ok",
    ...                       params=tuple(sorted(params.items())))
    >>> varying_params([case(n_clusters=8, tol=0.1), case(n_clusters=16, tol=0.1)])
    ('n_clusters',)
    """
    results = list(results)
    names = sorted({name for result in results for name, _ in result.params})
    return tuple(name for name in names
                 if len({repr(result.params_dict.get(name, "<unset>")) for result in results}) > 1)


def params_text(result: CaseResult, names: Iterable[str] | None = None) -> str:
    """``"k=v k2=v2"`` of the case's parameters (only ``names`` when given)."""
    wanted = None if names is None else set(names)
    return " ".join(f"{key}={value}" for key, value in result.params
                    if wanted is None or key in wanted)


def _short_label(result: CaseResult, dataset: bool) -> str:
    text = f"{result.algorithm} · {result.backend} · {result.device}"
    if result.workers != 1:
        text += f" ×{result.workers}"
    if result.strategy and result.dl is not None:
        text += f" [{result.strategy}]"
    return text + (f" · {result.dataset}" if dataset else "")


def _variant(result: CaseResult, varying: list[str], names: tuple[str, ...]) -> str:
    parts = []
    if "dataset" in varying:
        parts.append(result.dataset)
    if "params" in varying:
        parts.append(params_text(result, names) or "default params")
    if "workers" in varying:
        parts.append(f"{result.workers} worker(s)")
    return ", ".join(parts)


def _scaling_points(cases: list[CaseResult]) -> tuple[plots.ScalingPoint, ...]:
    """The points of one series; speedup and efficiency against the series' own 1-worker case.

    The definition is :mod:`accelml.report.speed`'s (t(1) / t(N), and that over N); the
    baseline is the 1-worker case of the same strategy when the run has one, so each
    curve starts at 1 and agrees with the epoch times drawn beside it.
    """
    cases = sorted(cases, key=lambda r: r.workers)
    base = cases[0].timing("epoch").median if cases[0].workers == 1 else None
    points = []
    for result in cases:
        timing = result.timing("epoch")
        speed = base / timing.median if base is not None and timing.median > 0 else None
        points.append(plots.ScalingPoint(
            result.workers, timing.median, timing.q1, timing.q3,
            result.dl.images_per_second if result.dl is not None else math.nan,
            speed, None if speed is None else speed / result.workers))
    return tuple(points)


def _run_to_run_cell(entry) -> tuple[float | None, str]:
    if entry.identical is None:
        return None, "not repeated" if entry.repeats < 2 else "–"
    if entry.identical:
        return 1.0, f"identical ({entry.repeats}×)"
    text = f"{entry.distinct} of {entry.repeats} differ"
    return 0.0 if entry.unexpected else 0.5, text + (" !" if entry.unexpected else "")


def _comparison_cell(comparison) -> tuple[float | None, str]:
    mark = " !" if comparison.unexpected else ""
    if comparison.bitwise_identical:
        return 1.0, "identical"
    if comparison.label_agreement is not None:
        value = comparison.label_agreement
        return value, f"{value:.1%}{mark}"
    if comparison.max_rel_diff is not None:
        value = comparison.max_rel_diff
        return 1.0 - min(1.0, value), f"rel {value:.2g}{mark}"
    if comparison.dl is not None and comparison.dl.accuracy_difference is not None:
        value = comparison.dl.accuracy_difference
        return 1.0 - min(1.0, abs(value)), f"Δacc {value:+.3f}{mark}"
    return None, "n/a"


# -- loading ---------------------------------------------------------------------------------


def open_store(results_dir: str | os.PathLike[str] | None) -> ResultsStore:
    """The existing store in ``results_dir`` (default ``./accelml-results``); never creates one."""
    return ResultsStore(results_dir, create=False)


def resolve_run(store: ResultsStore, run_id: str) -> RunRecord:
    """``latest``, a full run id or a unique prefix of one."""
    if run_id == LATEST:
        run = store.latest_run()
        if run is None:
            raise AccelmlError(f"no runs in {store.database} yet: run `python -m accelml compare` "
                               "first")
        return run
    return store.get_run(run_id)


def load_report(run_id: str = LATEST, results_dir: str | os.PathLike[str] | None = None, *,
                reference: str | None = None, against: str | None = None,
                against_dir: str | os.PathLike[str] | None = None) -> RunReport:
    """Read a run (and optionally the run to compare it with) from the store into a report."""
    store = open_store(results_dir)
    run = resolve_run(store, run_id)
    results = store.case_results(run.run_id)
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
        result.write_html(html)
    if plots_dir is not None:
        result.write_plots(plots_dir, plot_format)
    if csv is not None:
        result.write_csv(csv)
    if json is not None:
        result.write_json(json)
    return result


__all__ = ["COLUMNS", "CaseRatio", "EnvironmentDifference", "GeometricMeanSpeedup", "NamedFigure",
           "RunComparison", "RunReport", "compare_runs", "environment_differences",
           "geometric_mean", "geometric_mean_speedups", "load_report", "params_text", "read_csv",
           "report", "table_records", "varying_params", "write_csv"]
