import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from accelml.errors import SpecError
from accelml.orchestration import plan_run
from accelml.spec.load import load_spec, load_spec_text

REPO = Path(__file__).resolve().parents[2]
REPEATS = "repeats = {min = 2, max = 4, target = 0.1}"
VALID = """
name = "t"
reference = "sklearn"
repeats = {min = 2, max = 4, target = 0.1}

[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 100

[[cases]]
algorithm = "kmeans"
backend = ["sklearn", "sklearnex"]
dataset = "blobs"
params = {random_state = 0}
grid = {n_clusters = [2, 3]}
"""


def load(text: str, tmp_path=None):
    return load_spec_text(textwrap.dedent(text), "spec.toml", tmp_path)


def test_grid_expands_to_every_combination_with_stable_ids():
    experiment = load(VALID)
    assert len(experiment.cases) == 4
    assert {(c.backend, c.params_dict["n_clusters"]) for c in experiment.cases} == {
        ("sklearn", 2), ("sklearn", 3), ("sklearnex", 2), ("sklearnex", 3)}
    again = load(VALID)
    assert [c.case_id for c in again.cases] == [c.case_id for c in experiment.cases]
    policy = experiment.cases[0].repeats
    assert (policy.min_repeats, policy.max_repeats, policy.target_rel) == (2, 4, 0.1)


def test_case_id_ignores_how_a_case_is_measured_but_not_what_it_is():
    base = {c.case_id for c in load(VALID).cases}
    measured_differently = VALID.replace("repeats = {min = 2, max = 4, target = 0.1}",
                                         "repeats = 7\ntime_limit = 5")
    assert {c.case_id for c in load(measured_differently).cases} == base
    other_data = VALID.replace("n_samples = 100", "n_samples = 101")
    assert not base & {c.case_id for c in load(other_data).cases}


@pytest.mark.parametrize("change, where, allowed", [
    (("n_samples = 100", "n_samples = 100\nbogus = 1"), "datasets.blobs.bogus", "allowed:"),
    (('backend = ["sklearn", "sklearnex"]', 'backend = ["sklearn", "sklearnx"]'),
     "cases[0].backend[1]", "allowed: keras, sklearn, sklearnex, xgboost"),
    (('algorithm = "kmeans"', 'algorithm = "kmeens"'), "cases[0].algorithm", "allowed:"),
    (("grid = {n_clusters = [2, 3]}", "grid = {n_clusters = []}"), "cases[0].grid.n_clusters",
     "empty list"),
    (("n_samples = 100", 'n_samples = "many"'), "datasets.blobs.n_samples", "expected an integer"),
    (('reference = "sklearn"', 'reference = "xgboost"'), "reference", "allowed: sklearn, sklearnex"),
    (('dataset = "blobs"', 'dataset = "nope"'), "cases[0].dataset", "defined: blobs"),
    (('backend = ["sklearn", "sklearnex"]', 'backend = "xgboost"'), "cases[0].backend",
     "backends with it: sklearn, sklearnex"),
    (('name = "t"', 'name = "t"\ndeterministic = "yes"'), "deterministic", "expected true or false"),
    ((REPEATS, REPEATS[:-1] + ", skip_warmup_after = 0}"),
     "repeats.skip_warmup_after", "expected seconds > 0 or false"),
    ((REPEATS, REPEATS[:-1] + ', skip_warmup_after = "2"}'),
     "repeats.skip_warmup_after", "seconds > 0 (a phase whose first run takes that long"),
    (("params = {random_state = 0}", "params = {fair_start = true}"), "cases[0].params",
     "fair_start=True needs random_state set"),
])
def test_each_error_names_file_key_and_what_is_allowed(change, where, allowed):
    with pytest.raises(SpecError) as error:
        load(VALID.replace(*change))
    message = str(error.value)
    assert message.startswith(f"spec.toml: {where}: ")
    assert allowed in message
    assert "\n" not in message


def test_skip_warmup_after_is_read_from_the_repeats_table():
    default = load(VALID).cases[0].repeats
    assert default.skip_warmup_after == 2.0
    never = load(VALID.replace(REPEATS, "repeats = {skip_warmup_after = false}"))
    assert never.cases[0].repeats.skip_warmup_after is None
    sooner = load(VALID.replace(REPEATS, "repeats = {skip_warmup_after = 0.5}"))
    assert sooner.cases[0].repeats.skip_warmup_after == 0.5
    assert sooner.cases[0].case_id == never.cases[0].case_id    # how a case is measured, not what


