"""Read an experiment spec (TOML) into a validated :class:`~accelml.cases.Experiment`.

Every problem is one :class:`~accelml.errors.SpecError` (exit code 2) whose message names
the file, the key path and what is allowed, e.g.::

    experiments/x.toml: cases[0].backend: unknown backend 'sklearn-gpu'; allowed: keras, sklearn, sklearnex, xgboost

Nothing is run or written before the whole spec has validated.

A spec::

    name = "smoke"
    reference = "sklearn"          # backend that speedups and agreement are measured against
    repeats = {min = 3, max = 8, target = 0.05}   # or a fixed count: repeats = 5
                                   # skip_warmup_after = 2.0 (default): a phase whose first
                                   # run takes 2 s counts it (false: always warm up)
    warmup = 1
    time_limit = 120               # seconds per case
    threads = 1                    # threads each case may use (default: the cores it is given)
    deterministic = false          # true: seeds filled in where unset, TF op determinism,
                                   # Horovod fusion off (see accelml.runner.determinism)
    measurement = "interleaved"    # the reference case and the cases compared with it take
                                   # timed rounds in turn; "isolated": each case alone

    [datasets.blobs]
    source = "generated"           # generated | shipped | file | keras | openml
    generator = "blobs"            # classification | regression | blobs
    n_samples = 2000
    n_features = 8
    centers = 4
    seed = 0

    [[cases]]
    algorithm = "kmeans"
    backend = ["sklearn", "sklearnex"]
    dataset = "blobs"
    params = {n_clusters = 4, random_state = 0}
    grid = {max_iter = [50, 100]}  # every combination is a case

>>> experiment = load_spec_text('''
... reference = "sklearn"
... [datasets.blobs]
... source = "generated"
... generator = "blobs"
... n_samples = 200
... [[cases]]
... algorithm = "kmeans"
... backend = ["sklearn", "sklearnex"]
... dataset = "blobs"
... grid = {n_clusters = [2, 3]}
... ''', "inline.toml")
>>> len(experiment.cases)
4
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from accelml.cases import (
    INTERLEAVED,
    MEASUREMENTS,
    Case,
    Container,
    DatasetSpec,
    Experiment,
    RepeatPolicy,
    canonical_json,
)
from accelml.containers import container_from
from accelml.convert import MAX_NESTING, nesting_too_deep
from accelml.datasets.loaders import FILE_FORMATS, file_problem
from accelml.datasets.registry import NAMED_SOURCES, dataset_task
from accelml.dl.models import MODELS
from accelml.dl.strategies import STRATEGIES_POINT, default_strategy
from accelml.errors import AccelmlError, SpecError
from accelml.estimators import BACKENDS, check_params
from accelml.estimators import algorithms as algorithm_infos
from accelml.executors.cluster_settings import load_cluster_settings
from accelml.spec.schema import (
    CASE_KEYS,
    DATASET_KEYS,
    DATASET_SOURCES,
    DEVICES,
    DL_SHORTHANDS,
    DTYPES,
    EXPERIMENT_KEYS,
    LAYOUTS,
    RENAMED_CASE_KEYS,
    REPEAT_KEYS,
    TASKS,
)

logger = logging.getLogger(__name__)

DEFAULT_SPEC = "default.toml"
MAX_SEED = 2**32 - 1
"""Seeds are NumPy's: 0 to 2**32 - 1."""
MAX_GENERATED_VALUES = 2**31
"""A generated dataset holds at most this many values (n_samples x n_features; 16 GiB of float64)."""
INT64 = (-(2**63), 2**63 - 1)
MAX_TIME_LIMIT_S = 30 * 86400
"""The longest time limit a case may have: 30 days."""
MAX_CASES = 10_000
"""The most cases one spec may expand to (each runs in a process of its own); a bigger
comparison is several specs."""
GRID_KEYS = ("algorithm", "backend", "device", "ranks", "strategy", "dataset")


