"""``torch-ddp``: one process per rank, Keras 3 on PyTorch, ``torch.distributed`` all-reduce.

The loop is :func:`accelml.dl.strategies.torch_loop.train_on_torch` (Horovod's semantics:
broadcast from rank 0, averaged gradients, exact global metrics, BatchNorm moving averages
averaged each epoch, rank-0 files). Ranks meet through ``init_process_group``: NCCL on GPUs
(one GPU per rank, by local rank), gloo on CPUs.

Gradients are averaged in buckets, as ``DistributedDataParallel`` does: after the backward
pass the gradients are packed into flat buckets of at most :data:`BUCKET_BYTES` (one dtype
each), every bucket is all-reduced (sum) asynchronously, and once all have arrived each is
divided by the number of ranks and unpacked. DDP itself is not wrapped around the Keras
model: Keras on torch keeps its weights as ``torch.nn.Parameter`` objects of its own
variables, reads and updates them through ``optimizer.apply`` (not ``torch.optim``), and
keeps BatchNorm moving statistics as parameters rather than buffers, so DDP's gradient hooks
and buffer broadcasts would have to be second-guessed at each of those places; the buckets
give the same averaged gradients through the one loop that Horovod's torch path also uses.
What DDP adds, overlapping the all-reduce with the backward pass, is left out (measured
on GPUs under issue 15).

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
from accelml.dl.common import free_ports, in_slurm_step, slurm_tasks_per_node
from accelml.dl.config import TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.engines import probe_keras, requirements, torch_deterministic_environment
from accelml.dl.strategies import LOCAL_PROCESSES, SRUN, Determinism, Strategy
from accelml.dl.strategies.torch_loop import Collectives, train_on_torch
from accelml.errors import UnavailableError
from accelml.probe import Availability, distribution_version, import_or_reason

if TYPE_CHECKING:
    import torch

BUCKET_BYTES = 25 * 2**20
"""Most bytes of gradients in one all-reduce (DistributedDataParallel's ``bucket_cap_mb``)."""


def buckets(tensors: list[torch.Tensor], limit: int = BUCKET_BYTES) -> list[list[int]]:
    """Indices of ``tensors`` grouped into buckets of one dtype and device and at most ``limit``
    bytes (a larger tensor gets a bucket of its own), in order.

    >>> import torch
    >>> buckets([torch.zeros(4), torch.zeros(4), torch.zeros(2, dtype=torch.int64),
    ...          torch.zeros(8)], limit=32)
    [[0, 1], [3], [2]]
    """
    groups: dict[tuple[Any, Any], list[list[int]]] = {}
    filled: dict[tuple[Any, Any], int] = {}
    for index, tensor in enumerate(tensors):
        key = (tensor.dtype, tensor.device)
        size = tensor.numel() * tensor.element_size()
        group = groups.setdefault(key, [[]])
        if group[-1] and filled[key] + size > limit:
            group.append([])
            filled[key] = 0
        group[-1].append(index)
        filled[key] = filled.get(key, 0) + size
    return [bucket for group in groups.values() for bucket in group if bucket]


def _bucketed(torch_module: Any, reduce: Any, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """``tensors`` packed into buckets, ``reduce(flat)`` started on each (returning its pending
    work), waited for, and unpacked into new tensors."""
    packed = [(bucket, torch_module.cat([tensors[i].reshape(-1) for i in bucket]))
              for bucket in buckets(tensors)]
    pending = [reduce(flat) for _, flat in packed]
    for work in pending:
        work.wait()
    result = list(tensors)
    for bucket, flat in packed:
        pieces = torch_module.split(flat, [tensors[i].numel() for i in bucket])
        for index, piece in zip(bucket, pieces, strict=True):
            result[index] = piece.view_as(tensors[index])
    return result


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
    host = os.environ.get("MASTER_ADDR") or ("localhost" if size == 1 else None)
    port = os.environ.get("MASTER_PORT") or (str(free_ports(1)[0]) if size == 1 else None)
    if host is None or port is None:
        raise UnavailableError(f"torch-ddp rank {rank} of {size} needs MASTER_ADDR and "
                               "MASTER_PORT (accelml.dl.launch sets them)")
    dist.init_process_group("nccl" if on_gpu else "gloo", init_method=f"tcp://{host}:{port}",
                            rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=config.time_limit_s))

    def all_reduce(flat: torch.Tensor) -> Any:
        return dist.all_reduce(flat, op=dist.ReduceOp.SUM, async_op=True)

    def average(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        summed = _bucketed(torch, all_reduce, tensors)
        return [tensor.div_(size) for tensor in summed]

    def total(tensor: torch.Tensor) -> torch.Tensor:
        summed = tensor.clone()
        dist.all_reduce(summed, op=dist.ReduceOp.SUM)
        return summed

    def broadcast(tensors: list[torch.Tensor]) -> None:
        received = _bucketed(torch, lambda flat: dist.broadcast(flat, src=0, async_op=True),
                             tensors)
        with torch.no_grad():
            for tensor, value in zip(tensors, received, strict=True):
                tensor.copy_(value)

    return Collectives(rank, size, local_rank, local_size, average=average, total=total,
                       broadcast=broadcast, library="torch", close=dist.destroy_process_group)


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
    doc="one process per rank, Keras 3 on PyTorch, gradients averaged by torch.distributed "
        "all-reduce in buckets (NCCL on GPUs, gloo on CPUs)",
    keras_backends=("torch",),
    train=train,
    probe=probe,
    determinism=Determinism(
        Expectation(True, "seeds, torch's deterministic algorithms and a fixed bucket layout: "
                          "every all-reduce sums the same buckets in rank order, so runs "
                          "repeat bitwise"),
        environment=torch_deterministic_environment,
        notes=("torch.use_deterministic_algorithms is on: some CUDA kernels are slower",)),
    libraries=("keras", "torch"),
    multi_process=True,
    launchers=(LOCAL_PROCESSES, SRUN),
    default_launcher=LOCAL_PROCESSES,
    local_process_environment=rank_variables,
    rank_environment=rendezvous,
)
