"""accelml.convert: one converter for every record; stores written by earlier versions stay readable."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import pytest

from accelml.convert import OBJECT, from_data, to_data

STORES = sorted((Path(__file__).parents[2] / "benchmarks" / "gpu" / "results").glob("*/results.sqlite"))


class Colour(str, Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner:
    value: float
    note: str = ""


@dataclass(frozen=True)
class Outer:
    name: str
    colour: Colour
    inners: tuple[Inner, ...]
    best: Inner | None = None
    pairs: tuple[tuple[str, int], ...] = ()
    options: tuple[tuple[str, int], ...] = field(default=(), metadata=OBJECT)
    shape: tuple[int, int] = (0, 0)

    def json_extras(self) -> dict[str, int]:
        return {"count": len(self.inners)}


def test_round_trip_through_json_text():
    record = Outer("x", Colour.BLUE, (Inner(1.5), Inner(math.inf, "far")), Inner(2.0),
                   (("a", 1), ("a", 2)), (("k", 3),), (4, 5))
    data = json.loads(json.dumps(to_data(record)))
    assert data["pairs"] == [["a", 1], ["a", 2]] and data["options"] == {"k": 3}
    assert data["count"] == 2 and data["colour"] == "blue"
    assert from_data(Outer, data) == record


def test_lenient_reading_of_older_data():
    data = {"name": "x", "colour": "red", "inners": [{"value": None}], "unknown": 1,
            "options": [["k", 3]]}
    record = from_data(Outer, data)
    assert math.isnan(record.inners[0].value) and record.options == (("k", 3),)
    assert record.best is None and record.shape == (0, 0)


def test_wrong_types_are_errors_not_silent():
    with pytest.raises(TypeError, match="Outer.name: expected str"):
        from_data(Outer, {"name": 3, "colour": "red", "inners": []})
    with pytest.raises(TypeError, match="expected a list"):
        from_data(Outer, {"name": "x", "colour": "red", "inners": 5})


@pytest.mark.skipif(not STORES, reason="no committed stores under benchmarks/gpu/results")
def test_stores_written_by_earlier_versions_read_the_same():
    from accelml.results.records import CaseResult, RunRecord

    count = 0
    for path in STORES:
        with sqlite3.connect(path) as connection:
            for (text,) in connection.execute("select record_json from cases"):
                result = from_data(CaseResult, json.loads(text))
                assert from_data(CaseResult, json.loads(json.dumps(to_data(result)))) == result \
                    or repr(from_data(CaseResult, to_data(result))) == repr(result)
                count += 1
            for (text,) in connection.execute("select record_json from runs"):
                run = from_data(RunRecord, json.loads(text))
                assert run.spec_text and run.run_id
    assert count >= 30
