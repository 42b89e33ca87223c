"""Reproducibility baselines: a reviewable JSON file of what each case answered, and the check.

A baseline is made from a stored run (:func:`make_baseline`) and committed next to the spec.
``python -m accelml check SPEC --baseline FILE`` runs the spec again (or reads a stored run)
and :func:`check_run` compares every case with the baseline. The file is plain, sorted,
indented JSON, so a pull request that changes it shows which case's answer moved::

    {
      "format": "accelml-baseline",
      "version": 2,
      "created_at": "2026-11-26T05:00:00+00:00",
      "run_id": "20261126-050000-ab12",
      "spec": {"name": "smoke", "hash": "..."},
      "environment": {... python, CPU, library versions, env_hash ...},
      "tolerances": {                      # defaults for every case (edit to loosen)
        "score":  {"atol": 1e-09, "rtol": 1e-06},     # |new - old| <= atol + rtol*|old|
        "labels": {"min_agreement": 1.0},             # fraction of equal labels
        "values": {"atol": 1e-09, "rtol": 1e-06},     # elementwise, like numpy.isclose
        "loss":   {"atol": 1e-06, "rtol": 1e-05},     # deep learning: final loss
        "accuracy": {"atol": 0.0},                    # deep learning: final accuracy
        "bitwise": false,                             # true: any changed digest is drift
        "ranks": true,                                # DL: all ranks must end equal
        "label_agreement": {"atol": 0.0, "rtol": 0.0},   # one key per measure (comparisons)
        "identical": true, ...
      },
      "cases": {
        "<case_id>": {
          "label": "kmeans/sklearn/cpu on blobs (n_clusters=4, random_state=0)",
          "algorithm": "kmeans", "backend": "sklearn", "device": "cpu", "workers": 1, ...
          "status": "ok",
          "scores": {"inertia": 1234.5},
          "arrays": {"predictions": {"digest": "...", "dtype": "int32", "shape": [500],
                                     "summary": {...}, "values": [0, 3, 1, ...]}},
          "dl": {"final_loss": 0.31, "final_accuracy": 0.9, "ranks_identical": true},
          "expectation": {"bitwise": true, "reason": "..."},
          "tolerances": {"score.inertia": {"rtol": 1e-4}}      # optional, per case
        }
      },
      "comparisons": [                     # the run's agreement matrix, one value per measure
        {"kind": "cross-backend", "reference": "<case_id>", "other": "<case_id>",
         "label": "kmeans/sklearnex/cpu on blobs (...) vs kmeans/sklearn/cpu on blobs (...)",
         "measures": {"identical": false, "label_agreement": 0.998, "score_difference": -2.5},
         "tolerances": {"label_agreement": {"atol": 0.01, "rtol": 0.0}}   # optional
        }
      ]
    }

Two kinds of tolerance keys. A case's own answer, compared with the baseline's: ``score``,
``labels``, ``values``, ``loss``, ``accuracy``, ``bitwise`` and ``ranks``; such a key may name
one score or array (``score.accuracy``, ``values.probabilities``, ``labels.predictions``) and
then wins over the general key. The run's comparisons (cross-backend, -device, -scale: how
far each case is from its reference case), compared with the baseline's: one key per
measure that has a :class:`accelml.agreement.point.Tolerance` (the built-ins and any third
party's), ``{"atol": ..., "rtol": ...}`` for numbers (``|now - baseline| <= atol + rtol *
|baseline|``), ``true`` for a yes/no measure whose yes must stay yes. Per-case and
per-comparison tolerances win over the file's; cases (and comparisons of cases) whose
repeats are not expected to be bitwise identical get looser ones, written into the file.
Arrays up to ``inline_limit`` elements are kept in the file (exact: floats are written
with all their digits), so a check on another machine can measure how far they moved; larger
arrays keep their digest and a summary (mean, std, min, max or class counts) and are compared
in full when the store being checked still holds them. Version 1 files (no comparisons) are
still read.

>>> tolerance = Tolerances.from_dict({"score": {"rtol": 1e-3}, "score.accuracy": {"atol": 0.01}})
>>> tolerance.bounds("score", "accuracy"), tolerance.bounds("score", "r2")
((0.01, 0.0), (0.0, 0.001))
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from accelml.agreement.arrays import (
    ArrayAgreement,
    compare_arrays,
    is_label_array,
    matched_values,
)
from accelml.agreement.matrix import Agreement, agreement_matrix, case_label
from accelml.agreement.point import MEASURES, Bounds, Ideal, Measure, measures, output_task
from accelml.convert import MAX_NESTING, nesting_too_deep
from accelml.errors import AccelmlError, SpecError
from accelml.expectations import run_to_run_expectation
from accelml.results.records import CaseResult, Environment, FailureKind
from accelml.results.store import ResultsStore, array_digest

FORMAT = "accelml-baseline"
VERSION = 2
DEFAULT_INLINE_LIMIT = 20_000

DEFAULT_TOLERANCES: dict[str, Any] = {
    "score": {"atol": 1e-9, "rtol": 1e-6},
    "labels": {"min_agreement": 1.0},
    "values": {"atol": 1e-9, "rtol": 1e-6},
    "loss": {"atol": 1e-6, "rtol": 1e-5},
    "accuracy": {"atol": 0.0},
    "bitwise": False,
    "ranks": True,
}
"""Strict defaults: the same spec on the same software should give the same answer up to
round-off. Cases whose repeats are not expected to be bitwise identical get looser ones,
written into the file (:data:`NONDETERMINISTIC_TOLERANCES`)."""

NONDETERMINISTIC_TOLERANCES: dict[str, Any] = {
    "score": {"atol": 1e-6, "rtol": 1e-3},
    "labels": {"min_agreement": 0.99},
    "values": {"atol": 1e-4, "rtol": 1e-2},
    "loss": {"atol": 1e-3, "rtol": 1e-2},
    "accuracy": {"atol": 0.01},
}

ANSWER_KEYS = ("score", "labels", "values", "loss", "accuracy", "bitwise", "ranks")
"""Tolerance keys of a case's own answer; the measures' keys gate the run's comparisons."""


