"""Container runtime records as text: the command lines Apptainer and SingularityCE would get
(no runtime of theirs is installed here), checked against their documented options; the spec's
``container`` key, its errors and the site's defaults."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from accelml.cases import Container
from accelml.containers import RUNTIMES, Launch, container_from, passed_environment
from accelml.errors import SpecError
from accelml.spec import load_spec_text

DOCUMENTED_OPTIONS = {
    # apptainer-exec(1), Apptainer 1.x: -B/--bind src[:dest[:opts]], -e/--cleanenv,
    # --env (variables for the contained process), --pwd (initial working directory), --nv
    "apptainer": {"--bind", "--cleanenv", "--env", "--pwd", "--nv"},
    # singularity-exec(1), SingularityCE 3.6+ (--env since 3.6): the same options
    "singularity": {"--bind", "--cleanenv", "--env", "--pwd", "--nv"},
    # ch-run(1), Charliecloud 0.31: -b/--bind SRC[:DST], --unset-env GLOB, --set-env VAR=VALUE,
    # --env-no-expand, -c/--cd DIR
    "charliecloud": {"-b", "--unset-env", "--set-env", "--env-no-expand", "--cd"},
}

SPEC = """
[datasets.blobs]
source = "generated"
generator = "blobs"
n_samples = 100
n_features = 2
centers = 2

