"""``python -m accelml report``: terminal, exports, --against, and the HTML in real Chromium."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from _chromium import Browser, BrowserError

from accelml.cli import main
from accelml.errors import AccelmlError
from accelml.report import load_report, report
from accelml.report.export import read_csv
from accelml.report.plots import format_speedup
from accelml.results import ResultsStore

REPO = Path(__file__).resolve().parents[2]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelml", "report", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def _medians(directory: Path, run_id: str, phase: str = "fit") -> dict[tuple[str, str], float]:
    store = ResultsStore(directory, create=False)
    return {(r.algorithm, r.backend): r.timing(phase).median
            for r in store.case_results(run_id) if r.ok and r.timing(phase) is not None}


@pytest.fixture(scope="session")
def pages(runs, tmp_path_factory, artifacts) -> dict[str, Path]:
    """The HTML reports of the classical (against the other run), DL and hostile runs."""
    directory = tmp_path_factory.mktemp("html")
    written = {}
    for name, run_id, extra in (("classical", runs.classical, ["--against", runs.other]),
                                ("dl", runs.dl, []),
                                ("hostile", runs.hostile, [])):
        path = directory / f"{name}.html"
        assert main(["report", run_id, "--results-dir", str(runs.directory), "--html", str(path),
                     "--quiet", *extra]) == 0
        shutil.copy(path, artifacts / path.name)
        written[name] = path
    return written


# -- terminal --------------------------------------------------------------------------------


def test_terminal_report_has_table_speedups_failures_and_environment(runs):
    result = _cli(runs.classical[:11], "--results-dir", str(runs.directory))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"smoke: run {runs.classical}" in out
    assert "fit median (IQR)" in out and "sklearnex" in out
    medians = _medians(runs.directory, runs.classical)
    speedups = [medians[(a, "sklearn")] / medians[(a, "sklearnex")]
                for a in ("kmeans", "knn_classifier")]
    expected = math.exp(sum(map(math.log, speedups)) / 2)
    [summary] = [line for line in out.splitlines() if line.strip().startswith("sklearnex")
                 and " fit " in line]
    assert "over 2 case(s)" in summary
    assert summary.split()[3] == format_speedup(expected)
    assert "2 of 6 case(s) FAILED" in out
    assert "n_samples=178 should be >= n_clusters=500" in out
    assert "timeout: ran past its time limit of 0.2 s" in out
    assert "environment: environment hash " in out


def test_geometric_mean_speedup_per_backend_matches_the_stored_medians(runs):
    rep = load_report(runs.classical, runs.directory)
    by_phase = {(s.backend, s.device, s.phase): s for s in rep.speedups}
    assert {key[0] for key in by_phase} == {"sklearnex"}
    for phase in ("fit", "predict"):
        medians = _medians(runs.directory, runs.classical, phase)
        ratios = [medians[(a, "sklearn")] / medians[(a, "sklearnex")]
                  for a in ("kmeans", "knn_classifier")]
        entry = by_phase[("sklearnex", "cpu", phase)]
        assert entry.cases == 2
        assert entry.value == pytest.approx(math.sqrt(ratios[0] * ratios[1]), rel=1e-12)
        assert (entry.minimum, entry.maximum) == pytest.approx((min(ratios), max(ratios)))


def test_run_id_may_be_a_prefix_or_latest_and_unknown_ids_fail_cleanly(runs, tmp_path):
    assert load_report(runs.dl[:13], runs.directory).run.run_id == runs.dl
    assert load_report("latest", runs.directory).run.run_id == runs.hostile
    with pytest.raises(AccelmlError, match="ambiguous"):
        load_report("20261126", runs.directory)
    result = _cli("no-such-run", "--results-dir", str(runs.directory))
    assert result.returncode == 2
    assert result.stderr.startswith("accelml report: error: no run 'no-such-run'")
    assert len(result.stderr.strip().splitlines()) == 1
    missing = _cli("latest", "--results-dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == (f"accelml report: error: no results store at "
                                      f"{tmp_path / 'nowhere' / 'results.sqlite'}")


def test_failed_and_missing_cases_are_reported(runs):
    rep = load_report(runs.classical, runs.directory)
    assert [(r.algorithm, r.failure.value) for r in rep.failed] == [
        ("kmeans", "error"), ("random_forest_classifier", "timeout")]
    data = rep.to_dict()
    assert [f["failure"] for f in data["failed"]] == ["error", "timeout"]
    assert "n_clusters=500" in data["failed"][0]["reason"]
    interrupted = load_report(runs.hostile, runs.directory)
    assert len(interrupted.missing) == 1
    assert "1 planned case(s) have no result (the run is interrupted)" in interrupted.text()
    assert f"--resume {runs.hostile}" in interrupted.text()


# -- against -------------------------------------------------------------------------------


def test_against_gives_the_ratio_of_every_case_and_the_environment_fields_that_differ(runs):
    rep = load_report(runs.classical, runs.directory, against=runs.other[:12])
    against = rep.against
    assert against.other.run_id == runs.other
    ok_cases = [c for c in against.cases if c.this_status == "ok"]
    assert len(ok_cases) == 4 and not against.only_here and not against.only_there
    for case in ok_cases:
        expected = 2.0 if "sklearnex" in case.label else 0.5
        assert case.ratio("fit") == pytest.approx(expected, rel=1e-9)
        assert case.ratio("predict") == pytest.approx(expected, rel=1e-9)
        assert case.environment_differs
    failed = [c for c in against.cases if c.this_status != "ok"]
    assert len(failed) == 2 and all(c.ratios == () for c in failed)
    assert against.geometric_mean_ratio("fit") == pytest.approx(1.0)
    differences = {d.field: d for d in against.environment_differences}
    assert set(differences) == {"hostname", "library scikit-learn-intelex"}
    assert differences["library scikit-learn-intelex"].other == "2099.0.0"
    assert differences["library scikit-learn-intelex"].in_hash
    assert not differences["hostname"].in_hash
    text = rep.text()
    assert "environments differ" in text and "scikit-learn-intelex" in text
    assert "-> 2099.0.0" in text


def test_against_another_results_directory(runs, tmp_path):
    copy = tmp_path / "from-node-b17"
    shutil.copytree(runs.directory, copy)
    rep = load_report(runs.classical, runs.directory, against=runs.other, against_dir=copy)
    assert rep.against.other_results_dir == str(copy)
    assert [c.ratio("fit") for c in rep.against.cases if c.ratios] == pytest.approx(
        [0.5, 2.0, 0.5, 2.0])
    with pytest.raises(AccelmlError, match="itself"):
        load_report(runs.classical, runs.directory, against=runs.classical)


# -- exports ---------------------------------------------------------------------------------


def test_csv_and_json_exports_round_trip(runs, tmp_path):
    csv_path, json_path = tmp_path / "table.csv", tmp_path / "out" / "table.json"
    assert main(["report", runs.classical, "--results-dir", str(runs.directory),
                 "--csv", str(csv_path), "--json", str(json_path), "--against", runs.other,
                 "--quiet"]) == 0
    from_csv = read_csv(csv_path)
    exported = json.loads(json_path.read_text())
    records = load_report(runs.classical, runs.directory).records()
    assert from_csv == exported["rows"] == records
    assert exported["columns"] == list(from_csv[0])
    stored = {r.case_id: r for r in ResultsStore(runs.directory).case_results(runs.classical)}
    for row in from_csv:
        result = stored[row["case_id"]]
        if result.ok:
            assert row["fit_median"] == result.timing("fit").median
            assert row["fit_n"] == 5 and json.loads(row["params"]) == dict(result.params)
        else:
            assert row["fit_median"] is None and row["reason"] == result.reason
    assert exported["against"]["other_run"] == runs.other
    assert {d["field"] for d in exported["against"]["environment_differences"]} == {
        "hostname", "library scikit-learn-intelex"}
    assert len(exported["failed"]) == 2


def test_json_to_stdout(runs):
    result = _cli(runs.dl, "--results-dir", str(runs.directory), "--json", "-")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [row["ranks"] for row in data["rows"]] == [1, 2, 4, 8]
    assert data["rows"][2]["efficiency"] == pytest.approx(
        data["rows"][0]["epoch_median"] / data["rows"][2]["epoch_median"] / 4)


def test_plot_files_png_and_svg(runs, tmp_path):
    report(runs.classical, runs.directory, against=runs.other, plots_dir=tmp_path / "png")
    names = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert names == ["against-fit.png", "against-predict.png", "agreement.png",
                     "time-kmeans-on-digits.png", "time-knn_classifier-on-digits.png"]
    for path in (tmp_path / "png").iterdir():
        assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 10_000
    dl = load_report(runs.dl, runs.directory)
    dl.write_plots(tmp_path / "svg", "svg")
    svgs = sorted(p.name for p in (tmp_path / "svg").iterdir())
    assert svgs == ["agreement.svg", "scaling-mlp-on-digits_images.svg"]
    for path in (tmp_path / "svg").iterdir():
        assert ElementTree.parse(path).getroot().tag.endswith("svg")
    hostile = load_report(runs.hostile, runs.directory).write_plots(tmp_path / "hostile", "svg")
    assert len(hostile) == 3 and all(path.parent == tmp_path / "hostile" for path in hostile)
    for path in hostile:                  # well-formed XML: the markup in the names is escaped
        assert "<" not in path.name
        texts = [element.text or "" for element in ElementTree.parse(path).iter()
                 if element.tag.endswith("text")]
        assert any("<script>alert(1)</script>" in text for text in texts) or \
            path.name == "agreement.svg"


# -- the HTML page in Chromium -------------------------------------------------------------


def _assert_clean(page) -> None:
    assert page.errors() == [], page.errors()
    assert page.dialogs == []
    outside = [url for url in page.requests if not (url == page.url or url.startswith("data:"))]
    assert outside == [], f"the page fetched {outside}"


@pytest.mark.slow
def test_html_report_opens_without_errors_and_shows_the_charts(browser, pages, artifacts, runs):
    page = browser.open(pages["classical"])
    _assert_clean(page)
    charts = page.evaluate("""[...document.querySelectorAll('figure.chart')].map(f => ({
        section: f.dataset.section, id: f.id, svg: f.querySelectorAll('svg').length,
        text: [...f.querySelectorAll('svg text')].map(t => t.textContent).join('|')}))""")
    time_charts = [c for c in charts if c["section"] == "time"]
    assert [c["id"] for c in time_charts] == ["figure-time-kmeans-on-digits",
                                               "figure-time-knn_classifier-on-digits"]
    for chart in time_charts:
        assert chart["svg"] == 1
        assert "fit time" in chart["text"] and "predict time" in chart["text"]
        assert "sklearnex · cpu" in chart["text"] and "reference" in chart["text"]
        assert "faster" in chart["text"] or "slower" in chart["text"]
    [heatmap] = [c for c in charts if c["section"] == "agreement"]
    assert "cross-backend" in heatmap["text"] and "run-to-run" in heatmap["text"]
    assert [c["id"] for c in charts if c["section"] == "against"] == [
        "figure-against-fit", "figure-against-predict"]
    assert page.evaluate("document.querySelector('#failures h2').textContent") == \
        "2 of 6 cases failed"
    assert page.evaluate("document.querySelectorAll('#failures tr.failed-case').length") == 2
    assert page.evaluate("document.querySelectorAll('table.results tbody tr').length") == 6
    differences = page.evaluate(
        "[...document.querySelectorAll('#against tr.env-difference td:first-child')]"
        ".map(td => td.textContent)")
    assert differences == ["hostname", "library scikit-learn-intelex"]
    ratios = page.evaluate("[...document.querySelectorAll('#against td.ratio')]"
                           ".map(td => td.textContent)")
    assert ratios.count("2") == 4 and ratios.count("0.5") == 4
    assert page.evaluate("document.querySelector('#environment').textContent").count(
        load_report(runs.classical, runs.directory).run.env_hash) >= 1
    shot = page.screenshot(artifacts / "classical.png")
    assert shot.read_bytes()[:8] == PNG_MAGIC and shot.stat().st_size > 50_000


def test_html_report_of_a_scaling_run_draws_the_three_tutorial_plots(browser, pages, artifacts,
                                                                      runs):
    page = browser.open(pages["dl"])
    _assert_clean(page)
    [chart] = page.evaluate("""[...document.querySelectorAll('figure.chart[data-section=scaling]')]
        .map(f => [...f.querySelectorAll('svg text')].map(t => t.textContent).join('|'))""")
    for title in ("Epoch time", "Throughput", "Speedup", "images per second", "ranks",
                  "ideal (speedup = ranks)"):
        assert title in chart
    store = ResultsStore(runs.directory)
    epochs = {r.ranks: r.timing("epoch").median for r in store.case_results(runs.dl) if r.ok}
    efficiencies = page.evaluate("[...document.querySelectorAll('.scaling-table td.efficiency')]"
                                 ".map(td => td.textContent)")
    assert efficiencies == [f"{epochs[1] / epochs[w] / w:.0%}" for w in (1, 2, 4)]
    assert page.evaluate("document.querySelector('#failures h2').textContent") == \
        "1 of 4 cases failed"
    assert "SIGKILL" in page.evaluate("document.querySelector('#failures').textContent")
    page.screenshot(artifacts / "dl.png")


def test_hostile_strings_are_escaped_everywhere(browser, pages, artifacts, runs):
    hostile = runs.hostile_name
    source = pages["hostile"].read_text()
    assert "<script>alert(1)</script>" not in source
    assert "<img src=x" not in source
    page = browser.open(pages["hostile"])
    _assert_clean(page)
    assert page.evaluate("document.querySelectorAll('script, img, [onerror]').length") == 0
    text = page.evaluate("document.body.innerText")
    assert text.count(hostile) >= 3          # dataset, params and failure reason, shown as text
    assert page.evaluate("document.title").startswith(f"accelml report: {hostile}")
    svg_text = page.evaluate("[...document.querySelectorAll('svg text')]"
                             ".map(t => t.textContent).join('|')")
    assert "<script>alert(1)</script>" in svg_text   # the figure titles name the dataset, as text
    assert page.evaluate("document.querySelector('#missing h2').textContent") == \
        "1 planned case without a result"
    page.screenshot(artifacts / "hostile.png")


def test_a_missing_chromium_says_how_to_install_it():
    with pytest.raises(BrowserError, match="apt-get install chromium"):
        Browser(executable="/nonexistent/chromium")


def test_the_browser_check_sees_console_errors_exceptions_and_dialogs(browser, tmp_path):
    page_with_faults = tmp_path / "faults.html"
    page_with_faults.write_text(
        "<!doctype html><title>faults</title><script>console.error('boom');"
        "alert('hi');</script><script>undefinedFunction();</script>")
    page = browser.open(page_with_faults)
    assert any("boom" in message for message in page.console_errors)
    assert any("undefinedFunction" in message for message in page.exceptions)
    assert page.dialogs == ["hi"]


def test_terminal_report_of_a_scaling_run_gives_speedup_and_efficiency_per_rank_count(runs):
    rep = load_report(runs.dl, runs.directory)
    epochs = {r.ranks: r.timing("epoch").median for r in rep.results if r.ok}
    text = rep.text()
    assert "data-parallel scaling (epoch time over the 1-rank case; a step: " in text
    for ranks in (2, 4):
        speedup = epochs[1] / epochs[ranks]
        assert (f"{ranks} ranks {format_speedup(speedup)} "
                f"(efficiency {speedup / ranks:.0%}; a step ") in text
    # the measured step at N ranks against 1, and what it spends beyond the 1-rank step
    assert "of collective and host work" in text
    assert "1 of 4 case(s) FAILED" in text and "SIGKILL" in text