def measure_keys(measures_used: tuple[Measure, ...]) -> dict[str, Measure]:
    """Tolerance key -> the measure it gates (measures without a tolerance are not gated)."""
    keys: dict[str, Measure] = {}
    for measure in measures_used:
        if measure.tolerance is None:
            continue
        key = measure.tolerance.key
        if key in ANSWER_KEYS or key in keys or "." in key:
            raise AccelmlError(f"measure {measure.name!r}: tolerance key {key!r} is taken or "
                               f"has a '.'; the keys in use are "
                               + ", ".join([*ANSWER_KEYS, *keys]))
        keys[key] = measure
    return keys


def _entry(value: Bounds | bool) -> dict[str, float] | bool:
    return value if isinstance(value, bool) else value.to_dict()


def default_tolerances(measures_used: tuple[Measure, ...]) -> dict[str, Any]:
    """The file-wide tolerances a new baseline gets: the answers' and every gated measure's."""
    return {**DEFAULT_TOLERANCES,
            **{key: _entry(measure.tolerance.default)
               for key, measure in measure_keys(measures_used).items() if measure.tolerance}}


# ---------------------------------------------------------------- tolerances


@dataclass(frozen=True)
class Tolerances:
    """The tolerance table of a baseline or case: general keys and per-metric keys."""

    entries: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, where: str = "tolerances",
                  measures_used: tuple[Measure, ...] = ()) -> Tolerances:
        """Validated tolerances; ``measures_used`` are the measures whose keys are allowed."""
        data = data or {}
        if not isinstance(data, dict):
            raise SpecError(f"{where} must be a table, not {type(data).__name__}")
        gated = measure_keys(measures_used)
        for key, value in data.items():
            if key in gated:
                _check_measure_entry(gated[key], value, f"{where}.{key}")
                continue
            general = key.split(".", 1)[0]
            if general not in ANSWER_KEYS:
                raise SpecError(f"{where}: unknown tolerance {key!r}; allowed: "
                                + ", ".join([*ANSWER_KEYS, *gated]) + " (or e.g. score.accuracy)")
            if general in ("bitwise", "ranks"):
                if not isinstance(value, bool):
                    raise SpecError(f"{where}.{key} must be true or false")
                continue
            if not isinstance(value, dict):
                raise SpecError(f"{where}.{key} must be a table such as {{atol = 0.0, rtol = 1e-6}}")
            allowed = ("min_agreement",) if general == "labels" else ("atol", "rtol")
            for name, number in value.items():
                if name not in allowed:
                    raise SpecError(f"{where}.{key}: unknown key {name!r}; allowed: "
                                    + ", ".join(allowed))
                if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0:
                    raise SpecError(f"{where}.{key}.{name} must be a number >= 0")
        return cls(tuple(sorted(data.items())))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.entries)

    def over(self, base: Tolerances) -> Tolerances:
        """These tolerances, falling back to ``base`` for keys they lack."""
        merged = dict(base.entries)
        merged.update(self.entries)
        return Tolerances(tuple(sorted(merged.items())))

    def _lookup(self, general: str, name: str | None) -> Any:
        table = dict(self.entries)
        if name is not None and f"{general}.{name}" in table:
            return table[f"{general}.{name}"]
        if general in table:
            return table[general]
        return DEFAULT_TOLERANCES[general]

    def measure(self, measure: Measure) -> Bounds | bool:
        """How far ``measure`` may move in a comparison (its own default when the table lacks it)."""
        if measure.tolerance is None:
            return False
        value = dict(self.entries).get(measure.tolerance.key)
        if value is None:
            return measure.tolerance.default
        if isinstance(value, bool):
            return value
        return Bounds(float(value.get("atol", 0.0)), float(value.get("rtol", 0.0)))

    def bounds(self, general: str, name: str | None = None) -> tuple[float, float]:
        """``(atol, rtol)`` for ``score``/``values``/``loss``/``accuracy`` (and one name)."""
        entry = self._lookup(general, name)
        return float(entry.get("atol", 0.0)), float(entry.get("rtol", 0.0))

    def min_agreement(self, name: str | None = None) -> float:
        return float(self._lookup("labels", name).get("min_agreement", 1.0))

    def flag(self, general: str) -> bool:
        return bool(self._lookup(general, None))


