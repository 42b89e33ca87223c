"""Honest timing: warm-up rounds, adaptive repeats, device sync, peak memory.

:func:`repeat_until_stable` runs a round (a callable returning ``{phase: seconds}``) first
``warmup`` times without counting, then until the confidence interval of every phase's
median is within ``target_rel`` of the median, or ``max_repeats`` rounds, or the time
budget is spent. Why each run stopped is recorded in :class:`RepeatOutcome`. A phase whose
first warm-up run already takes ``skip_warmup_after`` seconds counts that run as its first
repeat (``warmup_note`` says so): a second 15-second fit would buy nothing.

>>> import itertools
>>> clock = itertools.cycle([1.0, 1.01, 0.99])
>>> outcome = repeat_until_stable(lambda i: {"fit": next(clock)}, min_repeats=3,
...                               max_repeats=10, target_rel=0.05, warmup=1)
>>> outcome.timings["fit"].count, outcome.stopped_because
(3, 'converged')
>>> slow = repeat_until_stable(lambda i: {"fit": 3.0}, min_repeats=2, max_repeats=2,
...                            skip_warmup_after=2.0, warmup=1)
>>> slow.timings["fit"].count, slow.rounds, slow.warmup_rounds
(2, 2, 0)
>>> slow.warmup_note
'fit: the first run took 3 s (>= 2 s), so it counted as a repeat instead of a warm-up'
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelml.estimators import Turns, device_sync
from accelml.results.records import PhaseTiming


@contextlib.contextmanager
def setup_frozen() -> Iterator[None]:
    """The objects alive when the rounds start (the libraries, the data, the template estimator)
    kept out of the garbage collector's walks while they run (``gc.freeze``), and handed back
    after (``gc.unfreeze``). Each round collects before its timing; without this, every such
    collection walked all of scikit-learn's, SciPy's and pandas' objects again (~135k, 65 ms a
    collection on a 2-core VM), and a collection that fell inside a timed fit walked them too.
    Every backend's rounds run so alike.

    >>> with setup_frozen():
    ...     gc.get_freeze_count() > 0
    True
    >>> gc.get_freeze_count()
    0
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def host_copy(value: Any) -> Any:
    """Bring a result to host memory, which waits for any device work that produced it.

    NumPy arrays pass through; dask, JAX and CuPy results go through
    :func:`accelml.estimators.device_sync`; TF/torch tensors and objects with ``__array__``
    are converted. Reading a clock after this call is reading it after the device finished.
    """
    if value is None or isinstance(value, np.ndarray):
        return value
    value = device_sync(value)
    if isinstance(value, np.ndarray):
        return value
    numpy_method = getattr(value, "numpy", None)   # TF / torch
    if callable(numpy_method):
        return numpy_method()
    try:
        return np.asarray(value)
    except Exception:   # sparse matrices and other results: they are already on the host
        return value


@dataclass(frozen=True)
class RepeatOutcome:
    timings: dict[str, PhaseTiming]
    rounds: int
    warmup_rounds: int
    stopped_because: str      # "converged", "max_repeats", "max_seconds", "time_limit", "fixed"
    warmup_note: str = ""     # the phases whose first run counted as a repeat, and why
    counted_rounds: tuple[int, ...] = ()   # the indexes passed to the round whose samples count


