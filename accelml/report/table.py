"""The comparison table (terminal and JSON), built only from the results store.

One :class:`Row` per case: algorithm, dataset, backend, device, ranks (and the strategy
column when any case has one), fit and predict
median with spread (IQR) and repeat count, speedup vs the reference ("ref" on the reference
case itself; a failed case is never a reference and shows "-") for its main phase and then
for its other phases, each with its interval, the iterations of an iterative fit against the
reference's, images/s per GPU (per rank on CPUs) of a deep-learning case, whether every
rank of a data-parallel case ended with identical weights (the ``rank weights`` column), the main score,
agreement with the reference case's predictions, and status (with the reason of a failure,
a ``noisy`` flag when the median's interval stayed wider than the case's target, and
"different optimum" with its reason when the fit's objective is not the reference's).

The columns after the timings are data (:data:`RESULT_COLUMNS`: heading, cell text,
whether shown), so a layout can place, drop or reorder them without knowing what they say.

Agreement: the headline of :func:`accelml.agreement.matrix.compare_results` between the case and
its reference case, so the table and the agreement matrix never disagree: label agreement
(cluster ids matched one-to-one first) where the outputs are labels, else the largest
absolute difference (cluster centres and PCA outputs matched first), else the final
accuracy difference of deep-learning cases (:mod:`accelml.agreement.measures`). Only cases on
the same data are compared. An N-rank case shown with its scaling (speed-up over its own
1-rank case, rather than over the reference backend) is compared with that 1-rank case.

>>> from accelml.results.store import ResultsStore
>>> import tempfile
>>> rows = build_rows(ResultsStore(tempfile.mkdtemp()), [], reference=None)
>>> rows
[]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from accelml.agreement.matrix import compare_results
from accelml.agreement.point import Measure, measures
from accelml.cases import INTERLEAVED, ISOLATED, OVERSUBSCRIBE
from accelml.report.layout import Column, Form, Layout, fit, render, wrap_lines
from accelml.report.layout import rich_table as layout_table
from accelml.report.speed import (
    Iterations,
    Optimum,
    Speedup,
    images_per_rank,
    iterations_of,
    main_phase,
    optimum_against,
    phase_speedups,
    rank_unit,
    reference_cases,
    scaling,
)
from accelml.results.records import CaseResult, PhaseTiming, RunRecord
from accelml.results.store import ResultsStore

if TYPE_CHECKING:
    from rich.table import Table

MAIN_SCORE = ("accuracy", "r2", "adjusted_rand", "inertia", "explained_variance")


@dataclass(frozen=True)
class Agreement:
    """How closely a case's outputs match its reference case's, in one figure: the headline of
    their :class:`accelml.agreement.matrix.PairAgreement`."""

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

    def short_text(self) -> str:
        """The median alone (``~``: noisy)."""
        unit, scale = _unit(self.median)
        return f"{_number(self.median * scale)}{unit}" + ("~" if self.noisy else "")

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
    ranks: int
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
    oversubscribed: bool = False
    main_phase: str = "fit"
    phase_speedups: tuple[Speedup, ...] = ()     # every phase against the reference, main first
    iterations: Iterations | None = None
    optimum: Optimum | None = None
    ranks_identical: bool | None = None          # data-parallel DL: every rank's final weights equal
    ranks_differing: tuple[int, ...] = ()        # the ranks whose weights differ from rank 0's
    warmup_note: str = ""
    images_per_rank: float | None = None        # DL: images/s per rank (per GPU on GPUs)
    open_listeners: str = ""                     # what a stranger could reach (unauthenticated)
    container: str = ""                          # where it ran: "" (the host) or runtime:image
    busy_host: tuple[float, int] | None = None   # (load, cores): other work shared its cores

    @property
    def different_optimum(self) -> bool:
        return self.optimum is not None and self.optimum.differs

    def to_dict(self) -> dict[str, Any]:
        """The row as ``compare --json`` writes it: every field, plus ``different_optimum``,
        the iterations' ``per_iteration_speedup`` and, where a speed-up has no interval
        (its bounds ``null``), ``speedup_interval`` / the phase's ``interval`` saying why."""
        data = asdict(self)
        data["different_optimum"] = self.different_optimum
        main = next((value for value in self.phase_speedups if value.phase == self.main_phase), None)
        data["speedup_interval"] = None if main is None or has_interval(main) else NO_INTERVAL
        for entry, value in zip(data["phase_speedups"], self.phase_speedups, strict=True):
            entry["interval"] = None if has_interval(value) else NO_INTERVAL
        if self.iterations is not None:
            data["iterations"]["per_iteration_speedup"] = self.iterations.per_iteration_speedup
        return data


