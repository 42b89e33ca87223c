"""The runnable examples in the executors' docstrings."""

import doctest
import importlib

import pytest

MODULES = ["accelml.executors", "accelml.executors.interface", "accelml.executors.resources",
           "accelml.executors.cluster_settings", "accelml.executors.tls", "accelml.executors.scripts",
           "accelml.executors.arguments", "accelml.executors.jobqueue", "accelml.executors.jobqueue_adapter",
           "accelml.executors.local_cluster", "accelml.executors.dashboard", "accelml.executors.schedulers.slurm",
           "accelml.executors.schedulers.pbs"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