def _check_measure_entry(measure: Measure, value: Any, where: str) -> None:
    if measure.ideal is Ideal.TRUE:
        if not isinstance(value, bool):
            raise SpecError(f"{where} must be true or false")
        return
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a table such as {{atol = 0.0, rtol = 1e-6}}")
    for name, number in value.items():
        if name not in ("atol", "rtol"):
            raise SpecError(f"{where}: unknown key {name!r}; allowed: atol, rtol")
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0:
            raise SpecError(f"{where}.{name} must be a number >= 0")


def _within(old: float, new: float, atol: float, rtol: float) -> bool:
    if old == new or (math.isnan(old) and math.isnan(new)):
        return True
    return abs(new - old) <= atol + rtol * abs(old)


# ---------------------------------------------------------------- the baseline file


def _summary(array: np.ndarray, labels: bool) -> dict[str, Any]:
    if labels:
        values, counts = np.unique(array.ravel(), return_counts=True)
        return {"classes": {str(v): int(c) for v, c in zip(values.tolist(), counts.tolist(), strict=True)}}
    if array.size == 0:
        return {}
    data = np.asarray(array, dtype=np.float64)
    return {"mean": float(np.nanmean(data)), "std": float(np.nanstd(data)),
            "min": float(np.nanmin(data)), "max": float(np.nanmax(data))}


def _inline(array: np.ndarray) -> list[Any]:
    return array.ravel().tolist()


def _from_inline(entry: dict[str, Any]) -> np.ndarray:
    array = np.array(entry["values"], dtype=np.dtype(entry["dtype"]))
    return array.reshape(tuple(entry["shape"]))


_PER_LINE = 16
_FLOATS_PER_LINE = 4


def _dump(value: Any, depth: int) -> str:
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{json.dumps(str(key))}: {_dump(value[key], depth + 1)}"
                 for key in sorted(value, key=str)]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(item, (dict, list, tuple)) for item in value):
            texts = [json.dumps(item, allow_nan=True) for item in value]
            per_line = _FLOATS_PER_LINE if any(isinstance(v, float) for v in value) else _PER_LINE
            if len(texts) <= per_line:
                return "[" + ", ".join(texts) + "]"
            lines = [inner + ", ".join(texts[i:i + per_line])
                     for i in range(0, len(texts), per_line)]
            return "[\n" + ",\n".join(lines) + "\n" + pad + "]"
        return "[\n" + ",\n".join(inner + _dump(item, depth + 1) for item in value) + "\n" + pad + "]"
    return json.dumps(value, allow_nan=True)


@dataclass(frozen=True)
class BaselineCase:
    """One case of a baseline (a parsed ``cases.<id>`` table)."""

    case_id: str
    data: dict[str, Any]
    tolerances: Tolerances

    @property
    def label(self) -> str:
        return str(self.data.get("label", self.case_id))

    def identity(self) -> dict[str, Any]:
        return {key: self.data.get(key) for key in
                ("algorithm", "backend", "device", "workers", "strategy", "dataset", "params")}