NO_INTERVAL = "n too small for an interval"
"""What a speed-up shows instead of an interval whose bounds say nothing (see :func:`has_interval`)."""


def has_interval(value: Speedup) -> bool:
    """Whether ``value``'s interval means something: both bounds finite and the lower one
    above zero. With a couple of repeats a median's interval (Student's t) reaches down to
    zero time, which makes the speed-up's upper bound infinite and its lower bound 0 or near
    it (``fit 1.47x (0-9.7)``): no interval is shown then, and the JSON says why.

    >>> has_interval(Speedup("b", "a", "fit", 1.47, 0.0, 9.7))
    False
    >>> has_interval(Speedup("b", "a", "fit", 4.0, 3.9, 4.1))
    True
    """
    return 0 < value.low <= value.high < math.inf


def _bounded(value: Speedup) -> Speedup:
    """``value`` with NaN bounds where :func:`has_interval` says they mean nothing."""
    if has_interval(value):
        return value
    return replace(value, low=math.nan, high=math.nan)


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
        found_scaling = scalings.get(result.case_id)
        if found_scaling is not None and result.ranks != 1 and ref is not None \
                and ref.backend == result.backend:
            ref = None   # an N-rank run of the reference backend: shown as scaling vs 1 rank
        # A failed case is never anyone's reference (nor its own): it shows no speedup.
        is_reference = ref is not None and ref.case_id == result.case_id and result.ok
        compared = ref is not None and not is_reference
        by_phase = tuple(_bounded(value) for value in phase_speedups(result, ref)) \
            if ref is not None else ()
        found = next((s for s in by_phase if s.phase == main_phase(result)), None)
        value: float | None = None
        low: float | None = None
        high: float | None = None
        if found is None and found_scaling is not None:
            value = found_scaling.speedup
            if found_scaling.measurement == INTERLEAVED:   # from the paired epochs
                low, high = found_scaling.low, found_scaling.high
        elif found is not None:
            value = found.value
            low, high = (found.low, found.high) if has_interval(found) else (None, None)
        score_name, score = _main_score(result) if result.ok else (None, None)
        match = None
        if ref is not None and not is_reference and result.ok and ref.ok:
            match = agreement(store, result, ref, found_measures)
        elif ref is None and found_scaling is not None and result.ranks != 1:
            baseline = next(r for r in results if r.case_id == found_scaling.baseline_case_id)
            match = agreement(store, result, baseline, found_measures)   # against 1 rank
        status = result.status if result.ok else f"{outcome_word(result)} ({result.failure.value})"
        rows.append(Row(
            case_id=result.case_id, algorithm=result.algorithm, dataset=result.dataset,
            backend=result.backend, device=result.device, ranks=result.ranks,
            params=dict(result.params), fit=TimingCell.of(result.timing("fit")),
            predict=TimingCell.of(result.timing("predict")),
            epoch=TimingCell.of(result.timing("epoch")), speedup=value, speedup_low=low,
            speedup_high=high, score_name=score_name, score=score, agreement=match,
            status=status, reason=result.reason, noisy=result.noisy, is_reference=is_reference,
            efficiency=None if found_scaling is None else found_scaling.efficiency,
            strategy=result.strategy, oversubscribed=dict(result.params).get(OVERSUBSCRIBE) is True,
            main_phase=main_phase(result), phase_speedups=by_phase,
            iterations=iterations_of(result, ref if compared else None),
            optimum=optimum_against(result, ref) if ref is not None and compared else None,
            ranks_identical=None if result.dl is None else result.dl.ranks_identical,
            ranks_differing=() if result.dl is None else result.dl.ranks_differing,
            warmup_note=result.warmup_note, images_per_rank=images_per_rank(result),
            open_listeners="" if result.dl is None or result.dl.listeners_authenticated
            else result.dl.listeners,
            container="" if result.container is None else result.container.label,
            busy_host=result.busy_host,
        ))
    return rows


