"""A CI gate for a spec that mixes CPU and GPU cases, on a machine without a GPU:
``--only-available`` skips the unavailable cases instead of failing on them, and
``check --junit FILE`` writes the outcome as JUnit XML."""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
import yaml

from accelml.cli import build_parser, main
from accelml.probe import probe_gpus

REPO = Path(__file__).resolve().parents[2]
SPEC = """
name = "mixed"
reference = "sklearn"
repeats = 2
warmup = 0
threads = 1
[datasets.bc]
source = "shipped"
name = "breast_cancer"
[[cases]]
algorithm = "gradient_boosting_classifier"
backend = ["sklearn", "xgboost"]
dataset = "bc"
params = {n_estimators = 4, random_state = 0}
[[cases]]
algorithm = "gradient_boosting_classifier"
backend = "xgboost"
device = "cuda"
dataset = "bc"
params = {n_estimators = 4, random_state = 0}
"""


@pytest.fixture(scope="module")
def gpu_baseline_on_a_cpu_machine(tmp_path_factory):
    """A run of the mixed spec here, and a baseline that says the GPU case succeeded (as one
    made on a GPU machine does)."""
    if probe_gpus().available:
        pytest.skip("this machine has a GPU: its cases are available")
    directory = tmp_path_factory.mktemp("gate")
    spec, baseline, results = directory / "mixed.toml", directory / "baseline.json", directory / "results"
    spec.write_text(SPEC)
    assert main(["check", str(spec), "--baseline", str(baseline), "--update-baseline",
                 "--results-dir", str(results)]) == 0
    data = json.loads(baseline.read_text())
    gpu_cases = [case_id for case_id, case in data["cases"].items() if case["status"] != "ok"]
    assert len(gpu_cases) == 1
    data["cases"][gpu_cases[0]]["status"] = "ok"
    baseline.write_text(json.dumps(data, indent=1))
    return directory, data["run_id"]


def junit(path):
    suite = ElementTree.parse(path).getroot().find("testsuite")
    return suite, {case.get("name"): case for case in suite.findall("testcase")}


@pytest.mark.slow
def test_unavailable_cases_fail_the_gate_without_the_flag(gpu_baseline_on_a_cpu_machine, capsys):
    directory, run_id = gpu_baseline_on_a_cpu_machine
    report = directory / "plain.xml"
    assert main(["check", "--run", run_id, "--baseline", str(directory / "baseline.json"),
                 "--results-dir", str(directory / "results"), "--junit", str(report)]) == 1
    assert "DRIFT" in capsys.readouterr().out
    suite, tests = junit(report)
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "0")
    [failed] = [case for case in tests.values() if case.find("failure") is not None]
    assert "/cuda" in failed.get("name")
    assert failed.find("failure").get("message").startswith("status: baseline ok, now failed")


def test_only_available_skips_them_and_passes(gpu_baseline_on_a_cpu_machine, capsys):
    directory, run_id = gpu_baseline_on_a_cpu_machine
    report = directory / "reports" / "ci" / "gate.xml"   # made, as --html and --json make theirs
    assert main(["check", "--run", run_id, "--baseline", str(directory / "baseline.json"),
                 "--results-dir", str(directory / "results"), "--junit", str(report),
                 "--only-available"]) == 0
    assert "1 case(s) skipped, unavailable on this machine" in capsys.readouterr().out
    suite, tests = junit(report)
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "0", "1")
    [skipped] = [case for case in tests.values() if case.find("skipped") is not None]
    assert "/cuda" in skipped.get("name") and "GPU" in skipped.find("skipped").get("message")


def test_compare_exit_code_with_and_without_only_available(gpu_baseline_on_a_cpu_machine, capsys):
    directory, run_id = gpu_baseline_on_a_cpu_machine
    arguments = ["compare", "--resume", run_id, "--results-dir", str(directory / "results"), "--no-progress"]
    assert main(arguments) == 1
    assert main([*arguments, "--only-available"]) == 0
    assert "1 case(s) skipped, unavailable on this machine" in capsys.readouterr().err


def test_the_github_actions_example_runs_a_check_command_accelml_accepts():
    workflow = yaml.safe_load((REPO / "experiments" / "ci" / "github-actions-check.yml").read_text())
    steps = workflow["jobs"]["reproducibility"]["steps"]
    [command] = [step["run"] for step in steps if "accelml check" in step.get("run", "")]
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "accelml"]
    args = build_parser("check").parse_args(words[3:])
    assert args.junit == "accelml-check.xml" and args.only_available and args.baseline
    assert any('pip install ".[intel,xgboost]"' in step.get("run", "") for step in steps)
