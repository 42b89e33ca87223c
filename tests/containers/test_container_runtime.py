"""Cases in a real container (Charliecloud's ch-run on a Debian image built by
make/build-container-image.sh): the same case on the host, in the image with the host's
libraries bound in, and in the image with its own libraries; bad containers are unavailable
with the reason while the rest run; a 2-rank Horovod case and a SLURM job inside the image."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelml.agreement.matrix import agreement_matrix
from accelml.results import FailureKind, ResultsStore

REPO = Path(__file__).resolve().parents[2]

SPEC = """
name = "containers"
reference = "sklearn"
repeats = 2
warmup = 0
time_limit = 240
deterministic = true
container = {containers}

[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 1500
n_features = 6
centers = 3
seed = 0

[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {{n_clusters = 3, n_init = 1, max_iter = 20, random_state = 0}}
"""


def toml_table(**values: object) -> str:
    return "{" + ", ".join(f"{key} = {json.dumps(value)}" for key, value in values.items()) + "}"


def accelml(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accelml", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


def run_spec(tmp_path: Path, containers: list[str], *extra: str, spec: str = SPEC):
    path = tmp_path / "spec.toml"
    path.write_text(spec.format(containers="[" + ", ".join(containers) + "]"))
    out = accelml("compare", str(path), "--results-dir", str(tmp_path / "results"), "--no-progress",
                  "--only-available", *extra)
    store = ResultsStore(tmp_path / "results" / "results.sqlite")
    run = store.latest_run()
    return out, store, run, store.case_results(run.run_id)


@pytest.fixture(scope="module")
def no_python_image(container_image, tmp_path_factory) -> str:
    """The test image without any Python (hard links: no copy of the files)."""
    image = tmp_path_factory.mktemp("images") / "no-python"
    subprocess.run(["cp", "-al", container_image, str(image)], check=True)
    for found in [*(image / "usr" / "bin").glob("python3*"), *(image / "usr" / "bin").glob("pydoc*")]:
        found.unlink()
    return str(image)


@pytest.fixture(scope="module")
def host_and_containers(container_image, host_python_binds, no_python_image, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("containers")
    venv = toml_table(runtime="charliecloud", image=container_image, binds=list(host_python_binds),
                      python=sys.executable)
    own = toml_table(runtime="charliecloud", image=container_image)
    missing = toml_table(runtime="charliecloud", image=str(tmp_path / "no-such-image"))
    apptainer = toml_table(runtime="apptainer", image="/images/stack.sif")
    no_python = toml_table(runtime="charliecloud", image=no_python_image)
    return run_spec(tmp_path, ['"host"', venv, own, missing, apptainer, no_python])


def by_place(results):
    """{'host' | 'venv' | 'own' | reason-kind: result}."""
    found = {}
    for result in results:
        container = result.container
        if container is None:
            found["host"] = result
        elif result.failure is FailureKind.UNAVAILABLE:
            found[Path(container.image).name if container.runtime == "charliecloud" else container.runtime] = result
        else:
            found["venv" if container.python == sys.executable else "own"] = result
    return found


@pytest.mark.slow
def test_bad_containers_are_unavailable_with_the_reason_and_the_rest_run(host_and_containers, tmp_path):
    out, _, _, results = host_and_containers
    assert out.returncode == 0, out.stderr
    places = by_place(results)
    assert {"host", "venv", "own"} <= set(places) and all(places[p].ok for p in ("host", "venv", "own"))
    unavailable = {name: result.reason for name, result in places.items() if not result.ok}
    assert "does not exist" in unavailable["no-such-image"]
    assert unavailable["apptainer"] == ("container runtime apptainer is not installed here "
                                        "(apptainer is not on PATH)")
    assert "cannot run python3" in unavailable["no-python"]
    assert all(places[name].failure is FailureKind.UNAVAILABLE for name in unavailable)


def test_the_fingerprint_records_the_image_and_the_libraries_inside_it(host_and_containers):
    _, _, _, results = host_and_containers
    places = by_place(results)
    host, venv, own = (places[name].environment for name in ("host", "venv", "own"))
    assert host.container is None
    assert venv.container is not None and own.container is not None
    assert venv.container.digest == own.container.digest and venv.container.digest.startswith("sha256:")
    assert venv.container.runtime == "charliecloud" and venv.container.runtime_version
    # bound in: the host's libraries; its own: numpy 2.3 and Debian's Python 3.11
    assert venv.library_version("numpy") == host.library_version("numpy")
    assert own.library_version("numpy").startswith("2.3.")
    assert own.library_version("numpy") != host.library_version("numpy")
    assert own.python.startswith("3.11.") and own.library_version("scikit-learn").startswith("1.8.")
    assert len({host.env_hash, venv.env_hash, own.env_hash}) == 3


def test_host_vs_container_is_an_axis_of_the_agreement_matrix(host_and_containers):
    _, store, run, _ = host_and_containers
    matrix = agreement_matrix(store, run.run_id)
    entries = {("own" if "with" not in entry.b.label else "venv"): entry for entry in matrix.cross_container}
    assert set(entries) == {"venv", "own"}
    assert all(entry.a.label.endswith("random_state=0)") for entry in entries.values())  # the host
    same = entries["venv"]
    assert same.expectation.bitwise and same.bitwise_identical, same.expectation.reason
    assert "run the same library versions" in same.expectation.reason
    other = entries["own"]
    assert not other.expectation.bitwise
    assert "numpy" in other.expectation.reason and "scikit-learn" in other.expectation.reason
    assert not matrix.unexpected


def test_slurm_script_shows_the_wrapped_command(container_image, tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(containers=toml_table(runtime="charliecloud", image=container_image,
                                                      binds=["/scratch"])))
    out = accelml("slurm-script", str(path), timeout=120)
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if "ch-run" in line)
    assert f"-b /scratch -b ACCELML-SOURCE -b SCRATCH -b DATASET-CACHE -b HOME --cd SCRATCH {container_image} -- " \
           "python3 -m accelml run-case SCRATCH/input.json --output SCRATCH/result.json" in line
    assert "'--unset-env=*' --env-no-expand" in line


def test_backends_lists_the_container_runtimes_with_versions(container_image):
    out = accelml("backends", "--json", timeout=120)
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    assert rows["container charliecloud"]["available"] and rows["container charliecloud"]["version"]
    for name in ("apptainer", "singularity"):
        if shutil.which(name) is None:
            assert rows[f"container {name}"]["status"] == f"unavailable: not installed: {name} is not on PATH"


DL_SPEC = """
name = "ranks-in-a-container"
time_limit = 400
deterministic = true
container = {containers}

[datasets.digits]
source = "shipped"
name = "digits"

[[cases]]
algorithm = "mlp"
backend = "keras"
dataset = "digits"
ranks = 2
epochs = 2
batch_size = 32
learning_rate = 0.02
strategy = """


@pytest.mark.slow
@pytest.mark.horovod
def test_two_horovod_ranks_run_inside_the_container_with_identical_weights(container_image, host_python_binds,
                                                                          horovod_ready, tmp_path):
    venv = toml_table(runtime="charliecloud", image=container_image, binds=list(host_python_binds),
                      python=sys.executable)
    out, _, _, (result,) = run_spec(tmp_path, [venv], spec=DL_SPEC + '"horovod"\n')
    assert out.returncode == 0 and result.ok, f"{result.reason}\n{out.stderr[-2000:]}"
    assert result.dl is not None and result.dl.ranks_identical
    assert len(result.dl.rank_weight_digests) == 2
    assert result.environment is not None and result.environment.container is not None


@pytest.mark.slow
@pytest.mark.slurm
def test_a_slurm_job_runs_its_case_inside_the_container(container_image, slurm_available, tmp_path):
    own = toml_table(runtime="charliecloud", image=container_image)
    out, _, _, (result,) = run_spec(tmp_path, [own], "--cluster", "slurm")
    assert out.returncode == 0 and result.ok, f"{result.reason}\n{out.stderr[-2000:]}"
    environment = result.environment
    assert environment is not None and environment.slurm_job_id
    assert environment.container is not None and environment.library_version("numpy").startswith("2.3.")
    assert os.path.basename(environment.container.image) == os.path.basename(container_image)




@pytest.mark.slow
@pytest.mark.slurm
def test_srun_starts_each_rank_of_a_slurm_job_inside_the_container(container_image, host_python_binds,
                                                                   slurm_available, tmp_path):
    """In a SLURM job the ranks are started by srun, which lives on the host: the case process
    stays there, srun starts ch-run for each rank, and the fingerprint is taken in the image."""
    venv = toml_table(runtime="charliecloud", image=container_image, binds=list(host_python_binds),
                      python=sys.executable)
    spec = DL_SPEC + '"torch-ddp"\nkeras_backend = "torch"\n'
    out, _, _, (result,) = run_spec(tmp_path, [venv], "--cluster", "slurm", spec=spec)
    assert out.returncode == 0 and result.ok, f"{result.reason}\n{out.stderr[-2000:]}"
    assert result.dl is not None and result.dl.ranks_identical and len(result.dl.rank_weight_digests) == 2
    environment = result.environment
    assert environment is not None and environment.slurm_job_id
    assert environment.container is not None and environment.container.image == container_image
