"""Fixtures for the deep-learning tests: real multi-process runs, shared across tests."""

from __future__ import annotations

import pytest


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
