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
    "backend_params": ((dict,), "a table backend = {library parameter = value}, the library's own "
                       "parameters without an accelml name, e.g. {xgboost = {subsample = 0.8}}"),
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
    "keras_backend": ((str,), "a Keras engine the strategy runs on ('tensorflow', 'jax', 'torch')"),
}
"""Keys of one ``[[cases]]`` table. Grid keys (algorithm ... dataset) take one value or a list."""

DL_SHORTHANDS = ("model", "epochs", "batch_size", "learning_rate", "lr_scaling", "keras_backend")
