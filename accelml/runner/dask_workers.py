"""Train a classical case on N workers of a dask cluster that the case process starts itself.

A case with ``ranks = N > 1`` whose backend trains the algorithm on several workers (its
implementation names an ``on_workers`` estimator, e.g. ``xgboost.dask``'s) is measured here,
in its own case process like every case. That process starts a private dask cluster of N
worker processes, partitions the data over them, trains through
:meth:`accelml.estimators.Estimator.fit_on_workers`, gathers the predictions and tears the
cluster down. The cluster belongs to the case rather than to the comparison's executor: a
case's workers must not be shared with other cases nor outlive it, and a job-queue job
already holds the N ranks of a multi-rank case (:class:`accelml.executors.resources.CaseNeeds`
gives such a case ``ranks = N``, one dask worker a rank), exactly as for a multi-rank deep-learning case.

How the workers start (:func:`launcher`):

- ``local-processes`` (default): N processes on this machine (a dask ``SpecCluster`` of
  nannies); on ``cuda`` worker i sees only the i-th visible GPU (``CUDA_VISIBLE_DEVICES``),
  so there is one worker per GPU and nothing more to install;
- ``srun`` / ``mpirun``: inside a job-queue job of N ranks (the job script exports
  ``ACCELML_RANK_LAUNCHER``) the scheduler runs in the case process and each rank runs
  ``python -m distributed.cli.dask_worker`` (one GPU per rank on ``cuda``); the ranks may
  be on several nodes.

Threads: each worker gets the case's ``threads`` (cores per rank); unset, local workers
split this machine's cores evenly and job-queue ranks take ``SLURM_CPUS_PER_TASK`` (else 1).

Timed phases (besides ``startup`` and ``load``, as for every case): ``place``, cutting
``X_train``, ``y_train`` and ``X_test`` into N row blocks and sending block i to worker i,
and where the backend trains from device memory (``Backend.to_device``: XGBoost on CUDA)
copying the feature blocks into each worker's GPU (one sample); ``fit``, training on the
placed blocks (per repeat); ``predict``, predicting the placed test rows and gathering
them into this process (per repeat). Each worker's peak resident memory is recorded
(``CaseResult.worker_peak_memory_bytes``), the case process's own in
``peak_host_memory_bytes``.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from accelml import estimators
from accelml.cases import Case
from accelml.datasets import load_dataset
from accelml.errors import AccelmlError, UnavailableError
from accelml.estimators import MeasureContext, Measurements, get_backend, task_of
from accelml.executors.tls import TemporaryCredentials
from accelml.probe import list_gpus
from accelml.results.records import PhaseTiming
from accelml.results.store import array_digest
from accelml.runner.rounds import clocked
from accelml.runner.scores import scores_for
from accelml.runner.stacks import PRELOAD, STACKS_DIR_VARIABLE
from accelml.runner.timing import host_copy, repeat_until_stable, setup_frozen

LOCAL_PROCESSES = "local-processes"
JOB_LAUNCHERS = ("srun", "mpirun")
LAUNCHER_VARIABLE = "ACCELML_RANK_LAUNCHER"
"""Set by a job-queue job of several ranks to the command that starts them (``srun``/``mpirun``)."""

WORKER_START_S = 120.0


def worker_environment() -> dict[str, str]:
    """Variables each worker process gets (the last two unless this process sets them):

    - quiet dask logs;
    - OpenMP threads that sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``). Spinning
      threads starve the thread that carries the workers' all-reduce once the workers'
      threads fill the cores: on 2 cores, 2 workers of 2 threads fitted 200k x 50 rows in
      21.9 s spinning and 2.8 s passive (1 worker: 1.2 s). On a 32-core GPU machine 2
      workers of 16 threads did not finish a 10M-row fit that one worker did in 40 s;
      passive, they took 68.5 s (1: 47.8 s);
    - blocking NCCL communicators (``NCCL_COMM_BLOCKING=1``, which overrides the config a
      program asks for). XGBoost (2.1+) makes its GPU workers' communicator non-blocking
      and, after each collective that NCCL reports still in progress, sleeps 5 ms before it
      polls again, so each of the all-reduces of a tree costs up to 5 ms. Blocking, NCCL
      returns once the collective is enqueued and XGBoost waits for it on the stream: on
      4 H200s, 10M x 50 rows, depth 8, a boosting round took 10 ms instead of 28 ms and the
      200-tree fit 3.44 s instead of 7.97 s (2 GPUs: 3.80 s instead of 6.24 s).

    >>> environment = worker_environment()
    >>> environment["DASK_LOGGING__DISTRIBUTED"], environment["NCCL_COMM_BLOCKING"] in ("0", "1")
    ('warning', True)
    """
    return {"DASK_LOGGING__DISTRIBUTED": "warning",
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
            "NCCL_COMM_BLOCKING": os.environ.get("NCCL_COMM_BLOCKING", "1")}


def launcher() -> str:
    """What starts the workers here: the job's rank launcher inside a job-queue job of
    several ranks, else local processes.

    >>> os.environ.pop(LAUNCHER_VARIABLE, None) and None
    >>> launcher()
    'local-processes'
    """
    named = os.environ.get(LAUNCHER_VARIABLE, "")
    return named if named in JOB_LAUNCHERS else LOCAL_PROCESSES


def threads_per_worker(threads: int | None, workers: int, how: str) -> int:
    """Threads of each worker: the case's ``threads``, else an even share of this machine's
    cores (local processes) or the job's cores per rank (job-queue ranks).

    >>> threads_per_worker(4, 2, "local-processes")
    4
    >>> threads_per_worker(None, 2, "local-processes") == max(1, (os.cpu_count() or 1) // 2)
    True
    """
    if threads is not None:
        return threads
    if how == LOCAL_PROCESSES:
        return max(1, (os.cpu_count() or 1) // workers)
    return int(os.environ.get("SLURM_CPUS_PER_TASK", "1") or 1)


def visible_gpus(workers: int) -> tuple[str, ...]:
    """The GPU ids local worker i is pinned to (the i-th visible GPU); an
    :class:`UnavailableError` where fewer than ``workers`` GPUs are visible."""
    found, reason = list_gpus()
    ids = [str(gpu.index) for gpu in found]
    if len(ids) < workers:
        raise UnavailableError(f"needs {workers} GPU(s), one per worker; {len(ids)} visible here"
                               + (f" ({reason})" if reason else ""))
    return tuple(ids[:workers])


def _peak_rss_bytes() -> int:
    """This process's peak resident memory (run on each worker)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


@contextmanager
def dask_cluster(workers: int, threads: int, device: str, how: str, workdir: str) -> Iterator[Any]:
    """A dask ``Client`` connected to ``workers`` fresh worker processes, closed on exit
    (local ones on this host's loopback; ranks of a job over mutual TLS, whose credentials
    are written under ``workdir``)."""
    from distributed import Client, Nanny, Scheduler, SpecCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)
    on_gpu = device == "cuda"
    if how == LOCAL_PROCESSES:
        gpus = visible_gpus(workers) if on_gpu else ("",) * workers
        specs = {f"worker-{index}": {"cls": Nanny, "options": {
            "nthreads": threads, "memory_limit": 0, "host": "127.0.0.1", "preload": [PRELOAD],
            "env": {**worker_environment(), **({"CUDA_VISIBLE_DEVICES": gpu} if on_gpu else {})}}}
            for index, gpu in enumerate(gpus)}
        scheduler = {"cls": Scheduler, "options": {"dashboard_address": None, "host": "127.0.0.1"}}
        with SpecCluster(workers=specs, scheduler=scheduler) as cluster, Client(cluster) as client:
            client.wait_for_workers(workers, timeout=WORKER_START_S)
            yield client
        return
    # The scheduler listens beyond this host: mutual TLS with credentials only this user
    # can read, in the case's own directory (which the ranks must see, as the job's do).
    with TemporaryCredentials.create(workdir) as credentials:
        security = credentials.security()
        scheduler = {"cls": Scheduler, "options": {"dashboard_address": None, "protocol": "tls://",
                                                    "security": security}}
        with SpecCluster(workers={}, scheduler=scheduler, security=security) as cluster, \
                Client(cluster, security=security) as client:
            command = _rank_command(how, workers, threads, on_gpu, cluster.scheduler_address) + [
                "--protocol", "tls://", "--tls-ca-file", credentials.ca_file,
                "--tls-cert", credentials.cert_file, "--tls-key", credentials.key_file]
            yield from _ranks_connected(client, command, workers, how)


