"""The ``horovod`` strategy on Keras 3 + PyTorch: ``horovod.torch``'s collectives for the
torch loop (:func:`accelml.dl.strategies.torch_loop.train_on_torch`).

Horovod picks the transport itself: NCCL for CUDA tensors where it was built with NCCL,
gloo (under ``horovodrun --gloo``) or MPI otherwise.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from typing import TYPE_CHECKING, Any

from accelml.dl.config import TrainingConfig, TrainingResult
from accelml.dl.data import ImageData
from accelml.dl.strategies.torch_loop import Collectives, train_on_torch
from accelml.errors import UnavailableError

if TYPE_CHECKING:
    import torch

EXTENSION = "mpi_lib_v2"
"""The compiled part of ``horovod.torch``: missing where Horovod was built without PyTorch
(``import horovod.torch`` then prints a warning to stdout and succeeds without its functions,
so its presence is checked as Horovod itself checks it: the file beside the package)."""


def built_with_torch() -> bool:
    """Whether this Horovod has its PyTorch binding (looked up; ``horovod.torch`` not imported)."""
    try:
        horovod = importlib.util.find_spec("horovod")
    except (ImportError, ValueError):
        return False
    if horovod is None or not horovod.submodule_search_locations:
        return False
    return any(os.path.exists(os.path.join(directory, "torch", EXTENSION + suffix))
               for directory in horovod.submodule_search_locations
               for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def import_horovod_torch() -> Any:
    """``horovod.torch``, or UnavailableError saying why not."""
    if not built_with_torch():
        raise UnavailableError("horovod was built without PyTorch (rebuild it with "
                               "HOROVOD_WITH_PYTORCH=1: make/build-horovod.sh)")
    try:
        import horovod.torch as hvd
    except ImportError as error:
        raise UnavailableError(f"horovod.torch does not import: {error}") from None
    return hvd


def connect(config: TrainingConfig) -> Collectives:
    """``hvd.init()``, and Horovod's grouped all-reduce (average), all-reduce (sum) and
    broadcast from rank 0."""
    hvd = import_horovod_torch()
    hvd.init()

    def average(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        return list(hvd.grouped_allreduce(tensors, op=hvd.Average))

    def total(tensor: torch.Tensor) -> torch.Tensor:
        summed: torch.Tensor = hvd.allreduce(tensor, op=hvd.Sum)
        return summed

    def broadcast(tensors: list[torch.Tensor]) -> None:
        hvd.broadcast_parameters([(f"state.{index}", tensor)
                                  for index, tensor in enumerate(tensors)], root_rank=0)

    return Collectives(hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(),
                       average=average, total=total, broadcast=broadcast, library="horovod")


def train(config: TrainingConfig, data: ImageData) -> TrainingResult:
    return train_on_torch(config, data, connect)
