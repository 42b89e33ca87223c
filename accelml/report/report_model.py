"""The report of one stored run (:class:`RunReport`), built from the store by
:func:`accelml.report.render.load_report`: what is shown, and the terminal, JSON, CSV and
figure forms of it. The HTML page is :mod:`accelml.report.html`'s.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelml.agreement.matrix import ENGINE_PARAMS, AgreementMatrix, agreement_matrix, cross_strategy_pairs
from accelml.report import plots
from accelml.report.against import RunComparison
from accelml.report.crossover import Crossover, crossovers
from accelml.report.environment import environment_fields
from accelml.report.export import COLUMNS, table_records, write_csv
from accelml.report.figures import (
    NamedFigure,
    agreement_heatmap,
    ratio_chart,
    report_figures,
    scaling_charts,
    time_charts,
    write_plots,
)
from accelml.report.labels import params_text, varying_params
from accelml.report.matrix_table import format_matrix
from accelml.report.speed import EngineComparison, GeometricMeanSpeedup, engine_comparisons
from accelml.report.table import Row, json_clean, render_text
from accelml.report.terminal import against_text, crossover_text, engines_text, paths_text, scaling_text, speedup_text
from accelml.results.records import CaseResult, Environment, RunRecord
from accelml.results.store import ResultsStore


@dataclass(frozen=True)
class AgreementSection:
    """The run's agreement matrix, or why it could not be computed (a broken array must not
    cost the rest of the report); neither when no case succeeded."""

    matrix: AgreementMatrix | None
    error: str | None


@dataclass(frozen=True)
class RunReport:
    """Everything shown about one run, built from the store by ``load_report``."""

    store: ResultsStore = field(repr=False, compare=False)
    run: RunRecord
    results: tuple[CaseResult, ...]
    reference: str | None
    rows: tuple[Row, ...]
    speedups: tuple[GeometricMeanSpeedup, ...]
    against: RunComparison | None = None
    against_store: ResultsStore | None = field(default=None, repr=False, compare=False)

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        """The cases that ran and failed (not those skipped as unavailable)."""
        return tuple(result for result in self.results if not result.ok and not result.skipped)

    @property
    def skipped(self) -> tuple[CaseResult, ...]:
        """The cases never run: unavailable on the machine that ran the comparison."""
        return tuple(result for result in self.results if result.skipped)

    @property
    def missing(self) -> tuple[str, ...]:
        """Planned case ids that have no stored result (an interrupted or running run)."""
        stored = {result.case_id for result in self.results}
        return tuple(case_id for case_id in self.run.case_ids if case_id not in stored)

    @property
    def environments(self) -> tuple[tuple[Environment, tuple[str, ...]], ...]:
        """Each distinct environment (the run's first) with the labels of its cases."""
        found: dict[str, tuple[Environment, list[str]]] = {}
        if self.run.environment is not None:
            found[self.run.environment.env_hash] = (self.run.environment, [])
        for result in self.results:
            if result.environment is None or result.env_hash is None:
                continue
            entry = found.setdefault(result.env_hash, (result.environment, []))
            entry[1].append(result.label)
        return tuple((env, tuple(labels)) for env, labels in found.values())

    # -- exports ---------------------------------------------------------------------------

    def crossovers(self) -> tuple[Crossover, ...]:
        """From how many rows N workers pay, per boosting scaling group (estimated)."""
        return crossovers(self.results)

    def records(self) -> list[dict[str, Any]]:
        """The table as flat records (the CSV / JSON export)."""
        return table_records(self.rows)

    def to_dict(self) -> dict[str, Any]:
        """What ``--json`` writes: the run, the table, speedups, failures and ``against``."""
        run = {key: value for key, value in self.run.to_dict().items() if key != "spec_text"}
        cleaned: dict[str, Any] = json_clean({
            "run": run,
            "reference": self.reference,
            "columns": [name for name, _ in COLUMNS],
            "rows": self.records(),
            "geometric_mean_speedups": [s.to_dict() for s in self.speedups],
            "engine_comparisons": [c.to_dict() for c in self.engine_comparisons()],
            "failed": [{"case_id": r.case_id, "label": r.label,
                        "failure": r.failure.value, "reason": r.reason} for r in self.failed],
            "skipped": [{"case_id": r.case_id, "label": r.label, "reason": r.reason}
                        for r in self.skipped],
            "missing": list(self.missing),
            "against": None if self.against is None else self.against.to_dict(),
            "crossovers": [crossover.to_dict() for crossover in self.crossovers()],
        })
        return cleaned

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n",
                        encoding="utf-8")
        return path

    def write_csv(self, path: str | os.PathLike[str]) -> Path:
        return write_csv(self.records(), path)

    def engine_comparisons(self) -> tuple[EngineComparison, ...]:
        """Images/s per GPU of every cross-strategy pair, with the engines' 1-GPU ratio."""
        names = tuple(name for name in varying_params(self.results) if name not in ENGINE_PARAMS)

        def label(result: CaseResult) -> str:
            shown = params_text(result, names)
            return f"{result.algorithm} on {result.dataset}" + (f" ({shown})" if shown else "")

        return engine_comparisons(cross_strategy_pairs(self.results), label)

    def training_paths(self) -> tuple[tuple[str, str], ...]:
        """(case label, recorded path) of every training case that recorded how its step ran."""
        return tuple((result.label, result.dl.path) for result in self.results
                     if result.dl is not None and result.dl.path)

    # -- agreement -------------------------------------------------------------------------

    def agreement(self) -> AgreementMatrix:
        """The run's agreement matrix (:func:`accelml.agreement.matrix.agreement_matrix`)."""
        against = None
        if self.against is not None and self.against_store is not None:
            against = (self.against_store, self.against.other.run_id)
        return agreement_matrix(self.store, self.run.run_id, self.reference, against=against)

    def agreement_section(self) -> AgreementSection:
        """The agreement matrix, or the reason it could not be computed."""
        if not any(result.ok for result in self.results):
            return AgreementSection(None, None)
        try:
            return AgreementSection(self.agreement(), None)
        except Exception as error:  # noqa: BLE001 -- a broken array must not cost the rest of the report
            return AgreementSection(None, f"{type(error).__name__}: {error}")

    # -- figures ---------------------------------------------------------------------------

    def time_charts(self) -> list[plots.TimeChart]:
        return time_charts(self.results, self.reference)

    def scaling_charts(self) -> list[plots.ScalingChart]:
        return scaling_charts(self.results)

    def agreement_heatmap(self, matrix: AgreementMatrix | None = None) -> plots.HeatMap | None:
        return agreement_heatmap(self.results, self.agreement() if matrix is None else matrix,
                                 self.reference)

    def ratio_chart(self, phase: str) -> plots.RatioChart | None:
        return ratio_chart(self.run, self.against, phase)

    def figures(self, matrix: AgreementMatrix | None = None, *,
                include_agreement: bool = True) -> list[NamedFigure]:
        """Every figure of the report, in page order, not yet drawn.

        ``matrix`` is the agreement matrix when the caller has it already (computed if not).
        """
        if include_agreement and matrix is None and any(result.ok for result in self.results):
            matrix = self.agreement()
        return report_figures(self.run, self.results, self.reference, self.against,
                              matrix if include_agreement else None)

    def write_plots(self, directory: str | os.PathLike[str], fmt: str = "png") -> list[Path]:
        """Write every figure as ``<name>.<fmt>`` (png or svg) into ``directory``."""
        return write_plots(self.figures(), directory, fmt)

    # -- terminal --------------------------------------------------------------------------

    def title(self) -> str:
        return f"{self.run.spec_name}: run {self.run.run_id}"

    def text(self, width: int | None = None) -> str:
        """The terminal report: compare's table, speedups, failures, agreement, environment,
        against; the tables at most ``width`` wide (None: their natural width)."""
        header = (f"run {self.run.run_id} ({self.run.status}), spec {self.run.spec_name}"
                  f"{' (' + self.run.spec_path + ')' if self.run.spec_path else ''}, "
                  f"started {self.run.created_at or '?'}; {len(self.results)} of "
                  f"{self.run.planned_cases} planned case(s) stored")
        parts = [header, render_text(list(self.rows), self.title(), width).rstrip()]
        scaling = scaling_text(self.scaling_charts())
        if self.speedups or not scaling:
            parts.append(speedup_text(self.reference, self.speedups))
        parts.append(scaling)
        parts.append(crossover_text(self.crossovers()))
        parts.append(engines_text(self.engine_comparisons()))
        parts.append(paths_text(self.training_paths(), width))
        if self.failed:
            lines = [f"{len(self.failed)} of {len(self.results)} case(s) FAILED:"]
            lines += [f"  {r.case_id} {r.label}: {r.failure.value}: {r.reason}"
                      for r in self.failed]
            parts.append("\n".join(lines))
        if self.skipped:
            parts.append("\n".join([f"{len(self.skipped)} case(s) skipped, unavailable on the "
                                    "machine that ran them:",
                                    *(f"  {r.case_id} {r.label}: {r.reason}"
                                      for r in self.skipped)]))
        if self.missing:
            parts.append(f"{len(self.missing)} planned case(s) have no result (the run is "
                         f"{self.run.status}); finish with: python -m accelml compare --resume "
                         f"{self.run.run_id}")
        section = self.agreement_section()
        if section.matrix is not None:
            parts.append("agreement:\n" + format_matrix(section.matrix, width))
        elif section.error is not None:
            parts.append(f"agreement: could not be computed: {section.error}")
        for environment, _ in self.environments:
            text = ", ".join(f"{name} {value}" for name, value in environment_fields(environment))
            parts.append(f"environment: {text}")
        if self.against is not None:
            parts.append(against_text(self.run, self.against))
        return "\n\n".join(part for part in parts if part)
