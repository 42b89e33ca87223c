"""The environment of a run in a report: its fields as table rows, and what differs between two.

>>> from accelml.results.records import Environment
>>> env = Environment("3.11.9", "linux", "Xeon", 8, 4, 8, (("numpy", "2.4.6"),), hostname="a")
>>> dict(environment_fields(env))["CPU"]
'Xeon'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelml.results.records import Environment

HASHED_FIELDS = ("python", "platform", "cpu_model", "logical_cores", "physical_cores",
                 "libraries", "gpus")


@dataclass(frozen=True)
class EnvironmentDifference:
    """One field (or library) whose value differs between two environments."""

    field: str                  # "cpu_model", "library scikit-learn-intelex", ...
    this: str
    other: str
    in_hash: bool               # part of what names the environment (env_hash)

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "this": self.this, "other": self.other,
                "in_hash": self.in_hash}


def _gpu_text(environment: Environment) -> str:
    if not environment.gpus:
        return "none"
    return ", ".join(f"{gpu.model} (driver {gpu.driver}, {gpu.memory_mib} MiB)"
                     for gpu in environment.gpus)


def environment_fields(environment: Environment) -> list[tuple[str, str]]:
    """The fields of an environment as (name, text) rows for a table, libraries left out."""
    def text(value: Any) -> str:
        return "–" if value is None or value == "" else str(value)

    return [
        ("environment hash", environment.env_hash),
        ("hostname", text(environment.hostname)),
        ("SLURM job", text(environment.slurm_job_id)),
        ("python", environment.python),
        ("platform", environment.platform),
        ("CPU", environment.cpu_model),
        ("cores (logical / physical / usable)",
         (f"{environment.logical_cores} / {text(environment.physical_cores)} / "
         f"{environment.usable_cores}")),
        ("threads per case", text(environment.threads)),
        ("GPUs", _gpu_text(environment)),
    ]


def environment_differences(this: Environment | None, other: Environment | None
                            ) -> tuple[EnvironmentDifference, ...]:
    """The fields (and library versions) that differ between two environments.

    >>> from accelml.results.records import Environment
    >>> a = Environment("3.11.9", "linux", "Xeon", 8, 4, 8, (("numpy", "2.4.6"),), hostname="a")
    >>> b = Environment("3.11.9", "linux", "Xeon", 8, 4, 8, (("numpy", "2.5.0"),), hostname="b")
    >>> [(d.field, d.this, d.other, d.in_hash) for d in environment_differences(a, b)]
    [('hostname', 'a', 'b', False), ('library numpy', '2.4.6', '2.5.0', True)]
    """
    if this is None or other is None:
        if this is other:
            return ()
        return (EnvironmentDifference("environment", "recorded" if this else "not recorded",
                                      "recorded" if other else "not recorded", True),)
    found = []
    for name in ("hostname", "slurm_job_id", "python", "platform", "cpu_model", "logical_cores",
                 "physical_cores", "usable_cores", "threads"):
        a, b = getattr(this, name), getattr(other, name)
        if a != b:
            found.append(EnvironmentDifference(name, "–" if a is None else str(a),
                                               "–" if b is None else str(b),
                                               name in HASHED_FIELDS))
    if this.gpus != other.gpus:
        found.append(EnvironmentDifference("gpus", _gpu_text(this), _gpu_text(other), True))
    mine, theirs = dict(this.libraries), dict(other.libraries)
    for library in sorted(set(mine) | set(theirs)):
        if mine.get(library) != theirs.get(library):
            found.append(EnvironmentDifference(f"library {library}",
                                               mine.get(library, "not installed"),
                                               theirs.get(library, "not installed"), True))
    return tuple(found)
