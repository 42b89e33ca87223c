"""Build stored runs from real scikit-learn fits, without the runner (fast unit tests)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from accelml.results.records import ArrayRef, CaseResult, DatasetInfo, FailureKind, RunRecord, Score
from accelml.results.store import ResultsStore, array_digest, array_to_npy_bytes
from accelml.runner.fingerprint import fingerprint

_counter = itertools.count()


def new_run(store: ResultsStore, reference: str = "sklearn", name: str = "unit") -> str:
    run_id = f"unit-{next(_counter):04d}-{np.random.default_rng().integers(1 << 30):x}"
    store.create_run(RunRecord(run_id=run_id, spec_name=name, spec_hash="0" * 64,
                               spec_text="", reference_backend=reference,
                               created_at=f"2026-01-01T00:00:{next(_counter) % 60:02d}",
                               environment=fingerprint(1)))
    return run_id


def add_result(store: ResultsStore, run_id: str, *, algorithm: str, backend: str = "sklearn",
               device: str = "cpu", ranks: int = 1, dataset: str = "data", task: str = "",
               params: dict[str, Any] | None = None, arrays: dict[str, np.ndarray] | None = None,
               scores: dict[str, float] | None = None, repeat_arrays: list[np.ndarray] | None = None,
               case_id: str | None = None, status: str = "ok", reason: str = "",
               dl=None, strategy: str | None = None, dataset_task: str = "") -> CaseResult:
    """Store one case result with its arrays; ``repeat_arrays`` give the repeat digests;
    ``dataset_task`` records the data set's own task."""
    params = params or {}
    arrays = arrays or {}
    refs, blobs = [], {}
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        digest = array_digest(array)
        refs.append(ArrayRef(name, digest, str(array.dtype), tuple(array.shape)))
        blobs[digest] = array_to_npy_bytes(array)
    if repeat_arrays is None and "predictions" in arrays:
        repeat_arrays = [arrays["predictions"]] * 3
    digests = tuple(array_digest(np.ascontiguousarray(a)) for a in (repeat_arrays or []))
    identity = f"{algorithm}|{backend}|{device}|{ranks}|{dataset}|{sorted(params.items())}"
    result = CaseResult(
        run_id=run_id, case_id=case_id or array_digest(np.frombuffer(identity.encode(), np.uint8))[:16],
        algorithm=algorithm, backend=backend, device=device, dataset=dataset, status=status,
        task=task, ranks=ranks, strategy=strategy, params=tuple(sorted(params.items())),
        reason=reason, repeats=len(digests), scores=tuple(Score(k, float(v), True)
                                                          for k, v in (scores or {}).items()),
        predictions=tuple(refs), repeat_prediction_digests=digests,
        environment=fingerprint(1), dl=dl,
        dataset_info=DatasetInfo(name=dataset, digest="0" * 16, source="generated",
                                 task=dataset_task, n_train=0, n_test=0, n_features=0,
                                 n_classes=None, dtype="float64", layout="C")
        if dataset_task else None,
        failure=FailureKind.NONE if status == "ok" else FailureKind.ERROR,
    )
    store.add_case_result(result, blobs)
    return result
