"""Boosting fits timed as set-up and rounds (issue 28, item 4): the shipped XGBoost scaling
spec, shrunk to small data, run for real (plain XGBoost on one worker, xgboost.dask on a
2-worker dask cluster; its GPU cases are recorded unavailable here), then its per-round costs
and crossover in the terminal report, the JSON export and the HTML page."""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
import xgboost

from accelml.cli import main
from accelml.estimators._xgboost_rounds import SECONDS_ATTRIBUTE, RoundTimer, read
from accelml.report import load_report
from accelml.report.html import render_html
from accelml.report.terminal import crossover_text
from accelml.results.records import CaseResult
from accelml.results.store import ResultsStore

SHIPPED = Path(__file__).resolve().parents[2] / "experiments" / "xgboost_scaling.toml"
ROUNDS = 12


def shrunk_spec() -> str:
    """The shipped spec on 3000 generated rows and 12 rounds."""
    text = re.sub(r"(?m)^n_samples = \d+", "n_samples = 3000", SHIPPED.read_text())
    return re.sub(r"n_estimators = \d+", f"n_estimators = {ROUNDS}", text)


@pytest.fixture(scope="module")
def scaling_run(tmp_path_factory):
    """The shrunk spec through ``python -m accelml compare`` (its GPU cases skipped as
    unavailable here): the results directory, the run id, its results and what compare printed."""
    where = tmp_path_factory.mktemp("boosting")
    spec = where / "xgboost_scaling.toml"
    spec.write_text(shrunk_spec())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["compare", str(spec), "--results-dir", str(where / "results"), "--cache-dir",
                     str(where / "cache"), "--no-progress", "--only-available"])
    assert code == 0, printed.getvalue()
    store = ResultsStore(where / "results")
    run = store.latest_run()
    return where / "results", run.run_id, store.case_results(run.run_id), printed.getvalue()


@pytest.mark.slow
def test_each_fit_is_timed_as_setup_and_rounds_on_one_and_two_workers(scaling_run):
    _, _, results, _ = scaling_run
    cpu = {r.ranks: r for r in results if r.device == "cpu"}
    assert all(not r.ok and r.failure.value == "unavailable" for r in results if r.device == "cuda")
    for result in cpu.values():
        assert result.ok, result.reason
        fit, setup, split = result.timing("fit"), result.timing("setup"), result.boosting
        assert fit is not None and setup is not None and split is not None
        assert len(setup.samples) == len(fit.samples) == result.repeats == 2
        assert all(0 < s < f for s, f in zip(setup.samples, fit.samples, strict=True))
        assert split.rounds == ROUNDS
        assert result.iterations == ROUNDS      # the table's "it" column on 1 and N workers
        assert split.setup_seconds == setup.median
        per_round = [(f - s) / ROUNDS for f, s in zip(fit.samples, setup.samples, strict=True)]
        assert split.per_round_seconds == pytest.approx(statistics.median(per_round))
        assert split.per_round_seconds > 0


def test_the_report_gives_per_round_costs_and_the_crossover(scaling_run):
    directory, run_id, results, printed = scaling_run
    cpu = {r.ranks: r for r in results if r.device == "cpu"}
    report = load_report(run_id, directory)
    text = report.text()
    assert "boosting on several workers: set-up and per-round cost" in text
    assert crossover_text(report.crossovers()) in text and crossover_text(report.crossovers()) in printed
    (measured,) = [line for line in text.splitlines() if "per round 1 CPU worker" in line]
    assert "2 CPU workers" in measured and "at 2.25k rows" in measured
    assert re.search(r"2 CPU workers (pay from ~[\d.]+k? rows|pay at every size|pay only below"
                     r" ~[\d.]+k? rows|do not pay at any size under this model) \(estimated from 1 "
                     rf"and 2 workers at 2.25k rows, {ROUNDS} rounds; model: a round = ", text)
    (exported,) = report.to_dict()["crossovers"]
    assert exported["estimated"] is True and exported["workers"] == 2
    assert exported["per_round_one"] == cpu[1].boosting.per_round_seconds
    assert exported["per_round_many"] == cpu[2].boosting.per_round_seconds
    assert exported["measured_rows"] == 2250 and exported["rounds"] == ROUNDS
    page = render_html(report)
    assert page.count('class="crossover"') == 1 and "estimated from 1 and 2 workers" in page


def test_the_clock_reads_the_rounds_the_booster_trained_and_leaves_no_trace():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] + rng.normal(scale=2.0, size=600) > 0).astype(int)
    model = xgboost.XGBClassifier(n_estimators=300, early_stopping_rounds=2, learning_rate=0.5,
                                  callbacks=[RoundTimer()])
    model.fit(X[:400], y[:400], eval_set=[(X[400:], y[400:])], verbose=False)
    rounds, seconds = read(model)
    assert rounds == model.get_booster().num_boosted_rounds() < 300 and seconds > 0
    assert model.get_booster().attr(SECONDS_ATTRIBUTE) is None and read(model) is None


def test_results_stored_before_the_split_still_read():
    stored = CaseResult("r", "c", "gradient_boosting_classifier", "xgboost", "cpu", "d", "ok").to_dict()
    del stored["boosting"]
    assert CaseResult.from_dict(stored).boosting is None


@pytest.mark.parametrize("name", ["accelml.report.crossover", "accelml.report.terminal",
                                  "accelml.runner.rounds", "accelml.estimators._xgboost_rounds"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
