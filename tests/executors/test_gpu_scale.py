"""On a machine with GPUs, a local case asking for more GPUs than it has is not refused
before the run: it is recorded as unavailable, saying what to set to share the GPUs, and
the cases that fit run (a 1/2/4-GPU spec on a 2-GPU machine runs its 1- and 2-GPU cases).
Skipped where there is no GPU: there such a case is recorded as unavailable too, with the
reason there is none."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accelml.cases import Case, DatasetSpec
from accelml.executors import ensure_scale
from accelml.executors.local_cluster import LocalExecutor

pytestmark = pytest.mark.gpu


def _case(gpus: int) -> Case:
    return Case("mlp", "keras", "cuda", DatasetSpec("d", "shipped", (("name", "digits"),)),
                ranks=gpus, strategy="torch-ddp")


def _name(item):
    return item.name


def test_more_gpus_than_the_machine_has_is_unavailable_and_the_rest_run(gpus):
    ensure_scale([_case(len(gpus)), _case(len(gpus) + 1)], None)   # no refusal
    items = [SimpleNamespace(name=str(n), device="cuda", ranks=n, strategy="torch-ddp",
                             oversubscribe=False) for n in (len(gpus), len(gpus) + 1)]
    with LocalExecutor(jobs=1) as executor:
        outcomes = {o.item.name: o for o in executor.map(_name, items)}
    fits, beyond = outcomes[str(len(gpus))], outcomes[str(len(gpus) + 1)]
    assert fits.ok and fits.result == str(len(gpus))
    assert beyond.failure == "unavailable" and beyond.result is None
    assert beyond.error == (f"needs {len(gpus) + 1} GPU(s); this machine has {len(gpus)}: "
                            "set oversubscribe = true in the case to share them between ranks")


def test_oversubscribed_case_shares_the_gpus_there_are(gpus):
    item = SimpleNamespace(name="shared", device="cuda", ranks=len(gpus) + 1,
                           strategy="torch-ddp", oversubscribe=True)
    with LocalExecutor(jobs=1) as executor:
        [outcome] = list(executor.map(_name, [item]))
    assert outcome.ok and outcome.result == "shared"