def load_text(busy_host: tuple[float, int]) -> str:
    """A busy host's load as the legend and the HTML report give it.

    >>> load_text((6.53, 2))
    '6.5 on 2 cores'
    """
    load, cores = busy_host
    return f"{load:.1f} on {cores} cores"


def _status_text(row: Row, note: int | None = None) -> str:
    flags = (", oversubscribed" if row.oversubscribed else "") + \
        (", busy host" if row.busy_host is not None else "") + \
        (", unauthenticated listeners" if row.open_listeners else "")
    if row.status == "ok":
        text = ("ok, noisy" if row.noisy else "ok") + flags
        if row.different_optimum:
            text += ", different optimum" + (f" [{note}]" if note else "")
        return text
    return row.status + flags + (f" [{note}]" if note else "")


def outcome_word(result: CaseResult) -> str:
    """"ok", "skipped" (never run: unavailable on this machine) or "failed".

    >>> from accelml.results.records import FailureKind
    >>> outcome_word(CaseResult("r", "c", "kmeans", "xgboost", "cuda", "d", "failed",
    ...                         failure=FailureKind.UNAVAILABLE, reason="no GPU"))
    'skipped'
    """
    return "ok" if result.ok else "skipped" if result.skipped else "failed"


def _short_status(row: Row, note: int | None = None) -> str:
    if row.status == "ok":
        return "ok~" if row.noisy else "ok"
    return row.status.split(" ")[0] + (f" [{note}]" if note else "")


def _varying_params(rows: Sequence[Row]) -> bool:
    """Show a params column only when one algorithm/dataset/backend/device runs with several."""
    seen: dict[tuple[str, str, str, str, int, str | None], set[str]] = {}
    for row in rows:
        key = (row.algorithm, row.dataset, row.backend, row.device, row.ranks, row.strategy)
        seen.setdefault(key, set()).add(_params_text(row.params))
    return any(len(values) > 1 for values in seen.values())


def phase_speedup_text(value: Speedup, separator: str = " ") -> str:
    """'predict 1.58x (1.50-1.66)': the phase, its speedup and the speedup's interval
    (``separator`` goes before the interval: a newline keeps a terminal column narrow).

    An interval from interleaved rounds' paired ratios says ``paired``; one from the two
    medians' intervals (cases measured isolated) says nothing more.

    >>> phase_speedup_text(Speedup("b", "a", "fit", 4.0, 3.9, 4.1))
    'fit 4.00x (3.9-4.1)'
    >>> phase_speedup_text(Speedup("b", "a", "fit", 1.47, 0.0, float("inf")))
    'fit 1.47x (n too small)'
    >>> phase_speedup_text(Speedup("b", "a", "fit", 4.0, 3.9, 4.1, "interleaved"))
    'fit 4.00x (3.9-4.1 paired)'
    """
    paired = " paired" if value.measurement == INTERLEAVED else ""
    interval = f"{separator}({value.low:.2g}-{value.high:.2g}{paired})" if has_interval(value) \
        else f"{separator}(n too small)"
    return f"{value.phase} {value.value:.2f}x{interval}"


