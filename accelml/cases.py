"""The records every stage reads: an :class:`Experiment` of :class:`Case` s on :class:`DatasetSpec` s.

This is the lowest layer of accelml: the spec builds these records, executors and the
runner run them, the store keeps them and the report reads them back, all importing them
from here. A case is one (algorithm, backend, device, ranks, strategy, dataset, params)
with the measurement settings it runs under (:class:`RepeatPolicy`, time and memory
limits, threads). Its ``case_id`` is a hash of what defines it, not of how it is measured,
so changing the repeat count or a time limit keeps the ids (and ``--resume`` keeps working).
An :class:`Expectation` says whether two results should be bitwise identical, and why.

>>> policy = RepeatPolicy(min_repeats=3, max_repeats=3)
>>> policy.fixed
True
>>> case = Case("kmeans", "sklearn", "cpu", DatasetSpec("blobs", "generated"))
>>> len(case.case_id)
16
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from accelml.convert import OBJECT, OMIT_NONE, OPTIONAL_OBJECT, JSONRecord, JSONValue, from_data, stored_as

JSONScalar = str | int | float | bool | None


def canonical_json(value: object) -> str:
    """JSON with sorted keys and no spaces: equal data gives equal text (and equal hashes).

    ``value`` is anything :func:`json.dumps` takes (tuples included).
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)


class CaseLike(Protocol):
    """What a case and a stored result have in common (a spec ``Case`` or a ``CaseResult``)."""

    @property
    def algorithm(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def ranks(self) -> int: ...
    @property
    def strategy(self) -> str | None: ...
    @property
    def params(self) -> tuple[tuple[str, JSONScalar], ...]: ...
    @property
    def library_params(self) -> tuple[tuple[str, JSONScalar], ...]: ...
    @property
    def container(self) -> Container | None: ...


def case_label(case: CaseLike, dataset: str, params: Iterable[str] | None = None) -> str:
    """The one name of a case (a spec ``Case`` or a stored ``CaseResult``): everything that
    tells it apart from the others of a spec, as one line,
    ``algorithm/backend/device[ xRANKS][ [strategy]] on dataset (params)[ in runtime:image]``.
    ``params`` names the parameters to show (default: all of them, the library's own too).
    The dry run, the progress lines, ``check``, the agreement matrix and the reports all name
    cases so.

    >>> case = Case("fashion_mnist_cnn", "keras", "cpu", DatasetSpec("digits", "shipped"),
    ...             ranks=2, strategy="horovod", params=(("epochs", 4), ("seed", 0)))
    >>> case_label(case, "digits")
    'fashion_mnist_cnn/keras/cpu x2 [horovod] on digits (epochs=4, seed=0)'
    >>> case_label(case, "digits", params=["seed"])
    'fashion_mnist_cnn/keras/cpu x2 [horovod] on digits (seed=0)'
    """
    wanted = None if params is None else set(params)
    extra = ", ".join(f"{key}={value}" for key, value in case.params + case.library_params
                      if wanted is None or key in wanted)
    ranks = f" x{case.ranks}" if case.ranks != 1 else ""
    strategy = f" [{case.strategy}]" if case.strategy else ""
    inside = f" in {case.container.label}" if case.container is not None else ""
    return (f"{case.algorithm}/{case.backend}/{case.device}{ranks}{strategy} on {dataset}"
            + (f" ({extra})" if extra else "") + inside)


@dataclass(frozen=True)
class Expectation(JSONRecord):
    """Whether two results should be bitwise identical, and the reason either way."""

    bitwise: bool
    reason: str


@dataclass(frozen=True)
class RepeatPolicy(JSONRecord):
    """How often a case is measured.

    It runs ``warmup`` uncounted rounds, then repeats until the confidence interval of every
    timed phase's median is within ``target_rel`` of the median (at least ``min_repeats``),
    or ``max_repeats`` is reached, or ``max_seconds`` of counted rounds have passed. A case
    that stops without reaching the target is flagged noisy. ``min_repeats == max_repeats``
    is a fixed count. A phase whose first warm-up run already takes ``skip_warmup_after``
    seconds or more counts that run as its first repeat: an untimed priming fit on a thousand
    rows has paid the one-time costs (imports, thread pools, dispatch) before it, and throwing
    away a 15-second fit doubles nothing but the wall time (None: always warm up).
    """

    min_repeats: int = 3
    max_repeats: int = 10
    target_rel: float = 0.05
    confidence: float = 0.95
    warmup: int = 1
    max_seconds: float | None = None
    skip_warmup_after: float | None = 2.0

    @property
    def fixed(self) -> bool:
        return self.min_repeats == self.max_repeats


@dataclass(frozen=True)
class DatasetSpec(JSONRecord):
    """One ``[datasets.NAME]`` table: ``source`` and its options (sorted key/value pairs)."""

    name: str
    source: str
    options: tuple[tuple[str, JSONScalar], ...] = field(default=(), metadata=OBJECT)

    def option(self, key: str, default: JSONScalar = None) -> JSONScalar:
        return dict(self.options).get(key, default)

    @property
    def identity(self) -> dict[str, JSONValue]:
        """What defines the data (the NAME is a label and is left out)."""
        return {"source": self.source, **dict(self.options)}

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.identity).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Container(JSONRecord):
    """The container image a case runs in (spec key ``container``).

    ``runtime`` names a plug-in of :mod:`accelml.containers` (charliecloud, apptainer,
    singularity), ``image`` what it runs (a directory or a ``.sif`` file), ``binds`` host paths
    mounted into it (``SRC`` or ``SRC:DST``) and ``python`` the interpreter inside it.

    >>> Container("charliecloud", "/images/bookworm", ("/scratch",)).label
    'charliecloud:bookworm'
    >>> Container("charliecloud", "/images/bookworm", python="/venv/bin/python").label
    'charliecloud:bookworm with /venv/bin/python'
    """

    runtime: str
    image: str
    binds: tuple[str, ...] = ()
    python: str = "python3"

    @property
    def label(self) -> str:
        """``runtime:image-name`` (and the Python inside when it is not the image's
        ``python3``), as tables and the agreement matrix show it."""
        python = f" with {self.python}" if self.python != "python3" else ""
        return f"{self.runtime}:{self.image.rstrip('/').rsplit('/', 1)[-1]}{python}"