def _known_names() -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str], dict[str, tuple[str, ...]]]:
    """(algorithms, backends, algorithm -> task, algorithm -> backends having it), from the
    algorithm table and the backend records (deep-learning backends included)."""
    infos = algorithm_infos()
    return (tuple(sorted(info.name for info in infos)), tuple(sorted(BACKENDS.names())),
            {info.name: info.task for info in infos},
            {info.name: tuple(info.backends) for info in infos})


def _dl_names() -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(models, strategies, the default strategy) the deep-learning package offers."""
    return tuple(sorted(MODELS)), tuple(sorted(STRATEGIES_POINT.names())), default_strategy().name


class _Spec:
    """Validation state for one file: every error names ``self.source`` and a key path."""

    def __init__(self, source: str):
        self.source = source

    def error(self, where: str, message: str) -> SpecError:
        return SpecError(f"{self.source}: {where}: {message}" if where else f"{self.source}: {message}")

    def check_keys(self, table: dict[str, Any], allowed: dict[str, tuple[tuple[type, ...], str]],
                   where: str) -> None:
        for key, value in table.items():
            path = f"{where}.{_key(key)}" if where else _key(key)
            if key not in allowed:
                raise self.error(path, f"unknown key; allowed: {', '.join(sorted(allowed))}")
            types, description = allowed[key]
            if not _is_instance(value, types):
                raise self.error(path, f"expected {description}, got {_describe(value)}")

    def one_of(self, value: Any, allowed: tuple[str, ...], where: str, what: str) -> str:
        if value not in allowed:
            raise self.error(where, f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
        return str(value)


def _key(key: str) -> str:
    """A key as it appears in a key path: bare when plain, quoted (escaped) otherwise."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _is_instance(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    if isinstance(value, float) and float in types and not math.isfinite(value):
        return False
    return isinstance(value, types)


def _describe(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} ({text[:40]}{'...' if len(text) > 40 else ''})"


def _as_list(spec: _Spec, value: Any, where: str, types: tuple[type, ...], what: str) -> list[Any]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise spec.error(where, f"empty list: give at least one {what}")
    for index, item in enumerate(values):
        if not _is_instance(item, types):
            raise spec.error(f"{where}[{index}]", f"expected {what}, got {_describe(item)}")
    return values


def _repeat_policy(spec: _Spec, value: Any, warmup: int, where: str,
                   base: RepeatPolicy) -> RepeatPolicy:
    if value is None:
        return RepeatPolicy(base.min_repeats, base.max_repeats, base.target_rel, base.confidence,
                            warmup, base.max_seconds, base.skip_warmup_after)
    if isinstance(value, int):
        if value < 1:
            raise spec.error(where, f"expected an integer >= 1, got {value}")
        return RepeatPolicy(value, value, base.target_rel, base.confidence, warmup, base.max_seconds,
                            base.skip_warmup_after)
    spec.check_keys(value, REPEAT_KEYS, where)
    minimum = value.get("min", base.min_repeats)
    maximum = value.get("max", max(base.max_repeats, minimum))
    target = float(value.get("target", base.target_rel))
    confidence = float(value.get("confidence", base.confidence))
    max_seconds = value.get("max_seconds", base.max_seconds)
    skip = value.get("skip_warmup_after", base.skip_warmup_after)
    if skip is True or (skip is not None and skip is not False and skip <= 0):
        raise spec.error(f"{where}.skip_warmup_after", f"expected seconds > 0 or false, got {skip}")
    if minimum < 1:
        raise spec.error(f"{where}.min", f"expected an integer >= 1, got {minimum}")
    if maximum < minimum:
        raise spec.error(f"{where}.max", f"must be >= min ({minimum}), got {maximum}")
    if not 0 < target < 1:
        raise spec.error(f"{where}.target", f"expected a relative half-width in (0, 1), got {target}")
    if not 0.5 <= confidence <= 0.999:
        raise spec.error(f"{where}.confidence", f"expected a level in [0.5, 0.999], got {confidence}")
    if max_seconds is not None and max_seconds <= 0:
        raise spec.error(f"{where}.max_seconds", f"expected seconds > 0, got {max_seconds}")
    return RepeatPolicy(minimum, maximum, target, confidence, warmup,
                        None if max_seconds is None else float(max_seconds),
                        None if skip is None or skip is False else float(skip))


