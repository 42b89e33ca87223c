"""The typed shape of an experiment: frozen dataclasses and the table of allowed keys.

An :class:`Experiment` holds its :class:`DatasetSpec` s and the expanded :class:`Case` s.
A case is one (algorithm, backend, device, workers, strategy, dataset, params) with the
measurement settings it runs under (:class:`RepeatPolicy`, time and memory limits, threads).
Its ``case_id`` is a hash of what defines it, not of how it is measured, so changing the
repeat count or a time limit keeps the ids (and ``--resume`` keeps working).

>>> policy = RepeatPolicy(min_repeats=3, max_repeats=3)
>>> policy.fixed
True
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from accelml.results.records import canonical_json

JSONScalar = str | int | float | bool | None

DEVICES = ("cpu", "cuda")
DATASET_SOURCES = ("generated", "shipped", "file", "keras", "openml")
GENERATORS = ("classification", "regression", "blobs", "images")
"""``images`` draws learnable synthetic uint8 images for keras cases (``accelml.dl.data``)."""
SHIPPED = ("digits", "breast_cancer", "wine", "diabetes", "iris")
KERAS_DATASETS = ("mnist", "fashion_mnist", "cifar10", "cifar100")
FILE_FORMATS = (".npz", ".csv", ".parquet")
TASKS = ("classification", "regression", "clustering")
DTYPES = ("float64", "float32")
LAYOUTS = ("C", "F")
DL_BACKENDS = ("keras",)

# Keys of a TOML section: name -> (allowed python types, description of what is allowed).
_INT = ((int,), "an integer")
_POS_INT = ((int,), "an integer >= 1")
_FLOAT = ((int, float), "a number")
_STR = ((str,), "a string")
_BOOL = ((bool,), "true or false")

EXPERIMENT_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "name": _STR,
    "description": _STR,
    "reference": _STR,
    "repeats": ((int, dict), "an integer >= 1 or a table {min, max, target, confidence, max_seconds}"),
    "warmup": ((int,), "an integer >= 0"),
    "time_limit": ((int, float), "seconds > 0"),
    "memory_limit_mb": ((int,), "an integer >= 1 (MiB)"),
    "threads": ((int,), "an integer >= 1"),
    "seed": _INT,
    "deterministic": ((bool,), "true or false (run every case in deterministic mode)"),
    "datasets": ((dict,), "a table of dataset tables ([datasets.NAME])"),
    "cluster": ((dict,), "a table of cluster settings ([cluster]: kind, jobs, resources, ...)"),
    "cases": ((list,), "an array of tables ([[cases]])"),
}
"""Top-level keys of a spec file."""

REPEAT_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "min": _POS_INT,
    "max": _POS_INT,
    "target": ((int, float), "a relative half-width > 0, e.g. 0.05 for +-5%"),
    "confidence": ((float,), "a level between 0.5 and 0.999"),
    "max_seconds": ((int, float), "seconds > 0"),
}

DATASET_KEYS: dict[str, dict[str, tuple[tuple[type, ...], str]]] = {
    "generated": {
        "source": _STR, "generator": _STR, "n_samples": _POS_INT, "n_features": _POS_INT,
        "n_informative": _POS_INT, "n_classes": _POS_INT, "centers": _POS_INT,
        "cluster_std": _FLOAT, "noise": _FLOAT, "seed": _INT, "test_size": _FLOAT,
        "dtype": _STR, "layout": _STR, "task": _STR,
        "image_size": _POS_INT, "test_samples": _POS_INT,
    },
    "shipped": {"source": _STR, "name": _STR, "seed": _INT, "test_size": _FLOAT,
                "dtype": _STR, "layout": _STR, "task": _STR},
    "file": {"source": _STR, "path": _STR, "target": _STR, "task": _STR, "seed": _INT,
             "test_size": _FLOAT, "dtype": _STR, "layout": _STR, "x_key": _STR, "y_key": _STR},
    "keras": {"source": _STR, "name": _STR, "path": _STR, "train_samples": _POS_INT,
              "test_samples": _POS_INT, "image_size": _POS_INT, "dtype": _STR, "task": _STR},
    "openml": {"source": _STR, "name": _STR, "data_id": _POS_INT, "version": _POS_INT,
               "path": _STR, "target": _STR, "task": _STR, "seed": _INT, "test_size": _FLOAT,
               "dtype": _STR, "layout": _STR, "max_samples": _POS_INT},
}
"""Keys of ``[datasets.NAME]`` by ``source``."""

CASE_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "algorithm": ((str, list), "a name or a list of names"),
    "backend": ((str, list), "a name or a list of names"),
    "device": ((str, list), "'cpu', 'cuda' or a list of them"),
    "workers": ((int, list), "an integer >= 1 or a list of them"),
    "strategy": ((str, list), "a distribution strategy or a list of them"),
    "dataset": ((str, list), "a dataset name or a list of them"),
    "params": ((dict,), "a table of fixed parameters"),
    "grid": ((dict,), "a table of parameter name = [values] (every combination runs)"),
    "repeats": EXPERIMENT_KEYS["repeats"],
    "warmup": EXPERIMENT_KEYS["warmup"],
    "time_limit": EXPERIMENT_KEYS["time_limit"],
    "memory_limit_mb": EXPERIMENT_KEYS["memory_limit_mb"],
    "threads": EXPERIMENT_KEYS["threads"],
    # Deep-learning shorthands (keras cases); they become training parameters.
    "model": _STR,
    "epochs": _POS_INT,
    "batch_size": ((int,), "an integer >= 1 (per worker; global batch = batch_size x workers)"),
    "learning_rate": _FLOAT,
    "lr_scaling": ((str,), "'linear', 'sqrt' or 'none'"),
}
"""Keys of one ``[[cases]]`` table. Grid keys (algorithm ... dataset) take one value or a list."""

DL_SHORTHANDS = ("model", "epochs", "batch_size", "learning_rate", "lr_scaling")


@dataclass(frozen=True)
class RepeatPolicy:
    """How often a case is measured.

    It runs ``warmup`` uncounted rounds, then repeats until the confidence interval of every
    timed phase's median is within ``target_rel`` of the median (at least ``min_repeats``),
    or ``max_repeats`` is reached, or ``max_seconds`` of counted rounds have passed. A case
    that stops without reaching the target is flagged noisy. ``min_repeats == max_repeats``
    is a fixed count.
    """

    min_repeats: int = 3
    max_repeats: int = 10
    target_rel: float = 0.05
    confidence: float = 0.95
    warmup: int = 1
    max_seconds: float | None = None

    @property
    def fixed(self) -> bool:
        return self.min_repeats == self.max_repeats

    def to_dict(self) -> dict[str, Any]:
        return {"min_repeats": self.min_repeats, "max_repeats": self.max_repeats,
                "target_rel": self.target_rel, "confidence": self.confidence,
                "warmup": self.warmup, "max_seconds": self.max_seconds}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RepeatPolicy":
        return cls(**data)


@dataclass(frozen=True)
class DatasetSpec:
    """One ``[datasets.NAME]`` table: ``source`` and its options (sorted key/value pairs)."""

    name: str
    source: str
    options: tuple[tuple[str, JSONScalar], ...] = ()

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)

    @property
    def identity(self) -> dict[str, Any]:
        """What defines the data (the NAME is a label and is left out)."""
        return {"source": self.source, **dict(self.options)}

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.identity).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "options": dict(self.options)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DatasetSpec":
        return cls(data["name"], data["source"], tuple(sorted(data.get("options", {}).items())))


@dataclass(frozen=True)
class Case:
    """One runnable case: what it is, and how it is measured."""

    algorithm: str
    backend: str
    device: str
    dataset: DatasetSpec
    workers: int = 1
    strategy: str | None = None
    params: tuple[tuple[str, JSONScalar], ...] = ()
    repeats: RepeatPolicy = field(default_factory=RepeatPolicy)
    time_limit_s: float = 600.0
    memory_limit_mb: int | None = None
    threads: int | None = None
    seed: int = 0

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "backend": self.backend,
            "device": self.device,
            "workers": self.workers,
            "strategy": self.strategy,
            "dataset": self.dataset.identity,
            "params": dict(self.params),
        }

    @property
    def case_id(self) -> str:
        """A stable id: the hash of what defines the case (not of how it is measured)."""
        return hashlib.sha256(canonical_json(self.identity).encode()).hexdigest()[:16]

    @property
    def params_dict(self) -> dict[str, JSONScalar]:
        return dict(self.params)

    @property
    def is_deep_learning(self) -> bool:
        return self.backend in DL_BACKENDS

    @property
    def label(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.params)
        workers = f" x{self.workers}" if self.workers != 1 else ""
        return (f"{self.algorithm}/{self.backend}/{self.device}{workers} on {self.dataset.name}"
                + (f" ({extra})" if extra else ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "algorithm": self.algorithm,
            "backend": self.backend,
            "device": self.device,
            "dataset": self.dataset.to_dict(),
            "workers": self.workers,
            "strategy": self.strategy,
            "params": dict(self.params),
            "repeats": self.repeats.to_dict(),
            "time_limit_s": self.time_limit_s,
            "memory_limit_mb": self.memory_limit_mb,
            "threads": self.threads,
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Case":
        case = cls(
            algorithm=data["algorithm"],
            backend=data["backend"],
            device=data["device"],
            dataset=DatasetSpec.from_dict(data["dataset"]),
            workers=int(data.get("workers", 1)),
            strategy=data.get("strategy"),
            params=tuple(sorted(data.get("params", {}).items())),
            repeats=RepeatPolicy.from_dict(data.get("repeats", {})),
            time_limit_s=float(data.get("time_limit_s", 600.0)),
            memory_limit_mb=data.get("memory_limit_mb"),
            threads=data.get("threads"),
            seed=int(data.get("seed", 0)),
        )
        if "case_id" in data and data["case_id"] != case.case_id:
            raise ValueError(f"case_id {data['case_id']} does not match its definition")
        return case


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

    @property
    def cluster(self) -> dict[str, Any] | None:
        import json

        return json.loads(self.cluster_json) if self.cluster_json else None

    @property
    def text_hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.case_id == case_id:
                return case
        raise KeyError(case_id)
