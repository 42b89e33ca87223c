"""The crossover of N GPUs against 1 (accelml.report.crossover) from stored results: one size
or several pooled, the verdicts, and its lines in the terminal report. The figures are the
per-round costs measured on 4 x H200 through xgboost.dask (benchmarks/RESULTS.md)."""

from __future__ import annotations

import pytest

from accelml.report.crossover import crossovers
from accelml.report.terminal import crossover_text
from accelml.results.records import BoostingRounds, CaseResult, DatasetInfo, PhaseTiming

PARAMS = (("max_depth", 8), ("n_estimators", 500))


def case(workers, rows, setup, per_round, params=PARAMS, rounds=500, status="ok"):
    info = DatasetInfo(f"d{rows}", "0" * 32, "generated", "classification", rows, rows // 10, 50, 2,
                       "float32", "C")
    fit = setup + rounds * per_round
    return CaseResult("r", f"c{workers}-{rows}-{len(params)}", "gradient_boosting_classifier",
                      "xgboost", "cuda", info.name, status, ranks=workers, params=params,
                      reason="" if status == "ok" else "lost", dataset_info=info,
                      timings=(PhaseTiming.from_samples("fit", [fit]),),
                      boosting=BoostingRounds(rounds, setup, per_round))


def test_one_size_gives_the_crossover_of_each_worker_count():
    found = crossovers([case(1, 40_000_000, 1.0, 0.053), case(2, 40_000_000, 1.5, 0.033),
                        case(4, 40_000_000, 1.8, 0.020)])
    assert [c.workers for c in found] == [2, 4]
    four = found[1]
    assert (four.per_round_one, four.per_round_many, four.setup_many) == (0.053, 0.020, 1.8)
    # r = f + c * rows / workers through (40M, 53 ms) and (10M, 20 ms)
    assert four.floor_seconds == pytest.approx(0.009)
    assert four.seconds_per_row == pytest.approx(1.1e-9)
    # set-up from one size: 1 GPU's 1.0 s grows with rows (2.5e-8 s a row); 4 GPUs' 1.8 s is
    # that cost on their 10M rows plus a fixed 1.55 s
    per_row = 1.0 / 40e6
    assert four.pays_from_rows == pytest.approx(
        (1.8 - per_row * 10e6) / (per_row * 0.75 + 500 * 1.1e-9 * 0.75))
    # at the measured size the model gives back the measured fits
    model_one = four.setup_one + 500 * (four.floor_seconds + four.seconds_per_row * 40e6)
    assert model_one == pytest.approx(1.0 + 500 * 0.053)
    text = crossover_text(found)
    assert "4 GPUs pay from ~3.59M rows (estimated from 1 and 4 GPUs at 40M rows, 500 rounds" in text
    assert "per round 1 GPU 53 ms, 4 GPUs 20 ms at 40M rows; set-up 1 s / 1.8 s" in text


def test_several_sizes_of_the_same_parameters_are_pooled():
    results = [case(1, 10_000_000, 0.4, 0.018), case(4, 10_000_000, 1.6, 0.011),
               case(1, 40_000_000, 1.0, 0.053), case(4, 40_000_000, 1.8, 0.020),
               case(4, 40_000_000, 1.8, 0.020, status="failed"),
               case(1, 40_000_000, 1.0, 0.040, params=(("max_depth", 6),))]
    (four,) = crossovers(results)
    assert four.rows == (10_000_000, 40_000_000) and four.measured_rows == 40_000_000
    assert four.floor_seconds == pytest.approx(0.0068, abs=0.002)     # 6-8 ms: both floors
    assert four.seconds_per_row == pytest.approx(1.15e-9, rel=0.1)
    assert 1e6 < four.pays_from_rows < 10e6
    assert "estimated from 1 and 4 GPUs at 10M, 40M rows" in crossover_text([four])


def test_a_one_gpu_set_up_that_grows_with_rows_is_not_taken_as_fixed():
    """4 x H200, xgboost_40m_gpu: 1 GPU's set-up (8.2 s, sketching 39.9M rows) is above 4
    GPUs' (2.9 s); read as a fixed cost it would make 4 GPUs pay at every size, against the
    10M-row run where they did not pay at 7.5M rows."""
    (four,) = crossovers([case(1, 39_900_000, 8.22, 0.048), case(4, 39_900_000, 2.87, 0.0196)])
    assert 1e6 < four.pays_from_rows < 3e6
    assert "set-up as measured, growing with each GPU's rows" in crossover_text([four])


def test_workers_whose_rounds_are_not_cheaper_do_not_pay():
    (four,) = crossovers([case(1, 4_000_000, 0.3, 0.004), case(4, 4_000_000, 1.6, 0.006)])
    assert not four.pays and four.seconds_per_row < 0
    assert "4 GPUs do not pay at any size under this model (estimated from" in crossover_text([four])


def test_cases_without_a_split_or_a_one_worker_case_give_none():
    assert crossovers([case(4, 1000, 1.0, 0.1)]) == ()
    plain = CaseResult("r", "x", "kmeans", "sklearn", "cpu", "d", "ok", ranks=2)
    assert crossovers([plain]) == () and crossover_text(()) == ""
