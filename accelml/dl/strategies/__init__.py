"""One module per way of spreading training; each has ``train(config, data) -> TrainingResult``.

``tf_fit``: ``single``, ``mirrored``, ``multiworker`` (``model.fit`` under a tf.distribute
strategy); ``horovod``: a Keras 3 training loop with ``horovod.tensorflow`` all-reduce;
``jax_steps``: ``jax-dataparallel`` and ``jax-pmean`` (stateless jitted steps on Keras 3/JAX).
"""

STRATEGY_MODULES = {
    "single": "accelml.dl.strategies.tf_fit",
    "mirrored": "accelml.dl.strategies.tf_fit",
    "multiworker": "accelml.dl.strategies.tf_fit",
    "horovod": "accelml.dl.strategies.horovod",
    "jax-dataparallel": "accelml.dl.strategies.jax_steps",
    "jax-pmean": "accelml.dl.strategies.jax_steps",
}
