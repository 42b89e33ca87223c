"""Which stored run a report is about: the store of a results directory, and a run id resolved.

>>> import tempfile
>>> resolve_run(ResultsStore(tempfile.mkdtemp()), LATEST)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
accelml.errors.StoreError: no runs in ...results.sqlite yet: run `python -m accelml compare` first
"""

from __future__ import annotations

import os

from accelml.errors import StoreError
from accelml.results.records import RunRecord
from accelml.results.store import ResultsStore

LATEST = "latest"


def open_store(results_dir: str | os.PathLike[str] | None) -> ResultsStore:
    """The existing store in ``results_dir`` (default ``./accelml-results``), read-only:
    never creates or changes one."""
    return ResultsStore(results_dir, read_only=True)


def resolve_run(store: ResultsStore, run_id: str) -> RunRecord:
    """``latest``, a full run id or a unique prefix of one."""
    if run_id == LATEST:
        run = store.latest_run()
        if run is None:
            raise StoreError(f"no runs in {store.database} yet: run `python -m accelml compare` "
                               "first")
        return run
    return store.get_run(run_id)
