"""Record types of accelml results: what one run and one case measured, with a schema version.

These frozen dataclasses are the contract between the runner (which produces them), the
results store (which keeps them) and every reader (report, check, the reproducibility
measures). A reader needs nothing but this module and :mod:`accelml.results.store`.

The types
---------
``RunRecord``
    One comparison: ``run_id``, the spec it came from (name, path, full text and hash),
    the reference backend, the client's ``Environment``, ``status`` (``running`` /
    ``finished`` / ``interrupted``), the number of planned cases and when it started.
``CaseResult``
    One case of a run, keyed by ``(run_id, case_id)``. What defines the case
    (``algorithm``, ``task``, ``backend``, ``device``, ``ranks``, ``strategy``,
    ``dataset``, ``params``), ``status`` (``"ok"`` or ``"failed"``) with ``failure``
    (``FailureKind``) and a one-line ``reason``; ``timings`` (one ``PhaseTiming`` per
    phase: ``startup``, ``load``, ``place``, ``fit``, ``predict``, ``epoch``), ``repeats`` and
    ``warmup`` (rounds counted and not), ``stopped_because`` (why repeating stopped:
    ``converged``, ``max_repeats``, ``max_seconds``, ``time_limit``, ``fixed``) and
    ``warmup_note`` (why a phase's first run was counted rather than thrown away as warm-up:
    it already took seconds); ``measurement`` (``interleaved``: its rounds alternated with
    those of the other cases of ``turn_group``, each in its own warm process, so its samples
    pair round by round with theirs (:func:`paired_ratio`); ``isolated``: all its rounds back
    to back, ``measurement_note`` saying why where interleaving was asked for);
    ``iterations`` (what the fit of an iterative algorithm ran:
    ``n_iter_`` and the like, the implementation's record names it); ``scores``
    (``Score``); ``predictions`` (``ArrayRef``: content digests of arrays kept beside
    the store) and ``repeat_prediction_digests`` (the digest of the predictions of every
    counted repeat, for run-to-run identity); ``peak_host_memory_bytes``,
    ``peak_gpu_memory_bytes`` (``None`` without a GPU), ``worker_peak_memory_bytes`` (the peak
    resident memory of each dask worker process of a classical case trained on several
    ranks) and ``workers_started_by`` (what started those workers: ``local-processes``, ``srun``,
    ``mpirun``); ``threads``; ``environment``
    (``Environment``, whose ``env_hash`` names it); ``dataset_info`` (``DatasetInfo``:
    digest, shape, dtype, memory layout); ``dl`` (``DLMeasurements`` for Keras cases:
    per-epoch times, loss and accuracy, images/s, per-rank weight digests, global batch
    = per-rank batch x ranks); ``boosting`` (``BoostingRounds`` for boosting fits whose
    backend times its rounds apart from its set-up: the rounds trained and the median
    set-up and per-round seconds).
``PhaseTiming``
    ``samples`` (seconds of every counted repeat, warm-up excluded), ``warmup_samples``,
    and what is derived from them: ``median``, ``q1``/``q3`` (the spread shown),
    ``minimum``/``maximum``, the confidence interval of the median ``ci_low``/``ci_high``
    at level ``ci_level`` and ``ci_halfwidth_rel`` (its larger half-width / median).
    ``noisy`` is True when that half-width stayed above the target the case asked for
    (and above ``TIMER_NOISE_FLOOR_S``, a millisecond).

Every type has ``to_dict()`` (plain JSON-able data) and ``from_dict()``; ``CaseResult``
and ``RunRecord`` also have ``to_json()`` / ``from_json()``. ``SCHEMA_VERSION`` is stored
with every record; ``from_dict`` refuses a record of a newer schema.

>>> timing = PhaseTiming.from_samples("fit", [1.0, 1.02, 0.98], target_rel=0.05)
>>> round(timing.median, 2), timing.count, timing.noisy
(1.0, 3, False)
>>> PhaseTiming.from_dict(timing.to_dict()) == timing
True
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum

from accelml.cases import ISOLATED, Case, Container, JSONScalar, canonical_json, case_label
from accelml.convert import OBJECT, OMIT_NONE, OPTIONAL_OBJECT, JSONRecord, JSONValue, from_data, stored_as

SCHEMA_VERSION = 2
"""2: a case result says how it was measured (``measurement``, ``turn_group``: interleaved
rounds with the cases of its comparison group, or isolated); records of version 1 read as
isolated."""


PHASES = ("startup", "load", "place", "fit", "setup", "predict", "epoch")
"""Phases a case may time. ``startup``: process start until the runner is ready (one sample);
``load``: dataset load or cache read (one sample); ``place``: sending the data's row blocks to
the workers of a case trained on several workers (one sample); ``fit`` / ``predict``: one sample per counted
repeat; ``setup``: the part of each ``fit`` before and after its boosting rounds (building the
DMatrix, starting the tracker and communicator of xgboost.dask; see ``BoostingRounds``);
``epoch``: one sample per counted epoch (the first epoch is warm-up)."""


TIMER_NOISE_FLOOR_S = 0.001
"""Below this half-width (seconds) a median's interval counts as precise whatever its relative
width: jitter of a millisecond is what the scheduler and the clock add to any call, so a
+-5% target on a 2 ms predict would never be met and would only burn repeats."""


def utc_now() -> str:
    """Now as the records store it: ISO 8601, UTC, milliseconds.

    >>> utc_now().endswith("+00:00") and len(utc_now()) == 29
    True
    """
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class FailureKind(str, Enum):
    """Why a case failed; ``NONE`` for a case that succeeded."""

    NONE = ""
    ERROR = "error"              # the case raised (bad parameter, library error, ...)
    TIMEOUT = "timeout"          # it ran past its time limit and was killed
    MEMORY = "memory"            # killed for memory (MemoryError, or SIGKILL by the OOM killer)
    KILLED = "killed"            # its process died by a signal or exited without a result
    UNAVAILABLE = "unavailable"  # the backend or device is not available on this machine
    LOST = "lost"                # the worker running it was lost, also after retries


class SchemaError(ValueError):
    """A stored record that this version of accelml cannot read."""


def _check_schema(data: Mapping[str, object], kind: str) -> None:
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise SchemaError(f"{kind} has schema version {version!r}, not an integer")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{kind} has schema version {version}; this accelml reads up to {SCHEMA_VERSION}"
        )


def _binomial_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return float(sum(math.comb(n, i) for i in range(0, k + 1)) / 2**n)


def median_confidence_interval(
    samples: list[float] | tuple[float, ...], confidence: float = 0.95
) -> tuple[float, float, float]:
    """Confidence interval of the median at ``confidence``: ``(low, high, level)``.

    With enough samples for that level (6 at 95%), distribution-free from order statistics:
    the narrowest ``[x_(k), x_(n-k+1)]`` whose coverage is at least ``confidence``, and
    ``level`` its exact coverage. With fewer, no order-statistic interval reaches the level
    (``[min, max]`` of 3 samples covers the median 75% of the time), so the interval is
    Student's t on the samples around their median, ``median +- t * s / sqrt(n)``, at
    ``confidence``: a stop rule that ends after 3 repeats then stops only where 3 samples
    agree closely enough to be as sure as 6 would be. One sample: no interval (level 0).

    >>> median_confidence_interval([1.0, 1.01, 0.99])
    (0.9751..., 1.0248..., 0.95)
    >>> low, high, level = median_confidence_interval(list(range(20)))
    >>> (low, high, round(level, 3))
    (5, 14, 0.959)
    """
    ordered = sorted(samples)
    n = len(ordered)
    if n == 0:
        raise ValueError("no samples")
    if n == 1:
        return ordered[0], ordered[0], 0.0
    min_max_level = 1.0 - 2.0 * 0.5**n
    if min_max_level < confidence:
        from scipy.stats import t as student_t

        median = statistics.median(ordered)
        halfwidth = float(student_t.ppf(0.5 + confidence / 2, n - 1)) * statistics.stdev(ordered) / math.sqrt(n)
        return median - halfwidth, median + halfwidth, confidence
    best = (ordered[0], ordered[-1], min_max_level)
    # k is the 1-based rank of the lower bound; coverage = 1 - 2 * P(X <= k - 1).
    for k in range(2, n // 2 + 1):
        level = 1.0 - 2.0 * _binomial_cdf_half(k - 1, n)
        if level < confidence:
            break
        best = (ordered[k - 1], ordered[n - k], level)
    return best


@dataclass(frozen=True)
class PairedRatio:
    """The median of per-round ratios ``reference / case`` of two interleaved cases, with the
    confidence interval of that median (:func:`median_confidence_interval` on the ratios)."""

    value: float
    low: float
    high: float
    level: float
    rounds: int

    @property
    def halfwidth_rel(self) -> float:
        """The interval's larger half-width relative to the median ratio."""
        if self.value <= 0 or self.rounds < 2:
            return math.inf
        return max(self.value - self.low, self.high - self.value) / self.value


