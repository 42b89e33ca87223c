"""A results store with real runs for the report tests, written through the store's writer API.

The classical run times real scikit-learn and scikit-learn-intelex fits on sklearn's digits
(5 repeats after a warm-up), keeps their predictions, and has two failed cases whose reasons
come from a real failure (a ValueError, and a process killed at its time limit). The DL run
has the shape of a Horovod scaling run on 1, 2 and 4 ranks; its epoch times are measured
from what one rank does per epoch (an MLP trained with ``partial_fit`` on a 1/N shard of the
data), and its 8-worker case failed. The "other" run is the classical run as measured on a
second machine that is exactly twice as slow for sklearnex and twice as fast for sklearn, with
a different scikit-learn-intelex version and hostname, so the ratios of ``--against`` are known.
The "hostile" run puts markup and quotes in its spec name, dataset name, a parameter and a
failure reason, and was interrupted with one planned case never run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from _chromium import MISSING, Browser, BrowserError
from _stores import now, run_record, write_run

from accelml.results import (
    ArrayRef,
    CaseResult,
    DatasetInfo,
    DLMeasurements,
    EpochMeasurement,
    FailureKind,
    PhaseTiming,
    ResultsStore,
    RunRecord,
    Score,
)
from accelml.results.store import array_digest
from accelml.runner.fingerprint import fingerprint

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "report"
HOSTILE = "<script>alert(1)</script>\"'&<img src=x onerror=alert(2)>"
REPEATS = 5
ONE_WORKER = True
"""The report tests run on one xdist worker, in order (tests/conftest.py's work units): they read
one session-scoped store of runs (built once) and one Chromium, some of them in order."""


@dataclass(frozen=True)
class Runs:
    """The store and the ids of the runs in it."""

    directory: Path
    classical: str
    other: str
    dl: str
    hostile: str
    hostile_name: str = HOSTILE     # the markup used as spec, dataset, parameter and reason


def _case_id(*parts) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12]


def _digits_info(X, y, name="digits") -> DatasetInfo:
    return DatasetInfo(name=name, digest=array_digest(X)[:16], source="shipped",
                       task="classification", n_train=len(X), n_test=len(X),
                       n_features=X.shape[1], n_classes=int(len(set(y))), dtype=str(X.dtype),
                       layout="C")


def _measure(make_estimator, X, y, store: ResultsStore):
    """Warm-up, then REPEATS timed fits and predicts; returns timings, scores, predictions."""
    fit_samples, predict_samples, digests = [], [], []
    make_estimator().fit(X, y).predict(X)          # warm-up, not counted
    for _ in range(REPEATS):
        estimator = make_estimator()
        start = time.perf_counter()
        estimator.fit(X, y)
        fit_samples.append(time.perf_counter() - start)
        start = time.perf_counter()
        predictions = estimator.predict(X)
        predict_samples.append(time.perf_counter() - start)
        digests.append(array_digest(predictions))
    digest = store.put_array(predictions)
    timings = (PhaseTiming.from_samples("fit", fit_samples, target_rel=0.5),
               PhaseTiming.from_samples("predict", predict_samples, target_rel=0.5))
    accuracy = float(np.mean(predictions == y)) if y is not None else None
    reference = ArrayRef("predictions", digest, str(predictions.dtype), predictions.shape)
    return timings, accuracy, reference, tuple(digests)


def _classical_cases(store, run_id, environment, X, y, dataset_name="digits", extra_params=()):
    from sklearn.cluster import KMeans
    from sklearn.neighbors import KNeighborsClassifier
    from sklearnex.cluster import KMeans as PatchedKMeans
    from sklearnex.neighbors import KNeighborsClassifier as PatchedKNeighborsClassifier

    info = _digits_info(X, y, dataset_name)
    plan = [
        ("kmeans", "sklearn", lambda: KMeans(n_clusters=10, n_init=1, random_state=0),
         {"n_clusters": 10}),
        ("kmeans", "sklearnex", lambda: PatchedKMeans(n_clusters=10, n_init=1, random_state=0),
         {"n_clusters": 10}),
        ("knn_classifier", "sklearn", lambda: KNeighborsClassifier(n_neighbors=5),
         {"n_neighbors": 5}),
        ("knn_classifier", "sklearnex", lambda: PatchedKNeighborsClassifier(n_neighbors=5),
         {"n_neighbors": 5}),
    ]
    results = []
    for algorithm, backend, make, params in plan:
        params = tuple(sorted({**params, **dict(extra_params)}.items()))
        timings, accuracy, ref, digests = _measure(make, X, y if algorithm != "kmeans" else None,
                                                   store)
        scores = ()
        if algorithm != "kmeans":
            scores = (Score("accuracy", accuracy, True),)
        results.append(CaseResult(
            run_id=run_id, case_id=_case_id(algorithm, backend, "cpu", dataset_name, params),
            algorithm=algorithm, backend=backend, device="cpu", dataset=dataset_name,
            status="ok", task="clustering" if algorithm == "kmeans" else "classification",
            params=params, timings=timings, repeats=REPEATS, warmup=1, scores=scores,
            predictions=(ref,), repeat_prediction_digests=digests,
            peak_host_memory_bytes=200_000_000, threads=1, environment=environment,
            dataset_info=info, started_at=now(), finished_at=now()))
    return results


def _failed_cases(run_id, environment, dataset_name="digits"):
    """Two real failures: a ValueError of KMeans, and a process killed at its time limit."""
    import subprocess

    from sklearn.cluster import KMeans
    from sklearn.datasets import load_wine

    X_small, _ = load_wine(return_X_y=True)
    try:
        KMeans(n_clusters=500, n_init=1).fit(X_small)
        raise AssertionError("KMeans with more clusters than samples should fail")
    except ValueError as error:
        reason = f"ValueError: {error}"
    limit = 0.2
    start = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout=limit)
        raise AssertionError("the sleeping process should have been killed")
    except subprocess.TimeoutExpired:
        killed_after = time.perf_counter() - start
    return [
        CaseResult(run_id=run_id, case_id=_case_id("kmeans", "sklearn", "cpu", "wine", 500),
                   algorithm="kmeans", backend="sklearn", device="cpu", dataset="wine",
                   status="failed", failure=FailureKind.ERROR, reason=reason,
                   params=(("n_clusters", 500),), environment=environment,
                   started_at=now(), finished_at=now()),
        CaseResult(run_id=run_id, case_id=_case_id("random_forest_classifier", "sklearn", "cpu",
                                                   dataset_name),
                   algorithm="random_forest_classifier", backend="sklearn", device="cpu",
                   dataset=dataset_name, status="failed", failure=FailureKind.TIMEOUT,
                   reason=f"ran past its time limit of {limit} s (killed after "
                          f"{killed_after:.2f} s)", environment=environment, attempts=2,
                   started_at=now(), finished_at=now()),
    ]


def _scaled(timing: PhaseTiming, factor: float) -> PhaseTiming:
    return PhaseTiming.from_samples(timing.phase, [s * factor for s in timing.samples],
                                    [s * factor for s in timing.warmup_samples],
                                    target_rel=timing.target_rel)


def _dl_cases(store, run_id, environment):
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    X, y = (X[:900] / 16.0).astype(np.float32), y[:900]
    classes = np.unique(y)
    info = DatasetInfo(name="digits_images", digest=array_digest(X)[:16], source="shipped",
                       task="classification", n_train=len(X), n_test=len(X), n_features=64,
                       n_classes=10, dtype="float32", layout="C", feature_shape=(8, 8, 1))
    cases = []
    for ranks in (1, 2, 4):
        shard_X, shard_y = X[0::ranks], y[0::ranks]     # rank 0's shard
        model = MLPClassifier(hidden_layer_sizes=(32,), random_state=0, batch_size=32,
                              learning_rate_init=1e-3 * ranks)
        epochs = []
        for epoch in range(5):
            start = time.perf_counter()
            model.partial_fit(shard_X, shard_y, classes=classes)
            seconds = time.perf_counter() - start
            accuracy = float(model.score(X, y))
            epochs.append(EpochMeasurement(epoch=epoch, seconds=seconds, loss=float(model.loss_),
                                      accuracy=accuracy))
        counted = [e.seconds for e in epochs[1:]]
        timing = PhaseTiming.from_samples("epoch", counted, [epochs[0].seconds])
        predictions = model.predict(X)
        digest = store.put_array(predictions)
        dl = DLMeasurements(
            model="mlp", epochs=tuple(epochs), per_rank_batch_size=32, ranks=ranks,
            learning_rate=1e-3 * ranks, images_per_second=len(X) / timing.median,
            strategy="horovod" if ranks > 1 else None,
            rank_weight_digests=(hashlib.sha256(model.coefs_[0].tobytes()).hexdigest(),) * ranks,
            final_loss=epochs[-1].loss, final_accuracy=epochs[-1].accuracy,
            test_accuracy=epochs[-1].accuracy)
        cases.append(CaseResult(
            run_id=run_id, case_id=_case_id("mlp", ranks), algorithm="mlp", backend="keras",
            device="cpu", dataset="digits_images", status="ok", task="classification",
            ranks=ranks, strategy="horovod", params=(("epochs", 5),), timings=(timing,),
            repeats=len(counted), warmup=1,
            scores=(Score("accuracy", epochs[-1].accuracy, True),),
            predictions=(ArrayRef("predictions", digest, str(predictions.dtype),
                                  predictions.shape),),
            environment=environment, dataset_info=info, dl=dl, threads=ranks,
            started_at=now(), finished_at=now()))
    cases.append(CaseResult(
        run_id=run_id, case_id=_case_id("mlp", 8), algorithm="mlp", backend="keras",
        device="cpu", dataset="digits_images", status="failed", ranks=8, strategy="horovod",
        params=(("epochs", 5),), failure=FailureKind.KILLED,
        reason="horovodrun exited with signal 9 (SIGKILL) before rank 0 reported",
        environment=environment, started_at=now(), finished_at=now()))
    return cases


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> Runs:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _build_runs(tmp_path_factory.mktemp("report-store") / "accelml-results")


def _build_runs(directory: Path) -> Runs:
    from sklearn.datasets import load_digits

    store = ResultsStore(directory)
    environment = fingerprint(threads=1)
    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16.0, y[:600]

    classical_id = "20261126-050000-c1a551"
    cases = _classical_cases(store, classical_id, environment, X, y)
    cases += _failed_cases(classical_id, environment)
    write_run(store, run_record(classical_id, cases, environment), cases)

    other_id = "20261126-060000-0e7e12"
    libraries = tuple((name, "2099.0.0" if name == "scikit-learn-intelex" else version)
                      for name, version in environment.libraries)
    other_env = dataclasses.replace(environment, libraries=libraries, hostname="node-b17")
    other_cases = []
    for case in cases:
        factor = 2.0 if case.backend == "sklearnex" else 0.5
        other_cases.append(dataclasses.replace(
            case, run_id=other_id, environment=other_env,
            timings=tuple(_scaled(t, factor) for t in case.timings)))
    write_run(store, run_record(other_id, other_cases, other_env), other_cases)

    dl_id = "20261126-070000-d1d1d1"
    dl_cases = _dl_cases(store, dl_id, environment)
    write_run(store, run_record(dl_id, dl_cases, environment, spec_name="dl_scaling"), dl_cases)

    hostile_id = "20261126-080000-ba5e00"
    hostile_cases = _classical_cases(store, hostile_id, environment, X[:200], y[:200],
                                     dataset_name=HOSTILE, extra_params=(("solver", HOSTILE),))
    hostile_cases.append(CaseResult(
        run_id=hostile_id, case_id=_case_id("svc", HOSTILE), algorithm="svc", backend="sklearn",
        device="cpu", dataset=HOSTILE, status="failed", failure=FailureKind.ERROR,
        reason=f"ValueError: unknown dataset {HOSTILE}", environment=environment,
        started_at=now(), finished_at=now()))
    hostile_run = run_record(hostile_id, hostile_cases, environment, spec_name=HOSTILE,
                       status=RunRecord.INTERRUPTED)
    hostile_run = dataclasses.replace(hostile_run, planned_cases=len(hostile_cases) + 1,
                                      case_ids=hostile_run.case_ids + (_case_id("never ran"),))
    write_run(store, hostile_run, hostile_cases)
    return Runs(directory, classical_id, other_id, dl_id, hostile_id)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for every HTML test of the session."""
    try:
        chromium = Browser()
    except BrowserError as error:
        pytest.fail(str(error) if MISSING in str(error) else f"Chromium did not start: {error}")
    yield chromium
    chromium.close()
