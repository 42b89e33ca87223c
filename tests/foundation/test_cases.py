"""accelml.cases: the records every stage passes on, written and read through accelml.convert."""

from __future__ import annotations

import json

import pytest

from accelml.cases import Case, DatasetSpec, Expectation, RepeatPolicy

# Case.to_dict() as main wrote it before the records went through accelml.convert
WRITTEN_BEFORE = {
    "case_id": "ecfcc26d656142cf", "algorithm": "random_forest_classifier", "backend": "sklearnex",
    "device": "cpu",
    "dataset": {"name": "blobs", "source": "generated", "options": {"centers": 3, "n_samples": 500}},
    "workers": 1, "strategy": None, "params": {"max_depth": None, "n_estimators": 20},
    "repeats": {"min_repeats": 2, "max_repeats": 4, "target_rel": 0.05, "confidence": 0.95, "warmup": 1,
                "max_seconds": 30},
    "time_limit_s": 600.0, "memory_limit_mb": 2048, "threads": None, "seed": 7,
}

CASE = Case("random_forest_classifier", "sklearnex", "cpu",
            DatasetSpec("blobs", "generated", (("centers", 3), ("n_samples", 500))),
            params=(("max_depth", None), ("n_estimators", 20)),
            repeats=RepeatPolicy(2, 4, max_seconds=30.0), memory_limit_mb=2048, seed=7)


def test_a_case_reads_what_earlier_versions_wrote_and_writes_the_same_data():
    assert Case.from_dict(WRITTEN_BEFORE) == CASE
    # the same data, plus the repeat policy's later field (issue 17) at its default
    assert CASE.to_dict() == {**WRITTEN_BEFORE, "repeats": {**WRITTEN_BEFORE["repeats"],
                                                            "skip_warmup_after": 2.0}}
    assert Case.from_dict(json.loads(json.dumps(CASE.to_dict()))) == CASE


def test_a_case_whose_id_does_not_match_its_definition_is_refused():
    with pytest.raises(ValueError, match="does not match its definition"):
        Case.from_dict({**WRITTEN_BEFORE, "params": {"n_estimators": 21}})


def test_missing_keys_take_the_defaults():
    minimal = {"algorithm": "kmeans", "backend": "sklearn", "device": "cpu",
               "dataset": {"name": "blobs", "source": "generated"}}
    assert Case.from_dict(minimal) == Case("kmeans", "sklearn", "cpu", DatasetSpec("blobs", "generated"))


def test_expectation_and_policy_data():
    assert Expectation(False, "why").to_dict() == {"bitwise": False, "reason": "why"}
    assert RepeatPolicy.from_dict(RepeatPolicy(3, 3).to_dict()) == RepeatPolicy(3, 3)


def test_a_case_on_several_ranks_keeps_the_id_and_data_it_had_as_workers():
    """``Case.ranks`` was ``workers``: the id hashes it under that key and the stored case keeps
    it (a store and a ``--resume`` of a run begun before the rename find their cases)."""
    case = Case("mlp", "keras", "cuda", DatasetSpec("digits", "shipped"), ranks=4,
                strategy="horovod", params=(("epochs", 2),))
    assert case.case_id == "15b9ad1403e36484"   # what main wrote for workers=4 before the rename
    assert case.to_dict()["workers"] == 4 and "ranks" not in case.to_dict()
    assert Case.from_dict(case.to_dict()) == case
    assert Case.from_dict({key: value for key, value in case.to_dict().items() if key != "case_id"}) == case
