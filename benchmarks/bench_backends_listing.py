"""How long ``python -m accelml backends`` takes: the default listing (package metadata and
NVML, nothing imported) against ``--import`` (each library imported, as before issue 18).

Each command runs ``--rounds`` times in a fresh interpreter, alternating, with output piped;
it prints the median wall and CPU (user + system of the child) seconds of each, and whether
the command wrote anything on stderr (TensorFlow's log lines).

    python benchmarks/bench_backends_listing.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time


def once(*args: str) -> tuple[float, float, bool]:
    """(wall seconds, CPU seconds, wrote to stderr) of one ``python -m accelml backends``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "accelml", "backends", *args],
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, bool(done.stderr.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    found: dict[str, list[tuple[float, float, bool]]] = {"backends": [], "backends --import": []}
    for _ in range(args.rounds):
        found["backends"].append(once())
        found["backends --import"].append(once("--import"))
    print(f"{'command':<20} {'wall s (median)':>16} {'cpu s (median)':>15}  stderr lines")
    for name, runs in found.items():
        wall = statistics.median(run[0] for run in runs)
        cpu = statistics.median(run[1] for run in runs)
        noisy = "yes" if any(run[2] for run in runs) else "none"
        print(f"{name:<20} {wall:>16.2f} {cpu:>15.2f}  {noisy}")
    print(f"({args.rounds} round(s), {os.cpu_count()} CPU(s) on this machine, shared)")


if __name__ == "__main__":
    main()
