"""What one rank runs: ``python -m accelml.dl.rank CONFIG.json RESULT_DIR``.

It trains with :func:`accelml.dl.run_training` and writes ``RESULT_DIR/rank-<rank>.json``:
``{"ok": true, "result": {...}}`` or, if anything raised, ``{"ok": false, "error": ...,
"traceback": ...}``, and then exits at once (a rank that failed must not sit in Horovod's
shutdown waiting for peers). The launcher reads these files.

>>> process_rank({"ACCELML_RANK": "1", "SLURM_PROCID": "0"}), process_rank({})
(1, 0)
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Mapping

from accelml.dl.config import TrainingConfig
from accelml.dl.launch import RANK_VARIABLE
from accelml.dl.training import run_training


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
