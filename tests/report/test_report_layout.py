"""The HTML report as a reader sees it at 1400 px in headless Chromium: nothing overflows,
legends name only what differs, heat-map text contrasts with its cell, a few repeats are
drawn as points, the spec's description is shown; and the history of one spec's runs."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest
from _stores import now, run_record, write_run

from accelml.cli import main
from accelml.report.figures import scaling_charts
from accelml.report.history import spec_history
from accelml.report.plots import format_speedup, readable_text_colour, relative_luminance
from accelml.results import (
    CaseResult,
    DLMeasurements,
    EpochMeasurement,
    PhaseTiming,
    ResultsStore,
    Score,
)
from accelml.runner.fingerprint import fingerprint

WIDE = "20261126-090000-3a11de"
DESCRIPTION = "Horovod vs torch-ddp at two batch sizes, and logistic regression on two backends"
LONG = "a_rather_long_parameter_name_that_differs_only_at_its_end"


def _timed(work, repeats):
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return samples


def _wide_cases(run_id, environment):
    """Logistic regression timed for real 3 times (few repeats) on two backends with three
    parameters that vary, and an MLP-like "epoch" (a real matrix product) on 1 and 2 ranks
    under two strategies and two batch sizes: every optional column of the table at once."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    X, y = load_digits(return_X_y=True)
    X, y = X[:300] / 16.0, y[:300]
    cases = []
    for backend in ("sklearn", "sklearnex"):
        for c in (0.5, 1.0):
            model = LogisticRegression(C=c, max_iter=200)
            fit = _timed(lambda model=model: model.fit(X, y), 3)
            predict = _timed(lambda model=model: model.predict(X), 3)
            cases.append(CaseResult(
                run_id=run_id, case_id=f"lr-{backend}-{c}", algorithm="logistic_regression",
                backend=backend, device="cpu", dataset="digits-with-a-long-descriptive-name", status="ok",
                task="classification",
                params=(("C", c), (LONG, f"value-{c}"), ("max_iter", 200), ("tol", 0.0001)),
                timings=(PhaseTiming.from_samples("fit", fit), PhaseTiming.from_samples("predict", predict)),
                repeats=3, warmup=1, scores=(Score("accuracy", float(model.score(X, y)), True),),
                environment=environment, started_at=now(), finished_at=now()))
    weights = np.random.default_rng(0).normal(size=(512, 512))
    for strategy in ("horovod", "torch-ddp"):
        for batch in (256, 512):
            for ranks in (1, 2):
                epochs = [EpochMeasurement(epoch=e, seconds=s, loss=1.0 / (e + 1), accuracy=0.5)
                          for e, s in enumerate(_timed(lambda: weights @ weights, 4))]
                timing = PhaseTiming.from_samples("epoch", [e.seconds for e in epochs[1:]], [epochs[0].seconds])
                cases.append(CaseResult(
                    run_id=run_id, case_id=f"mlp-{strategy}-{batch}-{ranks}", algorithm="mlp",
                    backend="keras", device="cpu", dataset="images", status="ok", task="classification",
                    ranks=ranks, strategy=strategy,
                    params=(("batch_size", batch), ("epochs", 4), ("learning_rate", 0.01)), timings=(timing,),
                    repeats=3, warmup=1, environment=environment, started_at=now(), finished_at=now(),
                    dl=DLMeasurements(model="mlp", epochs=tuple(epochs), per_rank_batch_size=batch,
                                      ranks=ranks, learning_rate=0.01,
                                      images_per_second=batch * ranks / timing.median,
                                      strategy=strategy, final_loss=0.25, final_accuracy=0.5)))
    return cases


@pytest.fixture(scope="module")
def wide(runs, tmp_path_factory):
    """A run with every optional column and a description, its HTML page, and the history
    page of the spec "smoke" (the classical run and its re-run on another machine)."""
    store = ResultsStore(runs.directory)
    environment = fingerprint(threads=1)
    cases = _wide_cases(WIDE, environment)
    run = dataclasses.replace(run_record(WIDE, cases, environment, spec_name="wide"),
                              spec_text=f'name = "wide"\ndescription = "{DESCRIPTION}"\n')
    if not any(r.run_id == WIDE for r in store.list_runs()):
        write_run(store, run, cases)
    directory = tmp_path_factory.mktemp("layout")
    page, history, classical = directory / "wide.html", directory / "history.html", directory / "classical.html"
    assert main(["report", runs.classical, "--results-dir", str(runs.directory), "--html", str(classical),
                 "--quiet"]) == 0
    assert main(["report", WIDE, "--results-dir", str(runs.directory), "--html", str(page), "--quiet"]) == 0
    assert main(["report", "--history", "smoke", "--results-dir", str(runs.directory), "--html", str(history),
                 "--quiet"]) == 0
    return {"page": page, "history": history, "classical": classical, "cases": cases}