@dataclass(frozen=True)
class BaselineComparison:
    """One comparison of the baseline's run (cross-backend, -device or -scale): its two cases
    and the value of every gated measure (a parsed ``comparisons`` entry)."""

    kind: str
    reference: str                 # case ids
    other: str
    label: str
    values: tuple[tuple[str, float | bool | None], ...]
    tolerances: Tolerances

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.reference, self.other)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reference": self.reference, "other": self.other,
                "label": self.label, "measures": dict(self.values),
                **({"tolerances": self.tolerances.to_dict()} if self.tolerances.entries else {})}

    @classmethod
    def from_dict(cls, data: Any, where: str, measures_used: tuple[Measure, ...]
                  ) -> BaselineComparison:
        if not isinstance(data, dict) or not all(
                isinstance(data.get(key), str) for key in ("kind", "reference", "other")):
            raise SpecError(f"{where} must be a table with kind, reference and other (case ids)")
        values = data.get("measures") or {}
        if not isinstance(values, dict) or not all(
                value is None or isinstance(value, (bool, int, float)) for value in values.values()):
            raise SpecError(f"{where}.measures must be a table of measure name -> number, "
                            "true/false or null")
        return cls(data["kind"], data["reference"], data["other"], str(data.get("label", "")),
                   tuple(sorted(values.items())),
                   Tolerances.from_dict(data.get("tolerances"), f"{where}.tolerances",
                                        measures_used))


