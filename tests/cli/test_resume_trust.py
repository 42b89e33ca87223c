"""``compare --resume`` trusts nothing in the store that decides what executes (issue 16, 3).

The attack: someone who can write a shared results directory edits an interrupted run's
stored spec to add ``[cluster] kind = "slurm"`` with a prologue line, and fixes its
``spec_hash``; the victim resumes the run. Before, that line ran on SLURM as the victim.
"""

import json
import sqlite3

import pytest

from accelml.cli import main
from accelml.orchestration import spec_signature
from accelml.results.records import RunRecord
from accelml.results.store import ResultsStore
from accelml.spec.load import load_spec_text

SPEC = """name = "trust"
repeats = 1
warmup = 0
[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 60
[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {n_clusters = 2, n_init = 1, random_state = 0}
"""


def interrupted_run(tmp_path, text=SPEC):
    """A store holding one interrupted run of ``text`` with no finished case."""
    spec = tmp_path / "trust.toml"
    spec.write_text(text)
    experiment = load_spec_text(text, str(spec), tmp_path)
    store = ResultsStore(tmp_path / "results")
    run = RunRecord(run_id="20260101T000000-abcdef", spec_name="trust",
                    spec_hash=experiment.text_hash, spec_text=text, spec_path=str(spec),
                    planned_cases=1, case_ids=tuple(c.case_id for c in experiment.cases),
                    status=RunRecord.INTERRUPTED,
                    spec_signature=spec_signature(text, str(spec)))   # as compare signs it
    store.create_run(run)
    spec.unlink()          # the victim has no copy of the spec: they resume from the store
    return store, run


def tamper(store, run_id, text, fix_hash):
    """What the attacker does to the stored spec, straight in SQLite."""
    import hashlib

    with sqlite3.connect(store.database) as connection:
        record = json.loads(connection.execute(
            "SELECT record_json FROM runs WHERE run_id=?", (run_id,)).fetchone()[0])
        record["spec_text"] = text
        if fix_hash:
            record["spec_hash"] = hashlib.sha256(text.encode()).hexdigest()
        connection.execute("UPDATE runs SET record_json=?, spec_hash=? WHERE run_id=?",
                           (json.dumps(record), record["spec_hash"], run_id))


def resume(store, run, capsys, *flags):
    """``compare --resume RUN`` without a SPEC, as the victim types it: (exit code, stderr)."""
    code = main(["compare", "--resume", run.run_id, "--results-dir", str(store.directory),
                 "--no-progress", *flags])
    return code, capsys.readouterr().err


SIGNATURE_REFUSAL = ("its stored spec is not signed with your key (edited in the store, or "
                     "stored by another user); give the SPEC file to resume it")
"""issue 30, item 4: a stored spec carries an HMAC made with its user's key; an edited one,
its digest recomputed or not, is refused before anything of it is used."""


@pytest.mark.parametrize("edit, fix_hash", [
    ("prologue", True), ("n_samples", False), ("n_samples", True), ("n_clusters", True)])
def test_an_edited_stored_spec_is_refused_with_one_line(tmp_path, capsys, edit, fix_hash):
    store, run = interrupted_run(tmp_path)
    marker = tmp_path / "pwned"
    edited = {"prologue": SPEC + f'[cluster]\nkind = "slurm"\n[cluster.resources]\n'
                                 f'prologue = ["touch {marker}"]\n',
              "n_samples": SPEC.replace("n_samples = 60", "n_samples = 61"),
              "n_clusters": SPEC.replace("n_clusters = 2", "n_clusters = 3")}[edit]
    tamper(store, run.run_id, edited, fix_hash=fix_hash)
    code, err = resume(store, run, capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"accelml compare: error: run {run.run_id}: {SIGNATURE_REFUSAL}"]
    assert not marker.exists() and store.case_results(run.run_id) == []


def test_a_stored_spec_signed_with_another_key_is_refused(tmp_path, capsys, monkeypatch):
    store, run = interrupted_run(tmp_path)
    monkeypatch.setenv("ACCELML_KEY_FILE", str(tmp_path / "another-users-key"))
    code, err = resume(store, run, capsys)
    assert code == 2 and SIGNATURE_REFUSAL in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", [[], ["--cluster", "local"]])
def test_resume_takes_the_cluster_from_the_command_line_not_the_store(tmp_path, capsys, flag):
    # The stored [cluster] asks for PBS, which this machine lacks: taking it would fail.
    store, run = interrupted_run(tmp_path, SPEC + '[cluster]\nkind = "pbs"\n')
    code, err = resume(store, run, capsys, *flag)
    assert code == 0, err
    assert [r.status for r in store.case_results(run.run_id)] == ["ok"]


def test_the_data_files_of_a_stored_spec_are_shown_before_use(tmp_path, capsys):
    """issue 30, item 4: paths resolve against the first run's spec directory, and are shown."""
    (tmp_path / "data.csv").write_text("a,b,y\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(40)))
    text = ('[datasets.f]\nsource = "file"\npath = "data.csv"\ntarget = "y"\n[[cases]]\n'
            'algorithm = "kmeans"\nbackend = "sklearn"\ndataset = "f"\n'
            'params = {n_clusters = 2, n_init = 1, random_state = 0}\n')
    store, run = interrupted_run(tmp_path, text)
    code, err = resume(store, run, capsys)
    assert code == 0, err
    assert f"its data files (relative to {tmp_path}): f: {tmp_path / 'data.csv'}" in err, err