def repeat_until_stable(
    round_: Callable[[int], dict[str, float]],
    *,
    min_repeats: int = 3,
    max_repeats: int = 10,
    target_rel: float = 0.05,
    confidence: float = 0.95,
    warmup: int = 1,
    max_seconds: float | None = None,
    deadline: float | None = None,
    skip_warmup_after: float | None = None,
    turns: Turns | None = None,
) -> RepeatOutcome:
    """Run ``round_(index)`` (index < 0 for warm-up) until every phase's median is stable.

    ``deadline`` is a ``time.monotonic()`` value the caller must finish by (the case's time
    limit): once ``min_repeats`` are in, no round starts that is expected to end past it.
    ``skip_warmup_after``: a phase whose first warm-up run takes at least this many seconds
    keeps it as a counted sample, and that round becomes the first counted round: no further
    warm-up runs (the faster phases of the round, e.g. a quick predict after a long fit, had
    their warm-up in it and get one sample fewer). ``counted_rounds`` lists the round indexes
    whose samples count, so the caller keeps the right outputs.

    With ``turns`` (an interleaved comparison group), the warm-up runs as above, then each
    counted round waits for its turn and the coordinator's stopping rule ends them (on the
    paired ratios of the group, :func:`accelml.runner.interleave.execute_group`).
    """
    warmup_samples: dict[str, list[float]] = {}
    samples: dict[str, list[float]] = {}
    counted_first: dict[str, float] = {}
    counted_rounds: list[int] = []
    done_warmup = 0
    for index in range(warmup):
        measured = round_(-1 - index)
        if index == 0 and skip_warmup_after is not None:
            counted_first = {phase: seconds for phase, seconds in measured.items()
                             if seconds >= skip_warmup_after}
        for phase, seconds in measured.items():
            target = samples if phase in counted_first else warmup_samples
            target.setdefault(phase, []).append(seconds)
        if counted_first:
            counted_rounds.append(-1 - index)
            break
        done_warmup += 1
    rounds = len(counted_rounds)
    note = "; ".join(f"{phase}: the first run took {seconds:.3g} s (>= {skip_warmup_after:.3g} s), "
                     "so it counted as a repeat instead of a warm-up"
                     for phase, seconds in counted_first.items())
    started = time.monotonic()
    stopped = "max_repeats"
    alone = turns is None
    if turns is not None:
        turns.ready({phase: seconds for phase, seconds in counted_first.items()})
        first = rounds
        while (reason := turns.next()) is None:
            measured = round_(rounds)
            for phase, seconds in measured.items():
                samples.setdefault(phase, []).append(seconds)
            counted_rounds.append(rounds)
            rounds += 1
            turns.report(measured)
        alone = rounds == first   # the group ended before this case's first turn: alone, as usual
        stopped = "max_repeats" if alone else reason
    while alone and rounds < max_repeats:
        round_started = time.monotonic()
        for phase, seconds in round_(rounds).items():
            samples.setdefault(phase, []).append(seconds)
        counted_rounds.append(rounds)
        rounds += 1
        last_round = time.monotonic() - round_started
        if rounds < min_repeats:
            continue
        if min_repeats == max_repeats:
            stopped = "fixed" if rounds == max_repeats else stopped
            continue
        stable = all(
            PhaseTiming.from_samples(phase, values, confidence=confidence).converged(target_rel)
            for phase, values in samples.items()
        )
        if stable:
            stopped = "converged"
            break
        now = time.monotonic()
        if max_seconds is not None and now - started >= max_seconds:
            stopped = "max_seconds"
            break
        if deadline is not None and now + 1.5 * last_round > deadline:
            stopped = "time_limit"
            break
    timings = {
        phase: PhaseTiming.from_samples(phase, values, warmup_samples.get(phase, ()),
                                        confidence=confidence, target_rel=target_rel)
        for phase, values in samples.items()
    }
    return RepeatOutcome(timings, rounds, done_warmup, stopped, note, tuple(counted_rounds))


def peak_host_memory_bytes() -> int:
    """Peak resident memory of this process and of its finished children (ru_maxrss, Linux KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, children) * 1024)


class GPUMemorySampler:
    """Samples the GPU memory used by this process and its children (NVML) on a thread.

    ``peak`` is in bytes, summed over the GPUs. Children count because deep-learning cases
    train in rank processes. Where NVML lists no processes at all (some containers hide
    them), the rise of each GPU's used memory over its level at the start is taken instead.
    Without NVML or a GPU, ``peak`` stays None (and the reason is in ``unavailable``).
    """

    def __init__(self, interval_s: float = 0.05):
        self.interval_s = interval_s
        self.peak: int | None = None
        self.unavailable = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> GPUMemorySampler:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                             for i in range(pynvml.nvmlDeviceGetCount())]
            self._baseline = [pynvml.nvmlDeviceGetMemoryInfo(h).used for h in self._handles]
        except Exception as error:   # no library, no driver, no device: say so, measure nothing
            self.unavailable = str(error) or type(error).__name__
            return self
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> int:
        import psutil
        import pynvml

        me = psutil.Process(os.getpid())
        pids = {me.pid} | {child.pid for child in me.children(recursive=True)}
        used = rise = 0
        listed = False
        for handle, baseline in zip(self._handles, self._baseline, strict=True):
            try:
                processes = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                rise += max(0, pynvml.nvmlDeviceGetMemoryInfo(handle).used - baseline)
            except pynvml.NVMLError:
                continue
            listed = listed or bool(processes)
            used += sum(p.usedGpuMemory or 0 for p in processes if p.pid in pids)
        return used if listed else rise

    def _run(self) -> None:
        while not self._stop.is_set():
            used = self._sample()
            if used and (self.peak is None or used > self.peak):
                self.peak = used
            self._stop.wait(self.interval_s)

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            import pynvml

            pynvml.nvmlShutdown()