@dataclass(frozen=True)
class Baseline:
    """A parsed baseline file (see the module docstring for its format)."""

    run_id: str
    created_at: str
    spec_name: str
    spec_hash: str
    environment: Environment | None
    tolerances: Tolerances
    cases: tuple[BaselineCase, ...]
    inline_limit: int = DEFAULT_INLINE_LIMIT
    comparisons: tuple[BaselineComparison, ...] = ()

    def case(self, case_id: str) -> BaselineCase | None:
        for case in self.cases:
            if case.case_id == case_id:
                return case
        return None

    def comparison(self, key: tuple[str, str, str]) -> BaselineComparison | None:
        return next((entry for entry in self.comparisons if entry.key == key), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION, "created_at": self.created_at,
            "run_id": self.run_id, "spec": {"name": self.spec_name, "hash": self.spec_hash},
            "environment": None if self.environment is None else self.environment.to_dict(),
            "inline_limit": self.inline_limit,
            "tolerances": self.tolerances.to_dict(),
            "cases": {case.case_id: {**case.data, **({"tolerances": case.tolerances.to_dict()}
                                                      if case.tolerances.entries else {})}
                      for case in self.cases},
            "comparisons": [entry.to_dict() for entry in self.comparisons],
        }

    def to_json(self) -> str:
        """Indented, key-sorted JSON; lists of numbers are written several to a line (16
        labels, 4 floats), so a diff of a baseline points at the values that moved."""
        return _dump(self.to_dict(), 0) + "\n"

    def write(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(self.to_json())
        temporary.replace(path)

    @classmethod
    def from_dict(cls, data: Any, where: str = "baseline") -> Baseline:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise SpecError(f"{where}: not an accelml baseline (no \"format\": \"{FORMAT}\")")
        version = data.get("version")
        if not isinstance(version, int) or version > VERSION:
            raise SpecError(f"{where}: baseline version {version!r}; this accelml reads up to {VERSION}")
        cases_data = data.get("cases")
        if not isinstance(cases_data, dict):
            raise SpecError(f"{where}: \"cases\" must be a table of case id -> case")
        comparisons_data = data.get("comparisons") or []
        if not isinstance(comparisons_data, list):
            raise SpecError(f"{where}: \"comparisons\" must be a list of comparisons")
        found = measures()
        cases = []
        for case_id, entry in cases_data.items():
            if not isinstance(entry, dict) or "status" not in entry:
                raise SpecError(f"{where}: cases.{case_id} must be a table with a status")
            for name, array in (entry.get("arrays") or {}).items():
                if not isinstance(array, dict) or "digest" not in array:
                    raise SpecError(f"{where}: cases.{case_id}.arrays.{name} needs a digest")
                if "values" in array:
                    try:
                        restored = _from_inline(array)
                    except (TypeError, ValueError, KeyError) as error:
                        raise SpecError(f"{where}: cases.{case_id}.arrays.{name}: {error}") from None
                    if array_digest(restored) != array["digest"]:
                        raise SpecError(f"{where}: cases.{case_id}.arrays.{name}: the values do "
                                        "not match the digest (edited by hand?)")
            tolerances = Tolerances.from_dict(entry.get("tolerances"),
                                              f"{where}: cases.{case_id}.tolerances", found)
            body = {k: v for k, v in entry.items() if k != "tolerances"}
            cases.append(BaselineCase(case_id, body, tolerances))
        environment = data.get("environment")
        spec = data.get("spec") or {}
        return cls(
            run_id=str(data.get("run_id", "")),
            created_at=str(data.get("created_at", "")),
            spec_name=str(spec.get("name", "")),
            spec_hash=str(spec.get("hash", "")),
            environment=None if not environment else Environment.from_dict(environment),
            tolerances=Tolerances.from_dict(data.get("tolerances"), f"{where}: tolerances", found),
            cases=tuple(cases),
            inline_limit=int(data.get("inline_limit", DEFAULT_INLINE_LIMIT)),
            comparisons=tuple(BaselineComparison.from_dict(entry, f"{where}: comparisons[{index}]",
                                                           found)
                              for index, entry in enumerate(comparisons_data)),
        )

    @classmethod
    def read(cls, path: str | Path) -> Baseline:
        """Read and validate a baseline file; :class:`SpecError` (exit 2) when it is not one."""
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise SpecError(f"{path}: no such baseline file (make one with --update-baseline)") from None
        except OSError as error:
            raise SpecError(f"{path}: cannot read the baseline: {error.strerror}") from None
        except UnicodeDecodeError as error:
            raise SpecError(f"{path}: not a baseline: not UTF-8 text (byte {error.start})") from None
        try:
            data = json.loads(text)
            too_deep = nesting_too_deep(data)
        except json.JSONDecodeError as error:
            raise SpecError(f"{path}: not valid JSON: {error.msg} at line {error.lineno}") from None
        except RecursionError:   # nested deeper than Python's parser can follow
            too_deep = True
        if too_deep:
            raise SpecError(f"{path}: not a baseline: its JSON nests more than {MAX_NESTING} "
                            "levels deep")
        return cls.from_dict(data, str(path))


def _case_entry(store: ResultsStore, result: CaseResult, inline_limit: int) -> dict[str, Any]:
    task = output_task(result)
    entry: dict[str, Any] = {
        "label": case_label(result), "algorithm": result.algorithm, "backend": result.backend,
        "device": result.device, "workers": result.workers, "strategy": result.strategy,
        "dataset": result.dataset, "params": dict(result.params), "task": task,
        "status": result.status,
    }
    if result.dataset_info is not None:
        entry["dataset_digest"] = result.dataset_info.digest
    if not result.ok:
        entry["reason"] = result.reason
        return entry
    entry["scores"] = {score.name: score.value for score in result.scores}
    arrays = {}
    for ref in result.predictions:
        item: dict[str, Any] = {"digest": ref.digest, "dtype": ref.dtype, "shape": list(ref.shape)}
        array = store.read_array(ref.digest)
        item["summary"] = _summary(array, is_label_array(ref.name, array.dtype, task))
        if array.size <= inline_limit and array.dtype.kind in "iubfUS":
            item["values"] = _inline(array)
        arrays[ref.name] = item
    entry["arrays"] = arrays
    if result.repeat_prediction_digests:
        entry["repeats_identical"] = len(set(result.repeat_prediction_digests)) == 1
    if result.dl is not None:
        entry["dl"] = {"final_loss": result.dl.final_loss,
                       "final_accuracy": result.dl.final_accuracy,
                       "test_loss": result.dl.test_loss,
                       "test_accuracy": result.dl.test_accuracy,
                       "ranks_identical": result.dl.ranks_identical,
                       "rank0_weights": (result.dl.rank_weight_digests[0]
                                         if result.dl.rank_weight_digests else None)}
    expectation = run_to_run_expectation(result)
    entry["expectation"] = expectation.to_dict()
    return entry


def make_baseline(store: ResultsStore, run_id: str, *, inline_limit: int = DEFAULT_INLINE_LIMIT,
                  tolerances: dict[str, Any] | None = None,
                  previous: Baseline | None = None) -> Baseline:
    """A baseline from stored run ``run_id``.

    Tolerances (file-wide and per case) of a ``previous`` baseline are kept, so
    ``--update-baseline`` never drops a tolerance someone reviewed. Cases whose repeats are
    not expected to be bitwise identical get :data:`NONDETERMINISTIC_TOLERANCES`.
    """
    run = store.get_run(run_id)
    store.verify(run.run_id)
    results = store.case_results(run.run_id)
    if not results:
        raise AccelmlError(f"run {run.run_id} has no stored cases to make a baseline from")
    found = measures()
    defaults = Tolerances.from_dict(default_tolerances(found), measures_used=found)
    general = Tolerances.from_dict(tolerances, measures_used=found).over(defaults) \
        if tolerances is not None else (previous.tolerances.over(defaults) if previous else defaults)
    cases = []
    for result in results:
        entry = _case_entry(store, result, inline_limit)
        kept = previous.case(result.case_id) if previous else None
        if kept is not None and kept.tolerances.entries:
            case_tolerances = kept.tolerances
        elif result.ok and not entry["expectation"]["bitwise"]:
            case_tolerances = Tolerances.from_dict(NONDETERMINISTIC_TOLERANCES)
        else:
            case_tolerances = Tolerances()
        cases.append(BaselineCase(result.case_id, entry, case_tolerances))
    repeat_bitwise = {case.case_id: bool(case.data.get("expectation", {}).get("bitwise"))
                      for case in cases}
    matrix = agreement_matrix(store, run.run_id, measures_used=found)
    comparisons = tuple(
        _comparison_entry(agreement, found, previous,
                          repeat_bitwise[agreement.a.case_id] and repeat_bitwise[agreement.b.case_id])
        for agreement in matrix.cross_backend + matrix.cross_device + matrix.cross_scale)
    return Baseline(
        run_id=run.run_id, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        spec_name=run.spec_name, spec_hash=run.spec_hash,
        environment=run.environment or results[0].environment,
        tolerances=general, cases=tuple(cases), inline_limit=inline_limit,
        comparisons=comparisons,
    )


def _comparison_entry(agreement: Agreement, measures_used: tuple[Measure, ...],
                      previous: Baseline | None, repeats_bitwise: bool) -> BaselineComparison:
    """A comparison of the run with the value of every gated measure. It keeps the reviewed
    tolerances of the ``previous`` baseline's same comparison, else gets the measures' loose
    ones when either case is not expected to repeat bitwise."""
    gated = measure_keys(measures_used)
    values = tuple(sorted((measure.name, reading.value) for measure, reading in agreement.readings
                          if measure.tolerance is not None))
    key = (agreement.kind, agreement.a.case_id, agreement.b.case_id)
    kept = previous.comparison(key) if previous else None
    if kept is not None and kept.tolerances.entries:
        tolerances = kept.tolerances
    elif repeats_bitwise:
        tolerances = Tolerances()
    else:
        tolerances = Tolerances(tuple(sorted(
            (key_name, _entry(measure.tolerance.loose)) for key_name, measure in gated.items()
            if measure.tolerance is not None and measure.tolerance.loose != measure.tolerance.default)))
    return BaselineComparison(agreement.kind, agreement.a.case_id, agreement.b.case_id,
                              f"{agreement.b.label} vs {agreement.a.label}", values, tolerances)


# ---------------------------------------------------------------- the check


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
        import xml.etree.ElementTree as ElementTree

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
                      bound: Bounds | bool) -> tuple[Any, str, str] | None:
    """(difference, tolerance, note) when ``new`` moved beyond ``bound`` from ``old``, else None.

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


class _Checker:
    def __init__(self, store: ResultsStore, baseline: Baseline):
        self.store = store
        self.baseline = baseline
        self.drifts: list[Drift] = []
        self.metrics = 0

    def drift(self, case: BaselineCase, metric: str, old: Any, new: Any, difference: Any,
              tolerance: str, note: str = "") -> None:
        self.drifts.append(Drift(case.case_id, case.label, metric, old, new, difference,
                                 tolerance, note))

    def check_comparison(self, stored: BaselineComparison, current: Agreement,
                         measures_used: tuple[Measure, ...]) -> None:
        """Every gated measure of one comparison against the baseline's value."""
        tolerances = stored.tolerances.over(self.baseline.tolerances)
        values = dict(stored.values)
        for measure in measures_used:
            if measure.tolerance is None or measure.name not in values:
                continue
            self.metrics += 1
            old, new = values[measure.name], current.value(measure.name)
            drift = _comparison_drift(old, new, tolerances.measure(measure))
            if drift is not None:
                difference, tolerance, note = drift
                self.drifts.append(Drift(
                    current.b.case_id, current.b.label, f"{stored.kind}.{measure.name}", old, new,
                    difference, tolerance, f"against {current.a.label}" + (f": {note}" if note else "")))


    def check_case(self, case: BaselineCase, result: CaseResult) -> None:
        tolerances = case.tolerances.over(self.baseline.tolerances)
        data = case.data
        self.metrics += 1
        if data["status"] == "ok" and not result.ok:
            self.drift(case, "status", "ok", "failed", "-", "must succeed", result.reason)
            return
        if data["status"] != "ok":
            return      # it failed in the baseline: nothing to compare
        self._scores(case, result, tolerances)
        self._arrays(case, result, tolerances)
        self._dl(case, result, tolerances)
        self._repeats(case, result)

    def _repeats(self, case: BaselineCase, result: CaseResult) -> None:
        digests = result.repeat_prediction_digests
        if not data_says_identical(case.data) or len(digests) < 2:
            return
        self.metrics += 1
        distinct = len(set(digests))
        if distinct > 1:
            self.drift(case, "repeats.identical", True, False, f"{distinct} different",
                       "bitwise repeats", f"{distinct} different predictions over "
                       f"{len(digests)} repeats; identity is expected here: "
                       + case.data.get("expectation", {}).get("reason", ""))

    def _scores(self, case: BaselineCase, result: CaseResult, tolerances: Tolerances) -> None:
        current = {score.name: score.value for score in result.scores}
        for name, old in (case.data.get("scores") or {}).items():
            self.metrics += 1
            if name not in current:
                self.drift(case, f"score.{name}", old, None, "-", "must exist",
                           "this score is no longer reported")
                continue
            old_value = math.nan if old is None else float(old)
            new = current[name]
            atol, rtol = tolerances.bounds("score", name)
            if not _within(old_value, new, atol, rtol):
                self.drift(case, f"score.{name}", old_value, new, new - old_value,
                           _bound_text(atol, rtol))

    def _baseline_array(self, entry: dict[str, Any]) -> np.ndarray | None:
        if "values" in entry:
            return _from_inline(entry)
        if self.store.has_array(entry["digest"]):
            return self.store.read_array(entry["digest"])
        return None

    def _arrays(self, case: BaselineCase, result: CaseResult, tolerances: Tolerances) -> None:
        task = case.data.get("task", "")
        bitwise = tolerances.flag("bitwise")
        for name, entry in (case.data.get("arrays") or {}).items():
            self.metrics += 1
            ref = result.prediction(name)
            if ref is None:
                self.drift(case, f"{name}", "present", "missing", "-", "must exist",
                           f"the run no longer stores {name!r}")
                continue
            if ref.digest == entry["digest"]:
                continue
            if bitwise:
                self.drift(case, f"{name}.digest", entry["digest"][:12], ref.digest[:12],
                           "changed", "bitwise")
            old = self._baseline_array(entry)
            new = self.store.read_array(ref.digest)
            if old is None:
                self._summaries(case, name, entry, new, task, tolerances)
                continue
            self._measure(case, name, compare_arrays(name, old, new, task=task), old, new,
                          tolerances, task)

    def _measure(self, case: BaselineCase, name: str, measure: ArrayAgreement,
                 old: np.ndarray, new: np.ndarray, tolerances: Tolerances, task: str) -> None:
        if measure.kind == "shape":
            self.drift(case, f"{name}.shape", list(old.shape), list(new.shape), "-", "must match")
        elif measure.kind == "labels":
            minimum = tolerances.min_agreement(name)
            if measure.label_agreement is not None and measure.label_agreement < minimum:
                self.drift(case, f"{name}.label_agreement", 1.0, measure.label_agreement,
                           measure.label_agreement - 1.0, f">= {minimum:g}",
                           "cluster ids matched (Hungarian)" if measure.matched else "")
        else:
            atol, rtol = tolerances.bounds("values", name)
            new, _ = matched_values(name, old, new, task)
            close = np.isclose(np.asarray(new, np.float64), np.asarray(old, np.float64),
                               atol=atol, rtol=rtol, equal_nan=True)
            if not close.all():
                self.drift(case, f"{name}.max_abs_diff", 0.0, measure.max_abs_diff,
                           measure.max_abs_diff, _bound_text(atol, rtol),
                           f"{int((~close).sum())} of {close.size} values outside; "
                           f"max relative {measure.max_rel_diff:.3g}")

    def _summaries(self, case: BaselineCase, name: str, entry: dict[str, Any], new: np.ndarray,
                   task: str, tolerances: Tolerances) -> None:
        summary = entry.get("summary") or {}
        labels = "classes" in summary
        current = _summary(new, labels)
        if labels:
            old_counts, new_counts = summary["classes"], current["classes"]
            moved = sum(abs(old_counts.get(k, 0) - new_counts.get(k, 0))
                        for k in set(old_counts) | set(new_counts)) / 2
            share = moved / max(1, new.size)
            minimum = tolerances.min_agreement(name)
            if task != "clustering" and 1.0 - share < minimum:
                self.drift(case, f"{name}.class_counts", old_counts, new_counts, f"{share:.3%} moved",
                           f">= {minimum:g} agreement", "baseline array not kept: class counts compared")
            return
        atol, rtol = tolerances.bounds("values", name)
        for key in ("mean", "std", "min", "max"):
            if key in summary and not _within(summary[key], current[key], atol, rtol):
                self.drift(case, f"{name}.{key}", summary[key], current[key],
                           current[key] - summary[key], _bound_text(atol, rtol),
                           "baseline array not kept: its summary was compared")

    def _dl(self, case: BaselineCase, result: CaseResult, tolerances: Tolerances) -> None:
        old = case.data.get("dl")
        if not old:
            return
        new = result.dl
        if new is None:
            self.drift(case, "dl", "present", "missing", "-", "must exist")
            return
        for key, general in (("final_loss", "loss"), ("test_loss", "loss"),
                             ("final_accuracy", "accuracy"), ("test_accuracy", "accuracy")):
            before, after = old.get(key), getattr(new, key)
            if before is None or after is None:
                continue
            self.metrics += 1
            atol, rtol = tolerances.bounds(general, key)
            if not _within(float(before), float(after), atol, rtol):
                self.drift(case, f"dl.{key}", before, after, after - before, _bound_text(atol, rtol))
        if tolerances.flag("ranks") and new.ranks_identical is False:
            self.metrics += 1
            self.drift(case, "dl.ranks_identical", old.get("ranks_identical"), False, "-",
                       "all ranks equal", "ranks ended with different weights")
        if tolerances.flag("bitwise") and old.get("rank0_weights") and new.rank_weight_digests \
                and new.rank_weight_digests[0] != old["rank0_weights"]:
            self.drift(case, "dl.weights", old["rank0_weights"][:12],
                       new.rank_weight_digests[0][:12], "changed", "bitwise")