def _ranks_connected(client: Any, command: list[str], workers: int, how: str) -> Iterator[Any]:
    """Start the ranks, yield ``client`` once all have connected, stop them afterwards."""
    ranks = subprocess.Popen(command, env={**os.environ, **worker_environment()},
                             start_new_session=True)
    try:
        _wait_for_ranks(client, ranks, workers, how)
        yield client
    finally:
        client.retire_workers(close_workers=True)
        try:
            ranks.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(ranks.pid, 9)
            ranks.wait()


def _rank_command(how: str, workers: int, threads: int, on_gpu: bool, address: str) -> list[str]:
    tool = shutil.which(how)
    if tool is None:
        raise UnavailableError(f"{how} is not on PATH (the job names it as its rank launcher)")
    worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads",
              str(threads), "--no-nanny", "--memory-limit", "0", "--no-dashboard",
              "--preload", PRELOAD]
    if how == "srun":
        gpus = ["--gpus-per-task=1"] if on_gpu else []
        return [tool, f"--ntasks={workers}", "--kill-on-bad-exit=1"] + gpus + worker
    as_root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    stacks = (STACKS_DIR_VARIABLE,) if STACKS_DIR_VARIABLE in os.environ else ()
    exported = [arg for name in ("PATH", "PYTHONPATH", *stacks, *worker_environment())
                for arg in ("-x", name)]
    return [tool, "-np", str(workers), "-bind-to", "none", "-map-by", "slot"] + as_root + exported + worker


