"""What one worker job asks the batch system for, and what one case needs from a worker.

:class:`Resources` is one job's request (cores, memory, GPUs, walltime, partition,
account, extra directives, prologue lines). :class:`CaseNeeds` is what one case needs
(cores, GPUs, ranks). A job-queue executor starts one *pool* of worker jobs per distinct
request and routes each case to its pool through dask worker resources, so a case that
needs GPUs never lands on a worker without them.

>>> base = Resources(cores=2, memory="4GiB", walltime="00:30:00", partition="debug")
>>> needs = CaseNeeds(gpus=2, ranks=2)
>>> job = base.for_case(needs)
>>> job.gpus, job.ranks, job.cores
(2, 2, 2)
>>> job.pool_tag == base.for_case(CaseNeeds(gpus=2, ranks=2)).pool_tag
True
>>> resources = job.worker_resources()
>>> resources["GPU"], resources["RANKS"], resources[job.pool_tag]
(2, 2, 1)
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelml.dl.strategies import find_strategy
from accelml.errors import SpecError

_WALLTIME = re.compile(r"^(?:(?P<days>\d+)-)?(?P<hours>\d+):(?P<minutes>[0-5]?\d):(?P<seconds>[0-5]?\d)$")
_MEMORY = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_WALLTIME_MARGIN_S = 300
_UNIT_BYTES = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_memory(text: str | int, where: str = "memory") -> int:
    """Bytes in ``text`` ("4GiB", "512M", "2G"; K/M/G/T are binary, as SLURM and PBS read them).

    >>> parse_memory("4GiB") == parse_memory("4G") == 4 * 2**30
    True
    """
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    match = _MEMORY.match(str(text))
    if not match or float(match["number"]) <= 0:
        raise SpecError(f"{where} = {text!r}: expected a positive size such as '4GiB', '512M' or '2G'")
    unit = (match["unit"] or "").upper().rstrip("B").rstrip("I")
    return int(math.ceil(float(match["number"]) * _UNIT_BYTES[unit]))


def parse_walltime(text: str, where: str = "walltime") -> int:
    """Seconds in a SLURM/PBS walltime "[D-]HH:MM:SS".

    >>> parse_walltime("1-00:30:00")
    88200
    """
    match = _WALLTIME.match(str(text).strip())
    if not match:
        raise SpecError(f"{where} = {text!r}: expected a walltime 'HH:MM:SS' or 'D-HH:MM:SS'")
    days = int(match["days"] or 0)
    seconds = ((days * 24 + int(match["hours"])) * 60 + int(match["minutes"])) * 60 + int(match["seconds"])
    if seconds <= 0:
        raise SpecError(f"{where} = {text!r}: must be longer than zero")
    return seconds


def format_walltime(seconds: int) -> str:
    """ "HH:MM:SS" (hours may exceed 24), the form both SLURM and PBS accept.

    >>> format_walltime(88200)
    '24:30:00'
    """
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def memory_megabytes(n_bytes: int) -> str:
    """SLURM/PBS memory in whole mebibytes, rounded up ("4096M"; both read M as MiB)."""
    return f"{math.ceil(n_bytes / 2**20)}M"


def _positive_int(value: object, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"{where} = {value!r}: expected an integer >= {minimum}")
    return value


def _optional_text(value: object, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or any(ch in value for ch in "\n\r"):
        raise SpecError(f"{where} = {value!r}: expected one line of text")
    return value


def _lines(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(item, str) for item in value):
        raise SpecError(f"{where} = {value!r}: expected a list of strings")
    for item in value:
        if "\n" in item or "\r" in item:
            raise SpecError(f"{where}: {item!r} spans several lines; give one list item per line")
    return tuple(value)


@dataclass(frozen=True)
class CaseNeeds:
    """What one case needs from the worker job that runs it.

    ``ranks`` processes (Horovod / tf.distribute multi-worker), ``gpus`` GPUs in all,
    ``cores`` CPU cores and ``memory_bytes`` memory per rank, ``seconds`` of walltime.
    """

    cores: int = 1
    gpus: int = 0
    ranks: int = 1
    memory_bytes: int | None = None
    seconds: float | None = None
    oversubscribe: bool = False

    def __post_init__(self) -> None:
        _positive_int(self.cores, "cores")
        _positive_int(self.gpus, "gpus", minimum=0)
        _positive_int(self.ranks, "ranks")

    @classmethod
    def of_case(cls, case: object) -> CaseNeeds:
        """Needs read off a case (:class:`accelml.cases.Case` or alike).

        ``device`` "cuda"/"gpu" needs GPUs: one per rank, or what the case's strategy
        record says (``gpus_per_rank``); the case's ``ranks`` are separate processes where the
        strategy is multi-process and devices of one process otherwise, and the dask workers
        of a classical case (no strategy) trained on several ranks, one a rank; ``threads`` are
        cores (at least the strategy's ``cores_per_rank``); ``memory_limit_mb`` and
        ``time_limit_s`` size the job; ``oversubscribe`` allows more ranks than cores. A
        strategy not installed here is sized as one process with one GPU per rank.

        >>> from types import SimpleNamespace as Case
        >>> CaseNeeds.of_case(Case(device="cuda", ranks=4, strategy="horovod"))
        CaseNeeds(cores=1, gpus=4, ranks=4, memory_bytes=None, seconds=None, oversubscribe=False)
        >>> CaseNeeds.of_case(Case(device="cuda", ranks=2, strategy="mirrored", threads=4))
        CaseNeeds(cores=4, gpus=2, ranks=1, memory_bytes=None, seconds=None, oversubscribe=False)
        >>> CaseNeeds.of_case(Case(device="cuda", ranks=4, strategy=None, threads=8))
        CaseNeeds(cores=8, gpus=4, ranks=4, memory_bytes=None, seconds=None, oversubscribe=False)
        >>> needs = CaseNeeds.of_case(Case(device="cpu", ranks=1, memory_limit_mb=512, time_limit_s=60.0))
        >>> needs.memory_bytes, needs.seconds, needs.oversubscribe
        (536870912, 60.0, False)
        """
        case_ranks = int(getattr(case, "ranks", None) or 1)
        name = getattr(case, "strategy", None)
        strategy = None if name is None else find_strategy(name)
        device = str(getattr(case, "device", "cpu") or "cpu").lower()
        on_gpu = device in {"cuda", "gpu"} or device.startswith(("cuda:", "gpu:"))
        memory_mb = getattr(case, "memory_limit_mb", None)
        seconds = getattr(case, "time_limit_s", None)
        # a classical case (no strategy) on several ranks: one process (dask worker) each
        cores, gpus, ranks = int(getattr(case, "threads", None) or 1), case_ranks if on_gpu else 0, case_ranks
        if strategy is not None:
            cores = max(cores, strategy.cores_per_rank)
            gpus, ranks = strategy.gpus(case_ranks, on_gpu), strategy.processes(case_ranks)
        return cls(
            cores=cores,
            gpus=gpus,
            ranks=ranks,
            memory_bytes=int(memory_mb) * 2**20 if memory_mb else None,
            seconds=float(seconds) if seconds else None,
            oversubscribe=getattr(case, "oversubscribe", False) is True,
        )


@dataclass(frozen=True)
class Resources:
    """One worker job's request to SLURM or PBS.

    ``cores`` and ``memory`` are per rank (task); ``gpus`` are per node, and only jobs of
    cases that use GPUs get them (at least one per rank); ``ranks`` tasks spread over
    ``nodes`` nodes. ``directives`` are extra ``#SBATCH``/``#PBS`` lines
    (without the prefix), ``prologue`` shell lines run before the worker starts
    (``module load ...``, ``conda activate ...``).
    """

    cores: int = 1
    memory: str = "2GiB"
    gpus: int = 0
    gpu_type: str | None = None
    ranks: int = 1
    nodes: int = 1
    walltime: str = "01:00:00"
    partition: str | None = None
    account: str | None = None
    directives: tuple[str, ...] = ()
    prologue: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _positive_int(self.cores, "resources.cores")
        _positive_int(self.gpus, "resources.gpus", minimum=0)
        _positive_int(self.ranks, "resources.ranks")
        _positive_int(self.nodes, "resources.nodes")
        parse_memory(self.memory, "resources.memory")
        parse_walltime(self.walltime, "resources.walltime")
        if self.ranks % self.nodes:
            raise SpecError(
                f"resources.ranks = {self.ranks} does not divide over resources.nodes = {self.nodes}"
            )
        for name, value in self.environment.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise SpecError(f"resources.environment: {name!r} is not a shell variable name")
            _optional_text(str(value), f"resources.environment.{name}")
        object.__setattr__(self, "environment", dict(sorted(self.environment.items())))

    FIELDS = ("cores", "memory", "gpus", "gpu_type", "ranks", "nodes", "walltime", "partition",
              "account", "directives", "prologue", "environment")
    KEY_NAMES = {"queue": "partition", "job_extra_directives": "directives",
                 "job_script_prologue": "prologue"}
    """Config keys spelled as dask-jobqueue spells them -> the field they set."""

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], where: str = "resources") -> Resources:
        """Resources from a config/spec table; keys may use '-' or '_' ("gpu-type")."""
        return cls().updated(mapping, where)

    def updated(self, mapping: Mapping[str, Any] | None, where: str = "resources") -> Resources:
        """A copy with the non-``None`` entries of ``mapping`` replacing these values.

        Keys may be spelled as dask-jobqueue's config spells them (:attr:`KEY_NAMES`):
        ``queue`` for ``partition``, ``job-extra-directives`` for ``directives``,
        ``job-script-prologue`` for ``prologue``.

        >>> Resources().updated({"queue": "gpu", "job-script-prologue": ["module load CUDA"]}).prologue
        ('module load CUDA',)
        """
        if not mapping:
            return self
        if not isinstance(mapping, Mapping):
            raise SpecError(f"{where}: expected a table of resources, got {mapping!r}")
        changes = {}
        for raw_key, value in mapping.items():
            key = str(raw_key).replace("-", "_")
            key = self.KEY_NAMES.get(key, key)
            if key not in self.FIELDS:
                allowed = ", ".join(self.FIELDS)
                others = ", ".join(name.replace("_", "-") for name in self.KEY_NAMES)
                raise SpecError(f"{where}.{raw_key}: unknown resource; allowed: {allowed} (or {others})")
            if value is None:
                continue
            label = f"{where}.{raw_key}"
            if key in {"cores", "gpus", "ranks", "nodes"}:
                value = _positive_int(value, label, minimum=0 if key == "gpus" else 1)
            elif key == "memory":
                parse_memory(value, label)
                value = str(value)
            elif key == "walltime":
                parse_walltime(value, label)
                value = str(value)
            elif key in {"directives", "prologue"}:
                value = _lines(value, label)
            elif key == "environment":
                if not isinstance(value, Mapping):
                    raise SpecError(f"{label}: expected a table NAME = value")
                value = {str(k): str(v) for k, v in value.items()}
            else:
                value = _optional_text(value, label)
            changes[key] = value
        try:
            return dataclasses.replace(self, **changes)
        except SpecError as error:
            raise SpecError(f"{where}: {error}") from None

    def for_case(self, needs: CaseNeeds) -> Resources:
        """This request widened to what ``needs`` asks for (never narrowed)."""
        ranks = max(needs.ranks, 1)
        nodes = self.nodes if ranks % self.nodes == 0 else 1
        memory = self.memory
        if needs.memory_bytes and needs.memory_bytes > self.memory_bytes:
            memory = memory_megabytes(needs.memory_bytes) + "iB"
        walltime = self.walltime
        if needs.seconds:
            # the case's own limit, plus room for worker start-up and the retry of a lost case
            wanted = int(math.ceil(needs.seconds)) + _WALLTIME_MARGIN_S
            walltime = format_walltime(max(self.walltime_seconds, wanted))
        return dataclasses.replace(
            self,
            cores=max(self.cores, needs.cores),
            memory=memory,
            gpus=max(self.gpus, -(-needs.gpus // nodes)) if needs.gpus else 0,
            ranks=ranks,
            nodes=nodes,
            walltime=walltime,
        )

    @property
    def ranks_per_node(self) -> int:
        return self.ranks // self.nodes

    @property
    def memory_bytes(self) -> int:
        return parse_memory(self.memory)

    @property
    def walltime_seconds(self) -> int:
        return parse_walltime(self.walltime)

    @property
    def pool_tag(self) -> str:
        """A short name shared by every job with this exact request (dask resource name)."""
        text = repr(tuple(getattr(self, name) if name != "environment" else tuple(self.environment.items())
                          for name in self.FIELDS))
        return "pool-" + hashlib.sha256(text.encode()).hexdigest()[:8]

    def worker_resources(self) -> dict[str, int]:
        """The dask worker resources a worker of this pool advertises (and a case asks for).

        The pool tag (1 per worker) both routes cases to their pool and keeps it to one
        case at a time per worker job; GPUs and ranks are there to be read in the
        dashboard and by :func:`check_worker_fits`.
        """
        resources = {self.pool_tag: 1, "RANKS": self.ranks}
        if self.gpus:
            resources["GPU"] = self.gpus * self.nodes
        return resources

    def describe(self) -> str:
        """One line for progress and error messages."""
        parts = [f"{self.ranks} rank(s)" if self.ranks > 1 else "1 task",
                 f"{self.cores} core(s)/rank", f"{self.memory}/rank"]
        if self.gpus:
            parts.append(f"{self.gpus} GPU(s)/node" + (f" ({self.gpu_type})" if self.gpu_type else ""))
        if self.nodes > 1:
            parts.append(f"{self.nodes} nodes")
        parts.append(f"walltime {self.walltime}")
        if self.partition:
            parts.append(f"partition {self.partition}")
        return ", ".join(parts)


def check_worker_fits(needs: CaseNeeds, resources: Mapping[str, float]) -> str | None:
    """Why a worker with dask ``resources`` cannot run a case with ``needs``, or ``None``."""
    if needs.gpus and resources.get("GPU", 0) < needs.gpus:
        return f"needs {needs.gpus} GPU(s), the worker has {int(resources.get('GPU', 0))}"
    if needs.ranks > 1 and resources.get("RANKS", 1) < needs.ranks:
        return f"needs {needs.ranks} ranks, the worker job has {int(resources.get('RANKS', 1))}"
    return None
