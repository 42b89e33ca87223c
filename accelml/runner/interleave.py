"""Interleaved measurement of a comparison group: A B C A B C ..., each case in its own warm process.

A reference case and the cases compared with it form a :class:`GroupTask`. Its cases start
one after the other (each loads its data and warms up alone, in its setup turn), then take
turns, one timed round each, until the group's stopping rule ends the rounds:
:func:`execute_group` is the coordinator. A drift of the host's speed over seconds then hits
the reference and the others alike, and the speed-up is the median of the per-round ratios
with the interval of those paired ratios (:func:`accelml.results.records.paired_ratio`).

Stopping rule (the reference case's repeat policy; a first run that took seconds counts as
a round, as in :func:`accelml.runner.timing.repeat_until_stable`): after ``min_repeats`` rounds,
stop when every compared case's every phase has a paired-ratio interval within
``target_rel`` of its median (or both cases' medians are within the timer's noise floor,
:data:`~accelml.results.records.TIMER_NOISE_FLOOR_S`), else at ``max_repeats`` rounds,
after ``max_seconds`` of rounds, or when the next round would end past a case's or the
group's time limit. Only one case of the group works at any time, on a GPU or on several
ranks too, so two cases never overlap.

A training (a Keras case) takes its epochs in turn: its first epoch is its warm-up, in its
setup turn; each later epoch is one round, its ranks held warm between turns
(:mod:`accelml.dl.turns`). Its rounds are fixed (its epochs), so the stopping rule does not
end them early (that would save nothing) except at the time limits; the rounds end when a
training has run its last epoch, and a longer training runs its remaining epochs alone
(kept in its epoch records, not in its paired phase). A case whose measurer does not take
rounds in turn (a training of one epoch, a third party's measurer) measures itself in its
setup turn, alone, and is recorded ``isolated`` with the reason; so is a case that failed.

>>> from accelml.cases import Case, DatasetSpec
>>> from accelml.runner.process import CaseTask
>>> data = DatasetSpec("d", "generated")
>>> group = GroupTask((CaseTask(Case("kmeans", "sklearn", "cpu", data, time_limit_s=60), "r"),
...                    CaseTask(Case("kmeans", "sklearnex", "cpu", data, time_limit_s=30), "r")))
>>> group.needs.seconds, group.interleaved
(90.0, True)
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from accelml.cases import INTERLEAVED
from accelml.estimators import GO
from accelml.executors.resources import CaseNeeds
from accelml.results.records import PhaseTiming, paired_ratio
from accelml.runner.process import CaseOutput, CaseTask, TurnControl, run_case_process

POLL_S = 0.5
"""How often the coordinator looks whether a case process it waits for has ended."""
FIXED_ROUNDS_DONE = "epochs"
"""Why a group's rounds end when one of its cases gave all its fixed rounds (a training's
epochs: each epoch after the first is one round)."""
NOT_REPEATED = ("its measurer does not take timed rounds in turn (e.g. a training of one "
                "epoch): measured alone in its turn")


@dataclass(frozen=True)
class GroupTask:
    """The cases of one comparison group, the reference first, and whether they interleave
    (a group of one case, or ``interleaved=False``, runs its cases one after the other)."""

    tasks: tuple[CaseTask, ...]
    interleave: bool = True

    @property
    def interleaved(self) -> bool:
        return self.interleave and len(self.tasks) > 1

    @property
    def needs(self) -> CaseNeeds:
        """What the group's worker job must give: the most any case needs (one case works
        at a time), and the time of all of them."""
        found = [CaseNeeds.of_case(task) for task in self.tasks]
        memory = [need.memory_bytes for need in found if need.memory_bytes is not None]
        seconds = [need.seconds for need in found if need.seconds is not None]
        return CaseNeeds(cores=max(n.cores for n in found), gpus=max(n.gpus for n in found),
                         ranks=max(n.ranks for n in found),
                         memory_bytes=max(memory) if memory else None,
                         seconds=sum(seconds) if seconds else None,
                         oversubscribe=any(n.oversubscribe for n in found))


class _Member:
    """One case process of a running group, seen from the coordinator."""

    def __init__(self, task: CaseTask, group_limit_s: float):
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        self.task = task
        self.control = TurnControl((commands_read, replies_write), group_limit_s)
        self.output: CaseOutput | None = None
        self.samples: dict[str, list[float]] = {}
        self.rounds = 0
        self.busy_s = 0.0
        self.last_round_s = 0.0
        self.active = False
        self.was_ready = False
        self.rounds_left: int | None = None   # a case with a fixed number of rounds (epochs)
        self._buffer = b""
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.output = run_case_process(self.task, self.control)

    def start(self) -> None:
        self._thread.start()

    @property
    def limit_s(self) -> float:
        return self.task.case.time_limit_s or 600.0

    def command(self, text: str) -> bool:
        try:
            os.write(self._commands, (text + "\n").encode())
            return True
        except OSError:   # the process ended
            return False

    def reply(self) -> dict[str, dict[str, float]] | None:
        """The case's next message, or None when it ended (or ran past its time limit:
        then it is killed and comes back as timed out)."""
        started = time.monotonic()
        try:
            while b"\n" not in self._buffer:
                left = self.limit_s - self.busy_s - (time.monotonic() - started)
                if left <= 0:
                    self.control.expire()
                    return None
                ready, _, _ = select.select([self._replies], [], [], min(POLL_S, left))
                if not ready:
                    if not self._thread.is_alive():
                        return None
                    continue
                chunk = os.read(self._replies, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
            line, _, self._buffer = self._buffer.partition(b"\n")
            message: dict[str, dict[str, float]] = json.loads(line)
            return message
        finally:
            self.last_round_s = time.monotonic() - started
            self.busy_s += self.last_round_s

    def add(self, measured: dict[str, float]) -> None:
        for phase, seconds in measured.items():
            self.samples.setdefault(phase, []).append(float(seconds))

    def take_round(self, measured: dict[str, float]) -> None:
        """Count a round; a case that has given all its fixed rounds is waited for (its
        process ends by itself), so that nothing of it overlaps the next case's turn."""
        self.add(measured)
        self.rounds += 1
        if self.rounds_left is not None:
            self.rounds_left -= 1
            if self.rounds_left <= 0:
                self._thread.join()
                self.active = False

    @property
    def gave_all(self) -> bool:
        return self.rounds_left is not None and self.rounds_left <= 0

    def finish(self, reason: str) -> CaseOutput:
        if self.was_ready:
            self.command(f"stop {reason}")
        os.close(self._commands)
        self._thread.join()
        os.close(self._replies)
        if not self.control.started.is_set():   # never started: its descriptors are still here
            for fd in self.control.child_fds:
                os.close(fd)
        assert self.output is not None
        return self.output


