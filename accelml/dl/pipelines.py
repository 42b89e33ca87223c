"""tf.data input pipelines in the order the tutorials teach.

Training: ``shard(size, rank)`` -> ``take(steps x batch)`` -> ``map(normalize, AUTOTUNE)``
-> ``cache()`` (in memory, or on disk per rank: ``cache(filename=cache_dir/train-{rank})``)
-> ``shuffle(shard size)`` -> ``batch(per-rank batch, drop_remainder)`` -> [resize per
batch] -> ``prefetch(AUTOTUNE)``. The test pipeline skips the shuffle and keeps the last
partial batch. Every rank takes the same number of steps (the smallest shard's), so no rank
waits on an all-reduce that another rank never starts; the samples are cut before the cache
so that the cache is always read to its end (a partly read tf.data cache is thrown away).
The resize (CIFAR-10 to 128x128) runs after the cache, on whole batches, so the cache holds
the small images.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType

import numpy as np

from accelml.dl.engine_objects import Dataset, Tensor
from accelml.errors import SpecError


def steps_per_epoch(train_samples: int, ranks: int, batch_size: int,
                    limit: int | None = None) -> int:
    """Batches per epoch for every rank: the smallest shard, whole batches only.

    >>> steps_per_epoch(1437, 2, 32)
    22
    """
    steps = (train_samples // ranks) // batch_size
    if limit is not None:
        steps = min(steps, limit)
    if steps < 1:
        raise SpecError(f"{train_samples} training samples give no full batch of {batch_size} "
                        f"per rank for {ranks} ranks; lower batch_size")
    return steps


def normalize(tf: ModuleType, image: Tensor, label: Tensor) -> tuple[Tensor, Tensor]:
    """uint8 pixels to float32 in [0, 1]; the label as it is."""
    return tf.cast(image, tf.float32) / 255.0, label


def _resize(tf: ModuleType, size: int) -> Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """The map that resizes a batch of images to ``size`` x ``size``."""
    def resize(images: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
        return tf.image.resize(images, (size, size)), labels
    return resize


def train_dataset(tf: ModuleType, x: np.ndarray, y: np.ndarray, *, batch_size: int, steps: int,
                  rank: int = 0, size: int = 1, shuffle: bool = True, seed: int = 0,
                  cache: str = "memory", cache_dir: str | None = None,
                  image_size: int | None = None, repeat: bool = False) -> Dataset:
    """The training pipeline; ``repeat`` makes it endless (for ``fit(steps_per_epoch=...)``)."""
    autotune = tf.data.AUTOTUNE
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shard(size, rank)
    dataset = dataset.take(steps * batch_size)
    dataset = dataset.map(lambda image, label: normalize(tf, image, label), num_parallel_calls=autotune)
    if cache == "memory":
        dataset = dataset.cache()
    elif cache == "disk":
        if cache_dir is None:
            raise ValueError("cache 'disk' needs cache_dir")
        os.makedirs(cache_dir, exist_ok=True)
        dataset = dataset.cache(filename=os.path.join(cache_dir, f"train-{rank}"))
    if shuffle:
        dataset = dataset.shuffle(steps * batch_size, seed=seed + rank, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if image_size is not None:
        dataset = dataset.map(_resize(tf, image_size), num_parallel_calls=autotune)
    if repeat:
        dataset = dataset.repeat()
    return dataset.prefetch(autotune)


def evaluation_dataset(tf: ModuleType, x: np.ndarray, y: np.ndarray, *, batch_size: int,
                       rank: int = 0, size: int = 1, image_size: int | None = None) -> Dataset:
    """The test pipeline: every sample of this rank's shard, the last batch partial."""
    autotune = tf.data.AUTOTUNE
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shard(size, rank)
    dataset = dataset.map(lambda image, label: normalize(tf, image, label), num_parallel_calls=autotune)
    dataset = dataset.cache().batch(batch_size)
    if image_size is not None:
        dataset = dataset.map(_resize(tf, image_size), num_parallel_calls=autotune)
    return dataset.prefetch(autotune)
