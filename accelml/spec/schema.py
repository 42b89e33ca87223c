"""The table of keys a spec file may hold, with the types and values each one allows.

The records a spec becomes (:class:`~accelml.cases.Experiment`, :class:`~accelml.cases.Case`,
...) live in :mod:`accelml.cases`, the lowest layer, so that every stage imports them downward.

>>> EXPERIMENT_KEYS["threads"][1]
'an integer >= 1'
"""

from __future__ import annotations

DEVICES = ("cpu", "cuda")
DATASET_SOURCES = ("generated", "shipped", "file", "keras", "openml")
# The names each dataset source offers (generators, shipped and Keras sets, file types) are
# the loaders' own: accelml.datasets.registry.NAMED_SOURCES and loaders.FILE_FORMATS.
TASKS = ("classification", "regression", "clustering")
DTYPES = ("float64", "float32")
LAYOUTS = ("C", "F")

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
    "repeats": ((int, dict), "an integer >= 1 or a table {min, max, target, confidence, max_seconds, "
                            "skip_warmup_after}"),
    "warmup": ((int,), "an integer >= 0"),
    "time_limit": ((int, float), "seconds > 0, at most 2592000 (30 days)"),
    "memory_limit_mb": ((int,), "an integer >= 1 (MiB)"),
    "threads": ((int,), "an integer >= 1"),
    "seed": _INT,
    "deterministic": ((bool,), "true or false (run every case in deterministic mode)"),
    "measurement": ((str,), "'interleaved' (a reference case and the cases compared with it take "
                            "timed rounds in turn, each in its own process) or 'isolated' (each "
                            "case's rounds back to back, alone)"),
    "datasets": ((dict,), "a table of dataset tables ([datasets.NAME])"),
    "cluster": ((dict,), "a table of cluster settings ([cluster]: kind, jobs, resources, ...)"),
    "container": ((dict, str, list), "a table {runtime, image, binds, python}, \"host\", or a list "
                                     "of them (each case runs once in each)"),
    "cases": ((list,), "an array of tables ([[cases]])"),
}
"""Top-level keys of a spec file."""

REPEAT_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "min": _POS_INT,
    "max": _POS_INT,
    "target": ((int, float), "a relative half-width > 0, e.g. 0.05 for +-5%"),
    "confidence": ((float,), "a level between 0.5 and 0.999"),
    "max_seconds": ((int, float), "seconds > 0"),
    "skip_warmup_after": ((int, float, bool), "seconds > 0 (a phase whose first run takes that "
                                              "long counts it as a repeat) or false"),
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
    "ranks": ((int, list), "an integer >= 1 or a list of them (the case's processes: data-parallel "
                           "ranks; a classical case trains on one dask worker per rank)"),
    "strategy": ((str, list), "a distribution strategy or a list of them"),
    "dataset": ((str, list), "a dataset name or a list of them"),
    "params": ((dict,), "a table of fixed parameters"),
    "grid": ((dict,), "a table of parameter name = [values] (every combination runs)"),
    "backend_params": ((dict,), "a table backend = {library parameter = value}, the library's own "
                       "parameters without an accelml name, e.g. {xgboost = {subsample = 0.8}}"),
    "repeats": EXPERIMENT_KEYS["repeats"],
    "warmup": EXPERIMENT_KEYS["warmup"],
    "time_limit": EXPERIMENT_KEYS["time_limit"],
    "memory_limit_mb": EXPERIMENT_KEYS["memory_limit_mb"],
    "threads": EXPERIMENT_KEYS["threads"],
    "container": EXPERIMENT_KEYS["container"],
    # Deep-learning shorthands (keras cases); they become training parameters.
    "model": _STR,
    "epochs": _POS_INT,
    "batch_size": ((int,), "an integer >= 1 (per rank; global batch = batch_size x ranks)"),
    "learning_rate": _FLOAT,
    "lr_scaling": ((str,), "'linear', 'sqrt' or 'none'"),
    "keras_backend": ((str,), "a Keras engine the strategy runs on ('tensorflow', 'jax', 'torch')"),
    "oversubscribe": ((bool,), "true or false (allow more ranks than this machine has cores, "
                               "or than it has GPUs; flagged in the table)"),
}
"""Keys of one ``[[cases]]`` table. Grid keys (algorithm ... dataset) take one value or a list."""

RENAMED_CASE_KEYS: dict[str, str] = {"workers": "ranks"}
"""Old name -> new name of ``[[cases]]`` keys: the old name is still read, with one warning line."""

DL_SHORTHANDS = ("model", "epochs", "batch_size", "learning_rate", "lr_scaling", "keras_backend",
                 "oversubscribe")

