"""Result records (:mod:`accelml.results.records`) and the SQLite store (:mod:`accelml.results.store`)."""

from accelml.results.records import (
    SCHEMA_VERSION,
    ArrayRef,
    CaseResult,
    ContainerImage,
    DatasetInfo,
    DLMeasurements,
    Environment,
    EpochMeasurement,
    FailureKind,
    PhaseTiming,
    RunRecord,
    Score,
)
from accelml.results.store import DEFAULT_RESULTS_DIR, ResultsStore, array_digest

__all__ = [
    "SCHEMA_VERSION", "ArrayRef", "CaseResult", "DatasetInfo", "DLMeasurements", "ContainerImage", "Environment",
    "EpochMeasurement", "FailureKind", "PhaseTiming", "RunRecord", "Score", "DEFAULT_RESULTS_DIR",
    "ResultsStore", "array_digest",
]
