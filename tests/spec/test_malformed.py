"""Broken specs, generated: every one exits 2 with one line naming the file, and writes nothing."""

import datetime
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelml.cli import main

VALID = {
    "name": "fuzz",
    "reference": "sklearn",
    "repeats": 2,
    "warmup": 1,
    "time_limit": 30,
    "datasets": {"blobs": {"source": "generated", "generator": "blobs", "n_samples": 50}},
    "cases": [{"algorithm": "kmeans", "backend": ["sklearn", "sklearnex"], "dataset": "blobs",
               "params": {"n_clusters": 2}}],
}


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode().replace('"', '\\"') + '"'
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f'"{k}" = {toml_value(v)}' for k, v in value.items()) + "}"


def to_toml(document: dict) -> str:
    return "\n".join(f'"{key}" = {toml_value(value)}' for key, value in document.items()) + "\n"


def copy(document):
    import copy as copy_module

    return copy_module.deepcopy(document)


scalars = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=8), st.booleans(), st.dates())
not_int = st.one_of(st.text(max_size=5), st.booleans(), st.lists(st.integers(), max_size=2),
                    st.dictionaries(st.text(min_size=1, max_size=3), st.integers(), max_size=2),
                    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)),
                    st.dates())
not_text = st.one_of(st.integers(), st.booleans(), st.dates(),
                     st.dictionaries(st.text(min_size=1, max_size=3), st.integers(), max_size=2))
unknown_names = st.text(min_size=1, max_size=10).filter(
    lambda s: s not in {"kmeans", "sklearn", "sklearnex", "xgboost", "keras", "blobs"})


@st.composite
def broken_documents(draw):
    document = copy(VALID)
    case, dataset = document["cases"][0], document["datasets"]["blobs"]
    mutation = draw(st.sampled_from([
        "unknown_top", "unknown_case", "unknown_dataset_key", "int_wrong_type",
        "text_wrong_type", "unknown_algorithm", "unknown_backend", "empty_grid", "empty_list",
        "missing_file", "missing_required", "no_cases", "bad_numbers",
    ]))
    if mutation == "unknown_top":
        document[draw(unknown_names.filter(lambda k: k not in VALID and k not in (
            "description", "memory_limit_mb", "threads", "seed", "cluster")))] = draw(scalars)
    elif mutation == "unknown_case":
        case[draw(unknown_names.filter(lambda k: k not in (
            "algorithm", "backend", "device", "ranks", "workers", "strategy", "dataset", "params",
            "grid", "repeats", "warmup", "time_limit", "memory_limit_mb", "threads", "model",
            "epochs", "batch_size", "learning_rate", "lr_scaling")))] = draw(scalars)
    elif mutation == "unknown_dataset_key":
        dataset[draw(st.sampled_from(["path", "name", "x_key", "bogus"]))] = "x"
    elif mutation == "int_wrong_type":
        target = draw(st.sampled_from(["warmup", "n_samples", "repeats"]))
        (dataset if target == "n_samples" else document)[target] = draw(
            not_int.filter(lambda v: not isinstance(v, dict)) if target == "repeats" else not_int)
    elif mutation == "text_wrong_type":
        target = draw(st.sampled_from(["reference", "algorithm", "generator", "name"]))
        holder = {"reference": document, "name": document, "algorithm": case,
                  "generator": dataset}[target]
        value = draw(not_text)
        if target == "algorithm" and isinstance(value, list):
            value = [1]
        holder[target] = value
    elif mutation == "unknown_algorithm":
        case["algorithm"] = draw(unknown_names)
    elif mutation == "unknown_backend":
        case["backend"] = ["sklearn", draw(unknown_names)]
    elif mutation == "empty_grid":
        case["grid"] = {"n_init": []}
    elif mutation == "empty_list":
        case[draw(st.sampled_from(["backend", "algorithm", "dataset", "device", "ranks"]))] = []
    elif mutation == "missing_file":
        document["datasets"]["blobs"] = {"source": "file", "path": draw(
            st.text(alphabet="abcxyz", min_size=1, max_size=8)) + ".npz"}
    elif mutation == "missing_required":
        del case[draw(st.sampled_from(["algorithm", "backend", "dataset"]))]
    elif mutation == "no_cases":
        document[draw(st.sampled_from(["cases", "datasets"]))] = [] if draw(st.booleans()) else {}
        if isinstance(document.get("datasets"), list):
            document["datasets"] = {}
    elif mutation == "bad_numbers":
        key, value = draw(st.sampled_from([
            ("time_limit", -1), ("time_limit", 0), ("warmup", -2), ("threads", 0),
            ("repeats", 0), ("repeats", {"min": 3, "max": 2}), ("repeats", {"target": 2.0}),
        ]))
        document[key] = value
    return document


def check_rejected(tmp_path, text: str, capsys) -> None:
    spec = tmp_path / "broken.toml"
    spec.write_text(text)
    results = tmp_path / "results"
    code = main(["compare", str(spec), "--results-dir", str(results), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2, (text, captured.err)
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"accelml compare: error: {spec}: "), lines[0]
    assert "Traceback" not in captured.err
    assert captured.out == ""
    assert not results.exists()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=broken_documents())
def test_generated_broken_specs_exit_2_with_one_line(tmp_path, capsys, document):
    check_rejected(tmp_path, to_toml(document), capsys)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=80))
def test_arbitrary_text_exits_2_with_one_line(tmp_path, capsys, text):
    check_rejected(tmp_path, text, capsys)


def test_the_valid_base_document_is_valid(tmp_path, capsys):
    spec = tmp_path / "ok.toml"
    spec.write_text(to_toml(VALID))
    assert main(["compare", str(spec), "--dry-run"]) == 0
    assert "2 case(s)" in capsys.readouterr().out


def test_a_real_process_prints_no_traceback(tmp_path):
    spec = tmp_path / "broken.toml"
    spec.write_text('[[cases]]\nalgorithm = "kmeans"\nbackend = "nope"\n')
    out = subprocess.run([sys.executable, "-m", "accelml", "compare", str(spec),
                          "--results-dir", str(tmp_path / "r")], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "r").exists()
