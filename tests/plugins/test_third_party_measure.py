"""A third party's measure, installed as pip would: one module registered under
``accelml.measures``, no accelml file touched. The agreement matrix of ``report``, its HTML
page and ``check``'s baseline show and gate it."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from accelml.agreement.baseline import Baseline, make_baseline
from accelml.agreement.check import check_run
from accelml.agreement.point import MEASURES
from accelml.results.records import ArrayRef, CaseResult, RunRecord
from accelml.results.store import ResultsStore, array_digest, array_to_npy_bytes

REPO = Path(__file__).resolve().parents[2]

SPEARMAN = """
from scipy.stats import spearmanr

from accelml.agreement import Aggregate, Bounds, Ideal, Measure, Reading, Tolerance


def spearman(pair):
    a, b = pair.a.array("probabilities"), pair.b.array("probabilities")
    if a is None or b is None or a.shape != b.shape:
        return ()
    return (Reading(float(spearmanr(a.ravel(), b.ravel()).statistic), "probabilities"),)


MEASURE = Measure(
    name="spearman", column="spearman", unit="",
    description="Spearman rank correlation of the predicted probabilities",
    ideal=Ideal.ONE, aggregate=Aggregate.WORST, compute=spearman,
    tolerance=Tolerance("spearman", default=Bounds(atol=1e-9), loose=Bounds(atol=1e-3)))
"""

SPEC = """
name = "spearman"
reference = "sklearn"
repeats = 2
warmup = 1
time_limit = 120
threads = 1

[datasets.cancer]
source = "shipped"
name = "breast_cancer"

[[cases]]
algorithm = "logistic_regression"
backend = ["sklearn", "sklearnex"]
dataset = "cancer"
params = {max_iter = 5000}
"""


def _accelml(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accelml", *args], cwd=REPO, check=False,
                          capture_output=True, text=True, timeout=600)


class _AgreementTable(HTMLParser):
    """The header and the cells of each row of the page's agreement table."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and "agreement-table" in (dict(attrs).get("class") or ""):
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("th", "td") and self._cell is None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("th", "td") and self._cell is not None:
            text = "".join(self._cell).strip()
            (self.header if tag == "th" else self.rows[-1]).append(text)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


@pytest.mark.slow
def test_a_third_party_measure_is_shown_and_gated(install_plugin, tmp_path):
    install_plugin("acme-spearman", {"acme_spearman.py": SPEARMAN},
                   {"accelml.measures": {"spearman": "acme_spearman:MEASURE"}})
    assert MEASURES.origin("spearman") == "acme_spearman:MEASURE"
    spec, baseline, results = tmp_path / "spearman.toml", tmp_path / "b.json", tmp_path / "results"
    spec.write_text(SPEC)
    store = ["--results-dir", str(results)]

    made = _accelml("check", str(spec), "--baseline", str(baseline), "--update-baseline", *store,
                    "--cache-dir", str(tmp_path / "cache"))
    assert made.returncode == 0, made.stderr
    document = json.loads(baseline.read_text())
    assert document["tolerances"]["comparisons"]["spearman"] == {"atol": 1e-9, "rtol": 0.0}
    assert document["tolerances"]["cases"]["spearman"] == {"atol": 1e-9, "rtol": 0.0}
    (comparison,) = document["comparisons"]
    assert comparison["kind"] == "cross-backend"
    spearman = comparison["measures"]["spearman"]
    assert 0.9 < spearman <= 1.0
    shown = f"{spearman:.4g}" if spearman != 1 else "1"

    # the agreement matrix of `report`: a spearman column, with the value on the cross-backend row
    printed = _accelml("report", "latest", *store)
    assert printed.returncode == 0, printed.stderr
    matrix = printed.stdout[printed.stdout.index("agreement:"):].splitlines()
    header = next(line for line in matrix if line.startswith("comparison"))
    (row,) = [line for line in matrix if line.startswith("cross-backend")]
    assert "spearman" in header.split()
    column = header.index("spearman")
    assert row[column:].split()[0] == shown

    # the HTML report: a spearman column, with the value
    page = tmp_path / "report.html"
    written = _accelml("report", "latest", *store, "--html", str(page), "--quiet")
    assert written.returncode == 0, written.stderr
    table = _AgreementTable()
    table.feed(page.read_text())
    assert "spearman" in table.header
    (cells,) = [cells for cells in table.rows if cells and cells[0] == "cross-backend"]
    assert cells[table.header.index("spearman")] == shown

    # check: the rerun agrees; a moved baseline value is drift named after the measure,
    # and loosening its tolerance key lets it pass
    again = _accelml("check", str(spec), "--baseline", str(baseline), *store,
                     "--cache-dir", str(tmp_path / "cache"))
    assert again.returncode == 0, again.stdout + again.stderr
    run_id = json.loads(_accelml("report", "latest", *store, "--json", "-").stdout)["run"]["run_id"]
    comparison["measures"]["spearman"] = spearman - 0.5
    baseline.write_text(json.dumps(document))
    drifted = _accelml("check", "--run", run_id, "--baseline", str(baseline), *store)
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    (line,) = [line for line in drifted.stdout.splitlines() if "cross-backend.spearman" in line
               and not line.startswith(" ")]
    assert line.startswith("logistic_regression/sklearnex/cpu")
    as_json = _accelml("check", "--run", run_id, "--baseline", str(baseline), *store, "--json")
    assert [drift["metric"] for drift in json.loads(as_json.stdout)["drifts"]] == [
        "cross-backend.spearman"]
    document["tolerances"]["comparisons"]["spearman"] = {"atol": 1.0}
    baseline.write_text(json.dumps(document))
    loosened = _accelml("check", "--run", run_id, "--baseline", str(baseline), *store)
    assert loosened.returncode == 0, loosened.stdout + loosened.stderr


