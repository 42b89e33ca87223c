"""Interleaved comparison groups, with real case processes: speed-ups from paired rounds."""

import dataclasses
import json
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

import accelml
from accelml.cases import INTERLEAVED, ISOLATED
from accelml.report.speed import speedup
from accelml.results.records import SCHEMA_VERSION, CaseResult, PhaseTiming, RunRecord
from accelml.results.store import ResultsStore
from accelml.runner.interleave import GroupTask, execute_group
from accelml.runner.process import CaseTask
from accelml.spec.load import load_spec_text

TWICE_THE_TREES = """
repeats = {min = 6, max = 16, target = 0.05}
time_limit = 120
threads = 1
datasets.data = {source = "generated", generator = "classification", n_samples = 3000, seed = 0}
cases = [
""" + ('{algorithm = "random_forest_classifier", backend = "sklearn", dataset = "data", '
       'params = {max_depth = 8, random_state = 0}, grid = {n_estimators = [6, 12]}}') + """
]
"""

BACKGROUND_LOAD = """
import time
while True:
    end = time.monotonic() + 0.35
    while time.monotonic() < end:
        pass
    time.sleep(0.35)
"""
"""Spins for 0.35 s, rests for 0.35 s, forever: a load that switches on and off."""


@pytest.mark.alone   # its own toggling load is the disturbance under test; neighbours would add another
def test_a_candidate_twice_as_slow_shows_half_with_an_interval_excluding_one_under_a_toggling_load(
        tmp_path):
    experiment = load_spec_text(TWICE_THE_TREES, "twice.toml")
    by_trees = {case.params_dict["n_estimators"]: case for case in experiment.cases}
    tasks = tuple(CaseTask(case, "r", cache_dir=str(tmp_path), threads=1)
                  for case in (by_trees[6], by_trees[12]))
    loads = [subprocess.Popen([sys.executable, "-c", BACKGROUND_LOAD]) for _ in range(2)]
    try:
        outputs = execute_group(GroupTask(tasks))
    finally:
        for load in loads:
            load.kill()
            load.wait()
    reference, candidate = (output.result for output in outputs)
    assert reference.ok and candidate.ok, (reference.reason, candidate.reason)
    assert reference.measurement == candidate.measurement == INTERLEAVED
    assert reference.turn_group == candidate.turn_group == tuple(task.case_id for task in tasks)
    assert reference.repeats == candidate.repeats >= 6
    assert reference.stopped_because == candidate.stopped_because
    found = speedup(candidate, reference, "fit")
    assert found is not None and found.measurement == INTERLEAVED
    # 6 against 12 trees of a forest is 0.5x give or take its fixed costs; the toggling load and
    # whatever else shares 2 cores move single rounds, so the median is asked within a third of it
    assert 0.33 < found.value < 0.67, found
    assert found.low <= found.value <= found.high < 1.0, found


@pytest.mark.slow
def test_a_comparison_interleaves_its_cases_and_the_store_keeps_the_rounds(tmp_path):
    X = np.random.default_rng(0).normal(size=(3000, 4))
    res = accelml.compare("kmeans", ["sklearn", "sklearnex"], data=(X, None), repeats=(3, 4),
                          params={"n_clusters": 3, "random_state": 0, "n_init": 1},
                          threads=1, results_dir=tmp_path)
    assert all(result.ok for result in res.results), [r.reason for r in res.results]
    assert {result.measurement for result in res.results} == {INTERLEAVED}
    rows = res.rows()
    compared = next(row for row in rows if not row.is_reference)
    assert compared.phase_speedups[0].measurement == INTERLEAVED
    assert "paired)" in res.table()
    # the store keeps the rounds: the speed-up is recomputed from it alone
    again = accelml.comparison.Comparison.from_store(accelml.results.store.ResultsStore(tmp_path),
                                                  res.run_id)
    assert again.speedup() == res.speedup()


def test_a_store_of_schema_1_still_reads_its_results_as_isolated_and_is_marked_when_written(
        tmp_path):
    store = ResultsStore(tmp_path)
    store.create_run(RunRecord("r", "s", "h", "", reference_backend="sklearn"))
    for case_id, backend, seconds in (("a", "sklearn", [2.0, 2.2, 1.8]), ("b", "x", [1.0, 1.1, 0.9])):
        store.add_case_result(CaseResult("r", case_id, "kmeans", backend, "cpu", "d", "ok",
                                         timings=(PhaseTiming.from_samples("fit", seconds),)))
    with sqlite3.connect(store.database) as connection:   # as accelml wrote it before schema 2
        connection.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
        for case_id, text in connection.execute("SELECT case_id, record_json FROM cases").fetchall():
            data = json.loads(text)
            for key in ("measurement", "turn_group", "measurement_note"):
                data.pop(key)
            data["schema_version"] = 1
            connection.execute("UPDATE cases SET record_json=? WHERE case_id=?",
                               (json.dumps(data), case_id))
    reference, candidate = ResultsStore(tmp_path, read_only=True).case_results("r")
    assert SCHEMA_VERSION == 2 and candidate.measurement == reference.measurement == ISOLATED
    found = speedup(candidate, reference)
    assert found is not None and found.measurement == ISOLATED and found.value == 2.0
    # the same samples taken in turn pair round by round: every ratio is 2
    group = ("a", "b")
    paired = speedup(dataclasses.replace(candidate, measurement=INTERLEAVED, turn_group=group),
                     dataclasses.replace(reference, measurement=INTERLEAVED, turn_group=group))
    assert paired is not None and (paired.value, paired.low, paired.high) == (2.0, 2.0, 2.0)
    ResultsStore(tmp_path)   # a writer marks the store with the schema it writes
    with sqlite3.connect(store.database) as connection:
        assert connection.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("2",)


def test_the_measurement_key_is_checked():
    text = TWICE_THE_TREES.replace("threads = 1", 'threads = 1\nmeasurement = "alternating"')
    try:
        load_spec_text(text, "bad.toml")
    except accelml.errors.SpecError as error:
        assert "measurement" in str(error) and "interleaved" in str(error)
    else:
        raise AssertionError("measurement = 'alternating' was accepted")


@pytest.mark.slow
def test_a_case_whose_reference_failed_is_measured_alone_and_says_why(tmp_path):
    text = (TWICE_THE_TREES.replace("min = 6, max = 16", "min = 2, max = 2")
            .replace('"random_forest_classifier"', '"kmeans"')
            .replace("max_depth = 8, random_state = 0", "random_state = 0")
            .replace("n_estimators = [6, 12]", "n_clusters = [5000, 3]"))
    by_clusters = {case.params_dict["n_clusters"]: case
                   for case in load_spec_text(text, "fails.toml").cases}
    tasks = tuple(CaseTask(by_clusters[k], "r", cache_dir=str(tmp_path), threads=1)
                  for k in (5000, 3))
    reference, candidate = (output.result for output in execute_group(GroupTask(tasks)))
    assert not reference.ok and candidate.ok, candidate.reason
    assert candidate.measurement == ISOLATED and candidate.repeats == 2
    assert "group_ended" in candidate.measurement_note and "measured alone" in candidate.measurement_note
