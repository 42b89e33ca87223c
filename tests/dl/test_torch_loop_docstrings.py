"""The examples in :mod:`accelml.dl.strategies.torch_loop`'s docstrings run and hold: among
them, that one rank trains the bare model, without the strategy's averaging wrapper."""

from __future__ import annotations

import doctest
import importlib.util

import pytest

import accelml.dl.strategies.torch_loop as torch_loop


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torch_loop_examples_hold():
    result = doctest.testmod(torch_loop, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4 and result.failed == 0
