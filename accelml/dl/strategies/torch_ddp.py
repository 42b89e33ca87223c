"""``torch-ddp``: one process per rank, Keras 3 on PyTorch, ``DistributedDataParallel``.

The loop is :func:`accelml.dl.strategies.torch_loop.train_on_torch` (Horovod's semantics:
broadcast from rank 0, averaged gradients, exact global metrics, BatchNorm moving averages
averaged each epoch, rank-0 files). Ranks meet through ``init_process_group``: NCCL on GPUs
(one GPU per rank, by local rank), gloo on CPUs.

Gradients are averaged by ``DistributedDataParallel`` itself, wrapped around the Keras model
for the training steps of two or more ranks (one rank trains the bare model:
:func:`~accelml.dl.strategies.torch_loop.averaging_wrapper`). Keras 3 on torch makes the
model a ``torch.nn.Module`` whose parameters are its variables' tensors, and
``optimizer.apply`` updates them in place, so DDP works on it unchanged: wrapping
broadcasts rank 0's parameters, and every backward pass all-reduces the gradients in buckets
(``bucket_cap_mb``, 25 MB), each started as soon as its gradients are ready, overlapping the
communication with the rest of the backward pass
(which an all-reduce after the backward pass, as in Horovod's torch path, cannot). The
non-trainable weights (BatchNorm moving statistics) are parameters without gradients, which
DDP leaves alone: the loop averages them at the end of each epoch.

Ranks started as local processes get ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE``/
``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` (:func:`rank_variables`); under ``srun`` each rank reads
its place from SLURM (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``) and meets the
others at the host and port the launcher chose (:func:`rendezvous`).

>>> rank_variables(1, ("localhost:2950", "localhost:2951"))["RANK"]
'1'
>>> rank_layout({"SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4",
...              "SLURM_LOCALID": "1", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"})
(3, 4, 1, 2)
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from accelml.cases import Expectation
from accelml.dl.common import (
    LOOPBACK,
    free_ports,
    in_slurm_step,
    listening_socket,
    slurm_tasks_per_node,
)
from accelml.dl.config import TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engines import probe_keras, requirements, torch_deterministic_environment
from accelml.dl.strategies import LOCAL_PROCESSES, SRUN, Determinism, Listener, Strategy
from accelml.dl.strategies.torch_loop import Collectives, train_on_torch
from accelml.errors import UnavailableError
from accelml.probe import Availability, distribution_version, import_or_reason

if TYPE_CHECKING:
    import torch


def rank_layout(environment: Mapping[str, str] = os.environ) -> tuple[int, int, int, int]:
    """(rank, size, local rank, ranks on this host): torch's variables, else SLURM's (a task
    of ``srun``), else one rank alone."""
    if "RANK" in environment and "WORLD_SIZE" in environment:
        rank, size = int(environment["RANK"]), int(environment["WORLD_SIZE"])
        return (rank, size, int(environment.get("LOCAL_RANK", rank)),
                int(environment.get("LOCAL_WORLD_SIZE", size)))
    if in_slurm_step(environment):
        size = int(environment.get("SLURM_STEP_NUM_TASKS") or environment.get("SLURM_NTASKS", "1"))
        return (int(environment["SLURM_PROCID"]), size, int(environment.get("SLURM_LOCALID", 0)),
                slurm_tasks_per_node(environment))
    return 0, 1, 0, 1


def connect(config: TrainingConfig) -> Collectives:
    """Join the run's process group (NCCL on GPUs, gloo on CPUs) and return its collectives."""
    import torch
    import torch.distributed as dist

    rank, size, local_rank, local_size = rank_layout()
    on_gpu = config.device == "gpu"
    if on_gpu and torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())   # NCCL's device
    if config.captures_steps:     # NCCL work recorded in a CUDA graph
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
    host = os.environ.get("MASTER_ADDR") or (LOOPBACK if size == 1 else None)
    port = os.environ.get("MASTER_PORT") or (str(free_ports(1)[0]) if size == 1 else None)
    if host is None or port is None:
        raise UnavailableError(f"torch-ddp rank {rank} of {size} needs MASTER_ADDR and "
                               "MASTER_PORT (accelml.dl.launch sets them)")
    timeout = datetime.timedelta(seconds=config.time_limit_s)
    # TCPStore's own server listens on every interface: rank 0 hands it a socket that
    # listens on MASTER_ADDR's address only (loopback in a one-host run), and owns it after
    listening = listening_socket(host, int(port)).detach() if rank == 0 else None
    make_store = dist.TCPStore  # type: ignore[attr-defined]
    store = make_store(host, int(port), size, rank == 0, timeout, master_listen_fd=listening)
    dist.init_process_group("nccl" if on_gpu else "gloo", store=store, rank=rank,
                            world_size=size, timeout=timeout)

    def average(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        summed = [tensor.clone() for tensor in tensors]
        for work in [dist.all_reduce(tensor, async_op=True) for tensor in summed]:
            work.wait()
        return [tensor.div_(size) for tensor in summed]

    def total(tensor: torch.Tensor) -> torch.Tensor:
        summed = tensor.clone()
        dist.all_reduce(summed)
        return summed

    def broadcast(tensors: list[torch.Tensor]) -> None:
        for work in [dist.broadcast(tensor, src=0, async_op=True) for tensor in tensors]:
            work.wait()

    def averaging_model(model: Any) -> Any:
        return torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[torch.cuda.current_device()] if on_gpu else None)

    return Collectives(rank, size, local_rank, local_size, average=average, total=total,
                       broadcast=broadcast, library="torch", close=dist.destroy_process_group,
                       averaging_model=averaging_model)


