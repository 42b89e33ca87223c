"""A killed case is run again, as the case of a lost dask worker is.

A case process, one of its ranks or its launcher (``horovodrun``, ``mpirun``, rank 0 of
torch-ddp) killed by a signal from outside (``kill -9`` by a user or the batch system, a
crash) comes back ``killed`` (:class:`~accelml.results.records.FailureKind`), with the
signal. Such a kill says nothing about the case, as a lost worker does not: the executor
runs the case of a lost worker again, at most ``retries`` times (``--retries``,
:attr:`accelml.executors.cluster_settings.ClusterSettings.retries`, default 2), and
:func:`execute_with_retries` does the same for a killed case, on the same worker, at once,
alone (a member of an interleaved group is measured alone on its re-run, with the reason).
The result counts every attempt (``attempts``) and keeps one line for each killed attempt
(``earlier_attempts``); their launcher and rank logs stay in the run's store. A case killed
while the client ends its cases (Ctrl-C, SIGTERM:
:func:`accelml.runner.process.end_running_cases`) is not run again.

>>> from accelml.cases import Case, DatasetSpec
>>> from accelml.results.records import CaseResult, FailureKind
>>> case = Case("kmeans", "sklearn", "cpu", DatasetSpec("d", "generated"))
>>> killed = CaseOutput(CaseResult.failed(case, "r", FailureKind.KILLED, "killed by SIGKILL"))
>>> run_again(killed, CaseTask(case, "r", retries=2), tried=0)
True
>>> run_again(killed, CaseTask(case, "r", retries=2), tried=2)
False
"""

from __future__ import annotations

import dataclasses

from accelml.results.records import FailureKind
from accelml.runner.interleave import GroupTask, execute_group
from accelml.runner.process import CaseOutput, CaseTask, ending_cases, run_case_process

KILLED_IN_ITS_GROUP = "killed while its group took turns: its re-run was measured alone"
"""The measurement note of an interleaved group's member that was killed and run again."""


def run_again(output: CaseOutput, task: CaseTask, tried: int) -> bool:
    """Whether a case that gave ``output`` after ``tried`` re-runs is run again: it was
    killed, it has re-runs left, and the client is not ending its cases."""
    return (output.result.failure is FailureKind.KILLED and tried < task.retries
            and not ending_cases())


def execute_with_retries(group: GroupTask) -> tuple[CaseOutput, ...]:
    """:func:`~accelml.runner.interleave.execute_group`, then every killed case of it again,
    alone, up to its task's ``retries`` times (see the module docstring). Never raises
    for a case's failure."""
    outputs = list(execute_group(group))
    for index, task in enumerate(group.tasks):
        earlier: list[str] = []
        while run_again(outputs[index], task, len(earlier)):
            result = outputs[index].result
            earlier.append(f"attempt {result.attempts}: {result.failure.value}: {result.reason}")
            outputs[index] = run_case_process(dataclasses.replace(task, attempt=result.attempts + 1))
        if earlier:
            result = dataclasses.replace(outputs[index].result, earlier_attempts=tuple(earlier))
            if group.interleaved and result.ok and not result.measurement_note:
                result = dataclasses.replace(result, measurement_note=KILLED_IN_ITS_GROUP)
            outputs[index] = CaseOutput(result, outputs[index].arrays)
    return tuple(outputs)
