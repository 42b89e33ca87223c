"""Specs on the user's own files (experiments/own_data.toml): a CSV with a named text target,
an .npz with text labels, errors in the file keys caught at validation, and a backend's own
library parameters (``backend_params``) checked against the library's signature."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from accelml.cases import Case
from accelml.datasets.registry import load_dataset
from accelml.errors import SpecError
from accelml.estimators import Estimator
from accelml.spec.load import load_spec, load_spec_text

REPO = Path(__file__).resolve().parents[2]
OWN_DATA = REPO / "experiments" / "own_data.toml"


def test_own_data_example_loads_text_labels_as_classification(tmp_path):
    experiment = load_spec(str(OWN_DATA))
    datasets = {dataset.name: dataset for dataset in experiment.datasets}
    flowers = load_dataset("flowers", "file", dict(datasets["flowers"].options), cache_dir=tmp_path)
    sensors = load_dataset("sensors", "file", dict(datasets["sensors"].options), cache_dir=tmp_path)
    assert (flowers.info.task, flowers.info.n_classes, flowers.info.n_features) == ("classification", 3, 4)
    assert (sensors.info.task, sensors.info.n_classes, sensors.info.dtype) == ("classification", 2, "float32")
    assert set(np.unique(sensors.y_train)) == {0, 1}   # "fault" < "normal", sorted
    xgboost_cases = [case for case in experiment.cases if case.backend == "xgboost"]
    assert xgboost_cases and all(dict(case.library_params) == {"subsample": 0.8, "colsample_bytree": 0.9}
                                 for case in xgboost_cases)
    assert all(not case.library_params for case in experiment.cases if case.backend != "xgboost")


def spec_on(tmp_path, dataset_lines, case_lines='backend = ["sklearn", "xgboost"]'):
    (tmp_path / "d.csv").write_text("a,b,species\n" + "".join(f"{i},{i % 3},{'xy'[i % 2]}\n" for i in range(12)))
    np.savez(tmp_path / "d.npz", features=np.ones((4, 2)), status=np.array(["p", "q", "p", "q"]))
    text = textwrap.dedent(f"""
        [datasets.d]
        source = "file"
        {dataset_lines}
        [[cases]]
        algorithm = "gradient_boosting_classifier"
        dataset = "d"
        params = {{n_estimators = 2}}
        {case_lines}
    """)
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("dataset_lines, message", [
    ('path = "d.csv"\ntarget = "Species"', r"datasets\.d\.target: no column 'Species'; columns: a, b, species$"),
    ('path = "d.npz"\nx_key = "features"\ny_key = "label"', r"datasets\.d\.y_key: no array 'label'; arrays: "),
    ('path = "d.npz"', r"datasets\.d\.x_key: no array 'X'; arrays: features, status$"),
])
def test_a_key_the_file_lacks_is_a_validation_error(tmp_path, dataset_lines, message):
    with pytest.raises(SpecError, match=message):
        load_spec(str(spec_on(tmp_path, dataset_lines)))


def test_the_cli_refuses_a_wrong_target_in_one_line_writing_nothing(tmp_path):
    spec = spec_on(tmp_path, 'path = "d.csv"\ntarget = "label"')
    results = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "accelml", "compare", str(spec), "--results-dir", str(results)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "datasets.d.target: no column 'label'" in run.stderr
    assert not results.exists()


@pytest.mark.parametrize("case_lines, message", [
    ('backend = ["sklearn", "xgboost"]\nbackend_params = {xgboost = {subsampel = 0.5}}',
     r"cases\[0\]\.backend_params\.xgboost: unknown parameter of xgboost:XGBClassifier 'subsampel' "
     r"\(did you mean 'subsample'\?\)"),
    ('backend = ["sklearn", "xgboost"]\nbackend_params = {xgboost = {n_estimators = 5}}',
     r"backend_params\.xgboost: xgboost parameter 'n_estimators' is set by accelml"),
    ('backend = "sklearn"\nbackend_params = {xgboost = {subsample = 0.5}}',
     r"backend_params\.xgboost: backend 'xgboost' is not a backend of this case"),
    ('backend = "sklearn"\nbackend_params = {sklearn = {no_such_thing = 1}}',
     r"backend_params\.sklearn: unknown parameter of sklearn\.ensemble:HistGradientBoostingClassifier"),
    ('backend = "xgboost"\nbackend_params = {xgboost = {subsample = [0.5]}}',
     r"backend_params\.xgboost\.subsample: expected a single value"),
])
def test_backend_params_are_checked_against_the_library(tmp_path, case_lines, message):
    with pytest.raises(SpecError, match=message):
        load_spec(str(spec_on(tmp_path, 'path = "d.csv"\ntarget = "species"', case_lines)))


def test_backend_params_reach_the_library_and_leave_other_case_ids_alone(tmp_path):
    spec = spec_on(tmp_path, 'path = "d.csv"\ntarget = "species"',
                   'backend = ["sklearn", "xgboost"]\nbackend_params = {xgboost = {subsample = 0.5}}')
    sklearn_case, xgboost_case = load_spec(str(spec)).cases
    plain = load_spec_text(spec.read_text().replace("backend_params", "# "), "spec.toml", tmp_path).cases
    assert sklearn_case.case_id == plain[0].case_id and xgboost_case.case_id != plain[1].case_id
    assert "subsample=0.5" in xgboost_case.label
    assert Case.from_dict(xgboost_case.to_dict()) == xgboost_case

    data = load_dataset("d", "file", dict(xgboost_case.dataset.options), cache_dir=tmp_path)
    estimator = Estimator("gradient_boosting_classifier", backend="xgboost", n_estimators=2,
                          library_params=dict(xgboost_case.library_params)).fit(data.X_train, data.y_train)
    assert estimator.estimator_.get_params()["subsample"] == 0.5
