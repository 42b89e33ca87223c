"""Packaging: ranges in pyproject.toml, exact pins only in make/constraints.txt (which make
installs with), a LICENSE, ``--version``, and ``pip install ".[intel,xgboost]"`` next to an
existing stack in a fresh virtual environment."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import accelml

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def requirements():
    project = PYPROJECT["project"]
    extras = [item for name, items in project["optional-dependencies"].items() if name != "all"
              for item in items]
    return project["dependencies"] + extras


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def test_dependencies_are_ranges_and_make_pins_each_exactly():
    pins = {}
    for line in (REPO / "make" / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonical(name)] = version.strip()
    for requirement in requirements():
        assert "==" not in requirement, f"pyproject.toml pins {requirement}: give a range"
        name = canonical(_NAME.match(requirement)[1])
        assert pins.get(name), f"{name} has no exact pin in make/constraints.txt"
    assert '-c "$here/constraints.txt"' in (REPO / "make" / "setup-venv.sh").read_text()


def test_license_file_and_version():
    assert PYPROJECT["project"]["license"] == "BSD-3-Clause"
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "the accelml developers" in text
    out = subprocess.run([sys.executable, "-m", "accelml", "--version"], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout
    assert out.strip() == f"accelml {accelml.__version__}"


def test_pip_installs_the_intel_and_xgboost_extras_into_a_fresh_venv(tmp_path):
    """Offline and in seconds: the fresh venv sees this environment's packages through a .pth
    file (the "existing stack"), so pip must accept their versions for every range and
    install accelml alone."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "accelml", source / "accelml", ignore=shutil.ignore_patterns("__pycache__"))
    env = {name: value for name, value in os.environ.items() if name not in {"PYTHONPATH", "PIP_FIND_LINKS"}}
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    Path(site_packages, "existing-stack.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                              "--disable-pip-version-check", f"{source}[intel,xgboost]"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    assert "Successfully installed accelml-" in install.stdout
    installed = subprocess.run(
        [str(python), "-c", "import accelml, importlib.metadata as m; print(accelml.__file__); "
         "print(m.version('accelml')); print(m.metadata('accelml')['License-Expression'])"],
        capture_output=True, text=True, cwd=tmp_path, check=True, env=env).stdout.split()
    assert installed == [str(Path(site_packages, "accelml", "__init__.py")), accelml.__version__, "BSD-3-Clause"]
    assert list(Path(site_packages).glob("accelml-*.dist-info/licenses/LICENSE"))
    version = subprocess.run([str(python), "-m", "accelml", "--version"], capture_output=True, text=True,
                             cwd=tmp_path, env=env)
    assert version.stdout.strip() == f"accelml {accelml.__version__}", version.stderr