def _positive(spec: _Spec, table: dict[str, Any], key: str, where: str, default: Any,
              minimum: float = 1) -> Any:
    value = table.get(key, default)
    if value is not None and value < minimum:
        raise spec.error(f"{where}{key}", f"expected a value >= {minimum}, got {value}")
    return value


def _dataset(spec: _Spec, name: str, table: Any, base_dir: Path) -> DatasetSpec:
    where = f"datasets.{_key(name)}"
    if not isinstance(table, dict):
        raise spec.error(where, f"expected a table [{where}], got {_describe(table)}")
    if "source" not in table:
        raise spec.error(f"{where}.source", f"missing; allowed: {', '.join(DATASET_SOURCES)}")
    source = table["source"]
    if not isinstance(source, str):
        raise spec.error(f"{where}.source", f"expected a string, got {_describe(source)}")
    spec.one_of(source, DATASET_SOURCES, f"{where}.source", "dataset source")
    spec.check_keys(table, DATASET_KEYS[source], where)
    options = {key: value for key, value in table.items() if key != "source"}
    if "task" in options:
        spec.one_of(options["task"], TASKS, f"{where}.task", "task")
    if "dtype" in options:
        spec.one_of(options["dtype"], DTYPES, f"{where}.dtype", "dtype")
    if "layout" in options:
        spec.one_of(options["layout"], LAYOUTS, f"{where}.layout", "layout")
    if "test_size" in options and not 0 < options["test_size"] < 1:
        raise spec.error(f"{where}.test_size", f"expected a fraction in (0, 1), got {options['test_size']}")
    named = NAMED_SOURCES.get(source)
    if named is not None:
        # The names come from the loaders: a name that validates is one that loads.
        if named.key not in options:
            raise spec.error(f"{where}.{named.key}", f"missing; allowed: {', '.join(named.names)}")
        spec.one_of(options[named.key], named.names, f"{where}.{named.key}", named.what)
    if "seed" in options and not 0 <= options["seed"] <= MAX_SEED:
        raise spec.error(f"{where}.seed", f"expected an integer from 0 to {MAX_SEED}, got {options['seed']}")
    if source == "generated":
        n_samples = options.get("n_samples", 1000)
        if n_samples < 4:
            raise spec.error(f"{where}.n_samples", f"expected at least 4 samples, got {n_samples}")
        for key in ("n_features", "n_classes", "centers", "n_informative"):
            if key in options and options[key] < 1:
                raise spec.error(f"{where}.{key}", f"expected an integer >= 1, got {options[key]}")
        values = n_samples * options.get("n_features", 20)
        if values > MAX_GENERATED_VALUES:
            raise spec.error(f"{where}.n_samples", f"{n_samples} samples x {options.get('n_features', 20)} "
                             f"features is {values:.3g} values; at most {MAX_GENERATED_VALUES:.3g} "
                             "(16 GiB of float64) are generated")
        for key in ("cluster_std", "noise"):
            if key in options and options[key] < 0:
                raise spec.error(f"{where}.{key}", f"expected a number >= 0, got {options[key]}")
    elif source == "openml" and "name" not in options and "data_id" not in options:
        raise spec.error(where, "an openml dataset needs name or data_id")
    if source == "file" and "path" not in options:
        raise spec.error(f"{where}.path", f"missing; a file of type {', '.join(FILE_FORMATS)}")
    if "path" in options:
        path = Path(options["path"]).expanduser()
        if not path.is_absolute():
            path = (base_dir / path).resolve()
        if source == "file" and path.suffix.lower() not in FILE_FORMATS:
            raise spec.error(f"{where}.path", f"unsupported file type {path.suffix!r}; allowed: "
                             + ", ".join(FILE_FORMATS))
        if not path.exists():
            raise spec.error(f"{where}.path", f"file not found: {path}")
        options["path"] = str(path)
        if source == "file" and path.suffix.lower() in (".csv", ".parquet") and "target" not in options \
                and options.get("task") != "clustering":
            raise spec.error(f"{where}.target", "missing; name the target column (or task = 'clustering')")
        if source == "file":
            problem = file_problem(str(path), target=options.get("target"), x_key=options.get("x_key", "X"),
                                   y_key=options.get("y_key"))
            if problem is not None:
                raise spec.error(f"{where}.{problem[0]}", problem[1])
    return DatasetSpec(name, source, tuple(sorted(options.items())))