def paired_ratio(reference: tuple[float, ...] | list[float], samples: tuple[float, ...] | list[float],
                 confidence: float = 0.95) -> PairedRatio | None:
    """``reference[i] / samples[i]`` per round, its median and that median's interval.

    Samples of interleaved cases are kept in round order and every case times every phase in
    the last round, so the rounds pair from the end: a case whose first run already counted
    (it took seconds) has one sample more of that phase than a case that warmed up first.
    None when a round has no positive time or fewer than one round pairs.

    >>> found = paired_ratio([2.0, 2.2, 1.8, 2.0], [1.0, 1.1, 0.9, 1.0])
    >>> found.value, found.low, found.high, found.rounds
    (2.0, 2.0, 2.0, 4)
    >>> paired_ratio([3.0, 2.0, 2.0], [1.0, 1.0]).rounds
    2
    """
    count = min(len(reference), len(samples))
    if count == 0:
        return None
    pairs = list(zip(reference[len(reference) - count:], samples[len(samples) - count:], strict=True))
    if any(mine <= 0 for _, mine in pairs):
        return None
    ratios = [theirs / mine for theirs, mine in pairs]
    low, high, level = median_confidence_interval(ratios, confidence)
    return PairedRatio(statistics.median(ratios), max(low, 0.0), high, level, count)