[[cases]]
algorithm = "kmeans"
backend = "sklearn"
dataset = "blobs"
params = {n_clusters = 2}
"""


@pytest.mark.parametrize("name", ["apptainer", "singularity"])
def test_exec_runtimes_wrap_a_command_with_their_documented_options(name):
    runtime = RUNTIMES.get(name)
    container = Container(name, "/images/stack.sif", ("/scratch", "/apps:/opt/apps:ro"))
    launch = Launch(binds=("/work/accelml",), environment=(("OMP_NUM_THREADS", "4"), ("PATH", "/usr/bin")),
                    gpus=True, workdir="/scratch/case")
    command = runtime.command(container, ["python3", "-m", "accelml", "run-case", "in.json"], launch)
    assert command == [name, "exec", "--cleanenv", "--env", "OMP_NUM_THREADS=4", "--env", "PATH=/usr/bin",
                       "--bind", "/scratch", "--bind", "/apps:/opt/apps:ro", "--bind", "/work/accelml",
                       "--pwd", "/scratch/case", "--nv", "/images/stack.sif",
                       "python3", "-m", "accelml", "run-case", "in.json"]
    image_at = command.index("/images/stack.sif")
    assert {word for word in command[2:image_at] if word.startswith("-")} <= DOCUMENTED_OPTIONS[name]
    assert "--nv" not in runtime.command(container, ["true"], Launch())


def test_charliecloud_wraps_a_command_with_its_documented_options():
    runtime = RUNTIMES.get("charliecloud")
    command = runtime.command(Container("charliecloud", "/images/dir", ("/scratch",)), ["python3", "-V"],
                              Launch(environment=(("A", "1"),), gpus=True, workdir="/scratch"))
    assert command == ["ch-run", "--unset-env=*", "--env-no-expand", "--set-env=A=1", "-b", "/scratch",
                       "--cd", "/scratch", "/images/dir", "--", "python3", "-V"]
    options = {word.split("=")[0] for word in command[1:command.index("/images/dir")] if word.startswith("-")}
    assert options <= DOCUMENTED_OPTIONS["charliecloud"]


def test_only_what_a_case_needs_passes_into_the_container():
    passed = dict(passed_environment({"SLURM_JOB_ID": "7", "HOROVOD_FUSION_THRESHOLD": "0",
                                      "LD_LIBRARY_PATH": "/host/lib", "PYTHONPATH": "/src",
                                      "PATH": "/host/venv/bin:/usr/bin", "SECRET_TOKEN": "x"}))
    assert set(passed) == {"SLURM_JOB_ID", "HOROVOD_FUSION_THRESHOLD", "PYTHONPATH", "PATH"}
    assert "/host" not in passed["PATH"]


@pytest.mark.parametrize("name", ["apptainer", "singularity"])
def test_slurm_script_shows_apptainer_and_singularity_commands(name, tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(f'container = {{runtime = "{name}", image = "/images/stack.sif", binds = ["/scratch"]}}\n'
                    + SPEC)
    out = subprocess.run([sys.executable, "-m", "accelml", "slurm-script", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if f"{name} exec" in line)
    assert line.startswith(f"#   {name} exec --cleanenv --env PATH=")
    assert line.endswith("--bind /scratch --bind ACCELML-SOURCE --bind SCRATCH --bind DATASET-CACHE --bind HOME "
                         "--pwd SCRATCH /images/stack.sif python3 -m accelml run-case SCRATCH/input.json "
                         "--output SCRATCH/result.json")


def test_a_list_of_containers_is_an_axis_and_host_keeps_the_case_id():
    on_host = load_spec_text(SPEC, "s.toml").cases[0]
    text = ('container = ["host", {runtime = "charliecloud", image = "/img/a"}, '
            '{runtime = "apptainer", image = "/img/b.sif", python = "/opt/venv/bin/python"}]\n' + SPEC)
    cases = load_spec_text(text, "s.toml").cases
    assert [case.container for case in cases] == [
        None, Container("charliecloud", "/img/a"), Container("apptainer", "/img/b.sif", (), "/opt/venv/bin/python")]
    assert cases[0].case_id == on_host.case_id and len({case.case_id for case in cases}) == 3
    per_case = SPEC.replace('params = {n_clusters = 2}', 'params = {n_clusters = 2}\ncontainer = "host"')
    assert load_spec_text('container = {runtime = "charliecloud", image = "/i"}\n' + per_case,
                          "s.toml").cases[0].container is None


@pytest.mark.parametrize(("container", "message"), [
    ('{runtime = "docker", image = "/i"}', "s.toml: container.runtime: unknown container runtime 'docker'"),
    ('{runtime = "charliecloud"}', "s.toml: container.image: missing"),
    ('{runtime = "charliecloud", image = "/i", binds = "/x"}', "s.toml: container.binds: expected a list"),
    ('{runtime = "charliecloud", image = "/i", gpu = true}', "s.toml: container: unknown key 'gpu'"),
    ('"podman"', "s.toml: container: expected a table {runtime, image, binds, python} or \"host\""),
])
def test_a_bad_container_is_a_one_line_spec_error(container, message):
    with pytest.raises(SpecError) as error:
        load_spec_text(f"container = {container}\n" + SPEC, "s.toml")
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_bad_container_exits_2_with_one_line_and_writes_nothing(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text('container = {runtime = "docker", image = "/i"}\n' + SPEC)
    out = subprocess.run([sys.executable, "-m", "accelml", "compare", str(path), "--results-dir",
                          str(tmp_path / "results")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "container.runtime: unknown container runtime 'docker'" in out.stderr
    assert not (tmp_path / "results").exists()


def test_site_defaults_come_from_accelml_yaml(tmp_path):
    config = tmp_path / "dask"
    config.mkdir()
    (config / "accelml.yaml").write_text(
        "accelml:\n  container:\n    runtime: apptainer\n    binds: [/apps]\n    python: /opt/py/bin/python\n")
    script = ("from accelml.spec import load_spec_text; import sys; "
              "print(load_spec_text(sys.stdin.read(), 's.toml').cases[0].container)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         input='container = {image = "/img/x.sif", binds = ["/data"]}\n' + SPEC,
                         env={**os.environ, "DASK_CONFIG": str(config)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("Container(runtime='apptainer', image='/img/x.sif', binds=('/apps', '/data'), "
                                  "python='/opt/py/bin/python')")
    assert container_from({"runtime": "charliecloud", "image": "/i"}, "c", {}).binds == ()