def _experiment_defaults(spec: _Spec, document: dict[str, Any]) -> dict[str, Any]:
    warmup = document.get("warmup", 1)
    if warmup < 0:
        raise spec.error("warmup", f"expected an integer >= 0, got {warmup}")
    time_limit = _time_limit(spec, document.get("time_limit", 600.0), "time_limit")
    return {
        "repeats": _repeat_policy(spec, document.get("repeats"), warmup, "repeats", RepeatPolicy()),
        "warmup": warmup,
        "time_limit_s": float(time_limit),
        "memory_limit_mb": _positive(spec, document, "memory_limit_mb", "", None),
        "threads": _positive(spec, document, "threads", "", None),
        "seed": _seed(spec, document.get("seed", 0)),
        "containers": _containers(spec, document.get("container", HOST), "container"),
    }


def _time_limit(spec: _Spec, seconds: float, where: str) -> float:
    """A time limit in seconds: above 0 and at most :data:`MAX_TIME_LIMIT_S` (nan and inf are
    neither), so that every timer and batch directive can hold it."""
    if not 0 < seconds <= MAX_TIME_LIMIT_S:
        raise spec.error(where, f"expected seconds > 0 and at most {MAX_TIME_LIMIT_S} "
                         f"(30 days), got {seconds}")
    return float(seconds)


def _case_count(table: object) -> int:
    """How many cases a ``[[cases]]`` table asks for (its lists and grid multiplied), read
    before any is made; a table that is not one counts 0 (its validation says why)."""
    if not isinstance(table, dict):
        return 0
    grid = table.get("grid")
    lists = [table.get(key) for key in GRID_KEYS]
    lists += list(grid.values()) if isinstance(grid, dict) else []
    return math.prod(len(value) for value in lists if isinstance(value, list))


HOST = "host"
"""A ``container`` value: run on the host, outside any image."""


def _containers(spec: _Spec, value: Any, where: str) -> list[Container | None]:
    """``container``: a table, ``"host"`` or a list of them -> one entry per value (None: host).
    A table's missing ``runtime``, ``binds``, ``python`` come from the site's defaults
    (``accelml.container`` in ``~/.config/dask/accelml.yaml``)."""
    values = value if isinstance(value, list) else [value]
    found: list[Container | None] = []
    for index, item in enumerate(values):
        path = f"{where}[{index}]" if isinstance(value, list) else where
        if item == HOST:
            found.append(None)
        elif isinstance(item, dict):
            try:
                found.append(container_from(item, path))
            except SpecError as error:
                raise SpecError(f"{spec.source}: {error}") from None
        else:
            raise spec.error(path, f"expected a table {{runtime, image, binds, python}} or "
                                   f"\"{HOST}\", got {_describe(item)}")
    if len(set(found)) != len(found):
        raise spec.error(where, "lists the same container twice")
    return found


def _seed(spec: _Spec, seed: int) -> int:
    if not 0 <= seed <= MAX_SEED:
        raise spec.error("seed", f"expected an integer from 0 to {MAX_SEED}, got {seed}")
    return seed