def _quantile(ordered: list[float], q: float) -> float:
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class PhaseTiming(JSONRecord):
    """Wall-clock seconds of one phase over the counted repeats, and the figures derived from them."""

    phase: str
    samples: tuple[float, ...]
    warmup_samples: tuple[float, ...] = ()
    median: float = math.nan
    q1: float = math.nan
    q3: float = math.nan
    minimum: float = math.nan
    maximum: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    ci_level: float = 0.0
    ci_halfwidth_rel: float = math.inf
    target_rel: float | None = None
    noisy: bool = False

    @classmethod
    def from_samples(
        cls,
        phase: str,
        samples: list[float] | tuple[float, ...],
        warmup_samples: list[float] | tuple[float, ...] = (),
        *,
        confidence: float = 0.95,
        target_rel: float | None = None,
    ) -> PhaseTiming:
        """Derive median, spread and the median's confidence interval from raw samples.

        ``target_rel`` is the half-width (relative to the median) the interval should reach;
        ``noisy`` is set when it did not. Phases measured once (startup, load) pass ``None``.
        """
        samples = tuple(float(s) for s in samples)
        if not samples:
            raise ValueError(f"phase {phase!r} has no samples")
        ordered = sorted(samples)
        median = statistics.median(ordered)
        low, high, level = median_confidence_interval(ordered, confidence)
        low = max(low, 0.0)   # Student's t on 2-5 spread samples can reach below zero seconds
        if median > 0:
            halfwidth = max(median - low, high - median) / median
        else:
            halfwidth = 0.0 if low == high else math.inf
        halfwidth_s = max(median - low, high - median)
        noisy = target_rel is not None and (
            len(samples) < 2 or (halfwidth > target_rel and halfwidth_s > TIMER_NOISE_FLOOR_S))
        return cls(
            phase=phase,
            samples=samples,
            warmup_samples=tuple(float(s) for s in warmup_samples),
            median=median,
            q1=_quantile(ordered, 0.25),
            q3=_quantile(ordered, 0.75),
            minimum=ordered[0],
            maximum=ordered[-1],
            ci_low=low,
            ci_high=high,
            ci_level=level,
            ci_halfwidth_rel=halfwidth,
            target_rel=target_rel,
            noisy=noisy,
        )

    @property
    def count(self) -> int:
        return len(self.samples)

    def converged(self, target_rel: float) -> bool:
        """True when the median's interval is within ``target_rel`` of the median, or within
        :data:`TIMER_NOISE_FLOOR_S` of it (needs 2+ samples)."""
        halfwidth_s = max(self.median - self.ci_low, self.ci_high - self.median)
        return self.count >= 2 and (self.ci_halfwidth_rel <= target_rel
                                    or halfwidth_s <= TIMER_NOISE_FLOOR_S)