def test_deterministic_key_fills_in_seeds_and_changes_only_those_ids():
    """The key is recorded by the spec and applied by the run (plan_run), as the flag is."""
    plain = load(VALID.replace("params = {random_state = 0}", ""))
    keyed = load(VALID.replace("params = {random_state = 0}", "")
                 .replace('name = "t"', 'name = "t"\ndeterministic = true'))
    assert keyed.deterministic and not plain.deterministic
    assert keyed.cases == plain.cases              # the spec's cases, as written
    deterministic = plan_run(keyed)
    assert deterministic.deterministic and deterministic.experiment.deterministic
    assert all(c.params_dict["random_state"] == 0 for c in deterministic.experiment.cases)
    assert not {c.case_id for c in plain.cases} & {c.case_id for c in deterministic.experiment.cases}
    assert [c.case_id for c in deterministic.experiment.cases] == \
        [c.case_id for c in plan_run(plain, deterministic=True).experiment.cases]
    # a case that already sets its seed keeps its id
    seeded = plan_run(load(VALID.replace('name = "t"', 'name = "t"\ndeterministic = true')))
    assert [c.case_id for c in seeded.experiment.cases] == [c.case_id for c in load(VALID).cases]


def test_missing_file_and_bad_toml(tmp_path):
    missing = VALID.replace('generator = "blobs"\nn_samples = 100', "").replace(
        'source = "generated"', 'source = "file"\npath = "nowhere.npz"')
    with pytest.raises(SpecError, match=r"datasets.blobs.path: file not found: .*nowhere.npz"):
        load(missing, tmp_path)
    with pytest.raises(SpecError, match="spec.toml: not valid TOML: .*line 1"):
        load("name = = 1")
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "absent.toml")


KERAS_ON_RANKS = """
[datasets.digits]
source = "shipped"
name = "digits"
[[cases]]
algorithm = "mnist_cnn"
backend = "keras"
dataset = "digits"
strategy = "horovod"
ranks = [1, 2]
"""


def test_keras_cases_take_ranks_strategy_and_training_keys():
    text = ('reference = "keras"\n' + KERAS_ON_RANKS
            + 'epochs = 3\nbatch_size = 32\nlearning_rate = 0.01\nlr_scaling = "sqrt"\n')
    experiment = load(text)
    assert [c.ranks for c in experiment.cases] == [1, 2]
    assert experiment.cases[1].params_dict == {"epochs": 3, "batch_size": 32,
                                               "learning_rate": 0.01, "lr_scaling": "sqrt"}
    with pytest.raises(SpecError, match="lr_scaling"):
        load(text.replace('"sqrt"', '"cubic"'))
    on_torch = load(text.replace('lr_scaling = "sqrt"', 'keras_backend = "torch"'))
    assert on_torch.cases[0].params_dict["keras_backend"] == "torch"
    with pytest.raises(SpecError, match=r"cases\[0\]: training keras_backend must be one of "
                                        r"tensorflow, torch for strategy 'horovod', not 'jax'"):
        load(text.replace('lr_scaling = "sqrt"', 'keras_backend = "jax"'))
    with pytest.raises(SpecError, match="cases\\[0\\].ranks: backend 'sklearn' trains kmeans in "
                                        "one process only"):
        load(VALID.replace('dataset = "blobs"', 'dataset = "blobs"\nranks = 2'))


def dry_run(tmp_path, text):
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    return subprocess.run([sys.executable, "-m", "accelml", "compare", str(spec), "--dry-run"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_the_old_case_key_workers_is_read_as_ranks_with_one_warning_line(tmp_path):
    new = dry_run(tmp_path, KERAS_ON_RANKS)
    old = dry_run(tmp_path, KERAS_ON_RANKS.replace("ranks = ", "workers = "))
    assert new.returncode == 0 and old.returncode == 0, (new.stderr, old.stderr)
    assert old.stdout == new.stdout and " x2 [horovod]" in new.stdout
    assert "workers" not in new.stderr
    [warning] = [line for line in old.stderr.splitlines() if "workers" in line]
    assert warning.endswith("spec.toml: 'workers' is now 'ranks' (read as the new name: cases[0].workers)")
    assert [c.ranks for c in load(KERAS_ON_RANKS.replace("ranks = ", "workers = ")).cases] == [1, 2]


def test_a_case_giving_both_workers_and_ranks_is_an_error():
    with pytest.raises(SpecError, match=r"cases\[0\]\.workers: the old name of 'ranks'; give only 'ranks'"):
        load(KERAS_ON_RANKS + "workers = 2\n")


def test_shipped_specs_validate():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for name in ("smoke", "classical_cpu", "gpu_boosting", "xgboost_gpu", "xgboost_scaling",
                 "xgboost_scaling_check"):
        assert load_spec(root / "experiments" / f"{name}.toml").cases, name
    assert load_spec(None).reference == "sklearn"


def test_parameter_names_and_unhonourable_values_are_spec_errors():
    with pytest.raises(SpecError, match=r"spec.toml: cases\[0\].params: unknown parameter"):
        load(VALID.replace("params = {random_state = 0}", "params = {random_stat = 0}"))
    odd_key = VALID.replace('n_samples = 100', 'n_samples = 100\n"bad\\nkey" = 1')
    with pytest.raises(SpecError) as error:
        load(odd_key)
    assert "\n" not in str(error.value) and 'datasets.blobs."bad\\nkey"' in str(error.value)
