"""The spec reference (experiments/SPEC-REFERENCE.md) is generated from the schema and kept in sync;
every key has a type, a default and an example of the right type."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelml.spec.reference import owned_defaults, spec_reference
from accelml.spec.schema import CASE_KEYS, DATASET_KEYS, DEFAULTS, EXAMPLES, EXPERIMENT_KEYS, REPEAT_KEYS

REPO = Path(__file__).resolve().parents[2]


def every_key():
    tables = {"spec": EXPERIMENT_KEYS, "repeats": REPEAT_KEYS, "cases": CASE_KEYS}
    keys = {f"{section}.{key}": entry for section, table in tables.items() for key, entry in table.items()}
    for table in DATASET_KEYS.values():
        keys.update({f"datasets.{key}": entry for key, entry in table.items()})
    return keys


def test_the_docs_file_is_the_generated_reference():
    written = (REPO / "experiments" / "SPEC-REFERENCE.md").read_text()
    assert written == spec_reference(), "regenerate: python -m accelml.spec.reference > experiments/SPEC-REFERENCE.md"


@pytest.mark.parametrize("path", sorted(every_key()))
def test_every_key_has_a_default_and_an_example_of_its_type(path):
    types, _ = every_key()[path]
    assert path in owned_defaults() or path in DEFAULTS
    example = EXAMPLES[path]
    assert isinstance(example, types) and (bool in types or not isinstance(example, bool))


def test_no_stale_entries():
    keys = set(every_key())
    assert set(EXAMPLES) == keys
    assert set(DEFAULTS) <= keys and not set(DEFAULTS) & set(owned_defaults())


def test_the_reference_names_every_key_and_file_keys_with_their_sources():
    text = spec_reference()
    for path in every_key():
        assert f"| `{path.split('.', 1)[1]}` |" in text, path
    assert "| `x_key` | a string | X | `x_key = \"features\"` | file |" in text
    assert "| `resources.job-script-prologue` |" in text
