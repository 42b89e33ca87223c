"""Experiment specs: TOML -> validated, frozen :class:`Experiment` with expanded :class:`Case` s.

>>> from accelml.spec import load_spec
>>> experiment = load_spec()           # the embedded default spec
>>> experiment.reference, len(experiment.cases) > 0
('sklearn', True)

- :mod:`accelml.spec.schema`: the dataclasses and the table of allowed keys.
- :mod:`accelml.spec.load`: parsing, validation (one-line :class:`~accelml.errors.SpecError`
  naming file, key path and what is allowed) and grid expansion.
- ``default.toml``: the spec ``python -m accelml compare`` runs without an argument.
"""

from accelml.cases import Case, DatasetSpec, Experiment, RepeatPolicy
from accelml.spec.load import load_spec, load_spec_text

__all__ = ["Case", "DatasetSpec", "Experiment", "RepeatPolicy", "load_spec", "load_spec_text"]
