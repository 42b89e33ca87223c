"""One name per concept: no two modules of accelml share a file name (``runner/measure.py``
was timing and ``report/measure.py`` agreement). A command module under ``accelml/cli/`` is
named after its command and may share its name with what the command runs (``cli/compare.py``
and ``compare.py``)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from accelml.cli import COMMAND_MODULES

PACKAGE = Path(__file__).resolve().parents[2] / "accelml"
SHARED_BY_EVERY_PACKAGE = {"__init__.py", "__main__.py"}


def repeated_file_names(package: Path) -> dict[str, list[str]]:
    """``{file name: [paths relative to the package]}`` of the names more than one module has."""
    command_files = {Path(*name.split(".")[1:]).with_suffix(".py") for name in COMMAND_MODULES.values()}
    paths: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if path.name in SHARED_BY_EVERY_PACKAGE or relative in command_files:
            continue
        paths[path.name].append(str(relative))
    return {name: found for name, found in paths.items() if len(found) > 1}


def test_no_two_modules_share_a_file_name() -> None:
    assert repeated_file_names(PACKAGE) == {}


def test_a_repeated_name_is_found(tmp_path: Path) -> None:
    for folder in ("runner", "report", "cli"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "runner" / "measure.py").write_text("")
    (tmp_path / "report" / "measure.py").write_text("")
    (tmp_path / "compare.py").write_text("")
    (tmp_path / "cli" / "compare.py").write_text("")     # a command module: excepted
    assert repeated_file_names(tmp_path) == {"measure.py": ["report/measure.py", "runner/measure.py"]}
