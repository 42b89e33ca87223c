"""What the command line imports: command modules import at module level, so the CLI loads
only the command being run, and nothing loads a deep-learning framework before it is needed."""

import functools
import json
import subprocess
import sys

import pytest

FRAMEWORKS = ("tensorflow", "jax", "torch", "keras", "horovod", "xgboost", "sklearnex")


def _imported_by(*argv: str) -> set[str]:
    """The top-level modules a fresh interpreter holds after ``python -m accelml ARGV``."""
    code = ("import json, sys\nfrom accelml.cli import main\ntry:\n    main(" + repr(list(argv))
            + ")\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules} "
            "| {name for name in sys.modules if name.startswith('accelml.')})))")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def imported_by():
    """:func:`_imported_by`, each command line run once for this module's tests (``--help``
    and ``run-case --help`` are asked about twice)."""
    return functools.cache(_imported_by)


@pytest.mark.parametrize("argv", [["--help"], ["compare", "--help"], ["check", "--help"],
                                  ["report", "--help"], ["run-case", "--help"]])
def test_help_loads_no_deep_learning_framework(imported_by, argv):
    assert not imported_by(*argv) & set(FRAMEWORKS)


def test_the_case_process_loads_only_its_own_command(imported_by):
    """... and no scikit-learn until a case fits an estimator: a deep-learning case's process
    (its ranks train) paid ~2.4 s of its ``startup`` phase for it."""
    modules = imported_by("run-case", "--help")
    assert "accelml.cli.run_case" in modules and "accelml.runner.run_case" in modules
    assert not {"accelml.cli.compare", "accelml.cli.report", "accelml.report.render",
                "accelml.comparison", "accelml.orchestration", "matplotlib", "sklearn"} & modules


def test_backends_lists_without_loading_a_framework(imported_by):
    """``backends`` finds libraries through package metadata; ``--import`` is what loads them."""
    assert not imported_by("backends") & set(FRAMEWORKS)


@pytest.mark.parametrize("argv", [["runs", "--help"], ["export", "--help"]])
def test_runs_and_export_load_no_framework(imported_by, argv):
    assert not imported_by(*argv) & set(FRAMEWORKS)


def test_the_command_list_imports_no_command_module(imported_by):
    """``python -m accelml --help`` lists the commands from accelml.cli.COMMAND_HELP: it took
    1.4 s importing every command (issue 33)."""
    modules = imported_by("--help")
    assert not {name for name in modules if name.startswith("accelml.cli.")}
    assert not {"numpy", "rich", "accelml.report", "accelml.comparison"} & modules


@pytest.mark.parametrize("argv", [["compare", "--help"], ["report", "--help"], ["runs", "--help"]])
def test_client_commands_load_no_scikit_learn(imported_by, argv):
    """The client reads the estimator registries, not :class:`accelml.estimators.Estimator`:
    scikit-learn (~3 CPU-s a process here) loads only in case processes that fit."""
    assert "sklearn" not in imported_by(*argv)
