"""Probes of the machine's tools: GPUs (NVML), mpirun, SLURM, launchers, and the tools for
probing an optional library.

Every probe returns an :class:`Availability` and never raises: a missing optional
dependency is reported as unavailable with the reason, never faked. Each backend probes its
own library in its module (``Backend.probe``, :mod:`accelml.estimators`); what this machine
can run as a whole is :func:`accelml.machine.probe_all`.

>>> module, reason = import_or_reason("sklearn", "scikit-learn", "scikit-learn")
>>> module.__name__, reason
('sklearn', '')
>>> import_or_reason("no_such_module", "no-such-dist", "no-such-dist")[1]
'no-such-dist is not installed (pip install no-such-dist)'
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType


@dataclass(frozen=True)
class Availability:
    """Whether ``name`` (on ``device``) can run here; ``detail`` says why not, or what is there;
    ``summary`` says in one line what ``name`` is."""

    name: str
    device: str
    available: bool
    version: str | None = None
    detail: str = ""
    summary: str = ""

    @property
    def status(self) -> str:
        return "available" if self.available else f"unavailable: {self.detail}"


@dataclass(frozen=True)
class GPUInfo:
    index: int
    model: str
    memory_mib: int
    driver: str


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, which SLURM and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def distribution_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (a pip name), or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def import_or_reason(module: str, distribution: str, install_hint: str) -> tuple[ModuleType | None, str]:
    """(the imported ``module``, "") or (None, why it cannot be imported: not installed, or broken)."""
    try:
        return importlib.import_module(module), ""
    except ImportError as error:
        if distribution_version(distribution) is None:
            return None, f"{distribution} is not installed (pip install {install_hint})"
        return None, f"{distribution} is installed but 'import {module}' fails: {error}"


@dataclass(frozen=True)
class ImportProbe:
    """A backend's probe: available on any device when ``module`` imports, with the version of
    ``distribution`` (the pip name; ``install_hint`` is what to pip install, by default it).

    >>> ImportProbe("sklearn", "scikit-learn")("cpu").available
    True
    >>> ImportProbe("cuml", "cuml-cu12")("cuda").detail
    'cuml-cu12 is not installed (pip install cuml-cu12)'
    """

    module: str
    distribution: str
    install_hint: str = ""

    def __call__(self, device: str) -> Availability:
        found, reason = import_or_reason(self.module, self.distribution,
                                         self.install_hint or self.distribution)
        if found is None:
            return Availability(self.module, device, False, None, reason)
        return Availability(self.module, device, True, distribution_version(self.distribution))


def find_launcher(name: str) -> str | None:
    """A console script of this Python's environment (even when its bin/ is not on PATH), else PATH's."""
    beside_python = Path(sys.executable).parent / name
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return str(beside_python)
    return shutil.which(name)


def list_gpus() -> tuple[list[GPUInfo], str]:
    """The NVIDIA GPUs visible through NVML, or an empty list and the reason."""
    try:
        import pynvml
    except ImportError:
        return [], "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return [], f"no NVIDIA driver found ({error})"
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            model = pynvml.nvmlDeviceGetName(handle)
            model = model.decode() if isinstance(model, bytes) else model
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20
            gpus.append(GPUInfo(index, model, int(memory), driver))
    finally:
        pynvml.nvmlShutdown()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = {item.strip() for item in visible.split(",") if item.strip()}
        gpus = [gpu for gpu in gpus if str(gpu.index) in wanted]
    if not gpus:
        return [], "the NVIDIA driver sees no GPU" + (
            f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        )
    return gpus, ""


def probe_gpus() -> Availability:
    gpus, reason = list_gpus()
    if not gpus:
        return Availability("GPUs", "cuda", False, None, reason)
    models = sorted({gpu.model for gpu in gpus})
    return Availability(
        "GPUs", "cuda", True, f"driver {gpus[0].driver}", f"{len(gpus)} x {', '.join(models)}"
    )




def probe_mpi() -> Availability:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return Availability("mpirun", "-", False, None,
                            "mpirun not on PATH (apt-get install openmpi-bin libopenmpi-dev)")
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=20,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Availability("mpirun", "-", False, None, f"mpirun --version failed: {error}")
    first = (out.stdout or out.stderr).strip().splitlines()
    return Availability("mpirun", "-", True, first[0] if first else "")


def probe_slurm() -> Availability:
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        return Availability("slurm", "-", False, None, "sbatch not on PATH")
    try:
        out = subprocess.run(["sinfo", "--noheader", "--format=%P %D %T"],
                             capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Availability("slurm", "-", False, None, f"sinfo does not answer: {error}")
    if out.returncode != 0:
        message = (out.stderr or out.stdout).strip().splitlines()
        return Availability("slurm", "-", False, None,
                            "sbatch found but the controller does not answer: "
                            + (message[-1] if message else f"sinfo exit {out.returncode}"))
    version = subprocess.run(["sbatch", "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    partitions = "; ".join(line.strip() for line in out.stdout.strip().splitlines())
    return Availability("slurm", "-", True, version.replace("slurm ", ""), partitions)
