"""The container image the container tests run cases in, built once by
make/build-container-image.sh and cached outside the checkout (~/.cache/accelml/images)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CANNOT_BUILD_HERE = 3


@pytest.fixture(scope="session")
def container_image() -> str:
    """The image directory (Debian bookworm, its python3 3.11 and its own numpy, scipy,
    scikit-learn, dask); skips where it cannot be built (not root, not Debian)."""
    out = subprocess.run(["bash", str(REPO / "make" / "build-container-image.sh"), sys.prefix],
                         capture_output=True, text=True, timeout=1800)
    if out.returncode == CANNOT_BUILD_HERE:
        pytest.skip(f"container image unavailable: {out.stdout.strip()}")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def host_python_binds() -> tuple[str, ...]:
    """What the image needs bound to run this venv's own Python and libraries: the venv and
    the interpreter's installation (skip where that is the system's /usr itself)."""
    if sys.base_prefix in ("/usr", "/usr/local", "/"):
        pytest.skip(f"this venv's Python lives in {sys.base_prefix}, which cannot be bound over "
                    "the image's own")
    return (sys.prefix, sys.base_prefix)
