"""accelml.plugins: records found by module and by entry point; a broken third party is soft-failed."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest

from accelml.errors import AccelmlError
from accelml.plugins import ExtensionPoint


@dataclass(frozen=True)
class Gadget:
    name: str


GADGETS = ExtensionPoint("gadget", "accelml.gadgets", "accelml.test_gadgets", "GADGET", Gadget)


def test_entry_point_records_are_found_and_broken_ones_listed(install_plugin):
    install_plugin("acme-gadgets", {
        "acme_gadgets.py": f"""
            from {__name__} import Gadget
            GADGET = (Gadget("spanner"), Gadget("wrench"))
        """,
        "acme_broken.py": "raise ImportError('needs libacme.so')\n",
    }, {"accelml.gadgets": {"tools": "acme_gadgets", "bad": "acme_broken:GADGET"}})
    assert GADGETS.names() == ("spanner", "wrench")
    assert GADGETS.origin("wrench") == "acme_gadgets"
    [broken] = GADGETS.broken()
    assert broken.entry_point == "bad = acme_broken:GADGET" and "libacme.so" in broken.reason
    with pytest.raises(AccelmlError, match="did you mean 'spanner'"):
        GADGETS.get("spaner")


def test_a_record_of_the_wrong_type_is_refused(install_plugin):
    install_plugin("acme-wrong", {"acme_wrong.py": "GADGET = 'not a record'\n"},
                   {"accelml.gadgets": {"wrong": "acme_wrong"}})
    [broken] = GADGETS.broken()
    assert "must be a Gadget" in broken.reason


def test_two_plugins_of_one_name_are_an_error(install_plugin):
    install_plugin("acme-twice", {"acme_twice.py": f"""
        from {__name__} import Gadget
        A = Gadget("same")
        B = Gadget("same")
    """}, {"accelml.gadgets": {"a": "acme_twice:A", "b": "acme_twice:B"}})
    with pytest.raises(AccelmlError, match="defined twice"):
        GADGETS.records()


def test_child_processes_see_the_third_party(install_plugin):
    install_plugin("acme-child", {"acme_child.py": "VALUE = 42\n"}, {"accelml.gadgets": {}})
    out = subprocess.run([sys.executable, "-c", "import acme_child; print(acme_child.VALUE)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "42"
