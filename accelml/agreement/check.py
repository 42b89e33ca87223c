"""``check``: every case of a run against its baseline entry, and the run's comparisons
against the values the baseline kept; what moved beyond its tolerance is drift (exit 1).

A case against its entry is one more pair run through the measures
(:mod:`accelml.agreement.point`) that gate comparisons: the baseline's answer is ``a`` (its
arrays from the file, else from the store being checked; where only a summary was kept, the
summaries are compared), the run's is ``b``. Each reading of each measure with a
:class:`~accelml.agreement.point.Tolerance` is drift when it is further from the measure's
ideal than the case's bound (``atol + rtol * reading.scale``; a yes/no measure gated with
``true`` must be yes). A measure of the case alone (its repeats, its ranks) must stay as the
baseline kept it where the case is expected to repeat bitwise. A comparison of the run
(cross-backend, -device, -scale) is drift when a measure's value moved beyond
``atol + rtol * |kept|`` from the baseline's, or a yes became a no. Adding a measure with a
tolerance therefore adds it to both, with no change here.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from accelml.agreement.arrays import ArrayAgreement, largest_magnitude, value_differences
from accelml.agreement.baseline import (
    RANKS_KEY,
    Baseline,
    BaselineCase,
    BaselineComparison,
    Bound,
    array_summary,
)
from accelml.agreement.matrix import PairAgreement, agreement_matrix, pair_of
from accelml.agreement.point import MEASURES, Measure, Outputs, Pair, Reading, measures
from accelml.results.records import CaseResult, FailureKind
from accelml.results.store import ResultsStore


@dataclass(frozen=True)
class Drift:
    """One thing that moved beyond its tolerance: which case, which metric, by how much."""

    case_id: str
    case: str                 # the case's label
    metric: str               # e.g. "score.accuracy", "predictions.label_agreement", "status"
    baseline: Any
    current: Any
    difference: Any
    tolerance: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


@dataclass(frozen=True)
class CheckReport:
    """The outcome of checking one run against a baseline."""

    run_id: str
    baseline_run_id: str
    checked: int                              # baseline cases found in the run and compared
    metrics: int                              # metrics compared
    drifts: tuple[Drift, ...]
    notes: tuple[str, ...] = field(default=())
    cases: tuple[tuple[str, str], ...] = field(default=())     # (case id, label) of every baseline case
    skipped: tuple[tuple[str, str], ...] = field(default=())   # (case id, why): unavailable here

    @property
    def ok(self) -> bool:
        return not self.drifts

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "baseline_run_id": self.baseline_run_id,
                "checked": self.checked, "metrics": self.metrics, "ok": self.ok,
                "drifts": [d.to_dict() for d in self.drifts], "notes": list(self.notes),
                "skipped": [{"case_id": case_id, "reason": why} for case_id, why in self.skipped]}

    def to_junit(self, suite: str = "accelml check") -> str:
        """JUnit XML (what CI systems show as a test report): one test per baseline case, a
        ``<failure>`` per metric that drifted, ``<skipped>`` for a case unavailable here.

        >>> report = CheckReport("r2", "r1", 1, 3, (Drift("c1", "kmeans/sklearn/cpu on b", "score.ari",
        ...                      1.0, 0.5, -0.5, "atol 0.01"),), cases=(("c1", "kmeans/sklearn/cpu on b"),
        ...                      ("c2", "kmeans/sklearnex/cuda on b")), skipped=(("c2", "no GPU"),))
        >>> print(report.to_junit())  # doctest: +ELLIPSIS
        <?xml version='1.0' encoding='utf-8'?>
        <testsuites name="accelml check" tests="2" failures="1" skipped="1" errors="0">...
        """
        failures = {case_id for case_id, _ in self.cases} & {drift.case_id for drift in self.drifts}
        skipped = dict(self.skipped)
        top = ElementTree.Element("testsuites", name=suite, tests=str(len(self.cases)),
                                  failures=str(len(failures)), skipped=str(len(skipped)), errors="0")
        tests = ElementTree.SubElement(top, "testsuite", name=suite, tests=str(len(self.cases)),
                                       failures=str(len(failures)), skipped=str(len(skipped)), errors="0")
        properties = ElementTree.SubElement(tests, "properties")
        for name, value in (("run_id", self.run_id), ("baseline_run_id", self.baseline_run_id)):
            ElementTree.SubElement(properties, "property", name=name, value=value)
        labels = dict(self.cases)
        orphans = [drift for drift in self.drifts if drift.case_id not in labels]
        for case_id, label in [*self.cases, *{(d.case_id, d.case) for d in orphans}]:
            test = ElementTree.SubElement(tests, "testcase", classname=suite, name=f"{label} [{case_id}]")
            if case_id in skipped:
                ElementTree.SubElement(test, "skipped", message=f"unavailable on this machine: {skipped[case_id]}")
            for drift in (d for d in self.drifts if d.case_id == case_id):
                failure = ElementTree.SubElement(
                    test, "failure", type="drift",
                    message=f"{drift.metric}: baseline {drift.baseline}, now {drift.current} ({drift.tolerance})")
                failure.text = drift.note or None
        if self.notes:
            ElementTree.SubElement(tests, "system-out").text = "\n".join(self.notes)
        ElementTree.indent(top)
        return ElementTree.tostring(top, encoding="unicode", xml_declaration=True) + "\n"

    def format(self, width: int = 60) -> str:
        """The table of what drifted (or one line saying all is within tolerance)."""
        lines = [f"note: {note}" for note in self.notes]
        if self.ok:
            lines.append(f"ok: {self.checked} case(s), {self.metrics} metric(s) within tolerance "
                         f"of baseline run {self.baseline_run_id}")
            return "\n".join(lines)
        header = ("case", "metric", "baseline", "now", "difference", "tolerance")
        rows: list[tuple[str, ...]] = [header]
        for drift in self.drifts:
            rows.append(tuple(_cell(value, width) for value in (
                drift.case, drift.metric, drift.baseline, drift.current, drift.difference,
                drift.tolerance)))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        table = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows]
        table.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"DRIFT: {len(self.drifts)} metric(s) in "
                     f"{len({d.case_id for d in self.drifts})} case(s) moved beyond tolerance "
                     f"of baseline run {self.baseline_run_id} ({self.checked} case(s) checked)")
        lines.extend(table)
        explained = [d for d in self.drifts if d.note]
        lines.extend(f"  {d.case}: {d.metric}: {d.note}" for d in explained)
        return "\n".join(lines)


def _cell(value: Any, width: int) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:.6g}"
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "~"


def _bound_text(atol: float, rtol: float) -> str:
    parts = []
    if atol:
        parts.append(f"atol {atol:g}")
    if rtol:
        parts.append(f"rtol {rtol:g}")
    return " + ".join(parts) or "exact"


def _comparison_drift(old: float | bool | None, new: float | bool | None,
                      bound: Bound) -> tuple[Any, str, str] | None:
    """(difference, tolerance, note) when ``new`` moved beyond ``bound`` from ``old``, else None.

    >>> from accelml.agreement.point import Bounds
    >>> _comparison_drift(0.9, 0.8, Bounds(atol=0.05))
    (-0.09999999999999998, 'atol 0.05', '')
    >>> _comparison_drift(True, False, True), _comparison_drift(True, False, False)
    (('-', 'must stay yes', ''), None)
    """
    if old is None:
        return None
    if new is None:
        return ("-", "must exist", "the measure no longer applies")
    if isinstance(bound, bool):
        return ("-", "must stay yes", "") if bound and old is True and new is not True else None
    if _within(float(old), float(new), bound.atol, bound.rtol):
        return None
    return (float(new) - float(old), _bound_text(bound.atol, bound.rtol), "")


def _within(old: float, new: float, atol: float, rtol: float) -> bool:
    if old == new or (math.isnan(old) and math.isnan(new)):
        return True
    return abs(new - old) <= atol + rtol * abs(old)


def _answer_drift(measure: Measure, reading: Reading, bound: Bound
                  ) -> tuple[Any, Any, str] | None:
    """(the ideal, difference, tolerance) when ``reading`` of a case against its baseline
    entry is further from ``measure``'s ideal than ``bound`` allows, else None.

    >>> from accelml.agreement.point import Aggregate, Bounds, Ideal
    >>> loss = Measure("loss_difference", "loss d", "", "", Ideal.ZERO, Aggregate.FIRST)
    >>> _answer_drift(loss, Reading(0.05, "final_loss", 0.4), Bounds(atol=1e-6, rtol=1e-5))
    (0.0, 0.05, 'atol 1e-06 + rtol 1e-05')
    >>> _answer_drift(loss, Reading(0.05, "final_loss", 0.4), Bounds(atol=0.1)) is None
    True
    """
    ideal: Any = {"one": 1.0, "zero": 0.0, "true": True}[measure.ideal.value]
    if isinstance(bound, bool):
        return (ideal, "-", "must be yes") if bound and reading.value is not True else None
    distance = measure.ideal.distance(reading.value)
    if distance <= bound.atol + bound.rtol * reading.scale:
        return None
    value = reading.value
    difference = value if isinstance(value, bool) else float(value) - float(ideal)
    return (ideal, difference, _bound_text(bound.atol, bound.rtol))


def _from_summary(name: str, entry: dict[str, Any], new: NDArray[np.generic], task: str
                  ) -> ArrayAgreement:
    """``new`` against an array the baseline kept only a summary of: class counts give a
    bound on label agreement (not for clustering, whose ids are arbitrary), and the mean,
    std, min and max are compared as values."""
    summary = entry.get("summary") or {}
    note = "baseline array not kept: its summary was compared"
    if "classes" in summary:
        old_counts = summary["classes"]
        new_counts = array_summary(new, True)["classes"]
        moved = sum(abs(old_counts.get(k, 0) - new_counts.get(k, 0))
                    for k in set(old_counts) | set(new_counts)) / 2
        agreement = None if task == "clustering" else 1.0 - moved / max(1, new.size)
        return ArrayAgreement(name, "labels", False, int(new.size), label_agreement=agreement,
                              note=note)
    keys = [key for key in ("mean", "std", "min", "max") if key in summary]
    old = np.array([summary[key] for key in keys], dtype=np.float64)
    current = array_summary(new, False)
    differences = value_differences(old, np.array([current[key] for key in keys], np.float64))
    return ArrayAgreement(name, "values", False, int(new.size),
                          max_abs_diff=differences["max_abs_diff"],
                          mean_abs_diff=differences["mean_abs_diff"],
                          max_rel_diff=differences["max_rel_diff"],
                          mean_rel_diff=differences["mean_rel_diff"], note=note,
                          scale=largest_magnitude(old))


class _Checker:
    def __init__(self, store: ResultsStore, baseline: Baseline, where: Path,
                 measures_used: tuple[Measure, ...]):
        self.store = store
        self.baseline = baseline
        self.where = where
        self.gated = tuple(measure for measure in measures_used if measure.tolerance is not None)
        self.drifts: list[Drift] = []
        self.metrics = 0

    def drift(self, case: BaselineCase, metric: str, old: Any, new: Any, difference: Any,
              tolerance: str, note: str = "") -> None:
        self.drifts.append(Drift(case.case_id, case.label, metric, old, new, difference,
                                 tolerance, note))

    def check_comparison(self, stored: BaselineComparison, current: PairAgreement) -> None:
        """Every gated measure of one comparison against the baseline's value."""
        tolerances = stored.tolerances.over(self.baseline.comparison_tolerances)
        values = dict(stored.values)
        for measure in self.gated:
            if measure.tolerance is None or measure.name not in values:
                continue
            self.metrics += 1
            bound = tolerances.bound(measure)
            old, new = values[measure.name], current.value(measure.name)
            drift = _comparison_drift(old, new, measure.tolerance.default if bound is None else bound)
            if drift is not None:
                difference, tolerance, note = drift
                self.drifts.append(Drift(
                    current.b.case_id, current.b.label, f"{stored.kind}.{measure.name}", old, new,
                    difference, tolerance, f"against {current.a.label}" + (f": {note}" if note else "")))

    def _pair(self, case: BaselineCase, result: CaseResult) -> Pair:
        """The baseline's answer (``a``) and the run's (``b``); arrays the baseline kept only
        a summary of are measured against the summary."""
        pair = pair_of(case.outputs(self.baseline.run_id, self.store, self.where),
                       Outputs(result, self.store))
        entries = case.data.get("arrays") or {}
        arrays = []
        for array in pair.arrays:
            ref = result.prediction(array.name)
            if array.kind == "missing" and ref is not None and array.name in entries:
                array = _from_summary(array.name, entries[array.name],
                                      self.store.read_array(ref.digest), pair.a.task)
            arrays.append(array)
        return replace(pair, arrays=tuple(arrays))

    def check_case(self, case: BaselineCase, result: CaseResult) -> None:
        data = case.data
        self.metrics += 1
        if data["status"] == "ok" and not result.ok:
            self.drift(case, "status", "ok", "failed", "-", "must succeed", result.reason)
            return
        if data["status"] != "ok":
            return      # it failed in the baseline: nothing to compare
        pair = self._pair(case, result)
        self._presence(case, result, pair)
        tolerances = case.tolerances.over(self.baseline.tolerances)
        found: dict[str, list[tuple[Measure, Reading, tuple[Any, Any, str]]]] = {}
        for measure in self.gated:
            if measure.compute is None or measure.tolerance is None or not measure.tolerance.answers:
                continue
            for reading in measure.compute(pair):
                self.metrics += 1
                bound = tolerances.bound(measure, reading.of)
                drift = _answer_drift(measure, reading,
                                      measure.tolerance.answer_default if bound is None else bound)
                if drift is not None:
                    found.setdefault(reading.of or measure.name, []).append((measure, reading, drift))
        shown = set()
        for moved in found.values():    # one drift per array or score: its first measure's
            measure, reading, (ideal, difference, tolerance) = moved[0]
            metric = f"{reading.of}.{measure.name}" if reading.of else measure.name
            shown.add(metric)
            array = next((item for item in pair.arrays if item.name == reading.of), None)
            notes = ([] if array is None else
                     [array.note, f"matched ({array.matched})" if array.matched else ""])
            if len(moved) > 1:
                notes.append("also beyond tolerance: " + ", ".join(
                    f"{other.name} {other.text(value)}" for other, value, _ in moved[1:]))
            self.drift(case, metric, ideal, reading.value, difference, tolerance,
                       "; ".join(note for note in notes if note))
        self._alone(case, result, shown)

    def _presence(self, case: BaselineCase, result: CaseResult, pair: Pair) -> None:
        """What the baseline's answer has and the run's lacks (no measure can apply to it)."""
        for array in pair.arrays:
            if array.kind == "shape":
                self.metrics += 1
                self.drift(case, f"{array.name}.shape", "same", "changed", "-", "must match",
                           array.note)
            elif array.kind == "missing" and result.prediction(array.name) is None:
                self.metrics += 1
                self.drift(case, array.name, "present", "missing", "-", "must exist",
                           f"the run no longer stores {array.name!r}")
        current = {score.name for score in result.scores}
        for name, old in (case.data.get("scores") or {}).items():
            if name not in current:
                self.metrics += 1
                self.drift(case, f"score.{name}", old, None, "-", "must exist",
                           "this score is no longer reported")
        if case.data.get("dl") and result.dl is None:
            self.metrics += 1
            self.drift(case, "dl", "present", "missing", "-", "must exist")

    def _alone(self, case: BaselineCase, result: CaseResult, shown: set[str]) -> None:
        """Each measure of the case alone (its repeats, its ranks) must stay as the baseline
        kept it, where the case is expected to repeat bitwise (the measure's loose bound
        elsewhere)."""
        kept = case.alone
        outputs = Outputs(result, self.store)
        for measure in self.gated:
            if measure.name not in kept or measure.tolerance is None:
                continue
            reading = measure.of(outputs)
            if reading is None:
                continue        # e.g. fewer than two repeats this time
            metric = f"{reading.of}.{measure.name}" if reading.of else measure.name
            if metric in shown:
                continue
            self.metrics += 1
            bound = measure.tolerance.default if case.expected_bitwise else measure.tolerance.loose
            drift = _comparison_drift(kept[measure.name], reading.value, bound)
            if drift is not None:
                difference, tolerance, note = drift
                reason = (case.data.get("expectation") or {}).get("reason", "")
                self.drift(case, metric, kept[measure.name], reading.value, difference, tolerance,
                           note or f"the baseline's was {kept[measure.name]}; expected here: {reason}")


