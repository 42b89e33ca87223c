"""Reproducibility baselines: a reviewable JSON file of what each case answered.

A baseline is made from a stored run (:func:`make_baseline`) and committed next to the spec.
``python -m accelml check SPEC --baseline FILE`` runs the spec again (or reads a stored run)
and :func:`accelml.agreement.check.check_run` compares every case with the baseline. The
file is plain, sorted, indented JSON, so a pull request that changes it shows which case's
answer moved::

    {
      "format": "accelml-baseline",
      "version": 3,
      "created_at": "2026-11-26T05:00:00+00:00",
      "run_id": "20261126-050000-ab12",
      "spec": {"name": "smoke", "hash": "..."},
      "environment": {... python, CPU, library versions, env_hash ...},
      "tolerances": {                      # one key per measure with a Tolerance (edit to loosen)
        "cases": {                         # each case of the run against its entry below
          "label_agreement": {"atol": 0.0, "rtol": 0.0},  # |reading - ideal| <= atol + rtol*scale
          "max_abs_diff": {"atol": 1e-09, "rtol": 1e-06}, "identical": false, ...
        },
        "comparisons": {                   # each comparison of the run against its kept value
          "label_agreement": {"atol": 0.0, "rtol": 0.0},  # |now - kept| <= atol + rtol*|kept|
          "identical": true, ...
        }
      },
      "cases": {
        "<case_id>": {
          "label": "kmeans/sklearn/cpu on blobs (n_clusters=4, random_state=0)",
          "algorithm": "kmeans", "backend": "sklearn", "device": "cpu", "workers": 1, ...   # workers: the ranks
          "status": "ok",
          "scores": {"inertia": 1234.5},
          "arrays": {"predictions": {"digest": "...", "dtype": "int32", "shape": [500],
                                     "summary": {...}, "values": [0, 3, 1, ...]}},
          "dl": {"final_loss": 0.31, "final_accuracy": 0.9, "rank0_weights": "..."},
          "measures": {"identical": true},          # the case alone (its repeats, its ranks)
          "expectation": {"bitwise": true, "reason": "..."},
          "tolerances": {"score_difference.inertia": {"rtol": 1e-4}}      # optional, per case
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

Every tolerance key is a measure's (:class:`accelml.agreement.point.Tolerance`: the built-ins
and any third party's), and a key may name one array or score (``max_abs_diff.probabilities``,
``score_difference.accuracy``), which then wins over the general key. Bounds are
``{"atol": ..., "rtol": ...}`` for numbers, ``true`` for a yes/no measure that must be yes.
Per-case and per-comparison tolerances win over the file's; cases (and comparisons of cases)
whose repeats are not expected to be bitwise identical get the measures' loose ones, written
into the file. Arrays up to ``inline_limit`` elements are kept in the file (exact: floats
are written with all their digits), so a check on another machine can measure how far they
moved; larger arrays keep their digest and a summary (mean, std, min, max or class counts)
and are compared in full when the store being checked still holds them. Version 1 and 2
files are still read: their answer keys (``score``, ``labels``, ``values``, ``loss``,
``accuracy``, ``bitwise``, ``ranks``) become the keys of the measures that name them
``legacy``.

>>> from accelml.agreement.point import measures
>>> tolerance = Tolerances.from_dict({"score_difference": {"rtol": 1e-3},
...                                   "score_difference.accuracy": {"atol": 0.01}},
...                                  measures_used=measures())
>>> score = next(m for m in measures() if m.name == "score_difference")
>>> tolerance.bound(score, "accuracy"), tolerance.bound(score, "r2")
(Bounds(atol=0.01, rtol=0.0), Bounds(atol=0.0, rtol=0.001))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from accelml.agreement.arrays import is_label_array
from accelml.agreement.matrix import PairAgreement, agreement_matrix
from accelml.agreement.point import Bounds, Ideal, Measure, Outputs, measures, output_task
from accelml.convert import MAX_NESTING, nesting_too_deep
from accelml.errors import AccelmlError, SpecError
from accelml.expectations import run_to_run_expectation
from accelml.results.records import ArrayRef, CaseResult, DLMeasurements, Environment, Score
from accelml.results.store import ResultsStore, array_digest

FORMAT = "accelml-baseline"
VERSION = 3
RANKS_KEY = "workers"
"""A case entry's key for the case's ranks: the name it had before the rename, kept so that
baselines read by older and newer versions alike (the file format is unchanged)."""
DEFAULT_INLINE_LIMIT = 20_000

Bound = Bounds | bool
"""How far one measure may move: bounds for numbers, ``True`` for a yes that must stay yes."""


def measure_keys(measures_used: tuple[Measure, ...]) -> dict[str, Measure]:
    """Tolerance key -> the measure it gates (measures without a tolerance are not gated)."""
    keys: dict[str, Measure] = {}
    for measure in measures_used:
        if measure.tolerance is None:
            continue
        key = measure.tolerance.key
        if key in keys or "." in key:
            raise AccelmlError(f"measure {measure.name!r}: tolerance key {key!r} is taken or "
                               f"has a '.'; the keys in use are " + ", ".join(keys))
        keys[key] = measure
    return keys


def bound_entry(value: Bound) -> dict[str, float] | bool:
    """A bound as the file writes it."""
    return value if isinstance(value, bool) else value.to_dict()


# ---------------------------------------------------------------- tolerances


@dataclass(frozen=True)
class Tolerances:
    """A tolerance table: a bound per measure key, or per measure key and array/score name."""

    entries: tuple[tuple[str, Bound], ...] = ()

    @classmethod
    def from_dict(cls, data: Any, where: str = "tolerances",
                  measures_used: tuple[Measure, ...] = ()) -> Tolerances:
        """Validated tolerances; ``measures_used`` are the measures whose keys are allowed."""
        data = data or {}
        if not isinstance(data, dict):
            raise SpecError(f"{where} must be a table, not {type(data).__name__}")
        gated = measure_keys(measures_used)
        entries: dict[str, Bound] = {}
        for key, value in data.items():
            measure = gated.get(str(key).split(".", 1)[0])
            if measure is None:
                raise SpecError(f"{where}: unknown tolerance {key!r}; allowed: " + ", ".join(gated)
                                + " (or one array or score, e.g. max_abs_diff.probabilities)")
            entries[str(key)] = _bound(measure, value, f"{where}.{key}")
        return cls(tuple(sorted(entries.items())))

    @classmethod
    def of(cls, bounds: dict[str, Bound]) -> Tolerances:
        return cls(tuple(sorted(bounds.items())))

    def to_dict(self) -> dict[str, Any]:
        return {key: bound_entry(value) for key, value in self.entries}

    def over(self, base: Tolerances) -> Tolerances:
        """These tolerances, falling back to ``base`` for keys they lack."""
        merged = dict(base.entries)
        merged.update(self.entries)
        return Tolerances(tuple(sorted(merged.items())))

    def bound(self, measure: Measure, of: str = "") -> Bound | None:
        """The bound of ``measure`` (for the array or score ``of``); None: the table lacks it."""
        if measure.tolerance is None:
            return None
        table = dict(self.entries)
        key = measure.tolerance.key
        return table.get(f"{key}.{of}", table.get(key)) if of else table.get(key)


def _bound(measure: Measure, value: Any, where: str) -> Bound:
    if measure.ideal is Ideal.TRUE:
        if not isinstance(value, bool):
            raise SpecError(f"{where} must be true or false")
        return value
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a table such as {{atol = 0.0, rtol = 1e-6}}")
    for name, number in value.items():
        if name not in ("atol", "rtol"):
            raise SpecError(f"{where}: unknown key {name!r}; allowed: atol, rtol")
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0:
            raise SpecError(f"{where}.{name} must be a number >= 0")
    return Bounds(float(value.get("atol", 0.0)), float(value.get("rtol", 0.0)))


def legacy_answers(data: Any, measures_used: tuple[Measure, ...]) -> Any:
    """A version-1/2 table of a case's own answer in measure keys: each answer key (``score``,
    ``values.probabilities``, ...) becomes the key of every measure that names it ``legacy``;
    ``{"min_agreement": m}`` becomes ``{"atol": 1 - m}``. Other keys are left as they are.

    >>> legacy_answers({"labels": {"min_agreement": 0.99}, "bitwise": True}, measures())
    {'label_agreement': {'atol': 0.010000000000000009}, 'identical': True}
    """
    if not isinstance(data, dict):
        return data
    translated: dict[str, Any] = {}
    for key, value in data.items():
        general, dot, of = str(key).partition(".")
        named = [measure.tolerance.key for measure in measures_used
                 if measure.tolerance is not None and measure.tolerance.legacy == general
                 and measure.tolerance.answers]
        if not named:
            translated[key] = value
            continue
        if isinstance(value, dict) and "min_agreement" in value:
            minimum = value["min_agreement"]
            value = {"atol": 1.0 - minimum} if isinstance(minimum, (int, float)) else value
        translated.update({f"{name}{dot}{of}": value for name in named})
    return translated


def array_summary(array: NDArray[np.generic], labels: bool) -> dict[str, Any]:
    """What a baseline keeps of an array too large to inline: class counts, or mean, std,
    min and max."""
    if labels:
        values, counts = np.unique(array.ravel(), return_counts=True)
        return {"classes": {str(v): int(c) for v, c in zip(values.tolist(), counts.tolist(), strict=True)}}
    if array.size == 0:
        return {}
    data = np.asarray(array, dtype=np.float64)
    return {"mean": float(np.nanmean(data)), "std": float(np.nanstd(data)),
            "min": float(np.nanmin(data)), "max": float(np.nanmax(data))}


def _inline(array: NDArray[np.generic]) -> list[Any]:
    return array.ravel().tolist()


def _from_inline(entry: dict[str, Any]) -> NDArray[np.generic]:
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


class BaselineArrays:
    """The arrays of a baseline's case as :class:`~accelml.agreement.point.Outputs` reads
    them: the values kept in the file, else the store being checked (None: neither has it)."""

    def __init__(self, inline: dict[str, NDArray[np.generic]], store: ResultsStore, where: Path):
        self.inline = inline
        self.store = store
        self.directory = where

    def read_array(self, digest: str) -> NDArray[np.generic] | None:
        if digest in self.inline:
            return self.inline[digest]
        return self.store.read_array(digest) if self.store.has_array(digest) else None


@dataclass(frozen=True)
class BaselineCase:
    """One case of a baseline (a parsed ``cases.<id>`` table)."""

    case_id: str
    data: dict[str, Any]
    tolerances: Tolerances

    @property
    def label(self) -> str:
        return str(self.data.get("label", self.case_id))

    @property
    def expected_bitwise(self) -> bool:
        """Its repeats were expected to be bitwise identical."""
        return bool((self.data.get("expectation") or {}).get("bitwise"))

    @property
    def alone(self) -> dict[str, float | bool]:
        """The value of each measure of the case alone (its repeats, its ranks) when made."""
        return {name: value for name, value in (self.data.get("measures") or {}).items()
                if value is not None}

    def result(self, run_id: str) -> CaseResult:
        """The case's answer as a result record, so the measures read it like a stored one."""
        data = self.data
        dl = data.get("dl") or None
        return CaseResult(
            run_id=run_id, case_id=self.case_id, algorithm=str(data.get("algorithm", "")),
            backend=str(data.get("backend", "")), device=str(data.get("device", "")),
            dataset=str(data.get("dataset", "")), status=str(data["status"]),
            task=str(data.get("task", "")), ranks=int(data.get(RANKS_KEY) or 1),
            strategy=data.get("strategy"), params=tuple(sorted((data.get("params") or {}).items())),
            scores=tuple(Score(name, float("nan") if value is None else float(value), True)
                         for name, value in (data.get("scores") or {}).items()),
            predictions=tuple(ArrayRef(name, entry["digest"], str(entry.get("dtype", "")),
                                       tuple(entry.get("shape") or ()))
                              for name, entry in (data.get("arrays") or {}).items()),
            dl=None if dl is None else DLMeasurements(
                str(data.get("algorithm", "")), (), 0, int(data.get(RANKS_KEY) or 1), 0.0, 0.0,
                rank_weight_digests=(dl["rank0_weights"],) if dl.get("rank0_weights") else (),
                final_loss=dl.get("final_loss"), final_accuracy=dl.get("final_accuracy"),
                test_loss=dl.get("test_loss"), test_accuracy=dl.get("test_accuracy")))

    def outputs(self, run_id: str, store: ResultsStore, where: Path) -> Outputs:
        """The case as one side of a pair: its record, its arrays from the file or ``store``."""
        inline = {entry["digest"]: _from_inline(entry)
                  for entry in (self.data.get("arrays") or {}).values() if "values" in entry}
        return Outputs(self.result(run_id), BaselineArrays(inline, store, where))

    def identity(self) -> dict[str, Any]:
        return {key: self.data.get(key) for key in
                ("algorithm", "backend", "device", RANKS_KEY, "strategy", "dataset", "params")}


