"""Names for TensorFlow and Keras objects where accelml's signatures meet them.

TensorFlow, Keras and ``tf_keras`` ship no type information, so to mypy their objects are
``Any`` (pyproject.toml ignores their missing imports). These names say in a signature
which object is meant; they check nothing. The modules themselves are passed as
``types.ModuleType``. JAX ships its own types: its arrays are ``jax.Array``.
"""

from __future__ import annotations

from typing import Any, TypeAlias

KerasModel: TypeAlias = Any
"""A ``Model`` of Keras 3 or of ``tf_keras``."""

KerasOptimizer: TypeAlias = Any
"""An optimizer of Keras 3 or of ``tf_keras``."""

Tensor: TypeAlias = Any
"""A TensorFlow tensor, or a Keras 3 tensor of whichever engine Keras runs on."""

Dataset: TypeAlias = Any
"""A ``tf.data.Dataset``."""

DistributionStrategy: TypeAlias = Any
"""A ``tf.distribute`` strategy."""
