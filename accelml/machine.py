"""What this machine can run: every backend on each of its devices, what the deep-learning
strategies need, the tools (GPUs, mpirun, SLURM), and the third-party plug-ins that failed
to load, with the reason.

``accelml.backends()`` and ``python -m accelml backends --import`` give :func:`probe_all`,
which imports each library (TensorFlow, JAX, torch, Horovod's bindings: seconds, and their
log noise). ``python -m accelml backends`` gives :func:`list_installed`: the same rows from
the records' ``libraries`` alone (found and versioned through package metadata, nothing
imported) and the GPUs NVML sees, in well under a second beyond accelml's own import.
Backends come from their records (:data:`accelml.estimators.BACKENDS`), so a third party's
backend is listed as soon as it is installed. No probe raises: what is missing is a row
saying "unavailable" and why.

>>> rows = probe_all()
>>> [(row.device, row.available) for row in rows if row.name == "sklearn"]
[('cpu', True)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from accelml.agreement.point import MEASURES
from accelml.containers import RUNTIMES
from accelml.dl.strategies import STRATEGIES_POINT, Strategy, strategy_availability
from accelml.estimators import BACKENDS, Backend, backend_availability
from accelml.executors.cluster_settings import SCHEDULERS
from accelml.plugins import BrokenPlugin
from accelml.probe import (
    Availability,
    distribution_version,
    list_gpus,
    probe_gpus,
    probe_mpi,
    probe_slurm,
)

ENGINES = ("keras", "tensorflow", "jax", "torch")
"""The deep-learning libraries listed on their own rows (Keras and its engines)."""
LISTED_NOTE = ("found through package metadata, nothing imported: `python -m accelml backends "
               "--import` imports each library to check that it loads")

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


def broken_plugins(*, strategies: bool = True) -> list[Availability]:
    """A row for each third party's entry point that failed to load, of every extension
    point (backends, strategies, schedulers, container runtimes, measures), with the reason.
    ``strategies=False`` leaves out the strategies' (their own rows already list them)."""
    points = (BACKENDS, *((STRATEGIES_POINT,) if strategies else ()), SCHEDULERS, RUNTIMES,
              MEASURES)
    return [_broken(plugin) for point in points for plugin in point.broken()]


def probe_all() -> list[Availability]:
    """Every backend and device, Keras's engines and each strategy, the tools, then broken plug-ins."""
    return [
        *backend_availability(),
        *strategy_availability(),
        *(replace(probe(), summary=summary) for probe, summary in _TOOLS),
        *(runtime.probe() for runtime in RUNTIMES.records()),
        *broken_plugins(strategies=False),
    ]


def _installed(name: str, device: str, libraries: tuple[str, ...], summary: str,
               any_of: tuple[str, ...] = ()) -> Availability:
    """``libraries`` (pip names) all installed, and one of ``any_of`` if given; on ``cuda``
    a GPU that NVML sees. Nothing is imported."""
    versions = {library: distribution_version(library) for library in (*libraries, *any_of)}
    missing = [library for library in libraries if versions[library] is None]
    if any_of and all(versions[library] is None for library in any_of):
        missing.append(" or ".join(any_of))
    found = ", ".join(f"{library} {version}" for library, version in versions.items() if version)
    # a backend's version is its first library's; a strategy's libraries go in its detail
    version = versions[libraries[0]] if not any_of else None
    if missing:
        having = f" ({found})" if any_of and found else ""
        return Availability(name, device, False, version,
                            f"not installed: {', '.join(missing)}{having}", summary)
    detail = found if any_of else ""
    if device == "cuda":
        gpus, reason = list_gpus()
        if not gpus:
            return Availability(name, device, False, version, reason, summary)
        detail = f"{len(gpus)} GPU(s)"
    return Availability(name, device, True, version, detail, summary)


def _backend_rows(backend: Backend) -> list[Availability]:
    rows = []
    for device in backend.devices:
        if device in ("cpu", "cuda"):
            found = _installed(backend.name, device, backend.libraries, backend.summary)
            hint = backend.how_to_get.get(device, "")
            if not found.available and hint:
                found = replace(found, detail=f"{found.detail}; {hint}")
            rows.append(found)
        else:   # a device NVML cannot answer for: the backend's own probe
            rows.append(backend.availability(device))
    return rows


def _strategy_row(record: Strategy) -> Availability:
    """Keras, one of the strategy's engines, and its other libraries, installed."""
    others = tuple(library for library in record.libraries
                   if library not in record.keras_backends and library != "keras")
    return _installed(f"strategy {record.name}", "-", ("keras", *others), record.doc,
                      any_of=tuple(record.keras_backends))


def list_installed() -> list[Availability]:
    """The rows of :func:`probe_all`, found without importing any backend's library: each
    backend and device, Keras and its engines, each strategy, the tools, broken plug-ins."""
    return [
        *(row for backend in BACKENDS.records() for row in _backend_rows(backend)),
        *(_installed(engine, "-", (engine,), "Keras 3" if engine == ENGINES[0]
                     else "an engine of Keras") for engine in ENGINES),
        *(_strategy_row(record) for record in STRATEGIES_POINT.records()),
        *(replace(probe(), summary=summary) for probe, summary in _TOOLS),
        *(runtime.probe() for runtime in RUNTIMES.records()),
        *broken_plugins(),
    ]