OVERSUBSCRIBE = "oversubscribe"
"""The parameter (spec key) that lets a case start more ranks on one machine than it has
cores; such a case is flagged wherever its results are shown."""


@dataclass(frozen=True)
class Case(JSONRecord):
    """One runnable case: what it is, and how it is measured."""

    algorithm: str
    backend: str
    device: str
    dataset: DatasetSpec
    ranks: int = field(default=1, metadata=stored_as("workers"))
    """The case's data-parallel ranks (a classical case: its dask workers, one a rank); stored
    as ``workers``, its name before, so stores and case ids read as they were."""
    strategy: str | None = None
    params: tuple[tuple[str, JSONScalar], ...] = field(default=(), metadata=OBJECT)
    repeats: RepeatPolicy = field(default_factory=RepeatPolicy)
    library_params: tuple[tuple[str, JSONScalar], ...] = field(default=(), metadata=OPTIONAL_OBJECT)
    """The library's own parameters for this backend (``backend_params`` in a spec)."""
    time_limit_s: float = 600.0
    memory_limit_mb: int | None = None
    threads: int | None = None
    seed: int = 0
    container: Container | None = field(default=None, metadata=OMIT_NONE)
    """The image the case process and its ranks run in; None: on the host."""

    @property
    def identity(self) -> dict[str, JSONValue]:
        """What defines the case (``library_params`` and ``container`` only when there are
        some: the ids of cases without them are those they always had)."""
        identity: dict[str, JSONValue] = {
            "algorithm": self.algorithm,
            "backend": self.backend,
            "device": self.device,
            "workers": self.ranks,   # the key before the rename: the ids stay as they were
            "strategy": self.strategy,
            "dataset": self.dataset.identity,
            "params": dict(self.params),
        }
        if self.library_params:
            identity["library_params"] = dict(self.library_params)
        if self.container is not None:
            identity["container"] = self.container.to_dict()
        return identity

    @property
    def case_id(self) -> str:
        """A stable id: the hash of what defines the case (not of how it is measured)."""
        return hashlib.sha256(canonical_json(self.identity).encode()).hexdigest()[:16]

    @property
    def params_dict(self) -> dict[str, JSONScalar]:
        return dict(self.params)

    @property
    def oversubscribe(self) -> bool:
        """Whether the spec allows more ranks than cores (:data:`OVERSUBSCRIBE`)."""
        return self.params_dict.get(OVERSUBSCRIBE) is True

    @property
    def label(self) -> str:
        """What tells this case apart from every other (:func:`case_label`)."""
        return case_label(self, self.dataset.name)

    def json_extras(self) -> dict[str, JSONValue]:
        """Written beside the fields (:mod:`accelml.convert`): the ``case_id``, checked when read."""
        return {"case_id": self.case_id}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Case:
        """The case ``data`` describes; a ``case_id`` that does not match it is a ``ValueError``."""
        case = from_data(cls, data)
        if "case_id" in data and data["case_id"] != case.case_id:
            raise ValueError(f"case_id {data['case_id']} does not match its definition")
        return case


INTERLEAVED = "interleaved"
ISOLATED = "isolated"
MEASUREMENTS = (INTERLEAVED, ISOLATED)
"""How a case's rounds are taken: ``interleaved`` (one timed round in turn with the other
cases of its comparison group, each in its own warm process: A B C A B C ...) or
``isolated`` (all its rounds back to back, alone)."""


@dataclass(frozen=True)
class Experiment:
    """A parsed, validated spec: its datasets and expanded cases, and where it came from."""

    name: str
    text: str
    path: str
    datasets: tuple[DatasetSpec, ...]
    cases: tuple[Case, ...]
    reference: str | None = None
    description: str = ""
    cluster_json: str = ""         # the [cluster] table (canonical JSON), for the executor
    deterministic: bool = False    # run in deterministic mode (accelml.runner.determinism)
    measurement: str = INTERLEAVED     # or ISOLATED (MEASUREMENTS)

    @property
    def cluster(self) -> dict[str, JSONValue] | None:
        if not self.cluster_json:
            return None
        table: dict[str, JSONValue] = json.loads(self.cluster_json)
        return table

    @property
    def text_hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.case_id == case_id:
                return case
        raise KeyError(case_id)
