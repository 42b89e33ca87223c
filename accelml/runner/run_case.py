"""The per-case process: ``python -m accelml run-case INPUT.json --output RESULT.json``.

It runs exactly one case and writes one JSON document (``{"result": CaseResult dict,
"arrays": [digest, ...]}``); the arrays (predictions, probabilities) are ``.npy`` files named
by digest in ``arrays_dir``. It never touches the results store: the client does that.

What is timed (seconds, ``time.perf_counter``):
  ``startup``  from the client spawning this process until it is ready to load data (1 sample)
  ``load``     reading the dataset (from the on-disk cache when it is there) (1 sample)
  ``fit``      ``estimator.fit(X_train, y_train)`` on a fresh clone, per counted repeat
  ``predict``  ``predict(X_test)`` (``transform`` for decomposition), result copied to host
               memory before the clock is read (that copy is the device sync), per repeat
Warm-up rounds run first and are stored apart (``warmup_samples``), never in the median.
Deterministic mode (``"deterministic": true`` in the input): the client has put the mode's
environment in place; here :func:`accelml.runner.determinism.apply` seeds Python and NumPy
before the data is loaded.
Threads: the client sets ``OMP_NUM_THREADS`` & co. before this process starts; here
threadpoolctl limits BLAS/OpenMP pools again and ``n_jobs`` is set when the algorithm takes
it and the spec did not; what the pools really use is recorded.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import signal
import threading
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from accelml import estimators
from accelml.cases import Case
from accelml.datasets import load_dataset
from accelml.errors import AccelmlError, ProcessKilled, TimeLimitExceeded, UnavailableError
from accelml.estimators import MeasureContext, Measurements, Turns, get_backend, task_of
from accelml.expectations import is_deep_learning
from accelml.results.records import (
    ArrayRef,
    CaseResult,
    FailureKind,
    PhaseTiming,
    utc_now,
)
from accelml.results.store import array_digest, array_to_npy_bytes
from accelml.runner.dask_workers import measure_on_workers
from accelml.runner.determinism import apply as apply_deterministic_mode
from accelml.runner.fingerprint import fingerprint
from accelml.runner.process import CaseDocument, CaseInput
from accelml.runner.rounds import clocked
from accelml.runner.scores import scores_for
from accelml.runner.stacks import STACKS_SIGNAL
from accelml.runner.timing import (
    GPUMemorySampler,
    host_copy,
    peak_host_memory_bytes,
    repeat_until_stable,
    setup_frozen,
)
from accelml.scratch import kill_tree

PREDICT_METHOD = {"decomposition": "transform"}


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def fitted_iterations(case: Case, estimator: estimators.Estimator) -> int | None:
    """The iterations the fit ran, from the attribute the implementation's record names
    (``n_iter_``; the largest entry when the library keeps one per class or target) or
    the function it gives (XGBoost's boosted rounds)."""
    implementation = get_backend(case.backend).implementations.get(case.algorithm)
    attribute = "" if implementation is None else implementation.iterations
    fitted = getattr(estimator, "estimator_", None)
    if callable(attribute):
        value = None if fitted is None else attribute(fitted)
    else:
        value = getattr(fitted, attribute, None) if attribute else None
    if value is None:
        return None
    values = np.asarray(value).ravel()
    return int(values.max()) if values.size else None


def _build_estimator(case: Case, threads: int | None) -> estimators.Estimator:
    """The case's estimator, with ``n_jobs = threads`` when the algorithm takes n_jobs on this
    backend and the spec did not set it (the thread pools are limited in any case)."""
    params = case.params_dict
    library_params = dict(case.library_params) or None
    if threads is not None and "n_jobs" not in params:
        try:
            return estimators.Estimator(case.algorithm, backend=case.backend, device=case.device,
                                        library_params=library_params, **params, n_jobs=threads)
        except AccelmlError:
            pass   # no n_jobs for this algorithm/backend: OpenMP/BLAS limits apply instead
    return estimators.Estimator(case.algorithm, backend=case.backend, device=case.device,
                                library_params=library_params, **params)


PRIMING_ROWS = 1000
"""Rows of the untimed priming fit that runs before a first run may count as a repeat."""


def _prime(template: estimators.Estimator, X: Any, y: Any, X_test: Any, fit_only: bool,
           predict_name: str) -> None:
    """Fit and predict once on the first :data:`PRIMING_ROWS` rows, untimed: the libraries'
    one-time costs (imports, thread pools, dispatch tables) are paid here, so a first full
    run that already takes seconds is a fair repeat (:func:`repeat_until_stable`'s
    ``skip_warmup_after``) and not a cold one."""
    from sklearn.base import clone

    rows = slice(0, PRIMING_ROWS)
    estimator = clone(template)
    try:
        if fit_only:
            estimator.fit_predict(X[rows])
        else:
            estimator.fit(X[rows], None if y is None else y[rows])
            getattr(estimator, predict_name)(X_test[rows])
    except Exception:  # noqa: BLE001 -- too few rows for this case (one class, k > rows): only priming
        pass


def _placed(case: Case, X_train: np.ndarray, X_test: np.ndarray) -> tuple[Any, Any, list[PhaseTiming]]:
    """The features where the case's backend trains from (:attr:`Backend.to_device`) and the
    timed ``place`` phase that copied them there; host arrays and no phase for most backends."""
    to_device = get_backend(case.backend).to_device(case.device)
    if to_device is None:
        return X_train, X_test, []
    started = time.perf_counter()
    placed = to_device(X_train), to_device(X_test)
    return (*placed, [PhaseTiming.from_samples("place", [time.perf_counter() - started])])


def measure_estimator(case: Case, context: MeasureContext) -> Measurements:
    """Load the data, then warm up and repeat fit and predict of one estimator."""
    from sklearn.base import clone

    started = time.perf_counter()
    data = load_dataset(case.dataset.name, case.dataset.source, dict(case.dataset.options),
                        cache_dir=context.cache_dir)
    load_seconds = time.perf_counter() - started
    task = task_of(case.algorithm)    # the algorithm's task; the data may serve several
    template = _build_estimator(case, context.threads)
    # Parameters derived from the data (fair_start's initial centroids) are drawn once,
    # before the timed fits, and kept with the result.
    derived = template.params_from_data(data.X_train)
    template.set_params(**derived)
    template, split = clocked(case, template)
    fit_only = not any(hasattr(template, m) for m in ("predict", "transform"))
    predict_name = PREDICT_METHOD.get(task, "predict")
    y_train = data.y_train if task in ("classification", "regression") else None
    X_train, X_test, placed = _placed(case, data.X_train, data.X_test)
    state: dict[str, Any] = {"digests": {}}

    def one_round(index: int) -> dict[str, float]:
        estimator = clone(template)
        gc.collect()
        t0 = time.perf_counter()
        if fit_only:
            labels = host_copy(estimator.fit_predict(X_train))
            t1 = time.perf_counter()
            timings = {"fit": t1 - t0}
            predictions = np.asarray(labels)
        else:
            estimator.fit(X_train, y_train)
            t1 = time.perf_counter()
            predictions = np.asarray(host_copy(getattr(estimator, predict_name)(X_test)))
            t2 = time.perf_counter()
            timings = {"fit": t1 - t0, "predict": t2 - t1}
            split.observe(index, estimator, t1 - t0)
        state["digests"][index] = array_digest(predictions)
        state["estimator"], state["predictions"] = estimator, predictions
        return timings

    policy = case.repeats
    if policy.warmup and policy.skip_warmup_after is not None:
        _prime(template, X_train, y_train, X_test, fit_only, predict_name)
    with setup_frozen():
        outcome = repeat_until_stable(
            one_round, min_repeats=policy.min_repeats, max_repeats=policy.max_repeats,
            target_rel=policy.target_rel, confidence=policy.confidence, warmup=policy.warmup,
            max_seconds=policy.max_seconds, deadline=context.deadline_monotonic,
            skip_warmup_after=policy.skip_warmup_after, turns=context.turns,
        )
    estimator, predictions = state["estimator"], state["predictions"]
    y_eval = data.y_train if fit_only else data.y_test
    scores, extra = scores_for(task, estimator, X_train if fit_only else X_test,
                               y_eval, predictions)
    timings = [PhaseTiming.from_samples("load", [load_seconds]), *placed]
    timings += [outcome.timings[phase] for phase in ("fit", "predict") if phase in outcome.timings]
    timings += split.timings(outcome.counted_rounds)
    arrays = [("predictions", predictions)] + sorted(extra.items()) + sorted(
        (name, value) for name, value in derived.items() if isinstance(value, np.ndarray))
    return Measurements(
        timings=tuple(timings), repeats=outcome.rounds, warmup=outcome.warmup_rounds,
        scores=tuple(scores), arrays=tuple(arrays),
        repeat_prediction_digests=tuple(state["digests"][i] for i in outcome.counted_rounds),
        dataset_info=data.info, task=task,
        stopped_because=outcome.stopped_because, iterations=fitted_iterations(case, estimator),
        warmup_note=outcome.warmup_note,
        boosting=split.record(outcome.counted_rounds),
    )


def _watch_parent() -> None:
    """End this process, and every process it started (a launcher and its ranks), if the
    client that started it dies (no orphaned, CPU-eating cases)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                kill_tree(os.getpid(), include_self=False)
                os._exit(70)

    threading.Thread(target=watch, daemon=True).start()


def _end_children_on_sigterm() -> None:
    """SIGTERM (the client's clean-up, ``scancel``) first kills what this process started
    (a launcher in a session of its own gets no signal of the batch system), then this
    process, by the same signal, so the client still sees which signal ended it."""

    def end(signum: int, frame: FrameType | None) -> None:
        kill_tree(os.getpid(), include_self=False)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, end)


def run_case(inputs: CaseInput) -> CaseDocument:
    """Run the case ``inputs`` describes (see :mod:`accelml.runner.process`); never raises."""
    ready = time.time()
    started_at = utc_now()
    load_at_start = os.getloadavg()[0]
    case = inputs.case
    arrays_dir = Path(inputs.arrays_dir)
    threads = inputs.threads
    spawned_at = ready if inputs.spawned_at is None else inputs.spawned_at
    startup = max(0.0, ready - spawned_at)
    deadline = None
    if inputs.time_limit_s:
        deadline = time.monotonic() + float(inputs.time_limit_s) - startup
    turns = None if inputs.turn_fds is None else Turns.from_fds(inputs.turn_fds)
    context = MeasureContext(inputs.cache_dir, str(arrays_dir.parent), deadline, threads, turns,
                             inputs.logs_dir)
    attempts = inputs.attempt
    pools: tuple[tuple[str, int], ...] = ()
    stored: list[str] = []
    try:
        from threadpoolctl import threadpool_info, threadpool_limits

        if inputs.deterministic:
            # The client already set the environment (before any library was imported here);
            # this seeds Python's and NumPy's global generators.
            apply_deterministic_mode(case, threads=threads)
        measurer = get_backend(case.backend).measurer or (
            measure_on_workers if case.ranks > 1 else measure_estimator)
        with GPUMemorySampler() as gpu_memory:
            if threads is not None:
                with threadpool_limits(limits=threads):
                    measured = measurer(case, context)
                    pools = tuple((f"{p['internal_api']}", int(p["num_threads"]))
                                  for p in threadpool_info())
            else:
                measured = measurer(case, context)
                pools = tuple((f"{p['internal_api']}", int(p["num_threads"]))
                              for p in threadpool_info())
        refs = []
        # inside the scratch folder its runner made, never that folder itself: a folder
        # swept since (its runner was killed) is not made again (FileNotFoundError)
        arrays_dir.mkdir(exist_ok=True)
        for name, array in measured.arrays:
            array = np.ascontiguousarray(array)
            digest = array_digest(array)
            (arrays_dir / f"{digest}.npy").write_bytes(array_to_npy_bytes(array))
            refs.append(ArrayRef(name, digest, str(array.dtype), tuple(array.shape)))
            stored.append(digest)
        task = measured.task or ("classification" if is_deep_learning(case) else "")
        result = CaseResult(
            run_id=inputs.run_id, case_id=case.case_id, algorithm=case.algorithm,
            backend=case.backend, device=case.device, dataset=case.dataset.name,
            ranks=case.ranks, strategy=case.strategy, params=case.params,
            library_params=case.library_params, started_at=started_at, attempts=attempts,
            container=case.container, status=CaseResult.OK, task=task,
            timings=(PhaseTiming.from_samples("startup", [startup]),) + measured.timings,
            repeats=measured.repeats, warmup=measured.warmup, scores=measured.scores,
            predictions=tuple(refs), repeat_prediction_digests=measured.repeat_prediction_digests,
            peak_host_memory_bytes=peak_host_memory_bytes(), peak_gpu_memory_bytes=gpu_memory.peak,
            threads=threads, thread_pools=pools, environment=fingerprint(threads),
            worker_peak_memory_bytes=measured.worker_peak_memory_bytes,
            workers_started_by=measured.workers_started_by,
            dataset_info=measured.dataset_info, dl=measured.dl, boosting=measured.boosting,
            finished_at=utc_now(),
            stopped_because=measured.stopped_because, iterations=measured.iterations,
            warmup_note=measured.warmup_note, host_load=(load_at_start, os.getloadavg()[0]),
        )
        document = CaseDocument(result, tuple(stored))
    except BaseException as error:  # any failure of the case becomes its recorded reason
        if isinstance(error, MemoryError):
            kind = FailureKind.MEMORY
        elif isinstance(error, UnavailableError):
            kind = FailureKind.UNAVAILABLE
        elif isinstance(error, ProcessKilled):
            kind = FailureKind.KILLED
        elif isinstance(error, TimeLimitExceeded):
            kind = FailureKind.TIMEOUT
        elif isinstance(error, KeyboardInterrupt):
            raise
        else:
            kind = FailureKind.ERROR
        result = CaseResult.failed(
            case, inputs.run_id, kind, _one_line(error), threads=threads, attempts=attempts,
            started_at=started_at, timings=(PhaseTiming.from_samples("startup", [startup]),),
            peak_host_memory_bytes=peak_host_memory_bytes(), environment=fingerprint(threads),
            host_load=(load_at_start, os.getloadavg()[0]),
        )
        document = CaseDocument(result, traceback=traceback.format_exc())
    return document


def main(input_path: str, output_path: str | None) -> int:
    _watch_parent()
    _end_children_on_sigterm()
    # Where a case hangs: the runner asks for every thread's stack before it kills a case
    # at its time limit, and keeps the innermost frames in the failure's reason.
    faulthandler.register(STACKS_SIGNAL, all_threads=True)
    with open(input_path) as handle:
        inputs = CaseInput.from_dict(json.load(handle))
    text = json.dumps(run_case(inputs).to_dict())
    if output_path is None:
        print(text)
    else:
        partial = output_path + ".partial"
        with open(partial, "w") as handle:
            handle.write(text)
        os.replace(partial, output_path)
    return 0