def _what_changed(old: dict[str, Any], new: CaseResult) -> list[str]:
    current: dict[str, Any] = {"algorithm": new.algorithm, "backend": new.backend, "device": new.device,
               RANKS_KEY: new.ranks, "strategy": new.strategy, "dataset": new.dataset,
               "params": dict(new.params)}
    changes = []
    for key, value in current.items():
        before: Any = old.get(key)
        if key == "params":
            before = before or {}
            for name in sorted(set(before) | set(value)):
                if before.get(name) != value.get(name):
                    changes.append(f"params.{name}: {before.get(name)!r} -> {value.get(name)!r}")
        elif before != value:
            changes.append(f"{'ranks' if key == RANKS_KEY else key}: {before!r} -> {value!r}")
    digest = None if new.dataset_info is None else new.dataset_info.digest
    if old.get("dataset_digest") and digest and old["dataset_digest"] != digest:
        changes.append(f"dataset content: {old['dataset_digest'][:12]} -> {digest[:12]}")
    return changes


def _environment_note(baseline: Baseline, results: list[CaseResult]) -> str | None:
    if baseline.environment is None:
        return None
    current = next((r.environment for r in results if r.environment is not None), None)
    if current is None or current.env_hash == baseline.environment.env_hash:
        return None
    old_libs, new_libs = dict(baseline.environment.libraries), dict(current.libraries)
    changed = [f"{name} {old_libs.get(name, '-')} -> {new_libs.get(name, '-')}"
               for name in sorted(set(old_libs) | set(new_libs))
               if old_libs.get(name) != new_libs.get(name)]
    for name in ("python", "cpu_model", "logical_cores"):
        before, after = getattr(baseline.environment, name), getattr(current, name)
        if before != after:
            changed.append(f"{name} {before} -> {after}")
    return (f"environment differs from the baseline's ({baseline.environment.env_hash} -> "
            f"{current.env_hash}): " + ("; ".join(changed[:6]) or "GPUs or platform"))


