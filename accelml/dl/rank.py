"""What one rank runs: ``python -m accelml.dl.rank CONFIG.json RESULT_DIR``.

It trains with :func:`accelml.dl.run_training` and writes ``RESULT_DIR/rank-<rank>.json``:
``{"ok": true, "result": {...}}`` or, if anything raised, ``{"ok": false, "error": ...,
"traceback": ...}``, and then exits at once (a rank that failed must not sit in Horovod's
shutdown waiting for peers). The launcher reads these files.

A rank imports Keras on its engine first (:func:`import_engine`), without the optional
integrations that Keras and TensorFlow import where installed but a rank never uses
(:data:`UNUSED_IN_A_RANK`), and with Python's garbage collector paused for that import only
(:func:`accelml.dl.common.collector_paused`).

>>> process_rank({"ACCELML_RANK": "1", "SLURM_PROCID": "0"}), process_rank({})
(1, 0)
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Mapping

from accelml.dl.common import collector_paused, skipped_imports
from accelml.dl.config import TrainingConfig
from accelml.dl.launch import RANK_VARIABLE
from accelml.dl.training import prepare_environment, run_training

UNUSED_IN_A_RANK = ("sklearn", "pandas", "matplotlib", "jax")
"""Imported by Keras and TensorFlow where installed, never used by a rank: scikit-learn for
Keras' estimator wrappers, pandas for DataFrame inputs (a rank feeds NumPy arrays), matplotlib
for Keras' image plots, JAX for TensorFlow Lite and Keras' Orbax callback. Skipped while a rank
imports Keras, they cost each rank's start about 3 CPU-s (benchmarks/bench_rank_start.py). An engine
or a strategy's library of that name (JAX) is kept, and after Keras anything may import them."""


def import_engine(config: TrainingConfig) -> tuple[str, ...]:
    """Import Keras on ``config``'s engine without :data:`UNUSED_IN_A_RANK` (those not yet
    imported, and not the engine or a library of the strategy); return the names skipped."""
    prepare_environment(config)
    kept = {config.engine, *config.strategy_record.libraries}
    with collector_paused(), skipped_imports(name for name in UNUSED_IN_A_RANK
                                             if name not in kept) as skipped:
        import keras  # noqa: F401
    return skipped


def process_rank(environment: Mapping[str, str] = os.environ) -> int:
    """This process's rank from whichever launcher started it (0 when alone)."""
    for name in (RANK_VARIABLE, "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                 "SLURM_PROCID"):
        if environment.get(name, "").isdigit():
            return int(environment[name])
    return 0


def _write(path: str, payload: dict[str, object]) -> None:
    partial = path + ".partial"
    with open(partial, "w") as handle:
        json.dump(payload, handle)
    os.replace(partial, path)


def main(argv: list[str] | None = None) -> int:
    config_path, result_dir = (argv or sys.argv[1:])[:2]
    rank = process_rank()
    path = os.path.join(result_dir, f"rank-{rank}.json")
    try:
        with open(config_path) as handle:
            config = TrainingConfig.from_dict(json.load(handle))
        import_engine(config)
        result = run_training(config)
        _write(path, {"ok": True, "rank": rank, "result": result.to_dict()})
    except BaseException as error:  # every failure must reach the launcher as this rank's error
        message = f"{type(error).__name__}: {error}".strip().splitlines()
        _write(path, {"ok": False, "rank": rank, "error": message[0] if message else "?",
                      "traceback": traceback.format_exc()})
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