@dataclass(frozen=True)
class Score(JSONRecord):
    """One quality figure of a case (accuracy, r2, inertia, log_loss, ...)."""

    name: str
    value: float
    higher_is_better: bool


@dataclass(frozen=True)
class ArrayRef(JSONRecord):
    """An array kept beside the store under its content digest (see ``store.array_digest``)."""

    name: str            # "predictions", "probabilities", "labels", ...
    digest: str          # sha256 hex of dtype, shape and C-order bytes
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class DatasetInfo(JSONRecord):
    """What data a case ran on: its content digest, shape, dtype and memory layout."""

    name: str
    digest: str
    source: str              # "generated", "shipped", "file", "keras", "openml"
    task: str                # "classification", "regression", "clustering"
    n_train: int
    n_test: int
    n_features: int
    n_classes: int | None
    dtype: str
    layout: str              # "C", "F" or "csr"
    feature_shape: tuple[int, ...] = ()   # per-sample shape for images, e.g. (28, 28, 1)


@dataclass(frozen=True)
class GPUDevice(JSONRecord):
    model: str
    driver: str
    memory_mib: int


@dataclass(frozen=True)
class ContainerImage(JSONRecord):
    """The container image a case ran in: its runtime (and version), path and content digest."""

    runtime: str
    runtime_version: str
    image: str
    digest: str

    @property
    def label(self) -> str:
        """``runtime:image-name@digest-prefix``.

        >>> ContainerImage("charliecloud", "0.31", "/img/bookworm", "sha256:0123456789abcdef").label
        'charliecloud:bookworm@0123456789ab'
        """
        return (f"{self.runtime}:{self.image.rstrip('/').rsplit('/', 1)[-1]}"
                f"@{self.digest.partition(':')[2][:12]}")


@dataclass(frozen=True)
class Environment(JSONRecord):
    """Where a result was measured. ``env_hash`` names the software + hardware environment.

    The hash covers python, platform, CPU model, core counts, library versions and GPUs; it
    leaves out ``hostname``, ``slurm_job_id`` and ``threads`` so that the same software on the
    same kind of node gets the same name.
    """

    python: str
    platform: str
    cpu_model: str
    logical_cores: int
    physical_cores: int | None
    usable_cores: int                          # cores in this process's affinity mask
    libraries: tuple[tuple[str, str], ...]     # (distribution, version), sorted
    gpus: tuple[GPUDevice, ...] = ()
    hostname: str = ""
    slurm_job_id: str | None = None
    threads: int | None = None                 # threads this case was allowed to use
    container: ContainerImage | None = field(default=None, metadata=OMIT_NONE)   # the image it ran in

    @property
    def env_hash(self) -> str:
        identity = {
            "python": self.python,
            "platform": self.platform,
            "cpu_model": self.cpu_model,
            "logical_cores": self.logical_cores,
            "physical_cores": self.physical_cores,
            "libraries": [list(item) for item in self.libraries],
            "gpus": [gpu.to_dict() for gpu in self.gpus],
        }
        if self.container is not None:   # (left out on the host: older hashes stay as they were)
            identity["container"] = {"runtime": self.container.runtime, "digest": self.container.digest}
        return hashlib.sha256(canonical_json(identity).encode()).hexdigest()[:16]

    def library_version(self, name: str) -> str | None:
        return dict(self.libraries).get(name)

    def json_extras(self) -> dict[str, JSONValue]:
        """Written beside the fields (:mod:`accelml.convert`), for readers of the raw JSON."""
        return {"env_hash": self.env_hash}


@dataclass(frozen=True)
class EpochMeasurement(JSONRecord):
    """One training epoch of a deep-learning case as its result stores it (as seen by rank 0);
    the training's own record of an epoch, with its learning rate and images, is
    :class:`accelml.dl.config.EpochRecord`."""

    epoch: int
    seconds: float
    loss: float
    accuracy: float | None = None
    val_loss: float | None = None
    val_accuracy: float | None = None


