"""The runnable examples of the modules the fault handling lives in."""

import doctest
import importlib

import pytest

MODULES = ["accelml.scratch", "accelml.errors", "accelml.dl.launch", "accelml.runner.process",
           "accelml.dl.loopback_horovodrun", "accelml.dl.private_network",
           "accelml.runner.fingerprint", "accelml.results.store"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