def test_a_third_party_measure_gates_each_case_against_its_baseline_entry(install_plugin, tmp_path):
    """The same plug-in, nothing else: ``check`` runs a case against its baseline entry
    through it too (a reordering the loosened absolute differences let pass)."""
    install_plugin("acme-spearman", {"acme_spearman.py": SPEARMAN},
                   {"accelml.measures": {"spearman": "acme_spearman:MEASURE"}})
    store = ResultsStore(tmp_path / "results")

    def run(probabilities: np.ndarray) -> str:
        run_id = f"run-{len(store.list_runs())}"
        store.create_run(RunRecord(run_id=run_id, spec_name="s", spec_hash="0" * 64, spec_text="",
                                   reference_backend="sklearn", created_at=f"2026-01-01T00:0{len(run_id)}"))
        digest = array_digest(probabilities)
        store.add_case_result(CaseResult(
            run_id, "c1", "ridge", "sklearn", "cpu", "data", "ok", task="regression",
            predictions=(ArrayRef("probabilities", digest, "float64", probabilities.shape),)),
            {digest: array_to_npy_bytes(probabilities)})
        return run_id

    values = np.linspace(0.0, 1.0, 50)
    baseline = make_baseline(store, run(values))
    assert baseline.tolerances.to_dict()["spearman"] == {"atol": 1e-9, "rtol": 0.0}
    assert check_run(store, run(values.copy()), baseline).ok
    document = baseline.to_dict()
    document["tolerances"]["cases"]["max_abs_diff"] = {"atol": 1.0}    # values may move...
    reordered = check_run(store, run(values[::-1].copy()), Baseline.from_dict(document))
    assert [drift.metric for drift in reordered.drifts] == ["probabilities.spearman"]  # ...not their order
    assert reordered.drifts[0].current == pytest.approx(-1.0)


def test_a_broken_measure_plugin_is_listed_with_its_reason(install_plugin):
    install_plugin("acme-measure", {"acme_measure.py": "raise ImportError('needs libkendall.so')\n"},
                   {"accelml.measures": {"kendall": "acme_measure:MEASURE"}})
    [broken] = MEASURES.broken()
    assert broken.entry_point == "kendall = acme_measure:MEASURE"
    out = _accelml("backends")
    assert out.returncode == 0, out.stderr
    assert "kendall" in out.stdout and "libkendall.so" in out.stdout
    assert "accelml.measures" in out.stdout

