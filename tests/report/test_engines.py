"""Images/s per GPU on deep-learning rows, and the engines' ratio on cross-strategy rows.

From a store of a real 4 x H200 run (committed under benchmarks/gpu/results: ResNet50V2,
jax-pmean against torch-ddp on 1 and 4 GPUs) and from a real CPU run of two strategies.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from accelml.report import load_report
from accelml.report.html import render_html
from accelml.report.speed import images_per_rank

GPU_STORE = (Path(__file__).parents[2] / "benchmarks" / "gpu" / "results"
             / "res-strat-4xH200-b512.sqlite")


@pytest.fixture(scope="module")
def h200_report(tmp_path_factory):
    directory = tmp_path_factory.mktemp("h200")
    shutil.copy(GPU_STORE, directory / "results.sqlite")
    return load_report("latest", directory)


def test_rows_show_images_per_second_per_gpu(h200_report):
    rates = {(row.strategy, row.ranks): row.images_per_rank for row in h200_report.rows}
    by_case = {result.case_id: result for result in h200_report.results}
    for row in h200_report.rows:
        dl = by_case[row.case_id].dl
        assert dl is not None and row.images_per_rank == pytest.approx(
            dl.images_per_second / row.ranks)
    assert rates[("jax-pmean", 1)] == pytest.approx(22_186, rel=1e-3)
    assert rates[("torch-ddp", 4)] == pytest.approx(3_797, rel=1e-3)
    text = h200_report.text()
    assert "img/s per GPU" in text and "22,186" in text
    record = next(r for r in h200_report.records() if r["case_id"] == h200_report.rows[0].case_id)
    assert record["images_per_second_per_rank"] == h200_report.rows[0].images_per_rank


def test_cross_strategy_rows_name_the_engines_ratio_per_gpu(h200_report):
    # jax-pmean's 1-GPU step is 5.76x torch-ddp's (XLA's fused ResNet step against Keras on
    # torch); at 4 GPUs the ratio falls to 5.08x because jax-pmean scales at 88%, torch-ddp 99%
    one, four = h200_report.engine_comparisons()
    assert (one.ranks, four.ranks) == (1, 4)
    assert (one.strategy, one.engine, one.reference_strategy, one.reference_engine) == (
        "jax-pmean", "jax", "torch-ddp", "torch")
    assert one.engine_ratio == pytest.approx(22_186 / 3_852, rel=1e-3)
    assert four.engine_ratio == one.engine_ratio          # the engines' ratio comes from 1 GPU
    assert four.ratio / four.engine_ratio == pytest.approx(0.885, abs=0.01)  # 88% vs 99% efficiency
    text = h200_report.text()
    assert "per GPU, engine jax = 5.76 × engine torch (22,186 vs 3,852 images/s per GPU)" in text
    assert ("19,287 vs 3,797 images/s per GPU (5.08×); per GPU, engine jax = 5.76 × engine torch "
            "on 1 GPU, so the strategies account for 0.88×") in text
    exported = json.loads(json.dumps(h200_report.to_dict()))["engine_comparisons"]
    assert [entry["engine_ratio"] for entry in exported] == [one.engine_ratio] * 2
    page = render_html(h200_report)
    assert "Per-GPU speed across strategies" in page and "22,186 images/s per GPU</div>" in page
    assert "engine jax = 5.76 × engine torch" in page


SPEC = """
name = "engines_cpu"
datasets.digits = { source = "shipped", name = "digits" }

[[cases]]
algorithm = "mlp"
backend = "keras"
strategy = ["jax-pmean", "torch-ddp"]     # Keras on JAX, Keras on torch
dataset = "digits"
params = { epochs = 3, batch_size = 32, learning_rate = 0.05 }
"""


@pytest.mark.slow
def test_a_real_cpu_run_of_two_engines_names_them_per_rank(tmp_path):
    pytest.importorskip("jax", reason="jax is not installed")
    pytest.importorskip("torch", reason="torch is not installed")
    from accelml.cli import main

    spec = tmp_path / "engines.toml"
    spec.write_text(SPEC)
    assert main(["compare", str(spec), "--results-dir", str(tmp_path / "res")]) == 0
    report = load_report("latest", tmp_path / "res")
    (comparison,) = report.engine_comparisons()
    by_strategy = {result.strategy: result for result in report.results}
    torch, jax = images_per_rank(by_strategy["torch-ddp"]), images_per_rank(by_strategy["jax-pmean"])
    assert torch and jax and comparison.engine_ratio == pytest.approx(torch / jax)
    assert (comparison.engine, comparison.reference_engine) == ("torch", "jax")
    ratio = f"{torch / jax:.2f}" if torch / jax >= 0.1 else f"{torch / jax:.2g}"
    assert (f"x1 [torch-ddp] vs [jax-pmean]: per rank, engine torch = {ratio} × engine jax"
            in report.text())
    assert "img/s per rank" in report.text()
    # how each training ran: every case's recorded path, in the text and on the page
    text, page = report.text(), render_html(report)
    for result in report.results:
        assert result.dl is not None and result.dl.path
        assert f"  {result.label}: {result.dl.path}" in text
        assert html.escape(result.dl.path) in page
    assert "how each training ran" in text and 'id="paths"' in page


def test_strategies_on_the_same_engine_are_compared_as_strategies(tmp_path):
    # 2 x H200, horovod against torch-ddp (both Keras on torch), per-GPU batch 256 and 512
    shutil.copy(GPU_STORE.parent / "res-strat5" / "results.sqlite", tmp_path / "results.sqlite")
    lines = [comparison.text() for comparison in load_report("latest", tmp_path).engine_comparisons()]
    assert ("resnet50v2 on synthetic_128 (batch_size=256) x1 [torch-ddp] vs [horovod]: same engine "
            "(torch): per GPU, torch-ddp = 0.98 × horovod (3,524 vs 3,583 images/s per GPU)") in lines
    assert any(line.startswith("resnet50v2 on synthetic_128 (batch_size=512) x1") for line in lines)
