"""What the docs, docstrings and comments tell a user to type or read exists: every
``python -m accelml COMMAND`` is a command, every ``python -m accelml.MODULE`` a module,
every ``accelml.module.Name`` resolves, and every repository path they name is there.
(Issue 33: experiments/own_data.toml pointed to ``python -m accelml spec-reference
(docs/spec-reference.md)``, neither of which exists, and three docstrings cited
``accelml.spec.schema.Case`` after Case moved to accelml.cases.)"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import accelml
from accelml.cli import COMMAND_MODULES

REPO = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".yml", ".yaml", ".html", ".cfg", ".conf",
                 ".txt", ".j2", ".sbatch", ".pbs"}
LEFT_OUT = (REPO / "benchmarks" / "gpu" / "results", REPO / "tests", REPO / "test-artifacts")
"""Saved outputs of past runs (they quote the files of the run that wrote them), the tests
(which name made-up plug-ins and modules on purpose) and what the tests leave for review
(test-artifacts/: reports of made-up runs, e.g. spec experiments/dl_scaling.toml)."""
PLACEHOLDERS = {"experiments/my_spec.toml", "experiments/x.toml"}
"""Paths that stand for the user's own file in an example."""

COMMAND = re.compile(r"python3? -m accelml ([a-z][\w-]*)")
MODULE = re.compile(r"python3? -m (accelml(?:\.\w+)+)")
DOTTED = re.compile(r"(?<![\w.])accelml(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./~-])((?:experiments|docs|slurm|benchmarks|make|accelml)/[\w./-]*\w)")


def documents() -> list[tuple[str, str]]:
    """(path relative to the repository, text) of every text file accelml ships or keeps:
    the package, the specs, the README, the SLURM templates, benchmarks and make steps."""
    found = []
    for path in sorted(REPO.rglob("*")):
        if path.suffix not in TEXT_SUFFIXES or not path.is_file() or ".git" in path.parts \
                or any(part.startswith(".") or part in {"build", "__pycache__"}
                       or part.endswith(".egg-info")     # pip's, as of the last install
                       for part in path.relative_to(REPO).parts) \
                or any(path.is_relative_to(folder) for folder in LEFT_OUT):
            continue
        found.append((str(path.relative_to(REPO)), path.read_text(errors="replace")))
    return found


def _module_names() -> set[str]:
    """accelml's own modules and packages (``accelml.report.table``, ...)."""
    names = {"accelml"}
    for info in pkgutil.walk_packages(accelml.__path__, "accelml."):
        names.add(info.name)
    return names


def resolves(name: str, modules: set[str]) -> bool:
    """``accelml.a.b.Name``: its longest module prefix imports and holds the rest."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        module_name = ".".join(parts[:end])
        if module_name in modules:
            found: object = importlib.import_module(module_name)
            for attribute in parts[end:]:
                if not hasattr(found, attribute):
                    return False
                found = getattr(found, attribute)
            return True
    return False


def test_every_command_the_docs_name_exists():
    wrong = sorted({f"{where}: python -m accelml {command}" for where, text in documents()
                    for command in COMMAND.findall(text) if command not in COMMAND_MODULES})
    assert not wrong, "\n".join(wrong)


def test_every_module_run_with_python_m_exists():
    wrong = sorted({f"{where}: python -m {module}" for where, text in documents()
                    for module in MODULE.findall(text) if importlib.util.find_spec(module) is None})
    assert not wrong, "\n".join(wrong)


def test_every_accelml_name_the_docs_cite_resolves():
    """Names that start with one of accelml's modules (``accelml.spec.schema.Case``) must
    resolve; others (``accelml.measures``, an entry-point group; ``accelml.yaml``, a file)
    are not module paths."""
    modules = _module_names() - {"accelml.__main__"}
    wrong = set()
    for where, text in documents():
        for name in DOTTED.findall(text):
            head = ".".join(name.split(".")[:2])
            if name.startswith("accelml.__main__") or head not in modules:
                continue
            if not resolves(name, modules):
                wrong.add(f"{where}: {name}")
    assert not wrong, "\n".join(sorted(wrong))


def test_every_repository_path_the_docs_name_is_there():
    """A path may name a file by the start of its name (``res-xg`` for res-xg.txt, .html)."""
    wrong = set()
    for where, text in documents():
        for name in PATH.findall(text):
            path = REPO / name
            if name in PLACEHOLDERS or path.exists() or (
                    path.parent.is_dir() and any(other.name.startswith(path.name)
                                                 for other in path.parent.iterdir())):
                continue
            wrong.add(f"{where}: {name}")
    assert not wrong, "\n".join(sorted(wrong))