def _check_integers(spec: _Spec, value: Any, where: str) -> None:
    """TOML integers are 64-bit; a parser that reads larger ones must not pass them on."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_integers(spec, item, f"{where}.{_key(key)}" if where else _key(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_integers(spec, item, f"{where}[{index}]")
    elif isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        raise spec.error(where, f"integer {value:.3g} is out of the 64-bit range TOML allows")


def _cases(spec: _Spec, index: int, table: Any, datasets: dict[str, DatasetSpec],
           defaults: dict[str, Any]) -> list[Case]:
    where = f"cases[{index}]"
    if not isinstance(table, dict):
        raise spec.error(where, f"expected a table ([[cases]]), got {_describe(table)}")
    spec.check_keys(table, CASE_KEYS, where)
    for key in ("algorithm", "backend", "dataset"):
        if key not in table:
            raise spec.error(f"{where}.{key}", "missing (every case needs algorithm, backend and dataset)")
    algorithms, backends, tasks, implemented = _known_names()
    models, strategies, default_strategy_name = _dl_names()

    listed = isinstance(table["backend"], list)
    backend_values = [spec.one_of(b, backends, f"{where}.backend[{i}]" if listed else f"{where}.backend",
                                  "backend")
                      for i, b in enumerate(_as_list(spec, table["backend"], f"{where}.backend", (str,),
                                                     "backend name"))]
    is_dl = [BACKENDS.get(b).deep_learning for b in backend_values]
    if any(is_dl) and not all(is_dl):
        deep_learning = ", ".join(b for b, dl in zip(backend_values, is_dl, strict=True) if dl)
        raise spec.error(f"{where}.backend", f"{deep_learning} cannot share a [[cases]] table "
                         "with classical backends; give it its own table")
    deep = all(is_dl)

    algorithm_values = _as_list(spec, table["algorithm"], f"{where}.algorithm", (str,), "algorithm name")
    for i, algorithm in enumerate(algorithm_values):
        path = f"{where}.algorithm" + (f"[{i}]" if isinstance(table["algorithm"], list) else "")
        if deep:
            if models:
                spec.one_of(algorithm, models, path, "model")
        else:
            spec.one_of(algorithm, algorithms, path, "algorithm")
    device_values = [spec.one_of(d, DEVICES, f"{where}.device", "device")
                     for d in _as_list(spec, table.get("device", "cpu"), f"{where}.device", (str,), "device")]
    rank_values = _as_list(spec, table.get("ranks", 1), f"{where}.ranks", (int,), "an integer >= 1")
    for value in rank_values:
        if value < 1:
            raise spec.error(f"{where}.ranks", f"expected integers >= 1, got {value}")
    strategy_values = _as_list(spec, table.get("strategy", default_strategy_name if deep else "none"),
                               f"{where}.strategy", (str,), "strategy name")
    if deep:
        for value in strategy_values:
            if strategies:
                spec.one_of(value, strategies, f"{where}.strategy", "strategy")
    elif strategy_values != ["none"]:
        raise spec.error(f"{where}.strategy", "only keras cases take a strategy "
                         "(classical backends run in one process)")
    if not deep and rank_values != [1]:
        _check_workers(spec, where, algorithm_values, backend_values)
    dataset_values = _as_list(spec, table["dataset"], f"{where}.dataset", (str,), "dataset name")
    for value in dataset_values:
        if value not in datasets:
            raise spec.error(f"{where}.dataset", f"unknown dataset {value!r}; defined: "
                             + (", ".join(_key(name) for name in sorted(datasets)) or "none (add [datasets.NAME])"))

    params = dict(table.get("params", {}))
    for key in DL_SHORTHANDS:
        if key in table:
            if not deep:
                raise spec.error(f"{where}.{key}", "only keras cases take deep-learning keys")
            params[key if key != "model" else "model"] = table[key]
    if deep and "model" in params:
        raise spec.error(f"{where}.model", "for keras cases the model is the algorithm; "
                         "write algorithm = \"<model>\"")
    for key, value in params.items():
        if isinstance(value, (dict, list)):
            raise spec.error(f"{where}.params.{_key(key)}", f"expected a single value, got {_describe(value)}"
                             " (put lists under grid)")
    library_params = _backend_params(spec, where, table.get("backend_params", {}), backend_values, deep)
    grid = table.get("grid", {})
    grid_axes = []
    for key, values in grid.items():
        values = _as_list(spec, values, f"{where}.grid.{_key(key)}", (str, int, float, bool), "value")
        if key in params:
            raise spec.error(f"{where}.grid.{_key(key)}", "also given in params; give it in one place")
        grid_axes.append([(key, value) for value in values])

    warmup = table.get("warmup", defaults["warmup"])
    if warmup < 0:
        raise spec.error(f"{where}.warmup", f"expected an integer >= 0, got {warmup}")
    base = defaults["repeats"]
    repeats = _repeat_policy(spec, table.get("repeats"), warmup, f"{where}.repeats", base)
    time_limit = _time_limit(spec, table.get("time_limit", defaults["time_limit_s"]),
                             f"{where}.time_limit")
    memory_limit = _positive(spec, table, "memory_limit_mb", f"{where}.", defaults["memory_limit_mb"])
    threads = _positive(spec, table, "threads", f"{where}.", defaults["threads"])
    containers = (_containers(spec, table["container"], f"{where}.container") if "container" in table
                  else defaults["containers"])

    cases = []
    for algorithm, backend, device, ranks, strategy, dataset_name in itertools.product(
            algorithm_values, backend_values, device_values, rank_values, strategy_values,
            dataset_values):
        for combination, container in itertools.product(
                itertools.product(*grid_axes) if grid_axes else [()], containers):
            case_params = {**params, **dict(combination)}
            if deep:
                _check_training(spec, where, algorithm, backend, device, ranks, strategy,
                                datasets[dataset_name], case_params)
            else:
                if backend not in implemented.get(algorithm, ()):
                    raise spec.error(f"{where}.backend", f"backend {backend!r} has no {algorithm}; "
                                     "backends with it: " + ", ".join(implemented.get(algorithm, ())))
                _check_task(spec, where, algorithm, tasks, datasets[dataset_name])
                _check_params(spec, where, algorithm, backend, device, case_params,
                              library_params.get(backend, {}))
            cases.append(Case(
                algorithm=algorithm, backend=backend, device=device,
                dataset=datasets[dataset_name], ranks=ranks,
                strategy=None if strategy == "none" else strategy,
                params=tuple(sorted(case_params.items())), repeats=repeats,
                library_params=tuple(sorted(library_params.get(backend, {}).items())),
                time_limit_s=float(time_limit), memory_limit_mb=memory_limit, threads=threads,
                seed=defaults["seed"], container=container,
            ))
    return cases


def _check_workers(spec: _Spec, where: str, algorithms: list[str], backends: list[str]) -> None:
    """Classical cases on several ranks: every backend of the table must train every
    algorithm of it on dask workers, one a rank (its implementation names an ``on_workers``
    estimator)."""
    for backend in backends:
        record = BACKENDS.get(backend)
        for algorithm in algorithms:
            if algorithm in record.implementations and not record.trains_on_workers(algorithm):
                having = [other.name for other in BACKENDS.records() if other.trains_on_workers(algorithm)]
                raise spec.error(f"{where}.ranks", f"backend {backend!r} trains {algorithm} in one "
                                 "process only (use threads for cores); backends that train it on "
                                 f"dask workers, one a rank: {', '.join(having) or 'none'}")


def _check_task(spec: _Spec, where: str, algorithm: str, tasks: dict[str, str],
                dataset: DatasetSpec) -> None:
    needed = tasks.get(algorithm)
    have = dataset_task(dataset.source, dict(dataset.options))
    if needed is None or have is None:
        return
    compatible = needed == have or needed in ("clustering", "decomposition")
    if not compatible:
        raise spec.error(f"{where}.dataset", f"{algorithm} is a {needed} algorithm but dataset "
                         f"{dataset.name!r} is a {have} dataset")


def _backend_params(spec: _Spec, where: str, table: dict[str, Any], backends: list[str],
                    deep: bool) -> dict[str, dict[str, Any]]:
    """``backend_params``: for each backend of the case, a table of the library's own parameters."""
    for backend, params in table.items():
        path = f"{where}.backend_params.{_key(backend)}"
        if deep:
            raise spec.error(f"{where}.backend_params", "only classical backends take library parameters")
        if backend not in backends:
            raise spec.error(path, f"backend {backend!r} is not a backend of this case; its backends: "
                             + ", ".join(backends))
        if not isinstance(params, dict):
            raise spec.error(path, f"expected a table of library parameters, got {_describe(params)}")
        for name, value in params.items():
            if not _is_instance(value, (str, int, float, bool)):
                raise spec.error(f"{path}.{_key(name)}", f"expected a single value, got {_describe(value)}")
    return {backend: dict(params) for backend, params in table.items()}


