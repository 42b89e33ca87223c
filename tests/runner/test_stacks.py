"""Where a hung case was: the frames a timed-out case's reason names start at the innermost
frame outside Python's standard library (a forest fit caught inside ``inspect`` names
scikit-learn's call), name installed files from their package on (code scikit-learn
vendors still says sklearn/), and a thread with only standard-library frames keeps them."""

from __future__ import annotations

import doctest
import sysconfig

from accelml.runner import stacks
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


def test_frames_all_in_one_helper_library_name_the_call_that_led_there():
    """A forest's fit killed at its limit inside narwhals' type checks (make test, stop 38):
    the three innermost frames were narwhals', and the reason named no scikit-learn frame."""
    dump = _dump(("/venv/lib/site-packages/narwhals/_utils.py", 1602, "_hasattr_static"),
                 ("/venv/lib/site-packages/narwhals/dependencies.py", 610, "_is_native_series"),
                 ("/venv/lib/site-packages/narwhals/stable/v2/dependencies.py", 80, "is_into_series"),
                 ("/venv/lib/site-packages/narwhals/stable/v2/__init__.py", 12, "wrapped"),
                 (f"{STDLIB}/functools.py", 909, "wrapper"),
                 ("/venv/lib/site-packages/sklearn/utils/validation.py", 2190, "_check_sample_weight"),
                 ("/venv/lib/site-packages/sklearn/ensemble/_forest.py", 359, "fit"))
    assert hung_at(dump) == (
        "narwhals/_utils.py:1602 _hasattr_static < narwhals/dependencies.py:610 "
        "_is_native_series < narwhals/stable/v2/dependencies.py:80 is_into_series < ... < "
        "sklearn/utils/validation.py:2190 _check_sample_weight")


def test_the_examples_in_the_module_hold():
    result = doctest.testmod(stacks, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4 and result.failed == 0
