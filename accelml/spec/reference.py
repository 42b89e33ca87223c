"""The spec reference: every key a spec file may hold, with its type, default and an example,
generated from the schema (:mod:`accelml.spec.schema`) and the records that own the defaults.

``experiments/SPEC-REFERENCE.md`` is this module's output; a test keeps the two the same::

    python -m accelml.spec.reference > experiments/SPEC-REFERENCE.md

>>> text = spec_reference()
>>> "| `target` | a string |" in text and "backend_params" in text
True
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Mapping
from importlib import resources as package_files

from accelml.cases import RepeatPolicy
from accelml.datasets.loaders import generated
from accelml.dl.config import TrainingConfig
from accelml.executors.cluster_settings import DEFAULTS_FILE
from accelml.spec.schema import (
    CASE_KEYS,
    DATASET_KEYS,
    DEFAULTS,
    EXAMPLES,
    EXPERIMENT_KEYS,
    REPEAT_KEYS,
)

Keys = Mapping[str, tuple[tuple[type, ...], str]]

_REPEAT_FIELDS = {"min": "min_repeats", "max": "max_repeats", "target": "target_rel", "confidence": "confidence",
                  "skip_warmup_after": "skip_warmup_after"}


def toml_value(value: object) -> str:
    """``value`` as TOML writes it inline.

    >>> toml_value({"xgboost": {"subsample": 0.8}}), toml_value([1, "a", True])
    ('{xgboost = {subsample = 0.8}}', '[1, "a", true]')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key} = {toml_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return repr(value)


def toml_document(document: Mapping[str, object]) -> str:
    """``document`` as a TOML file: its plain keys first, then a ``[key.name]`` section for
    each table of a table of tables and a ``[[key]]`` section for each table of an array of
    tables; every value inline (:func:`toml_value`).

    >>> print(toml_document({"datasets": {"d": {"source": "file"}}, "name": "x",
    ...                      "cases": [{"algorithm": ["kmeans"], "params": {"k": 2}}]}), end="")
    name = "x"
    <BLANKLINE>
    [datasets.d]
    source = "file"
    <BLANKLINE>
    [[cases]]
    algorithm = ["kmeans"]
    params = {k = 2}
    """
    def tables(value: object) -> list[tuple[str, Mapping[str, object]]]:
        if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
            return [(f".{name}", table) for name, table in value.items()]
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            return [("", table) for table in value]
        return []

    lines = [f"{key} = {toml_value(value)}" for key, value in document.items() if not tables(value)]
    for key, value in document.items():
        for name, table in tables(value):
            header = f"[{key}{name}]" if name else f"[[{key}]]"
            lines += ["", header, *(f"{k} = {toml_value(v)}" for k, v in table.items())]
    return "\n".join(lines) + "\n"


def owned_defaults() -> dict[str, str]:
    """Defaults read from their owners: the repeat policy, the data generator's signature and
    the training config."""
    policy = RepeatPolicy()
    found = {f"repeats.{key}": toml_value(getattr(policy, name)) for key, name in _REPEAT_FIELDS.items()}
    found["spec.repeats"] = (f"{{min = {policy.min_repeats}, max = {policy.max_repeats}, "
                             f"target = {policy.target_rel}}}")
    for name, parameter in inspect.signature(generated).parameters.items():
        if parameter.default is not inspect.Parameter.empty and name != "seed":
            found[f"datasets.{name}"] = "from the data" if parameter.default is None else toml_value(parameter.default)
    training = {field.name: field.default for field in dataclasses.fields(TrainingConfig)}
    for name in ("epochs", "batch_size", "learning_rate", "lr_scaling"):
        found[f"cases.{name}"] = toml_value(training[name])
    return found


def _default(path: str, owned: Mapping[str, str]) -> str:
    if path in owned:
        return f"`{owned[path]}`"
    return DEFAULTS[path]


def _table(section: str, keys: Keys, owned: Mapping[str, str], sources: Mapping[str, list[str]] | None = None
           ) -> list[str]:
    header = "| key | type | default | example |" if sources is None else \
        "| key | type | default | example | sources |"
    lines = [header, "|" + "---|" * (header.count(" | ") + 1)]
    for key, (_, description) in keys.items():
        path = f"{section}.{key}"
        cells = [f"`{key}`", description, _default(path, owned), f"`{key} = {toml_value(EXAMPLES[path])}`"]
        if sources is not None:
            cells.append(", ".join(sources[key]))
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return lines


def cluster_lines() -> list[str]:
    """The ``[cluster]`` keys with the defaults and notes of the packaged cluster YAML."""
    text = package_files.files("accelml.executors").joinpath(DEFAULTS_FILE).read_text()
    lines = ["| key | default | what |", "|---|---|---|"]
    section = ""
    for line in text.splitlines():
        match = re.match(r"^(?P<indent> *)(?P<key>[a-z-]+):\s*(?P<value>[^#]*?)\s*(?:#\s*(?P<note>.*))?$", line)
        if not match or len(match["indent"]) < 4:
            continue
        if not match["value"]:
            section = "resources." if match["key"] == "resources" else section
            continue
        key = (section if len(match["indent"]) > 4 else "") + match["key"]
        note = (match["note"] or "").replace("|", "\\|")
        lines.append(f"| `{key}` | `{match['value']}` | {note} |")
    return lines


def spec_reference() -> str:
    """The whole reference, as Markdown."""
    owned = owned_defaults()
    dataset_keys: dict[str, tuple[tuple[type, ...], str]] = {}
    sources: dict[str, list[str]] = {}
    for source, keys in DATASET_KEYS.items():
        for key, entry in keys.items():
            dataset_keys.setdefault(key, entry)
            sources.setdefault(key, []).append(source)
    parts = [
        "# Spec reference",
        "",
        "Generated from `accelml/spec/schema.py` by `python -m accelml.spec.reference` (a test keeps "
        "this file in sync). A spec is a TOML file: top-level keys, `[datasets.NAME]` tables, "
        "`[[cases]]` tables and an optional `[cluster]` table. Examples: `experiments/`; your own "
        "files: `experiments/own_data.toml`.",
        "",
        "## Top level",
        "",
        *_table("spec", EXPERIMENT_KEYS, owned),
        "",
        "## `repeats = {...}` (top level or in a case)",
        "",
        *_table("repeats", REPEAT_KEYS, owned),
        "",
        "## `[datasets.NAME]`",
        "",
        "`source` picks the keys a dataset may have (last column). `generated`: scikit-learn's "
        "`make_<generator>`; `shipped`: scikit-learn's bundled sets; `file`: `.npz` (arrays `x_key`, "
        "`y_key`), `.csv` or `.parquet` (column `target`), text labels make a classification set; "
        "`keras` and `openml`: downloaded, or read from `path`.",
        "",
        *_table("datasets", dataset_keys, owned, sources),
        "",
        "## `[[cases]]`",
        "",
        "`algorithm`, `backend`, `device`, `ranks`, `strategy` and `dataset` take one value or a "
        "list; every combination (times every `grid` combination) is one case. (`ranks` was "
        "`workers`: the old name is still read, with a warning.) `params` are "
        "accelml's parameter names (translated for each backend); `backend_params` are a library's "
        "own parameters, checked against its estimator's signature.",
        "",
        *_table("cases", CASE_KEYS, owned),
        "",
        "## `[cluster]` and `[cluster.resources]`",
        "",
        "Where cases run. The same keys (with `-`) live in `~/.config/dask/accelml.yaml` under "
        "`accelml: cluster:`; a site's dask-jobqueue config (`jobqueue.slurm`, `jobqueue.pbs`) "
        "gives the defaults of `walltime`, `queue`, `account`, `cores`, `memory`, and its "
        "`job-script-prologue` and `job-extra-directives` lines come first.",
        "",
        *cluster_lines(),
        "",
    ]
    return "\n".join(parts)


if __name__ == "__main__":
    print(spec_reference(), end="")
