"""horovodrun's "built with Gloo?" check (a TensorFlow import per launch) is asked once per
installed Horovod: a yes is kept under the extension files' listing, a no never is."""

from __future__ import annotations

import os

from accelml.dl.loopback_horovodrun import gloo_built_once


def _horovod(tmp_path):
    root = tmp_path / "horovod"
    for framework in ("tensorflow", "torch"):
        (root / framework).mkdir(parents=True)
        (root / framework / "mpi_lib.so").write_bytes(b"built")
    return root


def test_a_yes_is_asked_once_until_an_extension_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root, asked = _horovod(tmp_path), []

    def check(verbose=False):
        asked.append(verbose)
        return True

    built = gloo_built_once(check, root)
    assert [built(), built(), built()] == [True, True, True]
    assert asked == [False]
    assert [path.name for path in (tmp_path / "cache" / "accelml" / "horovod-gloo-built").iterdir()]
    (root / "torch" / "mpi_lib.so").write_bytes(b"rebuilt with other options")
    os.utime(root / "torch" / "mpi_lib.so", ns=(1, 1))
    assert built() is True and asked == [False, False]
    assert built(verbose=True) is True and asked == [False, False, True]   # prints its findings


def test_a_no_is_asked_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    answers = [False, None, True]
    built = gloo_built_once(lambda verbose=False: answers.pop(0), _horovod(tmp_path))
    assert [built(), built(), built(), built()] == [False, None, True, True]
    assert answers == []


def test_file_cache_examples():
    import doctest

    import accelml.file_cache

    result = doctest.testmod(accelml.file_cache)
    assert result.attempted >= 4 and result.failed == 0