def _wait_for_ranks(client: Any, ranks: subprocess.Popen[bytes], workers: int, how: str) -> None:
    deadline = time.monotonic() + WORKER_START_S
    while len(client.scheduler_info(n_workers=-1)["workers"]) < workers:
        if ranks.poll() is not None:
            raise RuntimeError(f"{how} ended (exit {ranks.returncode}) before its {workers} dask "
                               "workers connected")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{workers} dask workers started by {how} did not connect within "
                               f"{WORKER_START_S:.0f} s")
        time.sleep(0.1)


def place(client: Any, array: np.ndarray, addresses: list[str],
          to_device: Callable[[np.ndarray], object] | None = None) -> Any:
    """``array`` as a dask array of ``len(addresses)`` row blocks, block i held by worker i
    (sent now: the call returns once every block is on its worker), and with ``to_device``
    (:attr:`accelml.estimators.Backend.to_device`) copied into that worker's device memory."""
    import dask.array as da
    from dask.delayed import delayed
    from distributed import wait

    blocks = np.array_split(array, len(addresses))
    futures = [client.scatter(block, workers=[address], direct=True)
               for block, address in zip(blocks, addresses, strict=True)]
    meta = None
    if to_device is not None:
        futures = [client.submit(to_device, future, workers=[address], pure=False)
                   for future, address in zip(futures, addresses, strict=True)]
        wait(futures)
        meta = client.submit(_empty_like, futures[0], workers=[addresses[0]]).result()
    return da.concatenate([da.from_delayed(delayed(future), shape=block.shape, dtype=block.dtype,
                                           meta=meta)
                           for future, block in zip(futures, blocks, strict=True)])


def _empty_like(block: Any) -> Any:
    """No rows of ``block``, of its array type (dask's ``meta`` of a device-array collection)."""
    return block[:0]