def _speedup_text(row: Row) -> str:
    """The main phase's speedup with its interval ("ref" on the reference case)."""
    if row.is_reference:
        return "ref"
    if row.speedup is None:
        return "-"
    main = next((value for value in row.phase_speedups if value.phase == row.main_phase), None)
    text = phase_speedup_text(main, "\n") if main is not None else f"{row.speedup:.2f}x"
    if main is None and row.speedup_low is not None and row.speedup_high is not None:
        text += f"\n({row.speedup_low:.2g}-{row.speedup_high:.2g} paired)"   # scaling, in turns
    if row.efficiency is not None:
        text += f" (eff {row.efficiency:.0%})"
    return text


def _short_speedup(row: Row) -> str:
    if row.is_reference:
        return "ref"
    if row.speedup is None:
        return "-"
    return f"{row.speedup:.2f}x"


def _other_phases_text(row: Row) -> str:
    if row.is_reference or row.status != "ok":
        return "-"
    others = [phase_speedup_text(value, "\n") for value in row.phase_speedups
              if value.phase != row.main_phase]
    return "\n".join(others) or "-"


def _other_phases_short(row: Row) -> str:
    if row.is_reference or row.status != "ok":
        return "-"
    return " ".join(f"{value.phase} {value.value:.2f}x" for value in row.phase_speedups
                    if value.phase != row.main_phase) or "-"


def _iterations_text(row: Row) -> str:
    return "-" if row.iterations is None else row.iterations.text().replace(", ", "\n")


def rank_weights_text(row: Row) -> str:
    """'identical', 'rank 1, 3 differ from rank 0', or '-' for a case of one rank."""
    if row.ranks_identical is None:
        return "-"
    if row.ranks_identical:
        return "identical"
    return "rank " + ", ".join(str(rank) for rank in row.ranks_differing) + " differ from rank 0"


def _params_text(params: dict[str, Any], names: Sequence[str] | None = None) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items() if names is None or k in names)


def _timing(phase: str, short: bool) -> Callable[[Row], str]:
    def text(row: Row) -> str:
        cell: TimingCell | None = getattr(row, phase)
        if cell is None:
            return "-"
        return cell.short_text() if short else cell.text()

    return text


def _score(short: bool) -> Callable[[Row], str]:
    def text(row: Row) -> str:
        if row.score is None:
            return "-"
        return f"{row.score:.3g}" if short else f"{row.score_name} {row.score:.4g}"

    return text


def _per_rank_text(row: Row) -> str:
    return "-" if row.images_per_rank is None else f"{row.images_per_rank:,.0f}"


def _per_rank_heading(rows: Sequence[Row]) -> str:
    """'img/s per GPU' (or 'per rank' where some deep-learning case ran on the CPU)."""
    units = {rank_unit(row.device) for row in rows if row.images_per_rank is not None}
    return f"img/s per {units.pop() if len(units) == 1 else 'rank'}"


def _agreement_text(row: Row) -> str:
    return "ref" if row.is_reference else (row.agreement.text if row.agreement else "-")


