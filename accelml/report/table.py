"""The comparison table (terminal and JSON), built only from the results store.

One :class:`Row` per case: algorithm, dataset, backend, device, workers (and the strategy
column when any case has one), fit and predict
median with spread (IQR) and repeat count, speedup vs the reference ("ref" on the reference
case itself; a failed case is never a reference and shows "-"), the main score,
agreement with the reference case's predictions, and status (with the reason of a failure
and a ``noisy`` flag when the median's interval stayed wider than the case's target).

Agreement: the headline of :func:`accelml.report.repro.compare_results` between the case and
its reference case, so the table and the agreement matrix never disagree: label agreement
(cluster ids matched one-to-one first) where the outputs are labels, else the largest
absolute difference (cluster centres and PCA outputs matched first), else the final
accuracy difference of deep-learning cases (:mod:`accelml.report.measures`). Only cases on
the same data are compared. An N-worker case shown with its scaling (speed-up over its own
1-worker case, rather than over the reference backend) is compared with that 1-worker case.

>>> from accelml.results.store import ResultsStore
>>> import tempfile
>>> rows = build_rows(ResultsStore(tempfile.mkdtemp()), [], reference=None)
>>> rows
[]
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from accelml.report.measure import Measure, measures
from accelml.report.repro import compare_results
from accelml.report.speed import reference_cases, scaling, speedup
from accelml.results.records import CaseResult, PhaseTiming, RunRecord
from accelml.results.store import ResultsStore

if TYPE_CHECKING:
    from rich.table import Table

MAIN_SCORE = ("accuracy", "r2", "adjusted_rand", "inertia", "explained_variance")


@dataclass(frozen=True)
class Agreement:
    """How closely a case's outputs match its reference case's, in one figure."""

    kind: str                # the headline measure's name: "label_agreement", "max_abs_diff", ...
    value: float
    reference_case_id: str
    text: str                # as shown: "labels 98.50%", "max|d| 0.003"


@dataclass(frozen=True)
class TimingCell:
    median: float
    q1: float
    q3: float
    count: int
    noisy: bool
    ci_halfwidth_rel: float

    @classmethod
    def of(cls, timing: PhaseTiming | None) -> TimingCell | None:
        if timing is None:
            return None
        return cls(timing.median, timing.q1, timing.q3, timing.count, timing.noisy,
                   timing.ci_halfwidth_rel)

    def text(self) -> str:
        unit, scale = _unit(self.median)
        spread = f" ({_number(self.q1 * scale)}-{_number(self.q3 * scale)})" if self.count > 1 else ""
        return (f"{_number(self.median * scale)}{unit}{spread} n={self.count}"
                + ("~" if self.noisy else ""))


@dataclass(frozen=True)
class Row:
    case_id: str
    algorithm: str
    dataset: str
    backend: str
    device: str
    workers: int
    params: dict[str, Any]
    fit: TimingCell | None
    predict: TimingCell | None
    epoch: TimingCell | None
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    score_name: str | None
    score: float | None
    agreement: Agreement | None
    status: str
    reason: str
    noisy: bool
    is_reference: bool
    efficiency: float | None = None
    strategy: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _unit(seconds: float) -> tuple[str, float]:
    if math.isnan(seconds) or seconds >= 1:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e3
    return "us", 1e6


def _number(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def _main_score(result: CaseResult) -> tuple[str | None, float | None]:
    for name in MAIN_SCORE:
        value = result.score(name)
        if value is not None:
            return name, value
    if result.scores:
        return result.scores[0].name, result.scores[0].value
    return None, None


def agreement(store: ResultsStore, result: CaseResult, reference: CaseResult,
              measures_used: Sequence[Measure] | None = None) -> Agreement | None:
    """The headline of the comparison of two cases (None when nothing applies or data differ)."""
    if result.dataset_info and reference.dataset_info and \
            result.dataset_info.digest != reference.dataset_info.digest:
        return None
    found = compare_results(store, reference, store, result, measures_used=measures_used).headline
    if found is None:
        return None
    measure, reading = found
    return Agreement(measure.name, float(reading.value), reference.case_id,
                     measure.headline_text(reading))


def build_rows(store: ResultsStore, results: Iterable[CaseResult], reference: str | None
               ) -> list[Row]:
    results = list(results)
    references = reference_cases(results, reference) if reference else {}
    scalings = scaling(results)
    found_measures = measures()
    rows = []
    for result in results:
        ref = references.get(result.case_id)
        phase = "epoch" if result.timing("epoch") is not None else "fit"
        found_scaling = scalings.get(result.case_id)
        if found_scaling is not None and result.workers != 1 and ref is not None \
                and ref.case_id == result.case_id:
            ref = None   # an N-worker run of the reference backend: shown as scaling vs 1 worker
        # A failed case is never anyone's reference (nor its own): it shows no speedup.
        is_reference = ref is not None and ref.case_id == result.case_id and result.ok
        found = speedup(result, ref, phase) if ref is not None else None
        value: float | None = None
        low: float | None = None
        high: float | None = None
        if found is None and found_scaling is not None:
            value = found_scaling.speedup
        elif found is not None:
            value, low, high = found.value, found.low, found.high
        score_name, score = _main_score(result) if result.ok else (None, None)
        match = None
        if ref is not None and not is_reference and result.ok and ref.ok:
            match = agreement(store, result, ref, found_measures)
        elif ref is None and found_scaling is not None and result.workers != 1:
            baseline = next(r for r in results if r.case_id == found_scaling.baseline_case_id)
            match = agreement(store, result, baseline, found_measures)   # against 1 worker
        status = result.status if result.ok else f"failed ({result.failure.value})"
        rows.append(Row(
            case_id=result.case_id, algorithm=result.algorithm, dataset=result.dataset,
            backend=result.backend, device=result.device, workers=result.workers,
            params=dict(result.params), fit=TimingCell.of(result.timing("fit")),
            predict=TimingCell.of(result.timing("predict")),
            epoch=TimingCell.of(result.timing("epoch")), speedup=value, speedup_low=low,
            speedup_high=high, score_name=score_name, score=score, agreement=match,
            status=status, reason=result.reason, noisy=result.noisy, is_reference=is_reference,
            efficiency=None if found_scaling is None else found_scaling.efficiency,
            strategy=result.strategy,
        ))
    return rows


def _status_text(row: Row, note: int | None = None) -> str:
    if row.status == "ok":
        return "ok, noisy" if row.noisy else "ok"
    return row.status + (f" [{note}]" if note else "")


def _varying_params(rows: list[Row]) -> bool:
    """Show a params column only when one algorithm/dataset/backend/device runs with several."""
    seen: dict[tuple[str, str, str, str, int, str | None], set[str]] = {}
    for row in rows:
        key = (row.algorithm, row.dataset, row.backend, row.device, row.workers, row.strategy)
        seen.setdefault(key, set()).add(_params_text(row.params))
    return any(len(values) > 1 for values in seen.values())


def _speedup_text(row: Row) -> str:
    if row.is_reference:
        return "ref"
    if row.speedup is None:
        return "-"
    text = f"{row.speedup:.2f}x"
    if row.efficiency is not None:
        text += f" (eff {row.efficiency:.0%})"
    return text


def _params_text(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def rich_table(rows: list[Row], title: str = "") -> Table:
    """The table as a rich ``Table`` (the terminal shows it in colour)."""
    from rich.markup import escape
    from rich.table import Table

    show_params = _varying_params(rows)
    show_strategy = any(row.strategy for row in rows)
    show_epoch = any(row.epoch is not None for row in rows)
    table = Table(title=title or None, show_lines=False, header_style="bold")
    for name in ("algorithm", "dataset", "backend", "device"):
        table.add_column(name, justify="left")
    table.add_column("workers", justify="right")
    if show_strategy:
        table.add_column("strategy")
    if show_params:
        table.add_column("params", overflow="fold")
    show_fit = any(row.fit is not None for row in rows) or not show_epoch
    show_predict = any(row.predict is not None for row in rows) or not show_epoch
    if show_fit:
        table.add_column("fit median (IQR)", justify="right", no_wrap=True)
    if show_predict:
        table.add_column("predict median (IQR)", justify="right", no_wrap=True)
    if show_epoch:
        table.add_column("epoch median (IQR)", justify="right", no_wrap=True)
    for name in ("speedup", "score", "agreement", "status"):
        table.add_column(name, justify="right" if name != "status" else "left",
                         overflow="fold")
    notes = failure_notes(rows)
    for row in rows:
        cells = [row.algorithm, row.dataset, row.backend, row.device, str(row.workers)]
        if show_strategy:
            cells.append(row.strategy or "-")
        if show_params:
            cells.append(_params_text(row.params))
        if show_fit:
            cells.append(row.fit.text() if row.fit else "-")
        if show_predict:
            cells.append(row.predict.text() if row.predict else "-")
        if show_epoch:
            cells.append(row.epoch.text() if row.epoch else "-")
        score = "-" if row.score is None else f"{row.score_name} {row.score:.4g}"
        match = "ref" if row.is_reference else (row.agreement.text if row.agreement else "-")
        status = _status_text(row, notes.get(row.case_id, (None,))[0])
        style = None if row.status == "ok" else "red"
        cells += [_speedup_text(row), score, match, status]
        table.add_row(*(escape(cell) for cell in cells), style=style)
    return table


def render_text(rows: list[Row], title: str = "", width: int | None = None) -> str:
    """The table as plain text (no colour), e.g. for ``Comparison.table()``."""
    from rich.console import Console

    console = Console(width=width or 160, record=True, color_system=None, file=io.StringIO())
    console.print(rich_table(rows, title))
    footer = legend(rows)
    if footer:
        console.print(footer)
    return console.export_text()


def failure_notes(rows: list[Row]) -> dict[str, tuple[int, str]]:
    """case_id -> (note number, reason) for every failed row."""
    failed = [row for row in rows if row.status != "ok"]
    return {row.case_id: (index, row.reason) for index, row in enumerate(failed, start=1)}


def legend(rows: list[Row]) -> str:
    """What the table's marks mean, then one numbered line per failure with its reason."""
    from rich.markup import escape

    notes = ["times: median (interquartile range) over n counted repeats, warm-up excluded"]
    if any(row.noisy for row in rows):
        notes.append("~ / noisy: the median's confidence interval stayed wider than the target")
    lines = ["; ".join(notes)]
    for case_id, (number, reason) in failure_notes(rows).items():
        lines.append(f"[{number}] {case_id}: {reason}")
    return escape("\n".join(lines))


def json_clean(value: Any) -> Any:
    """``value`` with NaN and infinities as ``None`` (valid JSON), tuples as lists.

    >>> json_clean({"a": [1.0, float("nan")], "b": (float("inf"),)})
    {'a': [1.0, None], 'b': [None]}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_clean(v) for v in value]
    return value


def to_json(run: RunRecord, results: list[CaseResult], rows: list[Row]) -> dict[str, Any]:
    """Machine-readable results: the run, every row, and every full case record."""
    cleaned: dict[str, Any] = json_clean({
        "run": {key: value for key, value in run.to_dict().items() if key != "spec_text"},
        "rows": [row.to_dict() for row in rows],
        "cases": [result.to_dict() for result in results],
        "failed": [row.case_id for row in rows if row.status != "ok"],
    })
    return cleaned
