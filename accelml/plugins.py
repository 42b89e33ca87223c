"""Plug-in discovery: one :class:`ExtensionPoint` per kind of plug-in, one record per plug-in.

accelml has four extension points (backends, DL strategies, schedulers, measures). Each is
an :class:`ExtensionPoint` declared next to its record type; a plug-in is a frozen record
(``Backend``, ``Strategy``, ``Scheduler``, ``Measure``) that the rest of the code reads.
Records are found two ways, benchopt-style:

* **by module**: every public module (name not starting with ``_``) of the extension
  point's package that defines the extension point's attribute (``BACKEND``, ``STRATEGY``,
  ...) as one record or a tuple of records;
* **by entry point**: ``[project.entry-points."accelml.backends"]`` (and ``accelml.strategies``,
  ``accelml.schedulers``, ``accelml.measures``) in a third party's ``pyproject.toml``; the
  entry point names a record (``pkg.mod:RECORD``) or a module holding the attribute.

A built-in module that fails to import is a bug and raises; a third party's entry point
that fails to load is soft-failed: it is listed by :meth:`ExtensionPoint.broken` with the
reason, and every other plug-in keeps working.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Thing:
...     name: str
>>> things = ExtensionPoint("thing", "accelml.things", "accelml.nothing_here", "THING", Thing)
>>> things.names(), things.broken()
((), ())
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import os
import pkgutil
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Generic, Protocol, TypeVar

from accelml.errors import AccelmlError


class Named(Protocol):
    """What every plug-in record has: the name specs and the CLI use."""

    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=Named)


@dataclass(frozen=True)
class BrokenPlugin:
    """A third party's entry point that could not be loaded, and why."""

    group: str
    entry_point: str
    reason: str


@dataclass(frozen=True)
class _Found(Generic[R]):
    records: tuple[R, ...]
    origins: tuple[str, ...]
    broken: tuple[BrokenPlugin, ...]


@dataclass(frozen=True)
class ExtensionPoint(Generic[R]):
    """Where plug-ins of one ``kind`` ('backend', 'strategy', ...) are found: ``package``
    modules defining ``attribute``, and the entry-point ``group``. Records must be instances
    of ``record_type``."""

    kind: str
    group: str
    package: str
    attribute: str
    record_type: type[R]

    def records(self) -> tuple[R, ...]:
        """Every plug-in, built-ins first (by module name), then third parties'."""
        return self._find().records

    def names(self) -> tuple[str, ...]:
        return tuple(record.name for record in self.records())

    def get(self, name: str) -> R:
        """The record called ``name``; :class:`AccelmlError` listing the choices otherwise."""
        for record in self.records():
            if record.name == name:
                return record
        raise AccelmlError(unknown_choice(self.kind, name, self.names()))

    def find(self, name: str) -> R | None:
        """The record called ``name``, or None."""
        return next((record for record in self.records() if record.name == name), None)

    def origin(self, name: str) -> str:
        """The module (or entry point) that defined ``name``."""
        found = self._find()
        for record, origin in zip(found.records, found.origins, strict=True):
            if record.name == name:
                return origin
        raise AccelmlError(unknown_choice(self.kind, name, self.names()))

    def broken(self) -> tuple[BrokenPlugin, ...]:
        """Third-party entry points of this group that failed to load, with the reason."""
        return self._find().broken

    def _find(self) -> _Found[R]:
        return _discover(self, _path_fingerprint(self.package))

    def _discover(self) -> _Found[R]:
        records: list[R] = []
        origins: list[str] = []
        broken: list[BrokenPlugin] = []
        for module in _package_modules(self.package):
            for record in self._records_of(module, module.__name__):
                records.append(record)
                origins.append(module.__name__)
        for entry in importlib.metadata.entry_points(group=self.group):
            try:
                loaded = entry.load()
                found = (self._records_of(loaded, entry.value) if isinstance(loaded, ModuleType)
                         else self._checked(loaded, entry.value))
            except Exception as error:  # a third party's bug must not break accelml
                broken.append(BrokenPlugin(self.group, f"{entry.name} = {entry.value}",
                                           f"{type(error).__name__}: {error}"))
                continue
            for record in found:
                records.append(record)
                origins.append(entry.value)
        seen: dict[str, str] = {}
        for record, origin in zip(records, origins, strict=True):
            if record.name in seen:
                raise AccelmlError(f"{self.group}: {record.name!r} is defined twice, by "
                                   f"{seen[record.name]} and by {origin}")
            seen[record.name] = origin
        return _Found(tuple(records), tuple(origins), tuple(broken))

    def _records_of(self, module: ModuleType, origin: str) -> tuple[R, ...]:
        if not hasattr(module, self.attribute):
            return ()
        return self._checked(getattr(module, self.attribute), origin)

    def _checked(self, value: object, origin: str) -> tuple[R, ...]:
        checked: list[R] = []
        for item in value if isinstance(value, tuple) else (value,):
            if not isinstance(item, self.record_type):
                raise AccelmlError(f"{origin}: {self.attribute} must be a "
                                   f"{self.record_type.__name__} (or a tuple of them), "
                                   f"not {type(item).__name__}")
            checked.append(item)
        return tuple(checked)


PathFingerprint = tuple[tuple[str, int], ...]


def _path_fingerprint(package: str) -> PathFingerprint:
    """``sys.path`` and ``package``'s own folders, each with its modification time: installing
    a distribution or adding a module there changes it, so discovery runs again; otherwise its
    answer is reused."""
    loaded = sys.modules.get(package)
    stamps = []
    for entry in [*sys.path, *getattr(loaded, "__path__", ())]:
        try:
            stamps.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            stamps.append((entry, 0))
    return tuple(stamps)


@functools.lru_cache(maxsize=32)
def _discover(point: ExtensionPoint[R], fingerprint: PathFingerprint) -> _Found[R]:
    """One discovery of ``point``'s records for the import path ``fingerprint`` (cached: a
    look-up by name sits on hot paths such as every cell of the agreement matrix)."""
    return point._discover()


def _package_modules(package: str) -> list[ModuleType]:
    try:
        root = importlib.import_module(package)
    except ModuleNotFoundError as error:
        if error.name is not None and package.startswith(error.name):
            return []
        raise
    paths = getattr(root, "__path__", None)
    if paths is None:
        return []
    return [importlib.import_module(f"{package}.{info.name}")
            for info in sorted(pkgutil.iter_modules(paths), key=lambda info: info.name)
            if not info.name.startswith("_")]


def unknown_choice(kind: str, given: object, choices: tuple[str, ...] | list[str]) -> str:
    """One line: ``unknown backend 'sklearnx' (did you mean 'sklearnex'?); choose from: ...``."""
    close = difflib.get_close_matches(str(given), [str(choice) for choice in choices], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {kind} {given!r}{hint}; choose from: {', '.join(map(str, choices))}"

