"""What this machine can run: one probe per backend, device or tool.

Every probe returns an :class:`Availability` and never raises: a missing optional
dependency is reported as unavailable with the reason, never faked.

>>> from accelml.probe import probe_all
>>> rows = probe_all()
>>> any(row.name == "scikit-learn" and row.available for row in rows)
True
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


@dataclass(frozen=True)
class Availability:
    """Whether ``name`` (on ``device``) can run here; ``detail`` says why not, or what is there."""

    name: str
    device: str
    available: bool
    version: str | None = None
    detail: str = ""

    @property
    def status(self) -> str:
        return "available" if self.available else f"unavailable: {self.detail}"


@dataclass(frozen=True)
class GPUInfo:
    index: int
    model: str
    memory_mib: int
    driver: str


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _try_import(module: str, distribution: str, install_hint: str) -> tuple[object | None, str]:
    try:
        return importlib.import_module(module), ""
    except ImportError as error:
        if _version(distribution) is None:
            return None, f"{distribution} is not installed (pip install {install_hint})"
        return None, f"{distribution} is installed but 'import {module}' fails: {error}"


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


def probe_sklearn() -> Availability:
    module, reason = _try_import("sklearn", "scikit-learn", "scikit-learn")
    if module is None:
        return Availability("scikit-learn", "cpu", False, None, reason)
    return Availability("scikit-learn", "cpu", True, module.__version__)


def probe_sklearnex() -> Availability:
    module, reason = _try_import("sklearnex", "scikit-learn-intelex", "scikit-learn-intelex")
    if module is None:
        return Availability("scikit-learn-intelex", "cpu", False, None, reason)
    return Availability("scikit-learn-intelex", "cpu", True, _version("scikit-learn-intelex"))


def probe_xgboost(device: str) -> Availability:
    module, reason = _try_import("xgboost", "xgboost", "xgboost")
    if module is None:
        return Availability("xgboost", device, False, None, reason)
    version = module.__version__
    if device == "cpu":
        return Availability("xgboost", "cpu", True, version)
    if not module.build_info().get("USE_CUDA", False):
        return Availability(
            "xgboost", "cuda", False, version,
            "this xgboost wheel is built without CUDA (install the full 'xgboost' wheel, not 'xgboost-cpu')",
        )
    gpus, gpu_reason = list_gpus()
    if not gpus:
        return Availability("xgboost", "cuda", False, version, gpu_reason)
    return Availability("xgboost", "cuda", True, version, f"{len(gpus)} GPU(s)")


def probe_mpi() -> Availability:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return Availability("mpirun", "-", False, None,
                            "mpirun not on PATH (apt-get install openmpi-bin libopenmpi-dev)")
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=20)
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
                             capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Availability("slurm", "-", False, None, f"sinfo does not answer: {error}")
    if out.returncode != 0:
        message = (out.stderr or out.stdout).strip().splitlines()
        return Availability("slurm", "-", False, None,
                            "sbatch found but the controller does not answer: "
                            + (message[-1] if message else f"sinfo exit {out.returncode}"))
    version = subprocess.run(["sbatch", "--version"], capture_output=True, text=True).stdout.strip()
    partitions = "; ".join(line.strip() for line in out.stdout.strip().splitlines())
    return Availability("slurm", "-", True, version.replace("slurm ", ""), partitions)


def probe_all() -> list[Availability]:
    """Every probe, in the order ``python -m accelml backends`` shows them."""
    return [
        probe_sklearn(),
        probe_sklearnex(),
        probe_xgboost("cpu"),
        probe_xgboost("cuda"),
        probe_gpus(),
        probe_mpi(),
        probe_slurm(),
    ]