def measure_on_workers(case: Case, context: MeasureContext) -> Measurements:
    """Load the data, start the case's cluster, place the data, then warm up and repeat
    fit and predict on the workers."""
    from sklearn.base import clone

    task = task_of(case.algorithm)
    how = launcher()
    threads = threads_per_worker(context.threads, case.ranks, how)
    params: dict[str, object] = dict(case.params_dict)
    implementation = get_backend(case.backend).implementations[case.algorithm]
    if "n_jobs" in implementation.params and "n_jobs" not in params:
        params["n_jobs"] = threads
    template = estimators.Estimator(case.algorithm, backend=case.backend, device=case.device,
                                    library_params=dict(case.library_params) or None, **params)
    template.check_available()
    template, split = clocked(case, template)
    started = time.perf_counter()
    data = load_dataset(case.dataset.name, case.dataset.source, dict(case.dataset.options),
                        cache_dir=context.cache_dir)
    load_seconds = time.perf_counter() - started
    if data.y_train is None:
        raise AccelmlError(f"{case.algorithm} trains on labelled data; dataset "
                           f"{case.dataset.name!r} has no labels")
    library = implementation.on_workers.partition(":")[0]
    with dask_cluster(case.ranks, threads, case.device, how, context.workdir) as client:
        addresses = sorted(client.scheduler_info(n_workers=-1)["workers"])
        client.run(importlib.import_module, library)   # imported before any clock starts
        if split.clock is not None:
            client.run(split.clock.library_params)       # and the round clock's module
        to_device = get_backend(case.backend).to_device(case.device)
        started = time.perf_counter()
        X_train = place(client, data.X_train, addresses, to_device)
        X_test = place(client, data.X_test, addresses, to_device)
        y_train = place(client, data.y_train, addresses)
        place_seconds = time.perf_counter() - started
        state: dict[str, Any] = {"digests": []}

        def one_round(index: int) -> dict[str, float]:
            estimator = clone(template)
            gc.collect()
            t0 = time.perf_counter()
            estimator.fit_on_workers(client, X_train, y_train)
            t1 = time.perf_counter()
            predictions = np.asarray(host_copy(estimator.predict(X_test)))
            t2 = time.perf_counter()
            if index >= 0:
                state["digests"].append(array_digest(predictions))
            state["estimator"], state["predictions"] = estimator, predictions
            split.observe(index, estimator, t1 - t0)
            return {"fit": t1 - t0, "predict": t2 - t1}

        policy = case.repeats
        with setup_frozen():
            outcome = repeat_until_stable(
                one_round, min_repeats=policy.min_repeats, max_repeats=policy.max_repeats,
                target_rel=policy.target_rel, confidence=policy.confidence, warmup=policy.warmup,
                max_seconds=policy.max_seconds, deadline=context.deadline_monotonic,
                turns=context.turns,
            )
        predictions = state["predictions"]
        scores, extra = scores_for(task, state["estimator"], X_test, data.y_test, predictions)
        peaks = client.run(_peak_rss_bytes)
        worker_peaks = tuple(int(peaks[address]) for address in addresses)
    timings = (PhaseTiming.from_samples("load", [load_seconds]),
               PhaseTiming.from_samples("place", [place_seconds]),
               outcome.timings["fit"], outcome.timings["predict"],
               *split.timings(outcome.counted_rounds))
    boosting = split.record(outcome.counted_rounds)
    return Measurements(
        timings=timings, repeats=outcome.rounds, warmup=outcome.warmup_rounds,
        scores=tuple(scores), arrays=(("predictions", predictions), *sorted(extra.items())),
        repeat_prediction_digests=tuple(state["digests"]), dataset_info=data.info, task=task,
        stopped_because=outcome.stopped_because, worker_peak_memory_bytes=worker_peaks,
        workers_started_by=how, boosting=boosting,
        iterations=None if boosting is None else boosting.rounds,   # the booster's own count
    )
