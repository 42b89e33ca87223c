"""Fixtures for the deep-learning tests: real multi-process runs, shared across tests."""

from __future__ import annotations

import pytest

from tests.plugins.conftest import install_plugin  # noqa: F401  (strategy variants, as third parties install them)


@pytest.fixture(scope="session")
def horovod_ready():
    """Skip (with the reason) where Horovod or horovodrun is not installed."""
    from accelml.dl.strategies.horovod import probe_horovod

    found = probe_horovod()
    if not found.available:
        import os
        import shutil
        import sys

        launcher = shutil.which("horovodrun", path=os.path.dirname(sys.executable))
        if launcher is None:
            pytest.skip(f"horovod unavailable: {found.detail}")
    return True


@pytest.fixture(scope="session")
def horovod_torch_ready(horovod_ready):
    """Skip (with the reason) only where Horovod was built without its PyTorch binding."""
    from accelml.dl.strategies._horovod_torch import built_with_torch

    if not built_with_torch():
        pytest.skip("horovod was built without PyTorch (make/build-horovod.sh builds it with "
                    "HOROVOD_WITH_PYTORCH=1)")
    return True