# What the spec reference (accelml.spec.reference, experiments/SPEC-REFERENCE.md) shows for each key:
# an example value (checked against the key's types by the tests) and, where no record or
# function signature owns the default, the default in words. Sections: "spec" (top level),
# "repeats", "datasets" (every source's keys, by name), "cases".
EXAMPLES: dict[str, object] = {
    "spec.name": "my_comparison", "spec.description": "sklearn vs sklearnex on our data",
    "spec.reference": "sklearn", "spec.repeats": 5, "spec.warmup": 1, "spec.time_limit": 600,
    "spec.memory_limit_mb": 4096, "spec.threads": 4, "spec.seed": 0, "spec.deterministic": True,
    "spec.measurement": "isolated", "spec.datasets": {"blobs": {"source": "generated", "generator": "blobs"}},
    "spec.cluster": {"kind": "slurm", "jobs": 4}, "spec.cases": [{"algorithm": "kmeans"}],
    "repeats.min": 3, "repeats.max": 10, "repeats.target": 0.05, "repeats.confidence": 0.95,
    "repeats.max_seconds": 60, "repeats.skip_warmup_after": 2.0,
    "datasets.source": "file", "datasets.generator": "classification", "datasets.name": "breast_cancer",
    "datasets.n_samples": 2000, "datasets.n_features": 8, "datasets.n_informative": 4,
    "datasets.n_classes": 3, "datasets.centers": 4, "datasets.cluster_std": 1.5, "datasets.noise": 0.1,
    "datasets.seed": 0, "datasets.test_size": 0.25, "datasets.dtype": "float32", "datasets.layout": "F",
    "datasets.task": "classification", "datasets.image_size": 32, "datasets.test_samples": 512,
    "datasets.path": "data/flowers.csv", "datasets.target": "species", "datasets.x_key": "features",
    "datasets.y_key": "status", "datasets.train_samples": 2048, "datasets.data_id": 61,
    "datasets.version": 1, "datasets.max_samples": 10000,
    "cases.algorithm": ["kmeans", "dbscan"], "cases.backend": ["sklearn", "sklearnex"],
    "cases.device": ["cpu", "cuda"], "cases.ranks": [1, 2, 4], "cases.strategy": "horovod",
    "cases.dataset": "blobs", "cases.params": {"n_clusters": 4, "random_state": 0},
    "cases.grid": {"max_iter": [50, 100]}, "cases.backend_params": {"xgboost": {"subsample": 0.8}},
    "cases.repeats": {"min": 3, "max": 8}, "cases.warmup": 1, "cases.time_limit": 120,
    "cases.memory_limit_mb": 2048, "cases.threads": 1, "cases.model": "cnn", "cases.epochs": 3,
    "cases.batch_size": 64, "cases.learning_rate": 0.001, "cases.lr_scaling": "linear",
    "cases.keras_backend": "jax", "cases.oversubscribe": True,
    "spec.container": {"runtime": "charliecloud", "image": "/images/stack", "binds": ["/scratch"]},
    "cases.container": ["host", {"runtime": "apptainer", "image": "/images/stack.sif"}],
}
"""An example value of every key."""

DEFAULTS: dict[str, str] = {
    "spec.name": "the file's name without .toml", "spec.description": "none",
    "spec.reference": "none: no speed-up or agreement column", "spec.warmup": "1",
    "spec.time_limit": "600", "spec.memory_limit_mb": "no limit",
    "spec.threads": "the cores the case is given", "spec.seed": "0", "spec.deterministic": "false",
    "spec.measurement": "interleaved (isolated where a case has no reference case to take turns with)",
    "spec.datasets": "required", "spec.cluster": "a LocalCluster here", "spec.cases": "required",
    "repeats.max_seconds": "no limit",
    "datasets.source": "required", "datasets.generator": "required", "datasets.name": "required",
    "datasets.seed": "0", "datasets.test_size": "0.25", "datasets.dtype": "float64 (keras: float32)",
    "datasets.layout": "C", "datasets.task": "from the data (text or integer labels: classification)",
    "datasets.image_size": "32 (generated images)", "datasets.test_samples": "all (generated: 512)",
    "datasets.path": "required for source = 'file'; for keras/openml: download",
    "datasets.target": "required for .csv/.parquet (unless task = 'clustering'); openml: its default",
    "datasets.x_key": "X", "datasets.y_key": "y (absent: no labels)", "datasets.train_samples": "all",
    "datasets.data_id": "name or data_id required", "datasets.version": "the latest",
    "datasets.max_samples": "all",
    "cases.algorithm": "required", "cases.backend": "required", "cases.device": "cpu",
    "cases.ranks": "1", "cases.strategy": "keras: the default strategy; others: none",
    "cases.dataset": "required", "cases.params": "the algorithm's defaults", "cases.grid": "none",
    "cases.backend_params": "none", "cases.repeats": "the spec's repeats", "cases.warmup": "the spec's warmup",
    "cases.time_limit": "the spec's time_limit", "cases.memory_limit_mb": "the spec's memory_limit_mb",
    "cases.threads": "the spec's threads", "cases.model": "the algorithm names the model",
    "cases.keras_backend": "the strategy's first engine",
    "cases.oversubscribe": "false: more ranks than cores is refused on a local cluster",
    "spec.container": "\"host\" (missing runtime, binds, python: the site's accelml.container)",
    "cases.container": "the spec's container",
}
"""Defaults in words, where no record or signature owns them (accelml.spec.reference reads
the others from :class:`~accelml.cases.RepeatPolicy`, the data generator's signature and
:class:`~accelml.dl.config.TrainingConfig`)."""
