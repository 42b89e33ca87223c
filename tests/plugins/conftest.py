"""A third party's plug-in, installed the way pip would: modules plus a ``.dist-info`` with
``entry_points.txt``, in a temporary directory on ``sys.path`` and on ``PYTHONPATH`` (so the
per-case processes, dask workers and SLURM jobs that accelml starts find it too)."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

InstallPlugin = Callable[[str, dict[str, str], dict[str, dict[str, str]]], Path]


@pytest.fixture
def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InstallPlugin]:
    """``install_plugin("acme-knn", {"acme_knn.py": source}, {"accelml.backends": {"acme": "acme_knn:BACKEND"}})``.

    Returns the directory it installed into. Everything is undone after the test.
    """
    root = tmp_path / "site"
    root.mkdir()
    added: list[str] = []

    def install(distribution: str, modules: dict[str, str],
                entry_points: dict[str, dict[str, str]]) -> Path:
        for relative, source in modules.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
            added.append(relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__"))
        info = root / f"{distribution.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items()) + "\n"
            for group, points in entry_points.items()))
        importlib.invalidate_caches()
        return root

    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]))
    yield install
    for name in added:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
