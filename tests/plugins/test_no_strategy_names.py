"""No strategy's name is tested for outside the module that defines its record (issue 14).

Every module of ``accelml/`` is read as an AST; a place *tests* for a strategy when it
compares a value with the name (``==``, ``!=``, ``in``, ``is``, also through a literal
collection or a module constant holding it, or a ``x or "name"`` default), matches it in a
``match`` statement, calls ``startswith``/``endswith`` with a prefix/suffix of it, or looks
a value up in a module-level dict keyed by it. Docstrings and other mentions are fine.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

import accelml
from accelml.dl.strategies import STRATEGIES_POINT

PACKAGE = Path(accelml.__file__).resolve().parent

PENDING: dict[str, tuple[str, str]] = {}
"""Tests known to remain in areas this change does not own: file -> (name, why). The test
fails when such a test is gone too, so the entry cannot outlive it."""


def _strings(node: ast.AST | None, constants: dict[str, set[str]]) -> set[str]:
    """The string values ``node`` can stand for: a constant, a literal collection (dict keys),
    a module constant bound to one, either side of ``or``/``and`` or of a conditional."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_strings(item, constants) for item in node.elts))
    if isinstance(node, ast.Dict):
        return set().union(*(_strings(key, constants) for key in node.keys))
    if isinstance(node, ast.Name):
        return constants.get(node.id, set())
    if isinstance(node, ast.BoolOp):
        return set().union(*(_strings(value, constants) for value in node.values))
    if isinstance(node, ast.IfExp):
        return _strings(node.body, constants) | _strings(node.orelse, constants)
    return set()


def _module_constants(tree: ast.Module) -> dict[str, set[str]]:
    constants: dict[str, set[str]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        if isinstance(value, ast.Call) and value.args:
            value = value.args[0]          # MappingProxyType({...}), frozenset((...)), tuple([...])
        for target in targets:
            if isinstance(target, ast.Name):
                constants[target.id] = _strings(value, {})
    return constants


def strategy_tests(source: str, names: Iterable[str]) -> list[tuple[int, str]]:
    """(line, name) of every place in ``source`` that tests for one of ``names``.

    >>> strategy_tests('if config.strategy == "horovod":\\n    pass\\n', ["horovod"])
    [(1, 'horovod')]
    """
    names = set(names)
    tree = ast.parse(source)
    constants = _module_constants(tree)
    holding = {constant for constant, strings in constants.items() if strings & names}
    found: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        tested: set[str] = set()
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                tested |= _strings(operand, constants) & names
        elif isinstance(node, ast.MatchValue):
            tested |= _strings(node.value, constants) & names
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            pieces = set().union(*(_strings(argument, constants) for argument in node.args))
            if method == "startswith":
                tested |= {name for name in names for piece in pieces if piece and name.startswith(piece)}
            elif method == "endswith":
                tested |= {name for name in names for piece in pieces if piece and name.endswith(piece)}
            elif method == "get" and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id in holding:
                tested |= constants[node.func.value.id] & names
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in holding:
            tested |= constants[node.value.id] & names
        found |= {(node.lineno, name) for name in tested}
    return sorted(found)


def _defining_file(name: str) -> str:
    """``accelml/dl/strategies/tf_fit.py`` for a built-in; the entry point for a third party's."""
    return STRATEGIES_POINT.origin(name).replace(".", "/") + ".py"


def scan(package: Path) -> dict[str, list[tuple[int, str]]]:
    """file (``accelml/...``) -> where it tests for a strategy defined in another module."""
    names = STRATEGIES_POINT.names()
    found = {}
    for path in sorted(package.rglob("*.py")):
        file = path.relative_to(package.parent).as_posix()
        others = [name for name in names if _defining_file(name) != file]
        hits = strategy_tests(path.read_text(), others)
        if hits:
            found[file] = hits
    return found


def test_no_strategy_name_is_tested_outside_its_own_module():
    found = scan(PACKAGE)
    unexpected = {}
    for file, hits in found.items():
        pending_name = PENDING.get(file, (None, ""))[0]
        left = [(line, name) for line, name in hits if name != pending_name]
        if left:
            unexpected[file] = left
    listed = "\n".join(f"  {file}:{line}: tests for strategy {name!r}"
                       for file, hits in unexpected.items() for line, name in hits)
    assert not unexpected, ("read the Strategy record instead of testing the name:\n" + listed)
    stale = [file for file, (name, _) in PENDING.items()
             if not any(hit_name == name for _, hit_name in found.get(file, []))]
    assert not stale, f"no longer tests for its strategy: remove from PENDING: {stale}"


def test_every_built_in_strategy_is_scanned_against():
    names = STRATEGIES_POINT.names()
    assert {"single", "horovod", "multiworker", "jax-pmean"} <= set(names)
    assert all((PACKAGE.parent / _defining_file(name)).is_file() for name in names)


@pytest.mark.parametrize("source, expected", [
    ('if config.strategy == "horovod":\n    pass\n', [(1, "horovod")]),
    ('x = strategy != "single"\n', [(1, "single")]),
    ('ok = strategy in ("horovod", "multiworker")\n', [(1, "horovod"), (1, "multiworker")]),
    ('MULTI = ("horovod", "multiworker")\n\ndef f(s):\n    return s in MULTI\n',
     [(4, "horovod"), (4, "multiworker")]),
    ('jax = config.strategy.startswith("jax")\n', [(1, "jax-pmean")]),
    ('MODULES = {"single": "m"}\n\ndef f(s):\n    return MODULES[s], MODULES.get(s)\n',
     [(4, "single")]),
    ('match s:\n    case "single":\n        pass\n', [(2, "single")]),
    ('same = (a.strategy or "single") == b\n', [(1, "single")]),
    ('"""Strategies: single, horovod."""\nstrategy = "horovod"\nprint("single")\n', []),
    ('ok = device.startswith(("cuda:", "gpu:"))\n', []),
])
def test_the_scanner_finds_each_kind_of_test(source, expected):
    assert strategy_tests(source, ["single", "horovod", "multiworker", "jax-pmean"]) == expected