def _check_params(spec: _Spec, where: str, algorithm: str, backend: str, device: str,
                  params: dict[str, Any], library_params: dict[str, Any]) -> None:
    """Parameter names and values the backend cannot honour are spec errors (device
    availability is not: a case that cannot run here is recorded as failed, with the reason);
    so are library parameters the library's class does not take (checked where it is installed)."""
    try:
        check_params(algorithm, backend, device, params)
    except AccelmlError as error:
        raise spec.error(f"{where}.params", str(error)) from None
    except (TypeError, ValueError) as error:
        raise spec.error(f"{where}.params", f"invalid parameters for {algorithm}: {error}") from None
    if not library_params:
        return
    try:
        check_params(algorithm, backend, device, params, library_params)
    except AccelmlError as error:
        raise spec.error(f"{where}.backend_params.{_key(backend)}", str(error)) from None
    except (TypeError, ValueError) as error:
        raise spec.error(f"{where}.backend_params.{_key(backend)}", f"invalid library parameters: {error}") from None


def _check_training(spec: _Spec, where: str, model: str, backend: str, device: str, ranks: int,
                    strategy: str, dataset: DatasetSpec, params: dict[str, Any]) -> None:
    """Validate a training case through its backend's own check (``Backend.check_case``)."""
    probe = Case(algorithm=model, backend=backend, device=device, dataset=dataset,
                 ranks=ranks, strategy=strategy, params=tuple(sorted(params.items())))
    check_case = BACKENDS.get(backend).check_case
    if check_case is None:
        return
    try:
        check_case(probe)
    except SpecError as error:
        raise spec.error(where, str(error)) from None
    except (TypeError, ValueError) as error:
        raise spec.error(where, f"invalid training parameters: {error}") from None


