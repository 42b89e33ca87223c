"""The package's imports point down its layers, at module level, with no cycle hidden in a function.

Layers, lowest first (DESIGN.md, "The flow"): a module imports only from its own layer or a
lower one. Function-level imports are for heavy third-party libraries only, never accelml.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "accelml"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("accelml.errors", "accelml.convert", "accelml.cases", "accelml.plugins", "accelml.scratch"),
    ("accelml.probe", "accelml.results", "accelml.containers"),
    ("accelml.datasets", "accelml.dl"),
    ("accelml.estimators", "accelml.executors"),
    ("accelml.expectations",),
    ("accelml.spec", "accelml.runner"),
    ("accelml.agreement",),
    ("accelml.report", "accelml.machine"),
    ("accelml.compare", "accelml.testing"),
    ("accelml.cli", "accelml.__main__"),
)
"""Every module of accelml belongs to the layer of its longest listed prefix."""


def layer_of(module: str) -> int:
    if module == "accelml":  # the package root: __version__, and public names loaded lazily
        return len(LAYERS) - 1
    matches = [(len(prefix), index) for index, layer in enumerate(LAYERS) for prefix in layer
               if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return max(matches)[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def accelml_imports(tree: ast.Module, module: str) -> list[tuple[int, str, bool]]:
    """(line, imported module, inside a function) for every import of accelml in ``tree``;
    imports under ``if TYPE_CHECKING:`` are left out (they never run)."""
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child, in_function)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.rsplit(".", node.level - (1 if module_name_is_package(module) else 0))[0]
                target = f"{base}.{node.module}" if node.module else base
                found.append((node.lineno, target, in_function))
            elif node.module and (node.module == "accelml" or node.module.startswith("accelml.")):
                found.append((node.lineno, node.module, in_function))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, in_function) for alias in node.names
                         if alias.name == "accelml" or alias.name.startswith("accelml."))
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return found


def module_name_is_package(module: str) -> bool:
    return (PACKAGE.parent / module.replace(".", "/") / "__init__.py").is_file()


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_imports_point_down_and_sit_at_module_level(path: Path) -> None:
    module = module_name(path)
    own = layer_of(module)
    problems = []
    for line, target, in_function in accelml_imports(ast.parse(path.read_text()), module):
        if in_function:
            problems.append(f"line {line}: imports {target} inside a function")
        elif target != "accelml" and layer_of(target) > own:
            problems.append(f"line {line}: imports {target} (layer {layer_of(target)}) from "
                            f"layer {own}")
    assert not problems, f"{module}:\n  " + "\n  ".join(problems)


def test_the_scan_sees_what_it_must_refuse() -> None:
    source = ("from accelml.report import table\n"
              "def f():\n    from accelml.cases import Case\n"
              "from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from accelml.compare import compare\n")
    found = accelml_imports(ast.parse(source), "accelml.results.store")
    assert found == [(1, "accelml.report", False), (3, "accelml.cases", True)]
    assert layer_of("accelml.report.table") > layer_of("accelml.results.store")