def _alone_before_version_3(entry: dict[str, Any]) -> dict[str, Any]:
    """What versions 1 and 2 kept of a case alone under their own keys, as measure values."""
    dl = entry.get("dl") or {}
    found = {"identical": entry.get("repeats_identical"), "ranks_identical": dl.get("ranks_identical")}
    return {name: value for name, value in found.items() if value is not None}


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
    tolerances: Tolerances                  # each case against its entry (file-wide)
    cases: tuple[BaselineCase, ...]
    inline_limit: int = DEFAULT_INLINE_LIMIT
    comparisons: tuple[BaselineComparison, ...] = ()
    comparison_tolerances: Tolerances = Tolerances()   # each comparison (file-wide)

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
            "tolerances": {"cases": self.tolerances.to_dict(),
                           "comparisons": self.comparison_tolerances.to_dict()},
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
        old = version < 3      # answer keys and file-wide tolerances of versions 1 and 2
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
            table = entry.get("tolerances")
            tolerances = Tolerances.from_dict(legacy_answers(table, found) if old else table,
                                              f"{where}: cases.{case_id}.tolerances", found)
            body = {k: v for k, v in entry.items() if k != "tolerances"}
            if old:
                body["measures"] = _alone_before_version_3(entry)
            cases.append(BaselineCase(case_id, body, tolerances))
        environment = data.get("environment")
        spec = data.get("spec") or {}
        tables = data.get("tolerances") or {}
        if not isinstance(tables, dict):
            raise SpecError(f"{where}: tolerances must be a table, not {type(tables).__name__}")
        if old:     # one table: answer keys for the cases, measure keys for the comparisons
            gated = measure_keys(found)
            tables = {"cases": legacy_answers({k: v for k, v in tables.items()
                                               if str(k).split(".", 1)[0] not in gated}, found),
                      "comparisons": {k: v for k, v in tables.items()
                                      if str(k).split(".", 1)[0] in gated}}
        unknown = sorted(set(tables) - {"cases", "comparisons"})
        if unknown:
            raise SpecError(f"{where}: tolerances has {', '.join(map(str, unknown))}; allowed: "
                            "cases, comparisons")
        return cls(
            run_id=str(data.get("run_id", "")),
            created_at=str(data.get("created_at", "")),
            spec_name=str(spec.get("name", "")),
            spec_hash=str(spec.get("hash", "")),
            environment=None if not environment else Environment.from_dict(environment),
            tolerances=Tolerances.from_dict(tables.get("cases"), f"{where}: tolerances.cases", found),
            cases=tuple(cases),
            inline_limit=int(data.get("inline_limit", DEFAULT_INLINE_LIMIT)),
            comparisons=tuple(BaselineComparison.from_dict(entry, f"{where}: comparisons[{index}]",
                                                           found)
                              for index, entry in enumerate(comparisons_data)),
            comparison_tolerances=Tolerances.from_dict(
                tables.get("comparisons"), f"{where}: tolerances.comparisons", found),
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


def _case_entry(store: ResultsStore, result: CaseResult, inline_limit: int,
                measures_used: tuple[Measure, ...]) -> dict[str, Any]:
    task = output_task(result)
    entry: dict[str, Any] = {
        "label": result.label, "algorithm": result.algorithm, "backend": result.backend,
        "device": result.device, RANKS_KEY: result.ranks, "strategy": result.strategy,
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
        item["summary"] = array_summary(array, is_label_array(ref.name, array.dtype, task))
        if array.size <= inline_limit and array.dtype.kind in "iubfUS":
            item["values"] = _inline(array)
        arrays[ref.name] = item
    entry["arrays"] = arrays
    outputs = Outputs(result, store)
    entry["measures"] = {measure.name: reading.value for measure in measures_used
                         if measure.tolerance is not None
                         and (reading := measure.of(outputs)) is not None}
    if result.dl is not None:
        entry["dl"] = {"final_loss": result.dl.final_loss,
                       "final_accuracy": result.dl.final_accuracy,
                       "test_loss": result.dl.test_loss,
                       "test_accuracy": result.dl.test_accuracy,
                       "rank0_weights": (result.dl.rank_weight_digests[0]
                                         if result.dl.rank_weight_digests else None)}
    expectation = run_to_run_expectation(result)
    entry["expectation"] = expectation.to_dict()
    return entry


def _loose(measures_used: tuple[Measure, ...], default: str) -> Tolerances:
    """The measures' loose bounds where they differ from their ``default`` ("answer" for a
    case against its entry, "comparison" for a comparison)."""
    loose: dict[str, Bound] = {}
    for key, measure in measure_keys(measures_used).items():
        tolerance = measure.tolerance
        if tolerance is None:
            continue
        if default == "answer" and not tolerance.answers:
            continue
        strict = tolerance.answer_default if default == "answer" else tolerance.default
        if tolerance.loose != strict:
            loose[key] = tolerance.loose
    return Tolerances.of(loose)


def default_tolerances(measures_used: tuple[Measure, ...]) -> tuple[Tolerances, Tolerances]:
    """The file-wide tolerances a new baseline gets, from the measure records: each case's
    against its entry, and each comparison's."""
    gated = measure_keys(measures_used)
    return (Tolerances.of({key: measure.tolerance.answer_default for key, measure in gated.items()
                           if measure.tolerance and measure.tolerance.answers}),
            Tolerances.of({key: measure.tolerance.default
                           for key, measure in gated.items() if measure.tolerance}))


def make_baseline(store: ResultsStore, run_id: str, *, inline_limit: int = DEFAULT_INLINE_LIMIT,
                  previous: Baseline | None = None) -> Baseline:
    """A baseline from stored run ``run_id``.

    Tolerances (file-wide, per case and per comparison) of a ``previous`` baseline are kept,
    so ``--update-baseline`` never drops a tolerance someone reviewed. Cases whose repeats
    are not expected to be bitwise identical get the measures' loose tolerances.
    """
    run = store.get_run(run_id)
    store.verify(run.run_id)
    results = store.case_results(run.run_id)
    if not results:
        raise AccelmlError(f"run {run.run_id} has no stored cases to make a baseline from")
    found = measures()
    for_cases, for_comparisons = default_tolerances(found)
    if previous is not None:
        for_cases = previous.tolerances.over(for_cases)
        for_comparisons = previous.comparison_tolerances.over(for_comparisons)
    cases = []
    for result in results:
        entry = _case_entry(store, result, inline_limit, found)
        kept = previous.case(result.case_id) if previous else None
        if kept is not None and kept.tolerances.entries:
            case_tolerances = kept.tolerances
        elif result.ok and not entry["expectation"]["bitwise"]:
            case_tolerances = _loose(found, "answer")
        else:
            case_tolerances = Tolerances()
        cases.append(BaselineCase(result.case_id, entry, case_tolerances))
    repeat_bitwise = {case.case_id: case.expected_bitwise for case in cases}
    matrix = agreement_matrix(store, run.run_id, measures_used=found)
    comparisons = tuple(
        _comparison_entry(agreement, found, previous,
                          repeat_bitwise[agreement.a.case_id] and repeat_bitwise[agreement.b.case_id])
        for agreement in matrix.cross_backend + matrix.cross_device + matrix.cross_scale)
    return Baseline(
        run_id=run.run_id, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        spec_name=run.spec_name, spec_hash=run.spec_hash,
        environment=run.environment or results[0].environment,
        tolerances=for_cases, cases=tuple(cases), inline_limit=inline_limit,
        comparisons=comparisons, comparison_tolerances=for_comparisons,
    )


def _comparison_entry(agreement: PairAgreement, measures_used: tuple[Measure, ...],
                      previous: Baseline | None, repeats_bitwise: bool) -> BaselineComparison:
    """A comparison of the run with the value of every gated measure. It keeps the reviewed
    tolerances of the ``previous`` baseline's same comparison, else gets the measures' loose
    ones when either case is not expected to repeat bitwise."""
    values = tuple(sorted((measure.name, reading.value) for measure, reading in agreement.readings
                          if measure.tolerance is not None))
    key = (agreement.kind, agreement.a.case_id, agreement.b.case_id)
    kept = previous.comparison(key) if previous else None
    if kept is not None and kept.tolerances.entries:
        tolerances = kept.tolerances
    elif repeats_bitwise:
        tolerances = Tolerances()
    else:
        tolerances = _loose(measures_used, "comparison")
    return BaselineComparison(agreement.kind, agreement.a.case_id, agreement.b.case_id,
                              f"{agreement.b.label} vs {agreement.a.label}", values, tolerances)
