"""Fixtures for the deep-learning tests: real multi-process runs, shared across tests."""

from __future__ import annotations

import os

import pytest

from tests.plugins.conftest import install_plugin  # noqa: F401  (strategy variants, as third parties install them)


@pytest.fixture(scope="session")
def horovod_torch_ready(horovod_ready):
    """Skip (with the reason) only where Horovod was built without its PyTorch binding."""
    from accelml.dl.strategies._horovod_torch import built_with_torch

    if not built_with_torch():
        pytest.skip("horovod was built without PyTorch (make/build-horovod.sh builds it with "
                    "HOROVOD_WITH_PYTORCH=1)")
    return True


QUICK_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
"""XLA flags that cut what compiling costs on CPU (LLVM's optimisation of the machine code,
not XLA's own passes over the program: the collectives, their grouping and the arithmetic are
the same). Most of a small JAX test's CPU is compiling (a model's initialisers alone cost 8.5
CPU-s, 1.3 s with these), not training."""


def quick_xla_environment() -> dict[str, str]:
    """This process's environment with :data:`QUICK_XLA_FLAGS` added to ``XLA_FLAGS``."""
    flags = os.environ.get("XLA_FLAGS", "")
    return {**os.environ, "XLA_FLAGS": f"{flags} {QUICK_XLA_FLAGS}".strip()}


@pytest.fixture
def quick_xla(monkeypatch) -> None:
    """JAX processes started by the test (``launch``'s ranks, which add their host devices to
    ``XLA_FLAGS``) compile with :data:`QUICK_XLA_FLAGS`; skips where JAX is not installed."""
    pytest.importorskip("jax", reason="jax is not installed (pip install jax)")
    monkeypatch.setenv("XLA_FLAGS", quick_xla_environment()["XLA_FLAGS"])
