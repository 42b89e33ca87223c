"""From how many rows N workers (GPUs) pay for boosting: the crossover, estimated from the
measured set-up and per-round costs (:class:`accelml.results.records.BoostingRounds`).

A scaling group is the cases of one backend, device, algorithm and parameters that were
measured on 1 worker and on N > 1 (several datasets of the same parameters pool their sizes).
A fit of ``R`` rounds on ``n`` training rows and ``k`` workers takes ``s_k + R * r_k(n)``.

The model, stated: a round costs a floor plus a cost per row of each worker's share,

    ``r_k(n) = f + c * n / k``,

with the same ``f`` (the per-round cost that does not shrink with rows: kernel launches, on
several workers also the all-reduces) and the same ``c`` (one worker's cost per row: the same
cards) at 1 and N workers. ``f`` and ``c`` are the least-squares fit to every measured
per-round cost of the group, as ``(n / k, r)``: one size measured at 1 and N workers gives
two points, enough for both. The set-up ``s_k`` is a straight line in ``n`` through the
sizes where a worker count was measured at several; from one size it is taken as growing
with each worker's rows at one worker's measured cost per row (building the quantile
matrix reads and sketches every row: on 4 x H200 one GPU's set-up took 0.88 s at 7.5M rows
and 8.2 s at 40M), so ``s_1(n) = n * s_1 / n_1`` and ``s_N(n)`` keeps what its measured
set-up has beyond that cost on its share as a fixed part (at least 0). N workers pay for ``n``
where ``s_N(n) + R r_N(n) < s_1(n) + R r_1(n)``; ``R`` is the N-worker case's rounds.
Where N workers' rounds were not cheaper than one worker's at the measured size, ``c`` comes
out zero or negative and N workers do not pay at any size under this model. Every figure
is an estimate from this model, and the report says so.

>>> from accelml.results.records import BoostingRounds
>>> one = BoostingRounds(500, 1.0, 0.053)
>>> four = BoostingRounds(500, 1.8, 0.020)
>>> crossing = solve(40_000_000, 4, one, four)
>>> round(crossing.floor_seconds * 1e3, 1), round(crossing.pays_from_rows / 1e6, 2)
(9.0, 3.59)
>>> solve(4_000_000, 4, BoostingRounds(500, 0.3, 0.004), BoostingRounds(500, 1.6, 0.006)).pays
False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelml.cases import canonical_json
from accelml.results.records import BoostingRounds, CaseResult


@dataclass(frozen=True)
class Line:
    """``intercept + slope * x``."""

    intercept: float
    slope: float

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x


@dataclass(frozen=True)
class Crossover:
    """N workers against 1 for one scaling group: what was measured and the estimate.

    ``rows``: the training row counts measured (both worker counts); ``measured_rows``: the
    largest of them measured at both, where ``setup_*`` and ``per_round_*`` were measured.
    ``pays_from_rows``: N workers pay above this many rows (0: at every size); None: not from
    any size. ``pays_below_rows``: N workers pay only below this many rows (their rounds gain
    less per row than one worker's but they start cheaper); None otherwise.
    """

    algorithm: str
    backend: str
    device: str
    workers: int
    rows: tuple[int, ...]
    measured_rows: int
    rounds: int
    setup_one: float
    setup_many: float
    per_round_one: float
    per_round_many: float
    floor_seconds: float          # f of the model
    seconds_per_row: float        # c of the model: one worker's cost per row and round
    pays_from_rows: float | None
    pays_below_rows: float | None
    case_ids: tuple[str, ...]

    @property
    def pays(self) -> bool:
        """N workers are faster than one at some size under the model."""
        return self.pays_from_rows is not None or self.pays_below_rows is not None

    def to_dict(self) -> dict[str, object]:
        return {**{name: getattr(self, name) for name in self.__dataclass_fields__},
                "rows": list(self.rows), "case_ids": list(self.case_ids), "estimated": True,
                "model": "per-round = floor + seconds_per_row * rows / workers; fit = setup + rounds * per-round"}


def _fit_line(xs: Sequence[float], ys: Sequence[float]) -> Line | None:
    """The least-squares line through the points; None with fewer than two distinct ``xs``."""
    if len(set(xs)) < 2:
        return None
    slope, intercept = np.polyfit(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), 1)
    return Line(float(intercept), float(slope))


def _setup_lines(one: Sequence[tuple[int, BoostingRounds]],
                 many: Sequence[tuple[int, BoostingRounds]], workers: int) -> tuple[Line, Line]:
    """Set-up against rows at 1 and N workers: a line through several sizes; from one size,
    one worker's cost per row, and N workers the same on their share plus a fixed part."""
    setup_one = _fit_line([rows for rows, _ in one], [split.setup_seconds for _, split in one])
    if setup_one is None:
        rows, split = one[-1]
        setup_one = Line(0.0, split.setup_seconds / rows)
    setup_many = _fit_line([rows for rows, _ in many], [split.setup_seconds for _, split in many])
    if setup_many is None:
        rows, split = many[-1]
        per_row = setup_one.slope / workers
        setup_many = Line(max(0.0, split.setup_seconds - per_row * rows), per_row)
    return setup_one, setup_many


def crossing_rows(constant: float, slope: float) -> tuple[float | None, float | None]:
    """Where ``constant + slope * n < 0`` for ``n >= 0`` (N workers' time minus one's):
    ``(pays_from, pays_below)`` as in :class:`Crossover`.

    >>> crossing_rows(2.0, -0.5), crossing_rows(-1.0, 0.5), crossing_rows(1.0, 0.0)
    ((4.0, None), (None, 2.0), (None, None))
    """
    if slope < 0:
        return max(0.0, constant / -slope), None
    if constant < 0:
        return (0.0, None) if slope == 0 else (None, -constant / slope)
    return None, None


def _estimate(one: Sequence[tuple[int, BoostingRounds]], many: Sequence[tuple[int, BoostingRounds]],
              workers: int) -> tuple[Line, float | None, float | None] | None:
    """The per-round model (intercept f, slope c) and where N workers pay; None when the
    measured costs leave the model undetermined."""
    points: list[tuple[float, float]] = [(rows, split.per_round_seconds) for rows, split in one]
    points += [(rows / workers, split.per_round_seconds) for rows, split in many]
    per_round = _fit_line([x for x, _ in points], [y for _, y in points])
    if per_round is None:
        return None
    rounds = many[-1][1].rounds
    setup_one, setup_many = _setup_lines(one, many, workers)
    # time(N) - time(1) = constant + slope * n
    constant = setup_many.intercept - setup_one.intercept
    slope = (setup_many.slope - setup_one.slope
             + rounds * per_round.slope * (1.0 / workers - 1.0))
    return per_round, *crossing_rows(constant, slope)


def solve(rows: int, workers: int, one: BoostingRounds, many: BoostingRounds) -> Crossover:
    """The crossover of ``workers`` against 1 from one size measured at both (no group)."""
    estimated = _estimate([(rows, one)], [(rows, many)], workers)
    assert estimated is not None   # two distinct rows per worker: n and n / workers
    per_round, pays_from, pays_below = estimated
    return Crossover("", "", "", workers, (rows,), rows, many.rounds, one.setup_seconds,
                     many.setup_seconds, one.per_round_seconds, many.per_round_seconds,
                     per_round.intercept, per_round.slope, pays_from, pays_below, ())


def _group_key(result: CaseResult) -> str:
    return canonical_json({"algorithm": result.algorithm, "backend": result.backend,
                           "device": result.device, "strategy": result.strategy,
                           "params": dict(result.params)})


def crossovers(results: Sequence[CaseResult]) -> tuple[Crossover, ...]:
    """Every scaling group's crossover of each N > 1 against 1 worker, from the cases that
    recorded their set-up and rounds (in the order the groups first appear)."""
    groups: dict[str, dict[int, dict[int, CaseResult]]] = {}
    for result in results:
        if result.ok and result.boosting is not None and result.dataset_info is not None:
            by_workers = groups.setdefault(_group_key(result), {})
            # a classical case's ranks are its dask workers, one a rank
            by_workers.setdefault(result.ranks, {}).setdefault(result.dataset_info.n_train, result)
    found = []
    for by_workers in groups.values():
        one_cases = by_workers.get(1, {})
        for workers in sorted(k for k in by_workers if k > 1):
            many_cases = by_workers[workers]
            common = sorted(set(one_cases) & set(many_cases))
            if not common:
                continue
            one = [(rows, _split(one_cases[rows])) for rows in sorted(one_cases)]
            many = [(rows, _split(many_cases[rows])) for rows in sorted(many_cases)]
            estimated = _estimate(one, many, workers)
            if estimated is None:
                continue
            per_round, pays_from, pays_below = estimated
            rows = common[-1]
            first = many_cases[rows]
            found.append(Crossover(
                first.algorithm, first.backend, first.device, workers,
                tuple(sorted(set(one_cases) | set(many_cases))), rows, _split(first).rounds,
                _split(one_cases[rows]).setup_seconds, _split(first).setup_seconds,
                _split(one_cases[rows]).per_round_seconds, _split(first).per_round_seconds,
                per_round.intercept, per_round.slope, pays_from, pays_below,
                tuple(case.case_id for case in (*one_cases.values(), *many_cases.values()))))
    return tuple(found)


def _split(result: CaseResult) -> BoostingRounds:
    assert result.boosting is not None   # only such cases are grouped
    return result.boosting
