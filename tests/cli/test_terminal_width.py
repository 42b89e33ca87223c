"""Output that fits users' terminals: the compare table, the agreement matrix and
``backends`` at 80 and 120 columns through a real pseudo-terminal, and nothing hard-wrapped
when the output is piped (a SLURM log, ``grep``)."""

from __future__ import annotations

import re

import pytest

from accelml.report.layout import Column, Form, abbreviations, fit
from tests.cli.terminal import in_terminal, piped

CASES = [("kmeans", "blobs", "sklearn"), ("kmeans", "blobs", "sklearnex"),
         ("gradient_boosting_classifier", "breast_cancer", "sklearn"),
         ("gradient_boosting_classifier", "breast_cancer", "xgboost")]


@pytest.fixture(scope="module")
def smoke_run(smoke_store, tmp_path_factory):
    """One smoke comparison, piped (tests/cli/conftest.py's shared ``--no-progress`` run),
    and a copy of its store to resume: (results dir, run id, stdout, stderr)."""
    results = smoke_store.copy(tmp_path_factory.mktemp("smoke"))
    run_id = re.search(r"run (\S+):", smoke_store.table_stderr).group(1)
    return results, run_id, smoke_store.table_stdout, smoke_store.table_stderr


@pytest.fixture(scope="module")
def compare_shown(smoke_run):
    """``compare --resume`` of the smoke run in a terminal of each width, run once a width."""
    results, run_id, _, _ = smoke_run
    shown = {}

    def at(columns: int):
        if columns not in shown:
            shown[columns] = in_terminal("compare", "--resume", run_id, "--results-dir",
                                         str(results), "--no-progress", columns=columns)
        return shown[columns]

    return at


def _legend(text: str) -> dict[str, str]:
    """abbreviation -> full name, from the legend's ``column: short = full; ...`` lines."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"(algorithm|dataset|backend): (.*)$", line)
        if match:
            for pair in match.group(2).split("; "):
                short, _, full = pair.partition(" = ")
                found[short] = full
    return found


def _table_rows(text: str) -> list[list[str]]:
    """The compare table's body rows (between its rule and the legend), split on gaps."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("algorithm"))
    rows = []
    for line in lines[start + 2:]:
        if not line.strip() or line.startswith("times:"):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


@pytest.mark.parametrize("columns", [80, 120])
def test_compare_fits_the_terminal_and_every_row_says_what_it_is(compare_shown, columns):
    shown = compare_shown(columns)
    assert shown.returncode == 0, shown.text
    assert shown.widest() <= columns, shown.text
    legend = _legend(shown.text)
    rows = _table_rows(shown.text)
    assert len(rows) == len(CASES), shown.text
    for (algorithm, dataset, backend), cells in zip(CASES, rows, strict=True):
        named = [legend.get(cell, cell) for cell in cells[:3]]
        assert named == [algorithm, dataset, backend], (cells, shown.text)
        assert cells[-1] in ("ok", "ok~", "ok, noisy")                  # status stays
        assert any(re.fullmatch(r"ref|\d+\.\d\dx", cell) for cell in cells)  # speed-up stays
    # the agreement matrix fits too, and its rows tell the backends apart
    matrix = shown.text[shown.text.index("kind "):] if "kind " in shown.text else \
        shown.text[shown.text.index("comparison "):]
    assert "sklearnex" in matrix and "xgboost" in matrix
    assert "every case: cpu" in shown.text
    # the legend explains only columns the table shows
    header = next(line for line in shown.text.splitlines() if line.startswith("algorithm"))
    assert ("iterations" in header) == ("iterations: this fit's" in shown.text), shown.text


def test_compare_at_120_columns_keeps_full_names(compare_shown):
    shown = compare_shown(120)
    assert "gradient_boosting_classifier" in _table_rows(shown.text)[2][0]
    assert "…" not in "".join(line for line in shown.text.splitlines()
                              if line.startswith("kmeans"))


def test_report_fits_80_columns(smoke_run):
    results, run_id, _, _ = smoke_run
    shown = in_terminal("report", run_id, "--results-dir", str(results), columns=80)
    assert shown.returncode == 0 and shown.widest() <= 80, shown.text
    assert "sklearnex" in shown.text and "every case: cpu" in shown.text


def test_piped_output_is_never_hard_wrapped(smoke_store):
    stdout, stderr = smoke_store.table_stdout, smoke_store.table_stderr
    assert f"results in {smoke_store.results}" in stderr      # the path on the line that names it
    assert "…" not in stdout                         # nothing abbreviated at natural width
    assert any(line.startswith("gradient_boosting_classifier  breast_cancer  xgboost")
               for line in stdout.splitlines()), stdout
    assert "different implementations (other solvers, summation order, initialisation): " \
           "agreement is measured, not identity" in stdout
    assert all(line == line.rstrip() for line in stdout.splitlines())


def test_backends_is_quiet_fits_80_columns_and_names_backends_as_specs_do():
    # (that it imports no framework is tests/cli/test_import_cost.py's)
    done = piped("backends")
    assert done.returncode == 0 and done.stderr == "", done.stderr     # no TF/absl log lines
    shown = in_terminal("backends", columns=80)
    assert shown.returncode == 0 and shown.widest() <= 80, shown.text
    names = {line.split()[0] for line in shown.text.splitlines() if line.strip()}
    assert {"sklearn", "sklearnex", "xgboost", "keras"} <= names
    assert "scikit-learn-intelex" not in shown.text


def test_abbreviations_keep_what_tells_values_apart():
    short = abbreviations(["sklearn", "sklearnex", "xgboost"], 6)
    assert len(set(short.values())) == 3 and all(len(text) <= 6 for text in short.values())
    assert short["sklearnex"].endswith("ex")
    # a value that fits stays whole, and a bare head never reads as another value
    short = abbreviations(["sklearn", "sklearnex"], 7)
    assert short == {"sklearn": "sklearn", "sklearnex": "skle…ex"}


def test_a_column_without_a_drop_rank_never_disappears():
    rows = [("x" * 40, "1.00x", "ok")] * 3
    columns = [Column((Form("name", lambda r: r[0]),), drop_rank=1),
               Column((Form("speedup", lambda r: r[1]),)),
               Column((Form("status", lambda r: r[2]),))]
    layout = fit(columns, rows, 20)
    assert layout.headings == ("speedup", "status") and layout.width <= 20
    assert "left out at this width: name" in layout.legend[0]