def parse_spec(document: dict[str, Any], source: str, base_dir: Path, text: str) -> Experiment:
    """Validate a parsed TOML document and expand its cases, as the spec writes them:
    ``deterministic = true`` is recorded in ``Experiment.deterministic`` and applied by the
    run that runs it (:func:`accelml.orchestration.plan_run` fills in the seeds)."""
    spec = _Spec(source)
    _check_integers(spec, document, "")
    spec.check_keys(document, EXPERIMENT_KEYS, "")
    datasets_table = document.get("datasets", {})
    if not datasets_table:
        raise spec.error("datasets", "no datasets; add at least one [datasets.NAME] table")
    datasets = {name: _dataset(spec, name, table, base_dir) for name, table in datasets_table.items()}
    case_tables = document.get("cases", [])
    if isinstance(case_tables, list):
        case_tables = _renamed_keys(spec, case_tables)
    if not case_tables:
        raise spec.error("cases", "no cases; add at least one [[cases]] table")
    defaults = _experiment_defaults(spec, document)
    planned = sum(_case_count(table) for table in case_tables) if isinstance(case_tables, list) else 0
    if planned > MAX_CASES:
        raise spec.error("cases", f"the spec expands to {planned:,} cases; at most {MAX_CASES:,} "
                         "are allowed (split it into several specs)")
    cases: list[Case] = []
    for index, table in enumerate(case_tables):
        expanded = _cases(spec, index, table, datasets, defaults)
        if not expanded:
            raise spec.error(f"cases[{index}]", "the grid expands to no case")
        cases.extend(expanded)
    seen: dict[str, int] = {}
    for index, case in enumerate(cases):
        if case.case_id in seen:
            raise spec.error("cases", f"case {case.label} is listed twice; each case must be unique")
        seen[case.case_id] = index
    reference = document.get("reference")
    if reference is not None:
        backends = sorted({case.backend for case in cases})
        spec.one_of(reference, tuple(backends), "reference", "reference backend (not in any case)")
    cluster = document.get("cluster")
    if cluster is not None:
        _check_cluster(spec, cluster)
    measurement = document.get("measurement", INTERLEAVED)
    spec.one_of(measurement, MEASUREMENTS, "measurement", "measurement")
    name = document.get("name") or Path(source).stem
    return Experiment(name=name, text=text, path=source, datasets=tuple(datasets.values()),
                      cases=tuple(cases), reference=reference,
                      description=document.get("description", ""),
                      cluster_json=canonical_json(cluster) if cluster is not None else "",
                      deterministic=document.get("deterministic", False),
                      measurement=measurement)


