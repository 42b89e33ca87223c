"""The comparison table's reference marks and strategy column, and per-strategy scaling."""

import pytest

from accelml.report.speed import scaling
from accelml.report.table import build_rows, render_text
from accelml.results.records import CaseResult, FailureKind, PhaseTiming
from accelml.results.store import ResultsStore


def _ok(case_id, backend="sklearn", seconds=(1.0, 1.0, 1.0), **fields):
    return CaseResult("r", case_id, fields.pop("algorithm", "kmeans"), backend, "cpu",
                      fields.pop("dataset", "blobs"), "ok",
                      timings=(PhaseTiming.from_samples("fit", list(seconds)),), **fields)


def _failed(case_id, backend="sklearn", **fields):
    return CaseResult("r", case_id, fields.pop("algorithm", "kmeans"), backend, "cpu",
                      fields.pop("dataset", "blobs"), "failed", failure=FailureKind.ERROR,
                      reason="ValueError: boom", **fields)


def _epochs(case_id, ranks, strategy, seconds, algorithm="mlp"):
    return CaseResult("r", case_id, algorithm, "keras", "cpu", "mnist", "ok", ranks=ranks,
                      strategy=strategy,
                      timings=(PhaseTiming.from_samples("epoch", [seconds] * 3),))


def test_a_failed_reference_case_is_not_the_reference(tmp_path):
    rows = build_rows(ResultsStore(tmp_path), [_failed("a"), _ok("b", "sklearnex")], "sklearn")
    failed, other = rows
    assert not failed.is_reference and failed.speedup is None
    assert not other.is_reference and other.speedup is None and other.agreement is None
    text = render_text(rows)
    assert "ref" not in text.replace("reference", "")
    assert "failed (error)" in text


def test_a_working_reference_is_marked_and_others_get_a_speedup(tmp_path):
    rows = build_rows(ResultsStore(tmp_path), [_ok("a"), _ok("b", "sklearnex", (0.25,) * 3)],
                      "sklearn")
    assert rows[0].is_reference and not rows[1].is_reference
    assert rows[1].speedup == 4.0
    assert "ref" in render_text(rows)


def test_strategy_column_only_when_a_case_has_a_strategy(tmp_path):
    store = ResultsStore(tmp_path)
    plain = render_text(build_rows(store, [_ok("a")], "sklearn"))
    assert "strategy" not in plain
    results = [_epochs("h1", 1, "horovod", 4.0), _epochs("m1", 1, "mirrored", 4.0)]
    text = render_text(build_rows(store, results, "keras"))
    assert "strategy" in text and "horovod" in text and "mirrored" in text


def test_scaling_uses_the_one_worker_case_of_the_same_strategy():
    results = [
        _epochs("m1", 1, "mirrored", 8.0), _epochs("m2", 2, "mirrored", 4.0),
        _epochs("h1", 1, "horovod", 6.0), _epochs("h2", 2, "horovod", 4.0),
        _epochs("s1", 1, "single", 10.0), _epochs("w2", 2, "multiworker", 5.0),
        _epochs("o1", 1, "horovod", 3.0, algorithm="cnn"), _epochs("o2", 2, "horovod", 3.0, algorithm="cnn"),
    ]
    found = scaling(results)
    assert found["m2"].baseline_case_id == "m1" and found["m2"].speedup == 2.0
    assert found["h2"].baseline_case_id == "h1" and found["h2"].speedup == 1.5
    # no 1-rank multiworker case: measured against the single-process case
    assert found["w2"].baseline_case_id == "s1" and found["w2"].speedup == 2.0
    # another model has its own baseline
    assert found["o2"].baseline_case_id == "o1" and found["o2"].efficiency == 0.5


def test_a_failed_one_worker_case_is_no_baseline():
    failed = CaseResult("r", "f1", "mlp", "keras", "cpu", "mnist", "failed", ranks=1,
                        strategy="horovod", failure=FailureKind.ERROR, reason="boom")
    found = scaling([failed, _epochs("h2", 2, "horovod", 4.0)])
    assert "h2" not in found


def _widest(text):
    return max(len(line) for line in text.splitlines())


def test_a_narrow_table_keeps_failures_and_scaling_readable(tmp_path):
    """At 60 columns: a failed row still says failed with its note number (the reason in the
    legend); data-parallel rows keep ranks and strategy, which tell them apart."""
    store = ResultsStore(tmp_path)
    rows = build_rows(store, [_ok("a", dataset="breast_cancer_wisconsin"),
                              _failed("b", "sklearnex", dataset="breast_cancer_wisconsin")],
                      "sklearn")
    text = render_text(rows, width=60)
    assert _widest(text) <= 60, text
    assert "failed [1]" in text and "[1] b: ValueError: boom" in text
    results = [_epochs(f"{strategy}{ranks}", ranks, strategy, 4.0 / ranks)
               for strategy in ("horovod", "mirrored") for ranks in (1, 2, 4)]
    text = render_text(build_rows(store, results, "keras"), width=60)
    assert _widest(text) <= 60, text
    short = dict(line.removeprefix("strategy: ").split(" = ")
                 for line in text.splitlines() if line.startswith("strategy: "))
    body = [line.split() for line in text.splitlines() if line.startswith("mlp")]
    assert [(cells[3], short.get(cells[4], cells[4])) for cells in body] == [
        (str(w), s) for s in ("horovod", "mirrored") for w in (1, 2, 4)]
    assert "device: cpu (every row)" in text


