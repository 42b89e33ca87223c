"""What a deep-learning rank's start costs: Keras on its engine imported as a rank does, with
the integrations a rank never uses skipped (:data:`accelml.dl.rank.UNUSED_IN_A_RANK`), against
a plain ``import keras``; and the digits split read from the dataset registry's cache.

Each measurement is a fresh process (its own user + system CPU seconds, as a rank pays them).
The two imports alternate over ``--rounds`` so that a drifting host load favours neither; the
medians and their ratio are printed per engine, with what each process had loaded.

    python benchmarks/bench_rank_start.py               # tensorflow, torch and jax, 3 rounds
    python benchmarks/bench_rank_start.py --engines torch --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, os, resource, sys
mode, engine, strategy = sys.argv[1:4]
if mode == "rank":
    from accelml.dl.config import TrainingConfig
    from accelml.dl.rank import import_engine
    import_engine(TrainingConfig(model="mlp", dataset="digits", strategy=strategy,
                                 keras_backend=engine))
    from accelml.dl.data import load_image_data
    load_image_data("digits")
else:
    os.environ["KERAS_BACKEND"] = engine
    import keras
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    bunch = load_digits()
    train_test_split(bunch.images, bunch.target, test_size=0.2, random_state=0,
                     stratify=bunch.target)
usage = resource.getrusage(resource.RUSAGE_SELF)
loaded = [name for name in ("tensorflow", "torch", "jax", "sklearn", "pandas", "matplotlib")
          if name in sys.modules]
print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime, "loaded": loaded}))
"""

STRATEGIES = {"tensorflow": "horovod", "torch": "torch-ddp", "jax": "jax-pmean"}
"""A strategy each engine's ranks run under (its libraries decide what is kept)."""


def start(mode: str, engine: str, cache: str) -> dict[str, object]:
    env = dict(os.environ, XDG_CACHE_HOME=cache, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", CHILD, mode, engine, STRATEGIES[engine]],
                          env=env, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        start("rank", "tensorflow", cache)   # fills the registry's digits cache, as a first rank does
        for engine in options.engines:
            cpu: dict[str, list[float]] = {"plain": [], "rank": []}
            loaded: dict[str, object] = {}
            for round_ in range(options.rounds):
                for mode in (("plain", "rank") if round_ % 2 == 0 else ("rank", "plain")):
                    result = start(mode, engine, cache)
                    cpu[mode].append(float(result["cpu"]))   # type: ignore[arg-type]
                    loaded[mode] = result["loaded"]
            plain, rank = statistics.median(cpu["plain"]), statistics.median(cpu["rank"])
            print(f"{engine:10s} plain import keras + digits {plain:5.2f} CPU-s {loaded['plain']}")
            print(f"{'':10s} as a rank starts             {rank:5.2f} CPU-s {loaded['rank']}")
            print(f"{'':10s} rank / plain {rank / plain:.2f}, {plain - rank:.2f} CPU-s saved a rank "
                  f"(medians of {options.rounds})")


if __name__ == "__main__":
    main()
