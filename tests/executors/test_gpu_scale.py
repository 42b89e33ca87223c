"""On a machine with GPUs, a local case asking for more GPUs than it has is refused before
anything runs (one line, naming the case), unless the case says ``oversubscribe = true``.
Skipped where there is no GPU: there such a case is recorded as unavailable instead."""

from __future__ import annotations

import pytest

from accelml.cases import Case, DatasetSpec
from accelml.errors import SpecError
from accelml.executors import ensure_scale

pytestmark = pytest.mark.gpu


def _case(gpus: int) -> Case:
    return Case("mlp", "keras", "cuda", DatasetSpec("d", "shipped", (("name", "digits"),)),
                workers=gpus, strategy="torch-ddp")


def test_more_gpus_than_the_machine_has_is_refused(gpus):
    ensure_scale([_case(len(gpus))], None)
    with pytest.raises(SpecError, match=f"{len(gpus) + 1} GPUs on this machine, which has {len(gpus)}"):
        ensure_scale([_case(len(gpus) + 1)], None)
