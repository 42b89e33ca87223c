"""tf.data input pipelines in the order the tutorials teach.

Training: ``shard(size, rank)`` -> ``take(steps x batch)`` -> ``map(normalize, AUTOTUNE)`` -> ``cache()`` (in memory,
or on disk per rank: ``cache(filename=cache_dir/train-{rank})``) -> ``shuffle(shard size)``
-> ``batch(per-worker batch, drop_remainder)`` -> [resize per batch] -> ``prefetch(AUTOTUNE)``. The test pipeline skips the shuffle and keeps the last partial batch.
Every rank takes the same number of steps (the smallest shard's), so no rank waits on an
all-reduce that another rank never starts; the samples are cut before the cache so that
the cache is always read to its end (a partly read tf.data cache is thrown away). The resize (CIFAR-10 to 128x128) runs after the
cache, on whole batches, so the cache holds the small images.
"""

from __future__ import annotations

import os

from accelml.errors import SpecError


def steps_per_epoch(train_samples: int, workers: int, batch_size: int,
                    limit: int | None = None) -> int:
    """Batches per epoch for every worker: the smallest shard, whole batches only.

    >>> steps_per_epoch(1437, 2, 32)
    22
    """
    steps = (train_samples // workers) // batch_size
    if limit is not None:
        steps = min(steps, limit)
    if steps < 1:
        raise SpecError(f"{train_samples} training samples give no full batch of {batch_size} "
                        f"per worker for {workers} workers; lower batch_size")
    return steps


def normalize(tf, image, label):
    return tf.cast(image, tf.float32) / 255.0, label


def train_dataset(tf, x, y, *, batch_size: int, steps: int, rank: int = 0, size: int = 1,
                  shuffle: bool = True, seed: int = 0, cache: str = "memory",
                  cache_dir: str | None = None, image_size: int | None = None,
                  repeat: bool = False):
    """The training pipeline; ``repeat`` makes it endless (for ``fit(steps_per_epoch=...)``)."""
    autotune = tf.data.AUTOTUNE
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shard(size, rank)
    dataset = dataset.take(steps * batch_size)
    dataset = dataset.map(lambda i, l: normalize(tf, i, l), num_parallel_calls=autotune)
    if cache == "memory":
        dataset = dataset.cache()
    elif cache == "disk":
        os.makedirs(cache_dir, exist_ok=True)
        dataset = dataset.cache(filename=os.path.join(cache_dir, f"train-{rank}"))
    if shuffle:
        dataset = dataset.shuffle(steps * batch_size, seed=seed + rank, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if image_size is not None:
        dataset = dataset.map(lambda i, l: (tf.image.resize(i, (image_size, image_size)), l),
                              num_parallel_calls=autotune)
    if repeat:
        dataset = dataset.repeat()
    return dataset.prefetch(autotune)


def evaluation_dataset(tf, x, y, *, batch_size: int, rank: int = 0, size: int = 1,
                 image_size: int | None = None):
    autotune = tf.data.AUTOTUNE
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shard(size, rank)
    dataset = dataset.map(lambda i, l: normalize(tf, i, l), num_parallel_calls=autotune)
    dataset = dataset.cache().batch(batch_size)
    if image_size is not None:
        dataset = dataset.map(lambda i, l: (tf.image.resize(i, (image_size, image_size)), l),
                              num_parallel_calls=autotune)
    return dataset.prefetch(autotune)