def _converged(reference: _Member, member: _Member, target_rel: float, confidence: float) -> bool:
    """Whether every phase both cases timed has a paired-ratio interval within the target."""
    for phase, theirs in reference.samples.items():
        mine = member.samples.get(phase)
        if not mine:
            continue
        found = paired_ratio(theirs, mine, confidence)
        if found is None or found.rounds < 2:
            return False
        if found.halfwidth_rel <= target_rel:
            continue
        precise = all(PhaseTiming.from_samples(phase, values, confidence=confidence).converged(0.0)
                      for values in (theirs, mine))
        if not precise:
            return False
    return True


def _stop_reason(members: Sequence[_Member], started: float, group_end: float) -> str | None:
    """Why the rounds stop now (the reference's repeat policy), or None to go on. Rounds
    count as the cases' samples do: a first run that already took seconds counts in every
    case whose first run did (their setup turns came one after the other)."""
    reference = members[0]
    policy = reference.task.case.repeats
    active = [member for member in members if member.active]
    if any(member.gave_all for member in members):
        return FIXED_ROUNDS_DONE
    if not reference.active or len(active) < 2:
        return "group_ended"
    rounds = min(max(map(len, member.samples.values()), default=0) for member in active)
    # Trainings give a fixed number of rounds (their epochs) and run them whatever: stopping
    # them sooner saves nothing, so only the time limits end their rounds early.
    fixed_rounds = all(member.rounds_left is not None for member in active)
    if rounds >= policy.max_repeats and not fixed_rounds:
        return "fixed" if policy.fixed else "max_repeats"
    if rounds < policy.min_repeats and not fixed_rounds:
        return None
    if not (policy.fixed or fixed_rounds) and all(
            _converged(reference, member, policy.target_rel, policy.confidence)
            for member in active[1:]):
        return "converged"
    now = time.monotonic()
    if policy.max_seconds is not None and now - started >= policy.max_seconds:
        return "max_seconds"
    cycle = sum(member.last_round_s for member in active)
    if now + 1.5 * cycle > group_end or any(
            member.busy_s + 1.5 * member.last_round_s > member.limit_s for member in active):
        return "time_limit"
    return None


def _interleaved(output: CaseOutput, group: tuple[str, ...]) -> CaseOutput:
    result = dataclasses.replace(output.result, measurement=INTERLEAVED, turn_group=group)
    return CaseOutput(result, output.arrays)


def _alone(output: CaseOutput, note: str) -> CaseOutput:
    return CaseOutput(dataclasses.replace(output.result, measurement_note=note), output.arrays)


def execute_group(group: GroupTask) -> tuple[CaseOutput, ...]:
    """Run a comparison group: interleaved (see the module docstring), or one case after
    the other; one output per task, in the group's order. Never raises for a case's failure."""
    if not group.interleaved:
        return tuple(run_case_process(task) for task in group.tasks)
    group_limit = sum(task.case.time_limit_s or 600.0 for task in group.tasks)
    group_end = time.monotonic() + group_limit
    members = [_Member(task, group_limit) for task in group.tasks]
    try:
        for member in members:   # setup turns: start, load, warm up; one case at a time
            member.start()
            message = member.reply()
            if message is not None and "ready" in message:
                member.active = member.was_ready = True
                member.add(message["ready"])
                if "fixed" in message:
                    member.rounds_left = int(message["fixed"]["rounds"])
        started = time.monotonic()
        while (reason := _stop_reason(members, started, group_end)) is None:
            for member in members:
                if not member.active:
                    continue
                message = member.reply() if member.command(GO) else None
                if message is None or "round" not in message:
                    member.active = False
                    continue
                member.take_round(message["round"])
    except BaseException:
        for member in members:
            member.control.expire()
        raise
    paired = tuple(member.task.case_id for member in members if member.rounds)
    outputs = []
    for member in members:
        took_turns = member.rounds > 0 and members[0].rounds > 0
        output = member.finish(reason)
        if took_turns and output.result.ok:
            outputs.append(_interleaved(output, paired))
        elif output.result.ok:
            outputs.append(_alone(output, NOT_REPEATED if not member.was_ready else
                                  f"its group's rounds ended ({reason}) before it took a "
                                  "turn: measured alone"))
        else:
            outputs.append(output)
    return tuple(outputs)
