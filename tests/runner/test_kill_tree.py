"""accelml.scratch.kill_tree, the one way a case's or a launcher's process tree is killed: a
member that ends between the tree being read and its group being looked up is skipped, not an
error (seen once under load: a memory-limited case's child ended in that gap, and the runner
raised ProcessLookupError instead of recording the case over its memory limit)."""

from __future__ import annotations

import subprocess
import sys

import psutil

import accelml.scratch
from accelml.scratch import kill_tree


def test_a_member_that_ended_after_the_tree_was_read_is_skipped(monkeypatch):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    member = psutil.Process(ended.pid)
    ended.wait()                                   # gone, and reaped: its pid names nothing
    monkeypatch.setattr(accelml.scratch, "descendants", lambda pid: [member])
    kill_tree(ended.pid, include_self=False)
