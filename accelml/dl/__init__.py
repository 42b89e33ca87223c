"""Deep learning: Keras models trained data-parallel (Horovod, tf.distribute, JAX).

>>> from accelml.dl import TrainingConfig, launch
>>> config = TrainingConfig(model="mlp", dataset="digits", strategy="horovod",
...                         batch_size=32, epochs=3, warmup_epochs=1)
>>> result = launch(config, workers=2)          # doctest: +SKIP
>>> result.global_batch, result.ranks_agree     # doctest: +SKIP
(64, True)

Importing this package imports no TensorFlow, Keras or JAX; ranks import what their
strategy needs.
"""

from accelml.dl.config import (STRATEGIES, EpochRecord, TrainingConfig, TrainingResult,
                               scaled_learning_rate, warmup_learning_rate)
from accelml.dl.launch import LAUNCHERS, launch
from accelml.dl.training import run_training

__all__ = ["LAUNCHERS", "STRATEGIES", "EpochRecord", "TrainingConfig", "TrainingResult",
           "launch", "run_training", "scaled_learning_rate", "warmup_learning_rate"]
