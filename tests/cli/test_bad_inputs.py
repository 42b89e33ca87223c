"""Bad input, the way an attacker or a careless user types it (issue 16, the fuzz suite).

Every bad spec and command line here — hand-written (the issue's among them) and generated
by hypothesis — must end the same way: exit 2, exactly one line on stderr (no traceback,
no usage block), nothing on stdout, and nothing written: the working directory, the results
store and every file the command was pointed at are byte for byte as they were.

They run in this process (``accelml.cli.main``), so the suite is quick; a few go through a
real ``python -m accelml`` process, and ``run-case`` (which watches its parent) only there.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelml.cli import main

REPO = Path(__file__).resolve().parents[2]

BASE = """name = "fuzz"
reference = "sklearn"
repeats = 1
warmup = 0
time_limit = 60
[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 60
centers = 2
seed = 0
[datasets.cls]
source = "generated"
generator = "classification"
n_samples = 60
n_features = 5
[[cases]]
algorithm = "kmeans"
backend = ["sklearn", "sklearnex"]
dataset = "blobs"
params = {n_clusters = 2, n_init = 1, random_state = 0}
"""

CLASSICAL = '[[cases]]\nalgorithm = "{algorithm}"\nbackend = "{backend}"\ndataset = "cls"\nparams = {{{params}}}\n'
KERAS = ('[datasets.img]\nsource = "generated"\ngenerator = "images"\nn_samples = 64\n'
         '[[cases]]\nalgorithm = "small_cnn"\nbackend = "keras"\ndataset = "img"\n')


def edit(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new)


def dataset(table: str) -> str:
    """BASE with one more dataset table."""
    return BASE.replace("[datasets.cls]", table + "[datasets.cls]")


def extra(algorithm: str, params: str, backend: str = "sklearn") -> str:
    return BASE + CLASSICAL.format(algorithm=algorithm, backend=backend, params=params)


# ------------------------------------------------------------------ bad specs, by hand

BAD_SPECS = {
    # the issue's
    "n_clusters_text": edit("n_clusters = 2", 'n_clusters = "three"'),
    "dataset_seed_negative": edit("seed = 0", "seed = -1"),
    "n_samples_1e20": edit("n_samples = 60\ncenters", "n_samples = 100000000000000000000\ncenters"),
    "cluster_std_negative": edit("seed = 0", "cluster_std = -1.0"),
    "sklearn_algorithm_clash": edit("n_init = 1", 'n_init = 1, algorithm = "elkan"'),
    "xgboost_n_estimators_negative": extra("gradient_boosting_classifier", "n_estimators = -1", "xgboost"),
    # numbers out of range
    "dataset_seed_too_big": edit("seed = 0", "seed = 4294967296"),
    "top_seed_negative": "seed = -5\n" + BASE,
    "n_samples_3e9": edit("n_samples = 60\ncenters", "n_samples = 3000000000\ncenters"),
    "n_samples_too_few": edit("n_samples = 60\ncenters", "n_samples = 3\ncenters"),
    "n_samples_zero": edit("n_samples = 60\ncenters", "n_samples = 0\ncenters"),
    "n_features_zero": edit("n_features = 5", "n_features = 0"),
    "centers_zero": edit("centers = 2", "centers = 0"),
    "noise_negative": edit("n_features = 5", "n_features = 5\nnoise = -0.5"),
    "test_size_above_one": edit("seed = 0", "test_size = 1.5"),
    "test_size_zero": edit("seed = 0", "test_size = 0"),
    "time_limit_negative": edit("time_limit = 60", "time_limit = -1"),
    "time_limit_zero": edit("time_limit = 60", "time_limit = 0"),
    "repeats_zero": edit("repeats = 1", "repeats = 0"),
    "repeats_min_above_max": edit("repeats = 1", "repeats = {min = 3, max = 2}"),
    "repeats_target_two": edit("repeats = 1", "repeats = {target = 2.0}"),
    "repeats_confidence": edit("repeats = 1", "repeats = {confidence = 0.1}"),
    "warmup_negative": edit("warmup = 0", "warmup = -1"),
    "threads_zero": "threads = 0\n" + BASE,
    "memory_limit_zero": "memory_limit_mb = 0\n" + BASE,
    "integer_beyond_int64": edit("random_state = 0", "random_state = -100000000000000000000"),
    # parameter values
    "n_clusters_zero": edit("n_clusters = 2", "n_clusters = 0"),
    "n_clusters_fraction": edit("n_clusters = 2", "n_clusters = 2.5"),
    "n_clusters_bool": edit("n_clusters = 2", "n_clusters = true"),
    "n_init_zero": edit("n_init = 1", "n_init = 0"),
    "n_init_word": edit("n_init = 1", 'n_init = "sometimes"'),
    "max_iter_negative": edit("n_init = 1", "n_init = 1, max_iter = -3"),
    "tol_negative": edit("n_init = 1", "n_init = 1, tol = -1.0"),
    "random_forest_no_trees": extra("random_forest_classifier", "n_estimators = 0"),
    "random_forest_trees_text": extra("random_forest_classifier", 'n_estimators = "many"'),
    "min_samples_split_one": extra("random_forest_classifier", "min_samples_split = 1"),
    "knn_no_neighbours": extra("knn_classifier", "n_neighbors = 0"),
    "knn_algorithm_clash": extra("knn_classifier", 'algorithm = "brute"'),
    "logistic_c_negative": extra("logistic_regression", "C = -1.0"),
    "logistic_c_zero": extra("logistic_regression", "C = 0"),
    "boosting_learning_rate_zero": extra("gradient_boosting_classifier", "learning_rate = 0.0"),
    "boosting_leaves_word": extra("gradient_boosting_classifier", 'max_leaf_nodes = "unlimited"'),
    "logistic_max_iter_zero": extra("logistic_regression", "max_iter = 0"),
    "boosting_one_bin": extra("gradient_boosting_classifier", "max_bins = 1"),
    "boosting_learning_rate_negative": extra("gradient_boosting_classifier", "learning_rate = -0.1"),
    "xgboost_zero_trees": extra("gradient_boosting_classifier", "n_estimators = 0", "xgboost"),
    "unknown_parameter": edit("n_init = 1", "n_init = 1, n_cluster = 3"),
    "parameter_list": edit("n_init = 1", "n_init = [1, 2]"),
    "parameter_table": edit("n_init = 1", "n_init = {a = 1}"),
    # names
    "unknown_backend": edit('backend = ["sklearn", "sklearnex"]', 'backend = ["sklearn", "sklearn-gpu"]'),
    "unknown_algorithm": edit('algorithm = "kmeans"', 'algorithm = "kmeanz"'),
    "unknown_device": edit('dataset = "blobs"\nparams', 'device = "tpu"\ndataset = "blobs"\nparams'),
    "unknown_dataset": edit('dataset = "blobs"\nparams', 'dataset = "nope"\nparams'),
    "unknown_generator": edit('generator = "blobs"', 'generator = "spirals"'),
    "unknown_source": edit('source = "generated"\ngenerator = "blobs"', 'source = "ftp"'),
    "unknown_shipped": dataset('[datasets.s]\nsource = "shipped"\nname = "titanic"\n'),
    "unknown_keras_set": dataset('[datasets.k]\nsource = "keras"\nname = "emnist"\n'),
    "unknown_dtype": edit("seed = 0", 'seed = 0\ndtype = "float16"'),
    "unknown_layout": edit("seed = 0", 'seed = 0\nlayout = "X"'),
    "unknown_task": edit("seed = 0", 'seed = 0\ntask = "ranking"'),
    "unknown_top_key": "colour = 3\n" + BASE,
    "unknown_case_key": edit('dataset = "blobs"\nparams', 'dataset = "blobs"\ncolour = 1\nparams'),
    "unknown_dataset_key": edit("seed = 0", "seed = 0\nwidth = 3"),
    "reference_not_in_cases": edit('reference = "sklearn"', 'reference = "xgboost"'),
    "openml_without_name": dataset('[datasets.o]\nsource = "openml"\n'),
    # shapes of the document
    "no_cases": BASE[:BASE.index("[[cases]]")],
    "no_datasets": 'name = "x"\n[[cases]]\nalgorithm = "kmeans"\nbackend = "sklearn"\ndataset = "b"\n',
    "empty_backend_list": edit('backend = ["sklearn", "sklearnex"]', "backend = []"),
    "empty_grid": edit("params = {", "grid = {max_iter = []}\nparams = {"),
    "grid_and_params": edit("params = {", "grid = {n_init = [1, 2]}\nparams = {"),
    "duplicate_case": BASE + BASE[BASE.index("[[cases]]"):],
    "classical_ranks": edit('dataset = "blobs"\nparams', 'ranks = 2\ndataset = "blobs"\nparams'),
    "classical_strategy": edit('dataset = "blobs"\nparams', 'strategy = "horovod"\ndataset = "blobs"\nparams'),
    "classical_epochs": edit('dataset = "blobs"\nparams', 'epochs = 2\ndataset = "blobs"\nparams'),
    "keras_mixed_with_classical": edit('backend = ["sklearn", "sklearnex"]', 'backend = ["sklearn", "keras"]'),
    "keras_epochs_zero": BASE + KERAS + "epochs = 0\n",
    "keras_batch_zero": BASE + KERAS + "batch_size = 0\n",
    "keras_unknown_strategy": BASE + KERAS + 'strategy = "magic"\n',
    "keras_unknown_model": BASE + KERAS.replace("small_cnn", "gpt5"),
    "keras_ranks_zero": BASE + KERAS + "ranks = 0\n",
    "file_dataset_missing": dataset('[datasets.f]\nsource = "file"\npath = "nowhere.npz"\n'),
    "file_dataset_bad_suffix": dataset('[datasets.f]\nsource = "file"\npath = "spec.toml"\n'),
    "cluster_unknown_kind": BASE + '[cluster]\nkind = "nope"\n',
    "cluster_jobs_zero": BASE + "[cluster]\njobs = 0\n",
    "cluster_unknown_key": BASE + "[cluster]\ncolour = 1\n",
    "cluster_bad_launcher": BASE + '[cluster]\nlauncher = "telnet"\n',
    "cluster_negative_cores": BASE + "[cluster]\n[cluster.resources]\ncores = -1\n",
    # bounds (issue 30): time limits every timer and #SBATCH -t can hold, nesting, case count
    "time_limit_1e300": edit("time_limit = 60", "time_limit = 1e300"),
    "time_limit_inf": edit("time_limit = 60", "time_limit = inf"),
    "time_limit_nan": edit("time_limit = 60", "time_limit = nan"),
    "time_limit_31_days": edit("time_limit = 60", "time_limit = 2678400"),
    "time_limit_int64_max": edit("time_limit = 60", "time_limit = 9223372036854775807"),
    "case_time_limit_1e300": edit('dataset = "blobs"\nparams', 'time_limit = 1e300\ndataset = "blobs"\nparams'),
    "case_time_limit_nan": edit('dataset = "blobs"\nparams', 'time_limit = nan\ndataset = "blobs"\nparams'),
    "case_time_limit_negative_inf": edit('dataset = "blobs"\nparams',
                                         'time_limit = -inf\ndataset = "blobs"\nparams'),
    "arrays_nested_100000_deep": "description = " + "[" * 100_000 + "]" * 100_000 + "\n" + BASE,
    "tables_nested_100000_deep": "x = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n" + BASE,
    "params_nested_40_deep": edit("n_init = 1", "n_init = 1, extra = " + "[" * 40 + "1" + "]" * 40),
    "grid_of_two_million_cases": edit("params = {", "grid = {max_iter = [" + ", ".join(map(str, range(1, 2001)))
                                      + "], tol = [" + ", ".join(f"{i}e-6" for i in range(1, 1001))
                                      + "]}\nparams = {"),
    "grid_of_10002_cases": edit("params = {", "grid = {max_iter = [" + ", ".join(map(str, range(1, 5002)))
                                + "]}\nparams = {"),
    # not a spec
    "not_toml": "this is [not toml\n",
    "empty_file": "",
    "datetime_name": "name = 1979-05-27\n" + BASE.split("\n", 1)[1],
    "array_of_tables_datasets": BASE.replace("[datasets.blobs]", "[[datasets]]"),
}


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    """Every file and folder under ``directory``: content digest and mtime."""
    found = {}
    for path in sorted(directory.rglob("*")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        found[str(path.relative_to(directory))] = (digest, path.stat().st_mtime_ns)
    return found


def rejected(argv: list[str], workdir: Path, capsys) -> str:
    """Run ``argv`` in ``workdir``: exit 2, one stderr line, no stdout, nothing written."""
    before = snapshot(workdir)
    try:
        code = main(argv)
    except SystemExit as stop:           # argparse ends the process itself
        code = stop.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, (argv, code, captured.err[-2000:])
    assert len(lines) == 1 and "Traceback" not in captured.err, (argv, captured.err[-2000:])
    assert "error" in lines[0], lines[0]
    assert captured.out == "", (argv, captured.out[:500])
    assert snapshot(workdir) == before, argv
    return lines[0]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working directory (``./accelml-results`` would appear here if written)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", sorted(BAD_SPECS))
def test_bad_spec_is_one_line_exit_2_and_writes_nothing(name, workdir, capsys):
    spec = workdir / "spec.toml"
    spec.write_text(BAD_SPECS[name])
    line = rejected(["compare", str(spec)], workdir, capsys)
    assert line.startswith(f"accelml compare: error: {spec}"), line


@pytest.mark.parametrize("name", ["n_clusters_text", "dataset_seed_negative", "cluster_std_negative",
                                  "xgboost_n_estimators_negative", "not_toml", "cluster_jobs_zero"])
@pytest.mark.parametrize("command", ["dry-run", "check", "slurm-script"])
def test_bad_spec_is_refused_by_every_command_that_reads_one(name, command, workdir, capsys):
    spec = workdir / "spec.toml"
    spec.write_text(BAD_SPECS[name])
    argv = {"dry-run": ["compare", str(spec), "--dry-run"],
            "check": ["check", str(spec), "--baseline", "b.json", "--update-baseline"],
            "slurm-script": ["slurm-script", str(spec)]}[command]
    rejected(argv, workdir, capsys)


DATA_FILES = {
    "npz_random_bytes": ("d.npz", os.urandom(600)),
    "npz_zip_header_only": ("d.npz", b"PK\x03\x04garbage"),
    "npz_empty": ("d.npz", b""),
    "npz_truncated_zip": ("d.npz", b"PK\x05\x06" + bytes(18)),
    "csv_binary": ("d.csv", b"\xff\xfe\x00garbage\x00" * 10),
    "parquet_garbage": ("d.parquet", b"PAR1 not really"),
}


@pytest.mark.parametrize("name", sorted(DATA_FILES))
def test_a_garbage_data_file_is_one_line(name, workdir, capsys):
    """issue 30: a garbage .npz gave a BadZipFile traceback."""
    file_name, content = DATA_FILES[name]
    (workdir / file_name).write_bytes(content)
    spec = workdir / "spec.toml"
    target = "" if file_name.endswith(".npz") else 'target = "y"\n'
    spec.write_text(dataset(f'[datasets.f]\nsource = "file"\npath = "{file_name}"\n{target}')
                    + '[[cases]]\nalgorithm = "kmeans"\nbackend = "sklearn"\ndataset = "f"\n')
    line = rejected(["compare", str(spec)], workdir, capsys)
    assert "datasets.f" in line, line


def test_a_case_count_beyond_the_cap_names_the_count(workdir, capsys):
    spec = workdir / "spec.toml"
    spec.write_text(BAD_SPECS["grid_of_two_million_cases"])
    line = rejected(["compare", str(spec)], workdir, capsys)
    assert "4,000,000 cases; at most 10,000" in line, line


def test_the_base_spec_is_valid(workdir, capsys):
    spec = workdir / "spec.toml"
    spec.write_text(BASE)
    assert main(["compare", str(spec), "--dry-run"]) == 0
    assert "2 case(s)" in capsys.readouterr().out
    spec.write_text(extra("gradient_boosting_classifier", "n_estimators = 5", "xgboost"))
    assert main(["compare", str(spec), "--dry-run"]) == 0
    capsys.readouterr()


def test_a_non_utf8_spec_and_a_directory_are_one_line(workdir, capsys):
    spec = workdir / "latin1.toml"
    spec.write_bytes(BASE.replace("fuzz", "f\xfcr").encode("latin-1"))
    rejected(["compare", str(spec)], workdir, capsys)
    (workdir / "folder.toml").mkdir()
    rejected(["compare", str(workdir / "folder.toml")], workdir, capsys)
    rejected(["compare", str(workdir / "missing.toml")], workdir, capsys)


# ------------------------------------------------------------------ a stored run to point at


@pytest.fixture(scope="module")
def stored(smoke_store, tmp_path_factory):
    """A results directory with finished runs (a copy of the smoke store that
    tests/cli/conftest.py makes once for tests/cli), and a baseline of the latest."""
    root = tmp_path_factory.mktemp("stored")
    results = smoke_store.copy(root)
    assert main(["check", "--run", "latest", "--baseline", str(root / "baseline.json"),
                 "--results-dir", str(results), "--update-baseline"]) == 0
    return root


@pytest.fixture
def site(stored, workdir):
    """A copy of the stored run in the working directory, and files to point commands at."""
    shutil.copytree(stored / "results", workdir / "results")
    shutil.copy(stored / "baseline.json", workdir / "baseline.json")
    (workdir / "spec.toml").write_text(BASE)
    (workdir / "afile").write_text("x")
    (workdir / "adir").mkdir()
    (workdir / "latin1.json").write_bytes(b'\xff\xfe{"cases": []}')
    (workdir / "notjson.json").write_text("{nope")
    (workdir / "list.json").write_text("[1, 2]")
    (workdir / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (workdir / "deep40.json").write_text('{"cases": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}")
    (workdir / "empty").mkdir()
    (workdir / "zero").mkdir()
    (workdir / "zero" / "results.sqlite").write_bytes(b"")
    (workdir / "garbage").mkdir()
    (workdir / "garbage" / "results.sqlite").write_bytes(os.urandom(8192))
    # a store with no run in it
    assert main(["compare", "spec.toml", "--results-dir", "norun", "--dry-run"]) == 0
    from accelml.results.store import ResultsStore

    ResultsStore(workdir / "norun")
    return workdir


S, R, B = "spec.toml", "results", "baseline.json"
BAD_COMMAND_LINES = {
    # compare
    "resume_unknown_run": ["compare", "--resume", "bogus", "--results-dir", R],
    "resume_no_store": ["compare", "--resume", "bogus", "--results-dir", "nowhere"],
    "resume_empty_store": ["compare", "--resume", "bogus", "--results-dir", "empty"],
    "resume_zero_byte_store": ["compare", "--resume", "x", "--results-dir", "zero"],
    "resume_garbage_store": ["compare", "--resume", "x", "--results-dir", "garbage"],
    "reference_unknown": ["compare", S, "--reference", "bogus", "--results-dir", R],
    "reference_unknown_dry_run": ["compare", S, "--reference", "bogus", "--dry-run"],
    "results_dir_is_a_file": ["compare", S, "--results-dir", "afile"],
    "results_dir_under_a_file": ["compare", S, "--results-dir", "afile/sub"],
    "results_dir_in_proc": ["compare", S, "--results-dir", "/proc/nope/results"],
    "results_dir_zero_byte_db": ["compare", S, "--results-dir", "zero"],
    "results_dir_garbage_db": ["compare", S, "--results-dir", "garbage"],
    "compare_jobs_zero": ["compare", S, "--jobs", "0"],
    "compare_jobs_negative": ["compare", S, "--jobs", "-1"],
    "compare_jobs_text": ["compare", S, "--jobs", "two"],
    "compare_cores_zero": ["compare", S, "--cores", "0"],
    "compare_gpus_negative": ["compare", S, "--gpus", "-1"],
    "compare_retries_negative": ["compare", S, "--retries", "-1"],
    "compare_launcher_unknown": ["compare", S, "--launcher", "telnet"],
    "compare_cluster_unknown": ["compare", S, "--cluster", "nope"],
    "compare_cluster_config_missing": ["compare", S, "--cluster-config", "nope.yaml"],
    "compare_cluster_config_garbage": ["compare", S, "--cluster-config", "latin1.json"],
    "compare_job_env_without_value": ["compare", S, "--job-env", "NOEQUALS"],
    "compare_unknown_flag": ["compare", S, "--frobnicate"],
    "compare_two_specs": ["compare", S, S],
    "compare_spec_missing": ["compare", "missing.toml"],
    "compare_resume_with_other_spec": ["compare", "latin1.json", "--resume", "bogus", "--results-dir", R],
    # check
    "check_jobs_zero": ["check", S, "--baseline", B, "--jobs", "0"],
    "check_inline_limit_negative": ["check", S, "--baseline", B, "--inline-limit", "-1"],
    "check_neither_spec_nor_run": ["check", "--baseline", B],
    "check_both_spec_and_run": ["check", S, "--run", "latest", "--baseline", B],
    "check_deterministic_with_run": ["check", "--run", "latest", "--baseline", B, "--deterministic",
                                     "--results-dir", R],
    "check_no_baseline_flag": ["check", "--run", "latest", "--results-dir", R],
    "check_baseline_missing": ["check", "--run", "latest", "--baseline", "missing.json", "--results-dir", R],
    "check_baseline_not_utf8": ["check", "--run", "latest", "--baseline", "latin1.json", "--results-dir", R],
    "check_baseline_not_json": ["check", "--run", "latest", "--baseline", "notjson.json", "--results-dir", R],
    "check_baseline_not_an_object": ["check", "--run", "latest", "--baseline", "list.json", "--results-dir", R],
    "check_baseline_is_a_directory": ["check", "--run", "latest", "--baseline", "adir", "--results-dir", R],
    "check_unknown_run": ["check", "--run", "bogus", "--baseline", B, "--results-dir", R],
    "check_latest_no_store": ["check", "--run", "latest", "--baseline", B, "--results-dir", "nowhere"],
    "check_latest_no_runs": ["check", "--run", "latest", "--baseline", B, "--results-dir", "norun"],
    "check_zero_byte_store": ["check", "--run", "latest", "--baseline", B, "--results-dir", "zero"],
    "check_garbage_store": ["check", "--run", "latest", "--baseline", B, "--results-dir", "garbage"],
    "check_bad_spec_path": ["check", "missing.toml", "--baseline", B],
    # report
    "report_unknown_run": ["report", "bogus", "--results-dir", R],
    "report_no_store": ["report", "latest", "--results-dir", "nowhere"],
    "report_no_runs": ["report", "latest", "--results-dir", "norun"],
    "report_zero_byte_store": ["report", "latest", "--results-dir", "zero"],
    "report_garbage_store": ["report", "latest", "--results-dir", "garbage"],
    "report_reference_unknown": ["report", "latest", "--results-dir", R, "--reference", "bogus"],
    "report_csv_is_a_directory": ["report", "latest", "--results-dir", R, "--csv", "adir"],
    "report_html_is_a_directory": ["report", "latest", "--results-dir", R, "--html", "adir"],
    "report_json_is_a_directory": ["report", "latest", "--results-dir", R, "--json", "adir"],
    "report_plots_in_proc": ["report", "latest", "--results-dir", R, "--plots", "/proc/nope"],
    "report_plots_is_a_file": ["report", "latest", "--results-dir", R, "--plots", "afile"],
    "report_html_under_a_file": ["report", "latest", "--results-dir", R, "--html", "afile/x.html"],
    "report_csv_in_proc": ["report", "latest", "--results-dir", R, "--csv", "/proc/nope.csv"],
    "report_plot_format_unknown": ["report", "latest", "--results-dir", R, "--plot-format", "gif"],
    "report_against_unknown": ["report", "latest", "--results-dir", R, "--against", "bogus"],
    "report_against_itself": ["report", "latest", "--results-dir", R, "--against", "latest"],
    "report_against_dir_missing": ["report", "latest", "--results-dir", R, "--against", "latest",
                                   "--against-dir", "nowhere"],
    "report_two_run_ids": ["report", "a", "b", "--results-dir", R],
    "export_csv_is_a_directory": ["export", "--all", "--results-dir", R, "--csv", "adir"],
    "export_csv_in_proc": ["export", "--all", "--results-dir", R, "--csv", "/proc/nope/x.csv"],
    "export_parquet_under_a_file": ["export", "--all", "--results-dir", R, "--parquet", "afile/x.pq"],
    "check_junit_is_a_directory": ["check", "--run", "latest", "--baseline", B, "--results-dir", R,
                                   "--junit", "adir"],
    # run ids are matched exactly or by a unique prefix, never as a pattern (issue 30)
    "report_empty_run_id": ["report", "", "--results-dir", R],
    "report_percent_run_id": ["report", "%", "--results-dir", R],
    "report_underscore_run_id": ["report", "_", "--results-dir", R],
    "report_star_run_id": ["report", "*", "--results-dir", R],
    "report_percent_prefix_run_id": ["report", "2%", "--results-dir", R],
    "report_against_percent": ["report", "latest", "--results-dir", R, "--against", "%"],
    "export_empty_run_id": ["export", "", "--results-dir", R, "--csv", "x.csv"],
    "export_percent_run_id": ["export", "%", "--results-dir", R, "--csv", "x.csv"],
    "check_run_empty": ["check", "--run", "", "--baseline", B, "--results-dir", R],
    "check_run_percent": ["check", "--run", "%", "--baseline", B, "--results-dir", R],
    "check_run_underscore": ["check", "--run", "_", "--baseline", B, "--results-dir", R],
    "compare_resume_empty": ["compare", "--resume", "", "--results-dir", R],
    "compare_resume_percent": ["compare", "--resume", "%", "--results-dir", R],
    "compare_resume_underscore_prefix": ["compare", "--resume", "2_", "--results-dir", R],
    "compare_resume_question_mark": ["compare", "--resume", "?", "--results-dir", R],
    # nested baselines, a spec of another kind (issue 30)
    "check_baseline_nested_100000_deep": ["check", "--run", "latest", "--baseline", "deep.json",
                                          "--results-dir", R],
    "check_baseline_nested_40_deep": ["check", "--run", "latest", "--baseline", "deep40.json",
                                      "--results-dir", R],
    "update_baseline_nested_existing": ["check", "--run", "latest", "--baseline", "deep.json",
                                        "--results-dir", R, "--update-baseline"],
    "no_command": [],
    # the others
    "slurm_script_missing_spec": ["slurm-script", "missing.toml"],
    "slurm_script_unknown_cluster": ["slurm-script", S, "--cluster", "nope"],
    "slurm_script_jobs_zero": ["slurm-script", S, "--jobs", "0"],
    "backends_unknown_flag": ["backends", "--frobnicate"],
    "unknown_command": ["frobnicate"],
}


@pytest.mark.parametrize("name", sorted(BAD_COMMAND_LINES))
def test_bad_command_line_is_one_line_exit_2_and_writes_nothing(name, site, capsys):
    rejected(BAD_COMMAND_LINES[name], site, capsys)


def test_argparse_errors_are_one_line_naming_help(site, capsys):
    line = rejected(["compare", S, "--jobs", "0"], site, capsys)
    assert line.endswith("(see python -m accelml compare --help)"), line


def test_check_run_latest_works_like_report_latest(site, capsys):
    assert main(["check", "--run", "latest", "--baseline", B, "--results-dir", R]) == 0
    capsys.readouterr()


# ------------------------------------------------------------------ generated


NUMERIC_LIMITS = [
    # (text in BASE to replace, template, smallest valid, largest valid)
    ("seed = 0", "seed = {}", 0, 2**32 - 1),
    ("n_clusters = 2", "n_clusters = {}", 1, None),
    ("n_init = 1", "n_init = {}", 1, None),
    ("repeats = 1", "repeats = {}", 1, None),
    ("warmup = 0", "warmup = {}", 0, None),
    ("n_samples = 60\ncenters", "n_samples = {}\ncenters", 4, 2**31 // 20),
    ("centers = 2", "centers = {}", 1, None),
]


@st.composite
def out_of_range_specs(draw):
    old, template, low, high = draw(st.sampled_from(NUMERIC_LIMITS))
    below = st.integers(min_value=-(2**70), max_value=low - 1)
    above = st.integers(min_value=high + 1, max_value=2**70) if high is not None else below
    value = draw(st.one_of(below, above))
    return BASE.replace(old, template.format(value))


@st.composite
def wrongly_typed_specs(draw):
    old, template, _, _ = draw(st.sampled_from(NUMERIC_LIMITS))
    value = draw(st.one_of(
        st.text(alphabet="abcxyz", min_size=1, max_size=6).map(lambda s: f'"{s}"'),
        st.booleans().map(lambda b: "true" if b else "false"),
        st.floats(min_value=0.5, max_value=100.0).filter(lambda f: f != int(f)).map(repr),
        st.lists(st.integers(0, 3), min_size=1, max_size=3).map(str),
        st.dates().map(str)))
    return BASE.replace(old, template.format(value))


SETTINGS = settings(max_examples=80, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(text=st.one_of(out_of_range_specs(), wrongly_typed_specs()))
def test_generated_out_of_range_and_wrongly_typed_numbers(text, workdir, capsys):
    (workdir / "spec.toml").write_text(text)
    try:
        rejected(["compare", "spec.toml"], workdir, capsys)
    finally:
        (workdir / "spec.toml").unlink()


INT_FLAGS = [("compare", "--jobs", 1), ("compare", "--cores", 1), ("compare", "--gpus", 0),
             ("compare", "--retries", 0), ("check", "--jobs", 1), ("check", "--inline-limit", 0),
             ("slurm-script", "--jobs", 1)]


@st.composite
def bad_flag_values(draw):
    command, flag, low = draw(st.sampled_from(INT_FLAGS))
    value = draw(st.one_of(st.integers(max_value=low - 1).map(str),
                           st.text(alphabet="abc.-+ ", min_size=1, max_size=5).filter(
                               lambda s: not s.strip().lstrip("+-").isdigit())))
    argv = {"compare": ["compare", S], "check": ["check", S, "--baseline", B],
            "slurm-script": ["slurm-script", S]}[command]
    return [*argv, f"{flag}={value}"]


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=bad_flag_values())
def test_generated_bad_flag_values(argv, workdir, capsys):
    (workdir / S).write_text(BASE)
    rejected(argv, workdir, capsys)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run_id=st.text(alphabet="0123456789abcdefT-_%", min_size=1, max_size=20))
def test_generated_unknown_run_ids(run_id, stored, workdir, capsys):
    for argv in (["report", run_id, "--results-dir", str(stored / "results")],
                 ["check", "--run", run_id, "--baseline", str(stored / "baseline.json"),
                  "--results-dir", str(stored / "results")]):
        if run_id in ("latest",) or run_id.startswith("2026"):
            continue
        before = snapshot(stored)
        rejected(argv, workdir, capsys)
        assert snapshot(stored) == before


# ------------------------------------------------------------------ real processes


@pytest.mark.parametrize("argv", [
    ["compare", "spec.toml", "--jobs", "0"],
    ["compare", "--resume", "bogus", "--results-dir", "results"],
    ["report", "latest", "--results-dir", "zero"],
    ["run-case", "missing.json"],
    ["run-case", "notjson.json"],
    ["run-case", "list.json"],
])
def test_a_real_process_prints_one_line_and_writes_nothing(argv, site):
    before = snapshot(site)
    out = subprocess.run([sys.executable, "-m", "accelml", *argv], capture_output=True, text=True,
                         cwd=site, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 2, out.stderr[-2000:]
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout == ""
    assert snapshot(site) == before