def data_says_identical(entry: dict[str, Any]) -> bool:
    """The baseline's repeats were identical and identity is expected for this case."""
    return bool(entry.get("repeats_identical")) and bool(
        (entry.get("expectation") or {}).get("bitwise"))


def _what_changed(old: dict[str, Any], new: CaseResult) -> list[str]:
    current: dict[str, Any] = {"algorithm": new.algorithm, "backend": new.backend, "device": new.device,
               "workers": new.workers, "strategy": new.strategy, "dataset": new.dataset,
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
            changes.append(f"{key}: {before!r} -> {value!r}")
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
                       checker: _Checker) -> list[str]:
    """Gate the run's comparisons against the baseline's; the notes say what was not checked."""
    found = measures()
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
        checker.check_comparison(stored, entry, found)
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
    checker = _Checker(store, baseline)
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
                          f"now {case_label(closest)}")
            unmatched_new.remove(closest)
            checked += 1
            checker.check_case(case, closest)
        else:
            checker.metrics += 1
            checker.drift(case, "case", "present", "missing", "-", "must run",
                          "the run has no case with this definition")
    for result in unmatched_new:
        notes.append(f"not in the baseline: {case_label(result)} ({result.case_id})")
    if baseline.comparisons:
        notes.extend(_check_comparisons(store, run.run_id, baseline, checker))
    if skipped:
        notes.append(f"{len(skipped)} case(s) skipped, unavailable on this machine (--only-available)")
    return CheckReport(run.run_id, baseline.run_id, checked, checker.metrics,
                       tuple(checker.drifts), tuple(notes),
                       cases=tuple((case.case_id, case.label) for case in baseline.cases),
                       skipped=tuple(skipped))