def train(config: TrainingConfig, data: ImageData) -> TrainingResult:
    return train_on_torch(config, data, connect)


def rank_variables(rank: int, addresses: tuple[str, ...]) -> dict[str, str]:
    """What a rank started as a local process reads: where rank 0 listens, and its place."""
    host, _, port = addresses[0].rpartition(":")
    return {"MASTER_ADDR": host, "MASTER_PORT": port, "RANK": str(rank),
            "WORLD_SIZE": str(len(addresses)), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(len(addresses))}


def rendezvous(config: TrainingConfig) -> dict[str, str]:
    """Where the ranks meet when ``srun`` starts them: this host (rank 0 of a job step runs
    on the job's first node, where the launcher runs) at a port free now, unless the
    environment already names them."""
    return {"MASTER_ADDR": os.environ.get("MASTER_ADDR") or socket.gethostname(),
            "MASTER_PORT": os.environ.get("MASTER_PORT") or str(free_ports(1)[0])}


def listeners(launcher: str) -> Listener:
    """Rank 0's TCPStore and every rank's gloo/NCCL sockets: on 127.0.0.1 when the ranks are
    local processes; under ``srun`` on MASTER_ADDR's address (the job's interface) only,
    never every interface (rank 0 hands TCPStore a socket bound to it), where
    torch.distributed, which has no authentication, takes any host that reaches it."""
    if launcher == LOCAL_PROCESSES:
        return Listener("loopback only: TCPStore and gloo/NCCL on 127.0.0.1", True)
    return Listener("TCPStore and gloo/NCCL on MASTER_ADDR's address (the job's interface) "
                    "only, unauthenticated: torch.distributed has no authentication", False)


def probe_distributed() -> Availability:
    """``torch.distributed`` and its backends (gloo for CPUs, NCCL for GPUs)."""
    module, reason = import_or_reason("torch.distributed", "torch", "torch")
    if module is None:
        return Availability("torch.distributed", "-", False, None, reason)
    version = distribution_version("torch")
    if not module.is_available():
        return Availability("torch.distributed", "-", False, version,
                            "this torch was built without torch.distributed")
    built = [name for name, check in (("gloo", module.is_gloo_available),
                                      ("nccl", module.is_nccl_available))
             if check()]
    if not built:
        return Availability("torch.distributed", "-", False, version, "neither gloo nor NCCL built")
    import torch

    detail = "backends: " + ", ".join(built)
    if torch.cuda.is_available() and "nccl" not in built:
        detail += " (no NCCL: GPU runs cannot start)"
    return Availability("torch.distributed", "-", True, version, detail)


def probe() -> Availability:
    """Keras and ``torch.distributed``, with the backends it was built with."""
    distributed = probe_distributed()
    found = requirements(probe_keras, lambda: distributed)
    return dataclasses.replace(found, detail=distributed.detail) if found.available else found


STRATEGY = Strategy(
    name="torch-ddp",
    doc="one process per rank, Keras 3 on PyTorch, gradients averaged by "
        "DistributedDataParallel (NCCL on GPUs, gloo on CPUs)",
    keras_backends=("torch",),
    train=train,
    probe=probe,
    determinism=Determinism(
        Expectation(True, "seeds, torch's deterministic algorithms, and DDP's buckets laid out "
                          "by parameter order and the first step's gradient order, which is "
                          "the same in every run: every all-reduce sums the same buckets, "
                          "so runs repeat bitwise"),
        environment=torch_deterministic_environment,
        notes=("torch.use_deterministic_algorithms is on: some CUDA kernels are slower",)),
    libraries=("keras", "torch"),
    multi_process=True,
    launchers=(LOCAL_PROCESSES, SRUN),
    default_launcher=LOCAL_PROCESSES,
    local_process_environment=rank_variables,
    rank_environment=rendezvous,
    listeners=listeners,
)
