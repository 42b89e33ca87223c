"""Keras on torch through Inductor, for ``step_capture = "compiled"``: a training step's parts
compiled by ``torch.compile``, each on its own (:class:`CompiledParts`): the forward pass, loss
and batch metrics (the backward pass through AOTAutograd), and the optimizer's update.

Eagerly every Keras op is its own kernel (ResNet50V2, 128 px, bf16, batch 256: 71 ms of GPU
kernels a step against XLA's 14.5 ms); Inductor fuses the element-wise work (BatchNorm's
float32 casts and statistics, activations, the bias adds) into the convolutions' neighbours.
Keras's per-variable update is a handful of small kernels per variable (momentum, learning
rate schedule, assignment), which Inductor fuses too; a captured step of a small model is
mostly such kernels (the workshop CNN: 354 us a step on an H200 with only the forward compiled,
against XLA's 198 us).

Dynamo traces Keras's Python once. What broke its graphs, found with ``torch._dynamo.explain``
(:func:`graph_breaks`), and what :func:`prepare_for_inductor` does about it:

- BatchNormalization keeps its reduction axes in a Keras ``TrackedList``, a list subclass
  Dynamo cannot hand to ``torch.mean``/``torch.squeeze`` as a constant ("Failed to convert
  args/kwargs to proxy"): each training-mode BatchNorm split the graph (small_resnet: 17
  breaks, 18 graphs). The axes become a tuple (Keras tracks tuples as plain tuples), the
  same values: 0 breaks.
- ZeroPadding2D pads through ``keras.ops.pad``, which makes a new ``Pad`` operation every call;
  its auto-made name updates Keras's global name counts, a dict Dynamo sees mutated, and the
  next layer's ``inspect.Signature.bind`` reads a mapping proxy ("mapping proxy affected by
  dictionary mutation"): ResNet50V2 at 32 px, BatchNorm fixed, still broke 9 times (10 graphs)
  and each resumed frame recompiled until Dynamo's limit, leaving the rest eager. Each
  ZeroPadding2D calls the backend's ``pad`` directly (what ``Pad.call`` calls): 0 breaks.

ResNet50V2 (32 px, bf16, torch 2.13 on CPU): as built 13 breaks (14 graphs, and Dynamo's
recompile limit hit in Keras's ``_setattr_hook``, ``forward`` and ``Functional.call``, whose
frames then ran eagerly); prepared, 0 breaks, one graph. The workshop CNN: 0 either way.

Random numbers are drawn as eager torch draws them (Inductor's ``fallback_random``), so a
compiled step with dropout takes the same masks as the eager step from the same seed; what
differs is the rounding of fused arithmetic.

>>> COMPILE_OPTIONS["fallback_random"]
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

COMPILE_OPTIONS: dict[str, Any] = {"fallback_random": True}
"""Inductor's options for compiled steps: random draws as eager torch makes them."""


def prepare_for_inductor(model: Any) -> int:
    """Make ``model``'s layers traceable by Dynamo without graph breaks (see the module's
    notes); returns how many layers were changed. Their computation is unchanged."""
    import keras
    from keras.src.backend import numpy as backend_numpy

    changed = 0
    for layer in model._flatten_layers(include_self=False, recursive=True):
        axes = getattr(layer, "_reduction_axes", None)
        if isinstance(axes, list):
            layer._reduction_axes = tuple(axes)
            changed += 1
        if isinstance(layer, keras.layers.ZeroPadding2D):
            layer.call = _padding_without_operation(layer, backend_numpy.pad)
            changed += 1
    return changed


def _padding_without_operation(layer: Any, pad: Callable[..., Any]) -> Callable[[Any], Any]:
    """ZeroPadding2D's ``call``, padding with the backend's ``pad`` (no ``Pad`` operation)."""
    if layer.data_format == "channels_first":
        widths = ((0, 0), (0, 0), *layer.padding)
    else:
        widths = ((0, 0), *layer.padding, (0, 0))

    def call(inputs: Any) -> Any:
        return pad(inputs, widths)

    return call


def graph_breaks(torch: Any, function: Callable[..., Any], *args: Any) -> tuple[int, list[str]]:
    """(graph breaks, their distinct first-line reasons with the Keras line) of ``function``
    called with ``args``, by ``torch._dynamo.explain`` (which runs it once)."""
    explained = torch._dynamo.explain(function)(*args)
    reasons: dict[str, None] = {}
    for graph_break in explained.break_reasons:
        where = graph_break.user_stack[-1] if graph_break.user_stack else None
        place = f" at {where.filename.rsplit('site-packages/', 1)[-1]}:{where.lineno}" \
            if where is not None else ""
        reasons[graph_break.reason.splitlines()[0] + place] = None
    return int(explained.graph_break_count), list(reasons)


class CompiledOrEager:
    """``eager`` compiled by Inductor on its first call; where compiling fails there, ``eager``
    itself from then on, with the reason in :attr:`failure`. (An error of the step itself
    then raises from the eager call, as it would have without compiling.)"""

    def __init__(self, torch: Any, eager: Callable[..., Any]) -> None:
        self.torch = torch
        self.eager = eager
        self.compiled: Callable[..., Any] = torch.compile(eager, dynamic=False,
                                                          options=COMPILE_OPTIONS)
        self.calls = 0
        self.failure: str | None = None
        self.graphs = 0

    def __call__(self, *args: Any) -> Any:
        if self.failure is not None:
            return self.eager(*args)
        if self.calls:
            return self.compiled(*args)
        counters = self.torch._dynamo.utils.counters["stats"]
        before = counters["unique_graphs"]
        try:
            result = self.compiled(*args)
        except Exception as error:    # Dynamo's, Inductor's or the C++/Triton compiler's
            self.failure = f"{type(error).__name__}: {_first_line(error)}"
            return self.eager(*args)
        self.calls += 1
        self.graphs = counters["unique_graphs"] - before
        return result


class CompiledParts:
    """Named parts of a step, each a :class:`CompiledOrEager`: one part failing to compile
    leaves the others compiled.

    >>> import torch
    >>> parts = CompiledParts(torch, {"double": lambda x: 2 * x})
    >>> parts.part("double")(torch.ones(2)).tolist(), parts.compiled_names(), parts.failures()
    ([2.0, 2.0], ['double'], {})
    """

    def __init__(self, torch: Any, parts: dict[str, Callable[..., Any]]) -> None:
        self.parts = {name: CompiledOrEager(torch, eager) for name, eager in parts.items()}

    def part(self, name: str) -> CompiledOrEager:
        return self.parts[name]

    def compiled_names(self) -> list[str]:
        """The parts that compiled (so far: a part compiles on its first call)."""
        return [name for name, part in self.parts.items() if part.failure is None]

    def failures(self) -> dict[str, str]:
        """Why each part that failed to compile failed."""
        return {name: part.failure for name, part in self.parts.items()
                if part.failure is not None}

    def graphs(self) -> int:
        """Graphs Dynamo traced, over every part."""
        return sum(part.graphs for part in self.parts.values())


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else "no message"
