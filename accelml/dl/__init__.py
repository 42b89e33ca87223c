"""Deep learning: Keras models trained data-parallel (Horovod, tf.distribute, JAX).

>>> from accelml.dl import TrainingConfig, launch
>>> config = TrainingConfig(model="mlp", dataset="digits", strategy="horovod",
...                         batch_size=32, epochs=3, warmup_epochs=1)
>>> result = launch(config, ranks=2)          # doctest: +SKIP
>>> result.global_batch, result.ranks_agree     # doctest: +SKIP
(64, True)

How training is spread is a :class:`~accelml.dl.strategies.Strategy` record, one module
each (:mod:`accelml.dl.strategies`); ``STRATEGIES_POINT.names()`` lists those installed.
Importing this package imports no TensorFlow, Keras or JAX; ranks import what their
strategy needs.
"""

from accelml.dl.config import EpochRecord, TrainingConfig, TrainingResult, scaled_learning_rate, warmup_learning_rate
from accelml.dl.launch import launch
from accelml.dl.strategies import LAUNCHERS, STRATEGIES_POINT, Strategy
from accelml.dl.training import run_training

__all__ = ["LAUNCHERS", "STRATEGIES_POINT", "EpochRecord", "Strategy", "TrainingConfig",
           "TrainingResult", "launch", "run_training", "scaled_learning_rate",
           "warmup_learning_rate"]