@dataclass(frozen=True)
class DLMeasurements(JSONRecord):
    """What a deep-learning (Keras) case measured beyond the common fields.

    ``epochs`` holds every epoch including the first; ``warmup_epochs`` of them are left out of
    the ``epoch`` PhaseTiming and of ``images_per_second``. ``global_batch_size`` is always
    ``per_rank_batch_size * ranks``. (``per_rank_batch_size`` and ``ranks`` are stored as
    ``per_worker_batch_size`` and ``workers``, their names before.)
    """

    model: str
    epochs: tuple[EpochMeasurement, ...]
    per_rank_batch_size: int = field(metadata=stored_as("per_worker_batch_size"))
    ranks: int = field(metadata=stored_as("workers"))
    learning_rate: float
    images_per_second: float
    warmup_epochs: int = 1
    strategy: str | None = None          # "horovod", "mirrored", "jax", None for one rank
    lr_scaling: str = "linear"           # "none", "linear", "sqrt"
    rank_weight_digests: tuple[str, ...] = ()   # final weights of each rank (sha256)
    final_loss: float | None = None
    final_accuracy: float | None = None
    test_loss: float | None = None
    test_accuracy: float | None = None
    batchnorm_momentum: float | None = None     # the model's BatchNorm momentum (None: none)
    batchnorm_updates: int | None = None        # training steps, each updating its statistics
    path: str | None = None             # how the step ran and why (TrainingResult.path)
    listeners: str = ""                         # what the ranks listened on for each other
    listeners_authenticated: bool = True        # False: a stranger could reach them (flagged)

    @property
    def global_batch_size(self) -> int:
        return self.per_rank_batch_size * self.ranks

    @property
    def ranks_identical(self) -> bool | None:
        """True when every rank ended with the same weights (None if digests were not taken,
        or there is one rank: nothing to compare it with).

        >>> DLMeasurements("m", (), 32, 1, 0.1, 1.0, rank_weight_digests=("a",)).ranks_identical
        """
        if len(self.rank_weight_digests) < 2:
            return None
        return len(set(self.rank_weight_digests)) == 1

    @property
    def ranks_differing(self) -> tuple[int, ...]:
        """The ranks whose final weights differ from rank 0's (empty: all equal, or not taken).

        >>> DLMeasurements("m", (), 32, 3, 0.1, 1.0, rank_weight_digests=("a", "b", "a")).ranks_differing
        (1,)
        """
        first = self.rank_weight_digests[:1]
        return tuple(rank for rank, digest in enumerate(self.rank_weight_digests)
                     if first and digest != first[0])

    def json_extras(self) -> dict[str, JSONValue]:
        """Written beside the fields (:mod:`accelml.convert`), for readers of the raw JSON."""
        return {"global_batch_size": self.global_batch_size}


@dataclass(frozen=True)
class BoostingRounds(JSONRecord):
    """A boosting fit split into its set-up and its rounds, over the counted repeats.

    ``rounds``: the rounds the fitted booster holds (early stopping can end it before
    ``n_estimators``); ``setup_seconds``: the median of the ``setup`` phase, each fit's time
    outside its rounds (building the DMatrix or QuantileDMatrix, on several workers also the
    tracker, the communicator and the dask scheduling); ``per_round_seconds``: the median of
    (fit - setup) / rounds.

    >>> BoostingRounds(200, 1.5, 0.02).total_seconds(100)
    3.5
    """

    rounds: int
    setup_seconds: float
    per_round_seconds: float

    def total_seconds(self, rounds: int) -> float:
        """The fit time this split predicts for ``rounds`` rounds."""
        return self.setup_seconds + rounds * self.per_round_seconds