def _check_comparisons(store: ResultsStore, run_id: str, baseline: Baseline,
                       checker: _Checker, found: tuple[Measure, ...]) -> list[str]:
    """Gate the run's comparisons against the baseline's; the notes say what was not checked."""
    known = {measure.name for measure in found}
    matrix = agreement_matrix(store, run_id, measures_used=found)
    current = {(entry.kind, entry.a.case_id, entry.b.case_id): entry for entry in matrix.comparisons}
    notes = []
    for stored in baseline.comparisons:
        entry = current.get(stored.key)
        if entry is None:
            notes.append(f"{stored.kind} comparison {stored.label or stored.other} was not made "
                         "in this run (a case changed, failed or is missing)")
            continue
        checker.check_comparison(stored, entry)
    absent = sorted({name for stored in baseline.comparisons for name, _ in stored.values} - known)
    if absent:
        notes.append("measures of the baseline not installed here, so not checked: "
                     + ", ".join(absent))
        notes.extend(f"measure plug-in {plugin.entry_point} failed to load: {plugin.reason}"
                     for plugin in MEASURES.broken())
    return notes


def check_run(store: ResultsStore, run_id: str, baseline: Baseline, *,
              skip_unavailable: bool = False) -> CheckReport:
    """Compare every case of stored run ``run_id`` with ``baseline``.

    ``skip_unavailable``: a case that could not run because its backend or device is not on
    this machine (failure kind ``unavailable``) is skipped, not drift (``--only-available``).

    A baseline case missing from the run is drift (``case`` metric). When a new case of the
    run differs from it in one defining field only (a backend swapped, a parameter changed),
    the drift names that change and the two cases' answers are compared as well. Cases of
    the run that the baseline lacks are listed as notes, not drift.
    """
    run = store.get_run(run_id)
    store.verify(run.run_id)     # every array, even those whose digests match the baseline's
    results = store.case_results(run.run_id)
    by_id = {result.case_id: result for result in results}
    found = measures()
    checker = _Checker(store, baseline, Path(f"<baseline of run {baseline.run_id}>"), found)
    notes = []
    note = _environment_note(baseline, results)
    if note:
        notes.append(note)
    if baseline.spec_hash and run.spec_hash and baseline.spec_hash != run.spec_hash:
        notes.append(f"the spec text differs from the one the baseline was made from "
                     f"({baseline.spec_name or 'unnamed'})")
    unmatched_new = [r for r in results if baseline.case(r.case_id) is None]
    checked = 0
    skipped = []
    for case in baseline.cases:
        result = by_id.get(case.case_id)
        if result is not None and skip_unavailable and result.failure is FailureKind.UNAVAILABLE:
            skipped.append((case.case_id, result.reason))
            continue
        if result is not None:
            checked += 1
            checker.check_case(case, result)
            continue
        closest = min(unmatched_new, key=lambda r: len(_what_changed(case.data, r)), default=None)
        changes = [] if closest is None else _what_changed(case.data, closest)
        if closest is not None and len(changes) == 1:
            checker.drift(case, "case", "present", "changed", changes[0], "same definition",
                          f"now {closest.label}")
            unmatched_new.remove(closest)
            checked += 1
            checker.check_case(case, closest)
        else:
            checker.metrics += 1
            checker.drift(case, "case", "present", "missing", "-", "must run",
                          "the run has no case with this definition")
    for result in unmatched_new:
        notes.append(f"not in the baseline: {result.label} ({result.case_id})")
    if baseline.comparisons:
        notes.extend(_check_comparisons(store, run.run_id, baseline, checker, found))
    if skipped:
        notes.append(f"{len(skipped)} case(s) skipped, unavailable on this machine (--only-available)")
    return CheckReport(run.run_id, baseline.run_id, checked, checker.metrics,
                       tuple(checker.drifts), tuple(notes),
                       cases=tuple((case.case_id, case.label) for case in baseline.cases),
                       skipped=tuple(skipped))
