"""Datasets: generated, shipped with scikit-learn, files, Keras and OpenML; cached by content hash.

>>> import tempfile
>>> from accelml.datasets import load_dataset
>>> data = load_dataset("wine", "shipped", {"name": "wine"}, cache_dir=tempfile.mkdtemp())
>>> data.info.n_classes, data.info.dtype
(3, 'float64')
"""

from accelml.datasets.registry import LoadedData, dataset_task, default_cache_dir, load_dataset

__all__ = ["LoadedData", "dataset_task", "default_cache_dir", "load_dataset"]