def _renamed_keys(spec: _Spec, tables: list[Any]) -> list[Any]:
    """The ``[[cases]]`` tables with their old key names (:data:`RENAMED_CASE_KEYS`) read as
    the new ones, and one warning line naming the new names; both names in a table is an error."""
    renamed, where = [], []
    for index, table in enumerate(tables):
        if isinstance(table, dict):
            for old, new in RENAMED_CASE_KEYS.items():
                if old in table:
                    if new in table:
                        raise spec.error(f"cases[{index}].{old}", f"the old name of {new!r}; give only {new!r}")
                    table = {(new if key == old else key): value for key, value in table.items()}
                    where.append(f"cases[{index}].{old}")
        renamed.append(table)
    if where:
        names = ", ".join(f"{old!r} is now {new!r}" for old, new in RENAMED_CASE_KEYS.items())
        logger.warning("%s: %s (read as the new name: %s)", spec.source, names, ", ".join(where))
    return renamed


def _check_cluster(spec: _Spec, table: dict[str, Any]) -> None:
    """Validate [cluster] with the executors' own settings loader."""
    try:
        load_cluster_settings(spec_table=table, site=False)
    except SpecError as error:
        raise spec.error("cluster", str(error)) from None
    except (TypeError, ValueError) as error:
        raise spec.error("cluster", f"invalid cluster settings: {error}") from None


def load_spec_text(text: str, source: str = "<spec>", base_dir: Path | None = None) -> Experiment:
    """Parse and validate spec text; ``source`` names it in error messages."""
    document: dict[str, Any] | None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{source}: not valid TOML: {error}") from None
    except RecursionError:
        document = None          # nested deeper than Python's parser can follow
    if document is None or nesting_too_deep(document):
        raise SpecError(f"{source}: tables and arrays nest more than {MAX_NESTING} levels deep; "
                        "a spec needs a few")
    return parse_spec(document, source, base_dir or Path.cwd(), text)


def load_spec(path: str | Path | None = None) -> Experiment:
    """Load a spec file, or the embedded default spec when ``path`` is None."""
    if path is None:
        text = resources.files("accelml.spec").joinpath(DEFAULT_SPEC).read_text()
        return load_spec_text(text, f"<embedded {DEFAULT_SPEC}>", Path.cwd())
    path = Path(path)
    if not path.exists():
        raise SpecError(f"{path}: spec file not found")
    if path.is_dir():
        raise SpecError(f"{path}: is a directory, not a spec file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: cannot read: {error}") from None
    return load_spec_text(text, str(path), path.resolve().parent)
