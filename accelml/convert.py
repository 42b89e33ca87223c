"""One converter between accelml's frozen dataclasses and JSON data, driven by their type hints.

Every record that is stored, sent to a case process or written to a baseline goes through
:func:`to_data` and :func:`from_data`; no record writes its own ``to_dict``/``from_dict``.
The rules follow the annotations:

* a dataclass is an object of its fields (plus what its ``json_extras()`` returns, such as a
  derived ``case_id``; such keys are ignored when read back);
* ``tuple[X, ...]`` is a list; ``X | None`` is ``null`` or ``X``; an ``Enum`` is its value;
* a tuple of ``(str, value)`` pairs is a list of pairs, or an object where the field says
  ``metadata={"json": "object"}`` (parameters, dataset options);
* a field renamed in Python keeps its stored name where its metadata says so
  (:func:`stored_as`): stores and baselines written before the rename read unchanged;
* reading is lenient where stores written by older versions need it: a missing key takes
  the field's default, unknown keys are ignored, ``null`` for a float field that is not
  optional takes the field's default (or NaN), pairs may come as an object or as a list.

>>> from dataclasses import dataclass, field
>>> @dataclass(frozen=True)
... class Point:
...     name: str
...     xy: tuple[float, ...]
...     tags: tuple[tuple[str, int], ...] = field(default=(), metadata={"json": "object"})
>>> data = to_data(Point("p", (1.0, 2.0), (("a", 1),)))
>>> data
{'name': 'p', 'xy': [1.0, 2.0], 'tags': {'a': 1}}
>>> from_data(Point, data) == Point("p", (1.0, 2.0), (("a", 1),))
True
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Self, TypeVar, Union, cast

if TYPE_CHECKING:  # annotations only: the protocol every dataclass satisfies
    from _typeshed import DataclassInstance

JSONValue = str | int | float | bool | None | list["JSONValue"] | dict[str, "JSONValue"]
"""What :func:`to_data` returns and :func:`from_data` reads."""

D = TypeVar("D", bound="DataclassInstance")

OBJECT = {"json": "object"}
"""Field metadata: write this tuple of ``(str, value)`` pairs as a JSON object."""
OPTIONAL_OBJECT = {"json": "object", "omit_empty": True}
OMIT_NONE = {"omit_empty": True}
"""Field metadata: leave the field out while it is None (a field added later keeps older
records' data as it was)."""
"""As :data:`OBJECT`, left out when empty: a field added later keeps older records' data as it was."""


def stored_as(name: str) -> dict[str, str]:
    """Field metadata: the field is written and read under ``name``, its name before a
    rename (the field's own name is read too).

    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True)
    ... class Run:
    ...     ranks: int = field(default=1, metadata=stored_as("workers"))
    >>> to_data(Run(2)), from_data(Run, {"workers": 4}), from_data(Run, {"ranks": 4})
    ({'workers': 2}, Run(ranks=4), Run(ranks=4))
    """
    return {"stored_as": name}


def _stored_name(spec: dataclasses.Field[object]) -> str:
    return str(spec.metadata.get("stored_as", spec.name))


MAX_NESTING = 32
"""How deep a document a user gives (a spec's TOML, a baseline's JSON) may nest tables and
arrays: accelml's own formats need a handful of levels; far deeper ones only exhaust the
parser's recursion."""


def nesting_too_deep(value: object, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` (parsed JSON or TOML) nests lists and tables deeper than ``limit``,
    read without recursion.

    >>> nesting_too_deep({"a": [[1]]}, limit=3), nesting_too_deep({"a": [[[1]]]}, limit=3)
    (False, True)
    """
    level: list[tuple[object, int]] = [(value, 1)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, Mapping) else \
            item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (Mapping, list)):
                if depth + 1 > limit:
                    return True
                level.append((child, depth + 1))
    return False


class JSONRecord:
    """What a stored record inherits: ``to_dict`` and ``from_dict`` through this converter
    (a record that must check more when read overrides ``from_dict`` and calls ``from_data``)."""

    def to_dict(self) -> dict[str, JSONValue]:
        return to_object(cast("DataclassInstance", self))

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Self:
        return cast(Self, from_data(cast("type[DataclassInstance]", cls), data))


def to_data(value: object) -> JSONValue:
    """``value`` (a dataclass, tuple, enum or scalar) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_object(value)
    if isinstance(value, enum.Enum):
        return cast("JSONValue", value.value)
    if isinstance(value, (tuple, list)):
        return [to_data(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): to_data(item) for key, item in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot convert {type(value).__name__} to JSON data")


def to_object(record: DataclassInstance) -> dict[str, JSONValue]:
    """The dataclass instance ``record`` as a JSON object (what :func:`to_data` makes of it)."""
    data: dict[str, JSONValue] = {}
    for spec in dataclasses.fields(record):
        item = getattr(record, spec.name)
        if spec.metadata.get("omit_empty") and not item:
            continue
        if spec.metadata.get("json") == "object":
            data[_stored_name(spec)] = {str(key): to_data(entry) for key, entry in item}
        else:
            data[_stored_name(spec)] = to_data(item)
    extras = getattr(record, "json_extras", None)
    if extras is not None:
        data.update(cast("dict[str, JSONValue]", extras()))
    return data


def from_data(cls: type[D], data: Mapping[str, object]) -> D:
    """An instance of the dataclass ``cls`` from data written by :func:`to_data`."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    values: dict[str, object] = {}
    for spec in dataclasses.fields(cls):
        stored = _stored_name(spec)
        key = stored if stored in data else spec.name
        if not spec.init or key not in data:
            continue
        raw = data[key]
        hint = hints[spec.name]
        if raw is None and not _optional(hint):
            if _has_default(spec):
                continue
            if hint is float:
                values[spec.name] = math.nan
                continue
        values[spec.name] = _read(hint, raw, f"{cls.__name__}.{spec.name}")
    return cls(**values)


@functools.cache
def _hints(cls: type[DataclassInstance]) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _has_default(spec: dataclasses.Field[object]) -> bool:
    return (spec.default is not dataclasses.MISSING
            or spec.default_factory is not dataclasses.MISSING)


def _optional(hint: object) -> bool:
    return _is_union(hint) and type(None) in typing.get_args(hint)


def _is_union(hint: object) -> bool:
    return typing.get_origin(hint) in (Union, types.UnionType)


def _read(hint: object, raw: object, where: str) -> object:
    if hint is typing.Any or hint is object:
        return raw
    if _is_union(hint):
        if raw is None:
            return None
        members = [member for member in typing.get_args(hint) if member is not type(None)]
        if len(members) == 1:
            return _read(members[0], raw, where)
        return raw  # a union of scalars (JSONScalar): JSON already gives the right type
    origin = typing.get_origin(hint)
    if origin is tuple:
        return _read_tuple(hint, raw, where)
    if isinstance(hint, type):
        if dataclasses.is_dataclass(hint):
            return from_data(hint, cast("Mapping[str, object]", raw))
        if issubclass(hint, enum.Enum):
            return hint(raw)
        if hint is float:
            return math.nan if raw is None else float(cast("float", raw))
        if hint is int and not isinstance(raw, bool):
            return int(cast("int", raw))
        if hint in (str, bool):
            if not isinstance(raw, hint):
                raise TypeError(f"{where}: expected {hint.__name__}, got {type(raw).__name__}")
            return raw
    return raw


def _read_tuple(hint: object, raw: object, where: str) -> tuple[object, ...]:
    args = typing.get_args(hint)
    if isinstance(raw, Mapping):
        raw = sorted(raw.items())
    if not isinstance(raw, (list, tuple)):
        raise TypeError(f"{where}: expected a list, got {type(raw).__name__}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_read(args[0], item, where) for item in raw)
    if len(args) != len(raw):
        raise TypeError(f"{where}: expected {len(args)} items, got {len(raw)}")
    return tuple(_read(arg, item, where) for arg, item in zip(args, raw, strict=True))
