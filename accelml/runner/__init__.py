"""The runner: one isolated process per case, honest measurement, the environment fingerprint.

- :mod:`accelml.runner.process`: ``execute_case(CaseTask)``, run by an executor; starts the
  case process with its thread settings, enforces time and memory limits, classifies failures.
- :mod:`accelml.runner.run_case`: what runs inside that process (``python -m accelml run-case``).
- :mod:`accelml.runner.timing`: warm-up, adaptive repeats, device sync, peak memory.
- a backend that measures its own cases (keras) names its measurer in its record
  (``Backend.measurer``, :mod:`accelml.estimators._measurer`); the case process calls it.
- :mod:`accelml.runner.fingerprint`: the environment fingerprint and its hash.
"""
