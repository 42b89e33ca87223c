"""How a backend that is not a scikit-learn-style estimator measures its own cases.

The runner measures classical backends itself. A backend whose record names a measurer
(``Backend.measurer``) is measured by that function instead, inside the case's own process;
the runner stores what it returns:

    measure(case: Case, context: MeasureContext) -> Measurements

``case`` is the validated :class:`~accelml.cases.Case` (algorithm, backend, device,
ranks, strategy, dataset, params, repeats, time limit, threads); ``context`` says where
the dataset cache is, a scratch directory for the case, the deadline, and (in an interleaved
comparison group) the case's :class:`Turns`. The function raises on failure (an
:class:`~accelml.errors.UnavailableError` for a missing library or device); the runner
records the reason. A multi-rank case (``ranks > 1``) launches its ranks from inside this
function (e.g. horovodrun or mpirun) and returns rank 0's view with every rank's weight
digest in ``dl.rank_weight_digests``. The keras backend's measurer is
:func:`accelml.estimators.keras.measure_keras`. :func:`device_sync` brings a result to the
host before a clock is read, whoever measures.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from accelml.results.records import BoostingRounds, DatasetInfo, DLMeasurements, PhaseTiming, Score

GO = "go"
"""The coordinator's command for one timed round; ``stop REASON`` ends the rounds."""


class Turns:
    """A case process's end of the turn pipes of an interleaved comparison group
    (:mod:`accelml.runner.interleave`): it waits for its turn before each timed round and
    tells the coordinator what the round measured; the coordinator decides when rounds stop.

    Lines go both ways: the coordinator sends ``go`` or ``stop REASON``; the case answers
    ``{"ready": {phase: seconds}}`` once its warm-up is done (the phases whose first run
    counted) and ``{"round": {phase: seconds}}`` after each round. A case that has a fixed
    number of rounds to give (a training's epochs after the first) says so when it is ready,
    ``{"ready": {}, "fixed": {"rounds": n}}``: stopping it sooner would save no time, and
    its process ends by itself after its last round.
    """

    def __init__(self, commands: IO[str], replies: IO[str]):
        self._commands, self._replies = commands, replies

    @classmethod
    def from_fds(cls, fds: tuple[int, int]) -> Turns:
        """The turns over the inherited descriptors ``(commands, replies)``."""
        return cls(os.fdopen(fds[0], "r"), os.fdopen(fds[1], "w"))

    def _send(self, message: dict[str, dict[str, float]]) -> None:
        self._replies.write(json.dumps(message) + "\n")
        self._replies.flush()

    def ready(self, counted: dict[str, float], rounds: int | None = None) -> None:
        """Warmed up (``counted``: the phases whose first run counted); ``rounds``: the
        fixed number of rounds this case gives (None: as many as the coordinator asks for)."""
        message = {"ready": counted}
        if rounds is not None:
            message["fixed"] = {"rounds": float(rounds)}
        self._send(message)

    def report(self, measured: dict[str, float]) -> None:
        self._send({"round": measured})

    def next(self) -> str | None:
        """Wait for the next command: None for a round, else why the rounds stop. Raises
        :class:`RuntimeError` when the coordinator is gone (its pipe closed without a word):
        the case ends at once instead of measuring on for nobody."""
        line = self._commands.readline()
        if not line:
            raise RuntimeError("the coordinator of its comparison group is gone")
        line = line.strip()
        return None if line == GO else line.removeprefix("stop").strip()


@dataclass(frozen=True)
class MeasureContext:
    """Where a measurer may read and write, and by when it must be done."""

    cache_dir: str | None
    workdir: str
    deadline_monotonic: float | None
    threads: int | None
    turns: Turns | None = None
    """Set in an interleaved comparison group: a measurer that repeats rounds passes it to
    :func:`accelml.runner.timing.repeat_until_stable` (one that does not, e.g. a training's
    epochs, is measured alone in its turn)."""
    logs_dir: str | None = None     # where launchers' and ranks' logs are kept (the store's)


@dataclass(frozen=True)
class Measurements:
    """What a measurer returns; the runner adds identity, environment, memory and status."""

    timings: tuple[PhaseTiming, ...]
    repeats: int
    warmup: int
    scores: tuple[Score, ...] = ()
    arrays: tuple[tuple[str, np.ndarray], ...] = field(default=())   # (name, array) to keep
    repeat_prediction_digests: tuple[str, ...] = ()
    dataset_info: DatasetInfo | None = None
    dl: DLMeasurements | None = None
    stopped_because: str = ""
    task: str = ""          # classification, regression, clustering, decomposition
    iterations: int | None = None   # iterations of the last fit (iterative algorithms)
    warmup_note: str = ""           # why a phase's first run counted (it already took seconds)
    worker_peak_memory_bytes: tuple[int, ...] = ()   # each dask worker process's, on several ranks
    workers_started_by: str = ""                     # local-processes | srun | mpirun
    boosting: BoostingRounds | None = None           # set-up vs rounds (accelml.runner.rounds)


def device_sync(value: object) -> object:
    """Wait for device work behind ``value`` and return it on the host.

    NumPy arrays (what every backend here returns, XGBoost on CUDA included: its predictions
    are copied to the host, which is the sync) come back unchanged; dask collections (on
    several workers, whose blocks may be on GPUs) are computed; JAX arrays are waited for;
    CuPy arrays are copied to the host.

    >>> device_sync(np.arange(3))
    array([0, 1, 2])
    """
    compute = getattr(value, "compute", None)
    if callable(compute) and type(value).__module__.startswith("dask"):
        value = compute()
    if hasattr(value, "block_until_ready"):
        return value.block_until_ready()
    if hasattr(value, "__cuda_array_interface__") and hasattr(value, "get"):
        return value.get()
    return value
