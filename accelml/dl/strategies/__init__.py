"""Ways of spreading training: one module each, holding its :class:`Strategy` record(s).

Built in: ``tf_fit`` (``model.fit`` under tf.distribute: one process, several devices of
one host, or one process per rank), ``horovod`` (a Keras 3 loop with Horovod's
all-reduce, one process per rank, on TensorFlow or PyTorch), ``torch_ddp`` (Keras 3 on
PyTorch, ``torch.distributed`` all-reduce in buckets, one process per rank), ``jax_steps``
(stateless jitted steps of Keras 3 on JAX over the devices of one process), ``keras_fit``
(plain ``model.fit`` from NumPy on one device, on any Keras engine). ``torch_loop``
is the Keras-on-torch loop that the torch strategies share, over their own collectives.

A third party adds a strategy by writing a module that defines ``STRATEGY = Strategy(...)``
and naming it in its ``pyproject.toml``::

    [project.entry-points."accelml.strategies"]
    acme-fit = "acme_fit:STRATEGY"

>>> "single" in STRATEGIES_POINT.names() and default_strategy().name == "single"
True
>>> rows = strategy_availability()
>>> any(row.name == "strategy single" for row in rows)
True
"""

from __future__ import annotations

import dataclasses

from accelml.dl.config import (
    ALLREDUCE,
    AUTO,
    FLOAT32,
    LAUNCHERS,
    LOCAL_PROCESSES,
    NO_LISTENER,
    SRUN,
    STRATEGIES_POINT,
    Determinism,
    Listener,
    Strategy,
    default_strategy,
    find_strategy,
    no_listeners,
    no_rank_variables,
    no_variables,
    strategy_libraries,
    strategy_named,
)
from accelml.dl.engines import probe_jax, probe_keras, probe_tensorflow, probe_torch
from accelml.probe import Availability

__all__ = ["ALLREDUCE", "AUTO", "FLOAT32", "LAUNCHERS", "LOCAL_PROCESSES", "NO_LISTENER", "SRUN",
           "STRATEGIES_POINT", "Determinism", "Listener", "Strategy", "default_strategy",
           "find_strategy", "no_listeners", "no_rank_variables", "no_variables",
           "probe_strategy", "strategy_availability", "strategy_libraries", "strategy_named"]


def probe_strategy(record: Strategy) -> Availability:
    """Whether ``record`` can run here, as the row ``strategy <name>``; a probe that raises
    (a third party's bug) makes it unavailable with the error, never breaks the caller."""
    try:
        found = record.probe()
    except Exception as error:
        found = Availability(record.name, "-", False, None,
                             f"its probe raised {type(error).__name__}: {error}")
    return dataclasses.replace(found, name=f"strategy {record.name}", device="-",
                               summary=record.doc)


def strategy_availability() -> list[Availability]:
    """Rows for ``accelml backends``: Keras and its engines, then one row per strategy
    (``strategy <name>``), then third-party strategies that failed to load, with the reason."""
    rows = [dataclasses.replace(probe(), summary=summary) for probe, summary in (
        (probe_keras, "Keras 3"),
        (probe_tensorflow, "TensorFlow, an engine of Keras"),
        (probe_jax, "JAX, an engine of Keras"),
        (probe_torch, "PyTorch, an engine of Keras"))]
    rows.extend(probe_strategy(record) for record in STRATEGIES_POINT.records())
    for broken in STRATEGIES_POINT.broken():
        rows.append(Availability(broken.entry_point.partition(" = ")[0], "-", False, None,
                                 f"plug-in {broken.entry_point} ({broken.group}) failed to "
                                 f"load: {broken.reason}", "broken third-party plug-in"))
    return rows