def table_columns(rows: Sequence[Row]) -> list[Column[Row]]:
    """The comparison table's columns, in order, with what each may give up to fit a width
    (:mod:`accelml.report.layout`): compact forms first (times without their spread, the
    score without its name), then constant columns go to the legend, then algorithm and
    dataset names are abbreviated (with a legend), predict time and score are dropped,
    backends are abbreviated, and last fit time and agreement are dropped. Algorithm,
    dataset, backend, speed-up and status are never dropped.

    A new column is one more entry here (``applies`` says when the table has it)."""
    notes = {case_id: number for case_id, (number, _) in table_notes(list(rows)).items()}
    with_epoch = any(row.epoch is not None for row in rows)
    varying = varying_param_names(rows) if _varying_params(rows) else ()
    right = "right"
    return [
        Column((Form("algorithm", lambda row: row.algorithm),), abbreviate_rank=40, min_width=12),
        Column((Form("dataset", lambda row: row.dataset),), abbreviate_rank=42, min_width=8),
        Column((Form("backend", lambda row: row.backend),), abbreviate_rank=64, min_width=7),
        Column((Form("device", lambda row: row.device),), constant_rank=5, abbreviate_rank=46,
               min_width=4),
        Column((Form("ranks", lambda row: str(row.ranks)),), justify=right, constant_rank=5),
        Column((Form("strategy", lambda row: row.strategy or "-"),), constant_rank=5,
               abbreviate_rank=46, min_width=7, applies=lambda rows: any(r.strategy for r in rows)),
        Column((Form("container", lambda row: row.container or "host"),), abbreviate_rank=44, min_width=8,
               wrap=True, applies=lambda rows: any(r.container for r in rows)),
        Column((Form("params", lambda row: _params_text(row.params, varying)),),
               abbreviate_rank=48, min_width=10, applies=lambda rows: bool(varying)),
        *(Column((Form(f"{phase} median (IQR)", _timing(phase, False)),
                  Form(phase, _timing(phase, True))), justify=right, compact_rank=rank,
                 drop_rank=drop, min_width=6, applies=applies)
          for phase, rank, drop, applies in (
              ("fit", 12, 75, lambda rows: any(r.fit is not None for r in rows) or not with_epoch),
              ("predict", 10, 60,
               lambda rows: any(r.predict is not None for r in rows) or not with_epoch),
              ("epoch", 12, 75, lambda rows: with_epoch))),
        Column((Form("speedup", _speedup_text), Form("speedup", _short_speedup)), justify=right,
               compact_rank=20),
        Column((Form(_per_rank_heading(rows), _per_rank_text),), justify=right, drop_rank=56,
               applies=lambda rows: any(r.images_per_rank is not None for r in rows)),
        Column((Form("other phases", _other_phases_text), Form("other", _other_phases_short)),
               justify=right, compact_rank=18, drop_rank=34,
               applies=lambda rows: any(not r.is_reference and len(r.phase_speedups) > 1
                                        for r in rows)),
        Column((Form("iterations", _iterations_text),), justify=right, drop_rank=36,
               applies=lambda rows: any(r.iterations is not None for r in rows)),
        Column((Form("rank weights", rank_weights_text),), justify=right, drop_rank=66,
               applies=lambda rows: any(r.ranks_identical is not None for r in rows)),
        Column((Form("score", _score(False)), Form("score", _score(True))), justify=right,
               compact_rank=14, drop_rank=62),
        Column((Form("agreement", _agreement_text),), justify=right, drop_rank=80),
        Column((Form("status", lambda row: _status_text(row, notes.get(row.case_id))),
                Form("status", lambda row: _short_status(row, notes.get(row.case_id)))),
               compact_rank=25),
    ]


def varying_param_names(rows: Sequence[Row]) -> tuple[str, ...]:
    """The parameter names whose value is not the same in every row."""
    names = sorted({name for row in rows for name in row.params})
    return tuple(name for name in names
                 if len({repr(row.params.get(name, "<unset>")) for row in rows}) > 1)


def fit_table(rows: Sequence[Row], width: int | None = None) -> Layout:
    """The table laid out at most ``width`` wide (None: its natural width)."""
    return fit(table_columns(rows), rows, width)


def rich_table(rows: list[Row], title: str = "", width: int | None = None) -> Table:
    """The table as a rich ``Table`` that fits ``width`` (the terminal shows it in colour);
    :func:`legend` with the same width says what was abbreviated or left out."""
    return layout_table(fit_table(rows, width), title, row_styles(rows))


def row_styles(rows: Sequence[Row]) -> list[str | None]:
    """The colour of each row on a terminal: failed cases red, skipped ones yellow."""
    return [None if row.status == "ok" else "yellow" if row.status.startswith("skipped")
            else "red" for row in rows]


def render_text(rows: list[Row], title: str = "", width: int | None = None) -> str:
    """The table as plain text (no colour) at most ``width`` wide (None: its natural
    width), with its legend, e.g. for ``Comparison.table()``."""
    layout = fit_table(rows, width)
    text = render(layout, title)
    return "\n".join([text, *wrap_lines(legend(rows, width).splitlines(), width)]) if rows \
        else text


