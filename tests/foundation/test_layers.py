"""The package's imports point down its layers, with no cycle, and nothing hides a dependency.

Layers, lowest first (DESIGN.md, "The flow"): a module imports only from its own layer or a
lower one. What counts as an import of a module:

- an ``import`` at module level, and one under ``if TYPE_CHECKING:`` (a type that an upper
  layer owns is still a dependency on it);
- a string naming an accelml module, ``"accelml.x.y"`` or ``"accelml.x.y:attribute"`` (it is
  imported by name later: a plug-in's measurer, a lazily loaded name, a ``python -m`` target).

Inside a function only a third-party library may be imported (a heavy one, loaded when it is
needed): never accelml (that hides a cycle or an upward import) and never the standard
library (it costs nothing at module level). Within a layer, the module-level imports form no
cycle.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "accelml"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("accelml.errors", "accelml.convert", "accelml.cases", "accelml.plugins", "accelml.scratch",
     "accelml.file_cache"),
    ("accelml.probe", "accelml.results", "accelml.containers"),
    ("accelml.datasets", "accelml.dl"),
    ("accelml.estimators", "accelml.executors"),
    ("accelml.expectations",),
    ("accelml.spec", "accelml.runner"),
    ("accelml.agreement",),
    ("accelml.report", "accelml.machine"),
    ("accelml.orchestration", "accelml.testing"),
    ("accelml.comparison",),
    ("accelml.cli", "accelml.__main__"),
)
"""Every module of accelml belongs to the layer of its longest listed prefix."""

MODULE_REFERENCE = re.compile(r"accelml(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?")
"""A string that names an accelml module (and maybe an attribute of it)."""


def layer_of(module: str) -> int:
    if module == "accelml":  # the package root: __version__, and public names loaded lazily
        return len(LAYERS) - 1
    matches = [(len(prefix), index) for index, layer in enumerate(LAYERS) for prefix in layer
               if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return max(matches)[1]


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass(frozen=True)
class Reference:
    """One dependency of a module: an import (at module level, under ``TYPE_CHECKING`` or
    inside a function) or a string naming a module."""

    line: int
    target: str
    how: str    # "module", "typing", "function" or "string"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def references(tree: ast.Module, module: str, modules: frozenset[str],
               packages: frozenset[str] = frozenset()) -> list[Reference]:
    """Every import in ``tree`` (third-party ones only inside functions, where they are
    checked) and every string naming one of ``modules`` (``packages``: those of them that
    are packages); an import of ``accelml.x`` whose names are modules counts as an import
    of those modules."""
    found: list[Reference] = []
    is_package = module in packages

    def imported(node: ast.ImportFrom) -> list[str]:
        base = node.module or ""
        if node.level:
            package = module if is_package else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{node.module}" if node.module else package
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names]

    def visit(node: ast.AST, how: str) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                visit(child, "typing" if how == "module" else how)
            for child in node.orelse:
                visit(child, how)
            return
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            targets = imported(node)
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and MODULE_REFERENCE.fullmatch(node.value) \
                and node.value.partition(":")[0] in modules:
            found.append(Reference(node.lineno, node.value.partition(":")[0], "string"))
        for target in targets:
            if how == "function" or target == "accelml" or target.startswith("accelml."):
                found.append(Reference(node.lineno, target, how))
        inner = "function" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.Lambda)) else how
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, "module")
    return found


def is_accelml(target: str) -> bool:
    return target == "accelml" or target.startswith("accelml.")


def problems_of(module: str, found: Iterable[Reference]) -> list[str]:
    """What ``module``'s references break: an upward import or string, an import of accelml
    or of the standard library inside a function."""
    own = layer_of(module)
    problems = []
    for reference in found:
        target = reference.target
        if reference.how == "function":
            top = target.partition(".")[0]
            if is_accelml(target):
                problems.append(f"line {reference.line}: imports {target} inside a function")
            elif top in sys.stdlib_module_names or top == "__future__":
                problems.append(f"line {reference.line}: imports {target} (standard library) "
                                "inside a function: import it at module level")
        elif target != "accelml" and layer_of(target) > own:
            what = "names" if reference.how == "string" else "imports"
            problems.append(f"line {reference.line}: {what} {target} (layer {layer_of(target)}) "
                            f"from layer {own}")
    return problems


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` (module -> modules it imports) as a path that ends where it
    starts, or [] when there is none."""
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = walk(target)
                if cycle:
                    return cycle
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = walk(node)
            if cycle:
                return cycle
    return []


def scan(root: Path) -> dict[str, list[Reference]]:
    """Every module of the package at ``root`` and its references."""
    paths = sorted(root.rglob("*.py"))
    modules = frozenset(module_name(path, root) for path in paths)
    packages = frozenset(module_name(path, root) for path in paths if path.name == "__init__.py")
    return {module_name(path, root): references(ast.parse(path.read_text()),
                                                module_name(path, root), modules, packages)
            for path in paths}


def import_graph(found: dict[str, list[Reference]]) -> dict[str, set[str]]:
    """Module -> the accelml modules it imports when it is loaded (module level and
    ``TYPE_CHECKING``); the package root is left out (its public names load lazily)."""
    return {module: {r.target for r in refs
                     if r.how in ("module", "typing") and r.target in found
                     and r.target not in ("accelml", module)}
            for module, refs in found.items() if module != "accelml"}


FOUND = scan(PACKAGE)


@pytest.mark.parametrize("module", sorted(FOUND))
def test_imports_point_down_and_sit_at_module_level(module: str) -> None:
    problems = problems_of(module, FOUND[module])
    assert not problems, f"{module}:\n  " + "\n  ".join(problems)


def test_no_import_cycle() -> None:
    cycle = import_cycle(import_graph(FOUND))
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_scan_sees_what_it_must_refuse() -> None:
    modules = frozenset({"accelml.report", "accelml.cases", "accelml.comparison",
                         "accelml.runner.hooks", "accelml.results.store"})
    source = ("from accelml.report import table\n"
              "def f():\n    from accelml.cases import Case\n    import json\n    import numpy\n"
              "from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from accelml.comparison import compare\n"
              "MEASURER = 'accelml.runner.hooks:measure_keras'\n"
              "TEXT = 'see accelml.runner.hooks'\n")
    found = references(ast.parse(source), "accelml.results.store", modules)
    assert found == [Reference(1, "accelml.report", "module"),
                     Reference(3, "accelml.cases", "function"),
                     Reference(4, "json", "function"), Reference(5, "numpy", "function"),
                     Reference(8, "accelml.comparison", "typing"),
                     Reference(9, "accelml.runner.hooks", "string")]
    problems = problems_of("accelml.results.store", found)
    assert [problem.split(":")[0] for problem in problems] == [
        "line 1", "line 3", "line 4", "line 8", "line 9"]
    # the cycle the strategy record once hid under TYPE_CHECKING
    old = {"accelml.dl.config": {"accelml.dl.strategies"},
           "accelml.dl.strategies": {"accelml.dl.strategies._record"},
           "accelml.dl.strategies._record": {"accelml.dl.config"}}
    assert import_cycle(old) == ["accelml.dl.config", "accelml.dl.strategies",
                                 "accelml.dl.strategies._record", "accelml.dl.config"]
    assert import_cycle({"a": {"b"}, "b": set()}) == []