def open_at(browser, path: Path, width: int = 1400):
    page = browser.open(path, width=width)
    browser.call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, page.session)
    assert page.errors() == [] and page.dialogs == []
    return page


OVERFLOWING = """[...document.querySelectorAll('body *')].filter(e => {
    const box = e.getBoundingClientRect();
    return box.right > document.documentElement.clientWidth + 1
        || (e.classList.contains('scroll') && e.scrollWidth > e.clientWidth + 1);
  }).map(e => e.tagName + '.' + (e.getAttribute('class') || '') + ' ' + (e.id || ''))"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["page", "history"])
def test_the_pages_fit_1400_px_without_scrolling_sideways(browser, wide, name):
    page = open_at(browser, wide[name])
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    assert page.evaluate(OVERFLOWING) == []


def test_every_optional_column_is_there_and_the_description_is_shown(browser, wide):
    page = open_at(browser, wide["page"])
    headers = page.evaluate("[...document.querySelectorAll('table.results thead th')].map(th => th.textContent)")
    for column in ("ranks", "strategy", "params", "fit", "predict", "epoch", "speedup"):
        assert column in headers
    assert page.evaluate("document.querySelector('#description').textContent") == DESCRIPTION


def test_legends_name_only_what_differs_in_full(browser, wide):
    [chart] = scaling_charts(wide["cases"])
    labels = [series.label for series in chart.series]
    assert sorted(labels) == ["horovod · batch_size=256", "horovod · batch_size=512",
                              "torch-ddp · batch_size=256", "torch-ddp · batch_size=512"]
    page = open_at(browser, wide["page"])
    legend = page.evaluate("""[...document.querySelectorAll('figure.chart[data-section=scaling] svg text')]
        .map(t => t.textContent)""")
    assert all(label in legend for label in labels)
    assert not any("…" in text for text in legend)


def test_a_few_repeats_are_drawn_as_points(browser, wide):
    page = open_at(browser, wide["page"])
    points = page.evaluate("""[...document.querySelectorAll('figure.chart[data-section=time] g[id^=repeat-points]')]
        .map(g => g.querySelectorAll('use').length)""")
    assert points and all(count == 3 for count in points)      # 3 counted repeats, each a point
    caption = page.evaluate("document.querySelector('figure.chart[data-section=time]').textContent")
    assert "points: each repeat" in caption


def contrast(foreground, background):
    lighter, darker = sorted((relative_luminance(foreground), relative_luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_heat_map_text_contrasts_with_its_cell(browser, wide):
    page = open_at(browser, wide["classical"])
    fills = page.evaluate("""[...document.querySelectorAll('figure.chart[data-section=agreement] svg text')]
        .filter(t => t.textContent.startsWith('identical')).map(t => getComputedStyle(t).fill)""")
    assert fills and set(fills) == {"rgb(255, 255, 255)"}     # identical = the darkest green
    from matplotlib import colormaps

    for value in np.linspace(0, 1, 21):
        cell = tuple(colormaps["RdYlGn"](value)[:3])
        text = readable_text_colour(cell)
        rgb = tuple(int(text[i:i + 2], 16) / 255 for i in (1, 3, 5))
        assert contrast(rgb, cell) >= 4.5, (value, text)


def test_history_shows_each_case_s_speedup_per_run(browser, wide, runs):
    store = ResultsStore(runs.directory)
    history = spec_history(store, "smoke")
    run_ids = [run.run_id for run in history.runs]
    assert run_ids == sorted({runs.classical, runs.other})
    page = open_at(browser, wide["history"])
    assert page.evaluate("[...document.querySelectorAll('table.history-table th.run')].map(th => th.dataset.run)") \
        == run_ids
    texts = page.evaluate("""Object.fromEntries([...document.querySelectorAll('table.history-table tbody tr')]
        .map(tr => [tr.dataset.case, [...tr.querySelectorAll('td')].slice(1).map(td => td.textContent.trim())]))""")
    sklearnex = [r for r in store.case_results(runs.classical) if r.ok and r.backend == "sklearnex"]
    assert sklearnex
    for result in sklearnex:
        first, second = (history.cell(result.case_id, run_id) for run_id in run_ids)
        # the other run: sklearnex twice as slow and sklearn twice as fast, so 4x less speed-up
        assert second.speedup == pytest.approx(first.speedup / 4, rel=1e-6)
        assert texts[result.case_id] == [f"{format_speedup(cell.speedup)}{cell.agreement}" for cell in (first, second)]
    assert page.evaluate("document.querySelectorAll('#figure-history svg').length") == 1
