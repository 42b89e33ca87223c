"""Writing runs into a results store through its writer API, for the report tests."""

from __future__ import annotations

import dataclasses
import hashlib
import time

from accelml.results import RunRecord


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def run_record(run_id, cases, environment, spec_name="smoke", status=RunRecord.FINISHED):
    return RunRecord(run_id=run_id, spec_name=spec_name,
                     spec_hash=hashlib.sha256(spec_name.encode()).hexdigest(),
                     spec_text=f'name = "{spec_name}"\n', spec_path=f"experiments/{spec_name}.toml",
                     reference_backend="sklearn", created_at=now(), status=status,
                     planned_cases=len(cases), environment=environment,
                     case_ids=tuple(case.case_id for case in cases))


def write_run(store, run, cases):
    store.create_run(dataclasses.replace(run, status=RunRecord.RUNNING))
    for case in cases:
        assert store.add_case_result(case)
    store.set_run_status(run.run_id, run.status)
