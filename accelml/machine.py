"""What this machine can run: every backend on each of its devices, what the deep-learning
strategies need, the tools (GPUs, mpirun, SLURM), and the third-party plug-ins that failed
to load, with the reason.

``python -m accelml backends`` and ``accelml.backends()`` print :func:`probe_all`. Backends
come from their records (:data:`accelml.estimators.BACKENDS`), so a third party's backend is
listed as soon as it is installed. No probe raises: what is missing is a row saying
"unavailable" and why.

>>> rows = probe_all()
>>> [(row.device, row.available) for row in rows if row.name == "sklearn"]
[('cpu', True)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from accelml.dl.strategies import strategy_availability
from accelml.estimators import BACKENDS, backend_availability
from accelml.plugins import BrokenPlugin
from accelml.probe import Availability, probe_gpus, probe_mpi, probe_slurm

_TOOLS: tuple[tuple[Callable[[], Availability], str], ...] = (
    (probe_gpus, "NVIDIA GPUs seen through NVML"),
    (probe_mpi, "MPI launcher for multi-process training"),
    (probe_slurm, "SLURM job queue (--cluster slurm)"),
)


def _broken(plugin: BrokenPlugin) -> Availability:
    name = plugin.entry_point.partition(" = ")[0]
    return Availability(name, "-", False, None,
                        f"plug-in {plugin.entry_point} ({plugin.group}) failed to load: "
                        f"{plugin.reason}", "broken third-party plug-in")


def probe_all() -> list[Availability]:
    """Every backend and device, Keras's engines and each strategy, the tools, then broken plug-ins."""
    return [
        *backend_availability(),
        *strategy_availability(),
        *(replace(probe(), summary=summary) for probe, summary in _TOOLS),
        *(_broken(plugin) for plugin in BACKENDS.broken()),
    ]
