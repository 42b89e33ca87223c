"""The examples in the estimators package's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "accelml.estimators",
    "accelml.estimators._estimator",
    "accelml.estimators._registry",
    "accelml.estimators.keras",
    "accelml.estimators.sklearnex",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