@dataclass(frozen=True)
class CaseResult(JSONRecord):
    """Everything one case measured (or why it failed). Keyed by ``(run_id, case_id)``."""

    run_id: str
    case_id: str
    algorithm: str
    backend: str
    device: str
    dataset: str
    status: str                                   # "ok" or "failed"
    task: str = ""
    ranks: int = field(default=1, metadata=stored_as("workers"))   # stored as its name before
    strategy: str | None = None
    params: tuple[tuple[str, JSONScalar], ...] = field(default=(), metadata=OBJECT)
    library_params: tuple[tuple[str, JSONScalar], ...] = field(default=(), metadata=OPTIONAL_OBJECT)
    failure: FailureKind = FailureKind.NONE
    reason: str = ""
    timings: tuple[PhaseTiming, ...] = ()
    repeats: int = 0                              # counted repeats (warm-up excluded)
    warmup: int = 0
    stopped_because: str = ""                     # converged | max_repeats | max_seconds | time_limit | fixed | epochs
    warmup_note: str = ""                         # why a phase's first run was counted, not warm-up
    iterations: int | None = None                 # iterations of the (last) fit, iterative algorithms
    scores: tuple[Score, ...] = ()
    predictions: tuple[ArrayRef, ...] = ()
    repeat_prediction_digests: tuple[str, ...] = ()
    peak_host_memory_bytes: int | None = None
    peak_gpu_memory_bytes: int | None = None
    worker_peak_memory_bytes: tuple[int, ...] = ()   # each dask worker process's, on several ranks
    workers_started_by: str = ""                  # local-processes | srun | mpirun (dask workers)
    threads: int | None = None
    thread_pools: tuple[tuple[str, int], ...] = ()   # (threadpoolctl api/library, num_threads)
    environment: Environment | None = None
    dataset_info: DatasetInfo | None = None
    dl: DLMeasurements | None = None
    boosting: BoostingRounds | None = None        # set-up vs rounds of a boosting fit
    started_at: str = ""                          # ISO 8601, UTC
    finished_at: str = ""
    wall_seconds: float | None = None             # client-side, process start to result
    attempts: int = 1
    earlier_attempts: tuple[str, ...] = ()        # attempts killed and run again: "attempt 1: killed by ..."
    measurement: str = ISOLATED                   # interleaved | isolated (cases.MEASUREMENTS)
    turn_group: tuple[str, ...] = ()              # interleaved: the group's case ids in turn order, reference first
    measurement_note: str = ""                    # why a case of an interleaving run was measured isolated
    container: Container | None = field(default=None, metadata=OMIT_NONE)   # the image it was told to run in
    host_load: tuple[float, ...] = ()             # 1-minute load average where it ran: at its start, at its result
    schema_version: int = SCHEMA_VERSION

    OK = "ok"
    FAILED = "failed"

    def __post_init__(self) -> None:
        if self.status not in (self.OK, self.FAILED):
            raise ValueError(f"status must be 'ok' or 'failed', not {self.status!r}")
        if self.status == self.FAILED and not self.reason:
            raise ValueError("a failed case needs a reason")

    @classmethod
    def failed(cls, case: Case, run_id: str, failure: FailureKind, reason: str, *,
               threads: int | None = None, attempts: int = 1, started_at: str = "",
               wall_seconds: float | None = None, peak_host_memory_bytes: int | None = None,
               timings: tuple[PhaseTiming, ...] = (), environment: Environment | None = None,
               host_load: tuple[float, ...] = ()) -> CaseResult:
        """The result of ``case`` that failed for ``reason`` (its first line is kept), finished now.

        Every failed result is made here: by the case process for an exception, by the
        client-side process watcher for a timeout, the memory limit or a dead process, and
        by the client for a case its executor returned nothing for.

        >>> from accelml.cases import DatasetSpec
        >>> case = Case("kmeans", "sklearn", "cpu", DatasetSpec("blobs", "generated"))
        >>> result = CaseResult.failed(case, "r1", FailureKind.TIMEOUT, "too slow\\nmore")
        >>> result.status, result.failure.value, result.reason, result.case_id == case.case_id
        ('failed', 'timeout', 'too slow', True)
        """
        if failure is FailureKind.NONE:
            raise ValueError("a failed case needs a failure kind other than NONE")
        lines = [line for line in reason.strip().splitlines() if line.strip()]
        return cls(
            run_id=run_id, case_id=case.case_id, algorithm=case.algorithm, backend=case.backend,
            device=case.device, dataset=case.dataset.name, ranks=case.ranks,
            strategy=case.strategy, params=case.params, library_params=case.library_params,
            status=cls.FAILED, failure=failure,
            reason=lines[0].strip() if lines else "", timings=timings,
            peak_host_memory_bytes=peak_host_memory_bytes, threads=threads,
            environment=environment, started_at=started_at, finished_at=utc_now(),
            wall_seconds=wall_seconds, attempts=attempts, container=case.container,
            host_load=host_load,
        )

    @property
    def ok(self) -> bool:
        return self.status == self.OK

    @property
    def label(self) -> str:
        """The case's one name, as its spec ``Case`` has it (:func:`accelml.cases.case_label`).

        >>> CaseResult("r", "c", "kmeans", "sklearn", "cpu", "blobs", "ok", ranks=2,
        ...            params=(("n_clusters", 3),)).label
        'kmeans/sklearn/cpu x2 on blobs (n_clusters=3)'
        """
        return case_label(self, self.dataset)

    @property
    def skipped(self) -> bool:
        """Never run: this machine cannot give what the case needs (its backend, GPUs or
        cores; failure kind ``unavailable``). Shown as skipped, not as failed."""
        return self.failure is FailureKind.UNAVAILABLE

    @property
    def env_hash(self) -> str | None:
        return None if self.environment is None else self.environment.env_hash

    @property
    def busy_host(self) -> tuple[float, int] | None:
        """``(load, cores)`` when the host's 1-minute load average, at the case's start or at
        its result, was above its logical cores: other work shared the cores its times were
        taken on, so they (and its speedups) may not repeat. ``None`` otherwise, or unknown.

        >>> from accelml.results.records import Environment
        >>> env = Environment("3.12", "linux", "cpu", 2, 2, 2, ())
        >>> CaseResult("r", "c", "kmeans", "sklearn", "cpu", "d", "ok", environment=env,
        ...            host_load=(1.2, 5.25)).busy_host
        (5.25, 2)
        >>> CaseResult("r", "c", "kmeans", "sklearn", "cpu", "d", "ok", environment=env,
        ...            host_load=(1.2, 1.9)).busy_host is None
        True
        """
        if not self.host_load or self.environment is None:
            return None
        load, cores = max(self.host_load), self.environment.logical_cores
        return (load, cores) if load > cores else None

    @property
    def noisy(self) -> bool:
        return any(t.noisy for t in self.timings)

    def timing(self, phase: str) -> PhaseTiming | None:
        for timing in self.timings:
            if timing.phase == phase:
                return timing
        return None

    def score(self, name: str) -> float | None:
        for score in self.scores:
            if score.name == name:
                return score.value
        return None

    def prediction(self, name: str = "predictions") -> ArrayRef | None:
        for ref in self.predictions:
            if ref.name == name:
                return ref
        return None

    @property
    def params_dict(self) -> dict[str, JSONScalar]:
        return dict(self.params)

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CaseResult:
        _check_schema(data, "case result")
        return from_data(cls, data)

    @classmethod
    def from_json(cls, text: str) -> CaseResult:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class RunRecord(JSONRecord):
    """One comparison: the spec it ran, its reference backend and the client's environment."""

    run_id: str
    spec_name: str
    spec_hash: str                 # sha256 of the spec text
    spec_text: str                 # the TOML itself, so a run can be resumed or re-read anywhere
    spec_path: str = ""
    reference_backend: str | None = None
    created_at: str = ""           # ISO 8601, UTC
    status: str = "running"        # "running", "finished", "interrupted"
    planned_cases: int = 0
    environment: Environment | None = None
    case_ids: tuple[str, ...] = field(default=())   # every planned case, in spec order
    deterministic: bool = False    # ran in deterministic mode (accelml.runner.determinism)
    spec_signature: str = ""       # HMAC of spec_text and spec_path with its user's key (accelml.orchestration)
    schema_version: int = SCHEMA_VERSION

    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"

    @property
    def description(self) -> str:
        """The spec's ``description`` (read from the stored spec text; empty when it has none).

        >>> RunRecord("r", "s", "h", 'description = "CPU vs GPU"').description
        'CPU vs GPU'
        """
        try:
            value = tomllib.loads(self.spec_text).get("description", "")
        except tomllib.TOMLDecodeError:
            return ""
        return value if isinstance(value, str) else ""

    @property
    def env_hash(self) -> str | None:
        return None if self.environment is None else self.environment.env_hash

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> RunRecord:
        _check_schema(data, "run record")
        return from_data(cls, data)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        return cls.from_dict(json.loads(text))