def test_matrix_rows_that_differ_only_by_dataset_or_parameters_stay_distinct():
    """The matrix shows what tells its rows apart: a dataset or parameter that differs is
    in every row, what all rows share goes under the table, at 80 columns as at 200. At 80
    a row stays one line (its case text shortened, the legend gives it whole; issue 33: it
    wrapped to 3-5 lines) and keeps the bitwise column."""
    from accelml.agreement.matrix import MatrixRow, case_ref
    from accelml.agreement.point import measures
    from accelml.cases import Expectation
    from accelml.report.matrix_table import format_rows

    def case(backend, dataset, clusters):
        return CaseResult("r", f"{backend}{dataset}{clusters}", "kmeans", backend, "cpu",
                          dataset, "ok", params=(("n_clusters", clusters), ("n_init", 1),
                                                 ("random_state", 0)))

    rows = [MatrixRow("cross-backend", case_ref(case("sklearn", dataset, clusters)),
                      case_ref(case("sklearnex", dataset, clusters)), None, (),
                      Expectation(False, "different implementations"), False)
            for dataset in ("generated_blobs_100k_seed0", "generated_blobs_1m_seed0")
            for clusters in (8, 64)]
    for width in (80, 200):
        text = format_rows(rows, measures(), width)
        assert _widest(text) <= width, text
        lines = text.splitlines()
        assert "bitwise" in lines[0] and "expected" in lines[0], text
        body = [line for line in lines[2:6] if line.startswith(("cross-backend", "backend"))]
        assert len(body) == 4 and len(set(body)) == 4, text
        notes = []     # the notes under the table, each with its wrapped lines joined
        for line in lines[6:]:
            if line.startswith("  ") and notes:
                notes[-1] += " " + line.strip()
            else:
                notes.append(line)
        shortened = dict(item.split(" = ") for note in notes if note.startswith("case: ")
                         for item in note.removeprefix("case: ").split("; "))
        body = [" ".join(shortened.get(word, word) for word in line.split("  ")) for line in body]
        assert [("100k" in line, "n_clusters=64" in line) for line in body] == [
            (True, False), (True, True), (False, False), (False, True)], text
        assert "every case: kmeans cpu x1 n_init=1 random_state=0" in text


def _boosting(case_id, device, ranks, seconds):
    return CaseResult("r", case_id, "gradient_boosting_classifier", "xgboost", device, "rows", "ok",
                      ranks=ranks, timings=(PhaseTiming.from_samples("fit", list(seconds)),))


def test_the_reference_backend_on_a_gpu_is_measured_against_its_cpu_case(tmp_path):
    # reference = xgboost on CPU and CUDA, 1 and N ranks (experiments/xgboost_scaling.toml):
    # one GPU shows its speed-up over all the CPU cores, N ranks their scaling over one.
    results = [_boosting("g1", "cuda", 1, (3.2, 3.2, 3.3)), _boosting("g4", "cuda", 4, (1.6,) * 3),
               _boosting("c1", "cpu", 1, (40.0, 40.0, 41.0)), _boosting("c2", "cpu", 2, (20.0,) * 3)]
    rows = {row.case_id: row for row in build_rows(ResultsStore(tmp_path), results, "xgboost")}
    assert rows["c1"].is_reference and rows["c1"].speedup == 1.0
    assert (rows["c1"].speedup_low, rows["c1"].speedup_high) == (1.0, 1.0)
    assert not rows["g1"].is_reference and rows["g1"].speedup == pytest.approx(40.0 / 3.2)
    assert rows["g1"].speedup_low < rows["g1"].speedup < rows["g1"].speedup_high
    assert rows["g4"].speedup == 2.0 and rows["g4"].efficiency == 0.5   # vs 1 GPU, not vs CPU
    assert rows["c2"].speedup == 2.0 and rows["c2"].efficiency == 1.0
    # without a CPU case the GPU case is the reference, as before
    alone = build_rows(ResultsStore(tmp_path), results[:2], "xgboost")
    assert alone[0].is_reference and alone[1].speedup == 2.0


def test_a_speedup_from_two_samples_says_n_is_too_small_for_an_interval(tmp_path):
    """Two samples each: the medians' intervals reach zero time, and the speed-up read
    ``fit 1.47x (0-9.7)`` in the table and ``high: null`` in JSON (issue 33)."""
    from accelml.report.table import NO_INTERVAL, json_clean, to_json
    from accelml.results.records import RunRecord

    results = [CaseResult("r", "a", "kmeans", "sklearn", "cpu", "blobs", "ok",
                          timings=(PhaseTiming.from_samples("fit", [1.0, 3.0]),)),
               CaseResult("r", "b", "kmeans", "sklearnex", "cpu", "blobs", "ok",
                          timings=(PhaseTiming.from_samples("fit", [0.5, 1.9]),))]
    rows = {row.case_id: row for row in build_rows(ResultsStore(tmp_path), results, "sklearn")}
    fast = rows["b"]
    assert fast.speedup == pytest.approx(2.0 / 1.2)
    assert (fast.speedup_low, fast.speedup_high) == (None, None)
    text = render_text(list(rows.values()), width=300)
    assert "fit 1.67x" in text and "(n too small)" in text and "(0-" not in text
    assert NO_INTERVAL in text                              # the legend says what it means
    run = RunRecord("r", "s", "0" * 64, "", reference_backend="sklearn")
    document = json_clean(to_json(run, results, list(rows.values())))
    row = next(row for row in document["rows"] if row["case_id"] == "b")
    assert row["speedup_interval"] == NO_INTERVAL
    assert (row["speedup_low"], row["speedup_high"]) == (None, None)
    [fit] = row["phase_speedups"]
    assert (fit["low"], fit["high"], fit["interval"]) == (None, None, NO_INTERVAL)
    reference = next(row for row in document["rows"] if row["case_id"] == "a")
    assert reference["speedup_interval"] is None
