"""Where a hung case was: the frames a timed-out case's reason names start at the innermost
frame outside Python's standard library (a forest fit caught inside ``inspect`` names
scikit-learn's call), name installed files from their package on (code scikit-learn
vendors still says sklearn/), and a thread with only standard-library frames keeps them."""

from __future__ import annotations

import sysconfig

from accelml.runner.stacks import busiest_thread, hung_at

STDLIB = sysconfig.get_paths()["stdlib"]


def _dump(*files: tuple[str, int, str]) -> str:
    lines = ["Current thread 0x1 (most recent call first):"]
    lines += [f'  File "{path}", line {line} in {function}' for path, line, function in files]
    return "\n".join(lines)


def test_the_reason_starts_at_the_first_frame_outside_the_standard_library():
    dump = _dump((f"{STDLIB}/inspect.py", 2359, "_signature_from_function"),
                 (f"{STDLIB}/inspect.py", 3028, "from_callable"),
                 ("/venv/lib/site-packages/sklearn/utils/_param_validation.py", 180, "wrapper"),
                 ("/venv/lib/site-packages/sklearn/ensemble/_forest.py", 163, "_parallel_build_trees"),
                 ("/venv/lib/site-packages/joblib/parallel.py", 1863, "_get_sequential_output"))
    assert hung_at(dump) == ("sklearn/utils/_param_validation.py:180 wrapper < "
                             "sklearn/ensemble/_forest.py:163 _parallel_build_trees < "
                             "joblib/parallel.py:1863 _get_sequential_output")
    assert busiest_thread(dump) == hung_at(dump)


def test_a_thread_inside_the_standard_library_only_keeps_its_frames():
    dump = _dump((f"{STDLIB}/threading.py", 331, "wait"), (f"{STDLIB}/threading.py", 629, "wait"))
    tail = "/".join(STDLIB.split("/")[-2:])           # e.g. lib/python3.11
    assert hung_at(dump) == f"{tail}/threading.py:331 wait < {tail}/threading.py:629 wait"
