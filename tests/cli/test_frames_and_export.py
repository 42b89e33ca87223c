"""Python and notebooks: ``Comparison.to_frame`` and ``_repr_html_``, ``accelml runs``,
``accelml export`` across runs (CSV and Parquet), and the pandas recipe for
``compare --json``, on a real smoke comparison."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest

from accelml.comparison import Comparison
from accelml.report.frame import FRAME_COLUMNS, JSON_RECIPE, SAMPLE_COLUMNS
from accelml.results.store import ResultsStore
from tests.cli.terminal import in_process, in_terminal, piped


@pytest.fixture(scope="module")
def two_runs(smoke_store, tmp_path_factory):
    """Two smoke runs in one store (the second a resume of nothing: same cases, new table):
    a copy of tests/cli/conftest.py's shared store."""
    results = smoke_store.copy(tmp_path_factory.mktemp("smoke"))
    store = ResultsStore(results)
    return results, [run.run_id for run in store.list_runs()], smoke_store.json_stdout


@pytest.mark.slow
def test_to_frame_is_tidy_with_units_and_samples(two_runs):
    results, run_ids, _ = two_runs
    comparison = Comparison.from_store(ResultsStore(results), run_ids[0])
    table = comparison.to_frame()
    assert list(table.columns) == list(FRAME_COLUMNS)
    assert len(table) == 4 and set(table["backend"]) == {"sklearn", "sklearnex", "xgboost"}
    assert (table["fit_median_s"] > 0).all() and (table["fit_n"] == 2).all()
    assert table.loc[table["is_reference"], "speedup"].tolist() == [1.0, 1.0]
    samples = comparison.to_frame(samples=True)
    assert list(samples.columns) == list(SAMPLE_COLUMNS)
    counted = samples[(samples["phase"] == "fit") & ~samples["warmup"]]
    assert counted.groupby("case_id").size().tolist() == [2, 2, 2, 2]
    medians = counted.groupby("case_id")["seconds"].median()
    assert medians.to_dict() == pytest.approx(table.set_index("case_id")["fit_median_s"].to_dict())
    page = comparison._repr_html_()
    assert page.startswith("<table>") and "sklearnex" in page and "gradient_boosting_classifier" in page


def test_runs_lists_every_run(two_runs, capsys):
    results, run_ids, _ = two_runs
    listed = in_process(capsys, "runs", "--results-dir", str(results))
    assert listed.returncode == 0, listed.stderr
    for run_id in run_ids:
        assert re.search(rf"^{run_id}\s+smoke\s+.*finished\s+4/4\s+0", listed.stdout, re.M)
    shown = in_terminal("runs", "--results-dir", str(results), columns=80)
    assert shown.returncode == 0 and shown.widest() <= 80, shown.text
    as_json = json.loads(in_process(capsys, "runs", "--results-dir", str(results), "--json").stdout)
    assert [entry["run_id"] for entry in as_json] == run_ids


def test_export_all_runs_as_csv_and_parquet(two_runs, tmp_path, capsys):
    results, run_ids, _ = two_runs
    csv_file, parquet_file = tmp_path / "runs.csv", tmp_path / "samples.parquet"
    done = in_process(capsys, "export", "--all", "--csv", str(csv_file), "--results-dir", str(results))
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(csv_file)
    assert list(table.columns) == list(FRAME_COLUMNS)
    assert sorted(set(table["run_id"])) == sorted(run_ids) and len(table) == 8
    done = in_process(capsys, "export", run_ids[1], "--samples", "--parquet", str(parquet_file),
                      "--results-dir", str(results))
    assert done.returncode == 0, done.stderr
    samples = pd.read_parquet(parquet_file)
    assert set(samples["run_id"]) == {run_ids[1]} and set(samples["warmup"]) == {True, False}


def test_export_without_a_parquet_library_says_why_and_writes_nothing(two_runs, tmp_path):
    results, _, _ = two_runs
    target = tmp_path / "out.parquet"
    hide = ("import sys\nsys.modules['pyarrow'] = None\nsys.modules['fastparquet'] = None\n"
            "from accelml.cli import main\n"
            f"sys.exit(main(['export', '--all', '--parquet', {str(target)!r}, "
            f"'--results-dir', {str(results)!r}]))")
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "accelml export: error: Parquet unavailable: neither pyarrow nor fastparquet is "
        "installed (pip install pyarrow), or use --csv"]
    assert not target.exists()
    usage = piped("export", "--csv", str(tmp_path / "x.csv"), "--results-dir", str(results))
    assert usage.returncode == 2 and "RUN_ID" in usage.stderr and "Traceback" not in usage.stderr


def test_the_documented_pandas_recipe_reads_compare_json(two_runs, tmp_path, monkeypatch):
    _, _, json_output = two_runs
    (tmp_path / "results.json").write_text(json_output)
    monkeypatch.chdir(tmp_path)
    names: dict[str, object] = {}
    exec(compile(JSON_RECIPE, "JSON_RECIPE", "exec"), names)
    table, cases = names["table"], names["cases"]
    assert isinstance(table, pd.DataFrame) and len(table) == 4
    assert {"backend", "fit.median", "speedup", "agreement.value"} <= set(table.columns)
    assert len(cases) == 4 and "case_id" in cases.columns