def failure_notes(rows: list[Row]) -> dict[str, tuple[int, str]]:
    """case_id -> (note number, reason) for every failed row."""
    failed = [row for row in rows if row.status != "ok"]
    return {row.case_id: (index, row.reason) for index, row in enumerate(failed, start=1)}


def table_notes(rows: list[Row]) -> dict[str, tuple[int, str]]:
    """case_id -> (note number, text): every failure's reason, then every different optimum's."""
    notes = failure_notes(rows)
    for row in rows:
        if row.status == "ok" and row.optimum is not None and row.optimum.differs:
            notes[row.case_id] = (len(notes) + 1, "different optimum: " + row.optimum.reason)
    return notes


SPEEDUP_INTERVALS = {
    INTERLEAVED: "; (interval paired): the median of the per-round ratios of cases measured "
                 "interleaved, and that median's interval",
    ISOLATED: "; (interval): reference median / case median of cases measured isolated, "
              "interval from the medians' confidence intervals",
}
"""What the legend says of each kind of speed-up interval (``Speedup.measurement``)."""


def legend(rows: list[Row], width: int | None = None) -> str:
    """What the table's marks mean, what was abbreviated or left out at ``width``, then one
    numbered line per failure or different optimum with its reason (plain text: print it
    with markup off)."""
    layout = fit_table(rows, width)
    spread = any("(IQR)" in heading for heading in layout.headings)
    notes = ["times: median (interquartile range) over n counted repeats, warm-up excluded"
             if spread else "times: median over the counted repeats, warm-up excluded "
             "(spread and n at a wider width)"]
    if any(row.noisy for row in rows):
        notes.append("~ / noisy: the median's confidence interval stayed wider than the target")
    if any(row.oversubscribed for row in rows):
        notes.append("oversubscribed: more ranks than cores (oversubscribe = true); its times "
                     "measure sharing, not scaling")
    kinds = {value.measurement for row in rows if not row.is_reference
             for value in row.phase_speedups}
    if kinds:
        notes.append("speedup: reference time / case time, main phase first, other phases "
                     "beside it" + "".join(SPEEDUP_INTERVALS[kind] for kind in sorted(kinds)))
    if any(not row.is_reference and not has_interval(value)
           for row in rows for value in row.phase_speedups):
        notes.append(f"(n too small): {NO_INTERVAL} (its bounds would reach 0 and infinity); "
                     "more repeats give one")
    if any(row.iterations is not None for row in rows) and \
            any("iterations" in heading for heading in layout.headings):
        notes.append("iterations: this fit's vs the reference's, and the speedup per iteration")
    busy = [row.busy_host for row in rows if row.busy_host is not None]
    if busy:
        highest = load_text(max(busy, key=lambda found: found[0] / found[1]))
        notes.append(f"busy host: the host's 1-minute load average exceeded its cores while the case "
                     f"ran (highest: {highest}); other work shared them, so its "
                     "times and speedups may not repeat")
    for where in dict.fromkeys(row.open_listeners for row in rows if row.open_listeners):
        notes.append(f"unauthenticated listeners: {where}")
    if any(row.warmup_note for row in rows):
        notes.append("a phase whose first run took seconds counted it instead of warming up")
    lines = ["; ".join(notes[:2]), *notes[2:], *layout.legend]
    for case_id, (number, reason) in table_notes(rows).items():
        lines.append(f"[{number}] {case_id}: {reason}")
    return "\n".join(lines)


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
    """Machine-readable results: the run, every row, and every full case record (as stored:
    a case's ``ranks`` under their stored name ``workers``, see :class:`CaseResult`)."""
    cleaned: dict[str, Any] = json_clean({
        "run": {key: value for key, value in run.to_dict().items() if key != "spec_text"},
        "rows": [row.to_dict() for row in rows],
        "cases": [result.to_dict() for result in results],
        "failed": [row.case_id for row in rows if row.status.startswith("failed")],
        "skipped": [row.case_id for row in rows if row.status.startswith("skipped")],
    })
    return cleaned
