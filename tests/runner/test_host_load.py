"""Every result records the host's load where it ran, and the report says when other work
shared the cores its times were taken on (issue 29: a speed-up taken under contention)."""

import dataclasses
import math

from accelml.report.html import render_html
from accelml.report.render import load_report
from accelml.report.table import build_rows, legend, render_text
from accelml.results.records import CaseResult, Environment, PhaseTiming, RunRecord
from accelml.results.store import ResultsStore
from accelml.runner.process import CaseTask, execute_case
from accelml.spec.load import load_spec_text

SPEC = """
reference = "sklearn"
repeats = 2
warmup = 0
threads = 1

[datasets.data]
source = "generated"
generator = "classification"
n_samples = 400
n_features = 5

[[cases]]
algorithm = "logistic_regression"
backend = "sklearn"
dataset = "data"
"""


def test_a_case_process_records_the_load_at_its_start_and_at_its_result(tmp_path):
    (fits,) = load_spec_text(SPEC, "t.toml").cases
    # the second fails in the case process (scikit-learn refuses C), which records it too
    for case in (fits, dataclasses.replace(fits, params=(("C", "not a number"),))):
        result = execute_case(CaseTask(case=case, run_id="r", cache_dir=str(tmp_path), threads=1)).result
        assert len(result.host_load) == 2, result
        assert all(math.isfinite(load) and load >= 0 for load in result.host_load)
        assert CaseResult.from_dict(result.to_dict()).host_load == result.host_load
    assert not result.ok   # the second case failed where it ran


def _result(case_id, backend, seconds, load):
    environment = Environment("3.12", "linux", "cpu", 2, 2, 2, ())
    return CaseResult("r", case_id, "kmeans", backend, "cpu", "blobs", "ok", environment=environment,
                      timings=(PhaseTiming.from_samples("fit", [seconds] * 3),), host_load=load)


def test_a_case_taken_on_a_busy_host_is_flagged_with_its_load(tmp_path):
    quiet = [_result("a", "sklearn", 1.0, (0.4, 1.9)), _result("b", "sklearnex", 0.5, (1.0, 1.5))]
    rows = build_rows(ResultsStore(tmp_path), quiet, "sklearn")
    assert all(row.busy_host is None for row in rows)
    assert "busy host" not in render_text(rows, width=200) + legend(rows, 200)
    busy = [quiet[0], _result("b", "sklearnex", 0.5, (1.0, 6.53))]
    rows = build_rows(ResultsStore(tmp_path), busy, "sklearn")
    assert rows[1].busy_host == (6.53, 2) and rows[1].to_dict()["busy_host"] == (6.53, 2)
    assert "ok, busy host" in render_text(rows, width=200)
    assert "highest: 6.5 on 2 cores" in legend(rows, 200)


def test_the_html_report_marks_a_busy_host_case_with_its_load(tmp_path):
    store = ResultsStore(tmp_path)
    store.create_run(RunRecord("r", "busy", "0" * 64, "", reference_backend="sklearn",
                               case_ids=("a", "b")))
    store.add_case_result(_result("a", "sklearn", 1.0, (0.4, 1.9)))
    html = render_html(load_report("r", tmp_path))
    assert "busy host" not in html
    store.add_case_result(_result("b", "sklearnex", 0.5, (7.25, 3.0)))
    html = render_html(load_report("r", tmp_path))
    assert 'title="load 7.2 on 2 cores">busy host</span>' in html
    assert "<em>busy host</em>: the host's 1-minute load average" in html
