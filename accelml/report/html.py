"""The self-contained HTML page of a report: inline CSS, inline SVG figures, no script, no network.

The page is rendered by Jinja2 with autoescaping on, from ``report.html`` and ``report.css``
beside this module. Every string that comes from a user (spec, dataset and parameter names,
failure reasons, hostnames) goes through the template's escaping; the figures are SVG
written by matplotlib, which escapes its text itself. A Content-Security-Policy in the page
forbids scripts and every fetch, so even a string that slipped through could not run or
call out, and the page opens the same with the network off.

>>> from accelml.report.html import CONTENT_SECURITY_POLICY
>>> "script-src" in CONTENT_SECURITY_POLICY or "default-src 'none'" in CONTENT_SECURITY_POLICY
True
"""

from __future__ import annotations

import math
import os
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelml import __version__
from accelml.agreement.matrix import AgreementMatrix, CaseRef
from accelml.cases import case_label
from accelml.report import plots
from accelml.report.environment import environment_fields
from accelml.report.labels import params_text, varying_params
from accelml.report.report_model import RunReport
from accelml.report.speed import PHASES, rank_unit
from accelml.report.table import Row, TimingCell, load_text, phase_speedup_text, rank_weights_text
from accelml.report.terminal import crossover_lines

if TYPE_CHECKING:
    import jinja2

CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""No script, no fetch of any kind: only the inline stylesheet and inline images."""


def page_template(name: str = "report.html") -> tuple[jinja2.Template, str]:
    """A page template beside this module (autoescaping on; ``{% include %}`` finds the
    others, such as the common ``_head.html``) and the stylesheet every page inlines."""
    import jinja2

    package = resources.files("accelml.report")

    def source(file: str) -> str:
        return package.joinpath(file).read_text(encoding="utf-8")

    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(source), autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True)
    return environment.get_template(name), source("report.css")


def _timing_text(cell: TimingCell | None) -> tuple[str, str]:
    """(median, 'q1–q3, n=5') of a table cell; dashes where there is none."""
    if cell is None:
        return "–", ""
    if cell.count < 2:
        return plots.format_seconds(cell.median), f"n={cell.count}"
    low, high = plots.format_seconds(cell.q1), plots.format_seconds(cell.q3)
    return plots.format_seconds(cell.median), f"IQR {low}–{high}, n={cell.count}"


def _speedup_text(row: Row) -> str:
    if row.status != "ok":
        return "–"
    if row.is_reference:
        return "reference"
    if row.speedup is None:
        return "–"
    main = next((value for value in row.phase_speedups if value.phase == row.main_phase), None)
    text = plots.format_speedup(row.speedup) if main is None else phase_speedup_text(main)
    if row.efficiency is not None:
        text += f" (efficiency {row.efficiency:.0%})"
    return text


def _speedup_cards(report: RunReport) -> list[dict[str, Any]]:
    """One card per backend and device, a line per phase."""
    cards: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in report.speedups:
        card = cards.setdefault((entry.backend, entry.device),
                                {"backend": entry.backend, "device": entry.device, "phases": []})
        card["phases"].append({
            "phase": entry.phase, "value": plots.format_speedup(entry.value),
            "faster": entry.value >= 1, "cases": entry.cases,
            "range": f"{entry.minimum:.2f}–{entry.maximum:.2f}"})
    return list(cards.values())


def _table(report: RunReport) -> dict[str, Any]:
    rows = list(report.rows)
    results = {result.case_id: result for result in report.results}
    show_epoch = any(row.epoch is not None for row in rows)
    show_ranks = any(row.ranks != 1 for row in rows)
    show_strategy = any(result.strategy for result in report.results)
    # Parameters that differ between cases get a column; the rest are said once, above.
    names = varying_params(report.results)
    common = dict(sorted((key, value) for result in report.results
                         for key, value in result.params if key not in names))
    body = []
    for row in rows:
        result = results.get(row.case_id)
        cells = {}
        for phase in PHASES:
            cells[phase] = _timing_text(getattr(row, phase))
        body.append({
            "case_id": row.case_id, "algorithm": row.algorithm, "dataset": row.dataset,
            "backend": row.backend, "device": row.device, "ranks": row.ranks,
            "strategy": (result.strategy if result is not None else None) or "–",
            "params": "" if result is None else params_text(result, names),
            "fit": cells["fit"], "predict": cells["predict"], "epoch": cells["epoch"],
            "speedup": _speedup_text(row),
            "per_rank": "" if row.images_per_rank is None else
                          f"{row.images_per_rank:,.0f} images/s per {rank_unit(row.device)}",
            "score": "–" if row.score is None else f"{row.score_name} {row.score:.4g}",
            "agreement": "–" if row.status != "ok" else "reference" if row.is_reference else (
                row.agreement.text if row.agreement else "–"),
            "reference": row.is_reference and row.status == "ok",
            "ok": row.status == "ok", "noisy": row.noisy, "status": row.status,
            "reason": row.reason,
            "other_speedups": [] if row.is_reference or row.status != "ok" else [
                phase_speedup_text(value) for value in row.phase_speedups
                if value.phase != row.main_phase],
            "iterations": "–" if row.iterations is None else row.iterations.text(),
            "rank_weights": "–" if row.ranks_identical is None else rank_weights_text(row),
            "rank_weights_bad": row.ranks_identical is False,
            "optimum": row.optimum.reason if row.different_optimum and row.optimum else "",
            "busy_host": "" if row.busy_host is None else f"load {load_text(row.busy_host)}",
        })
    return {"rows": body, "show_epoch": show_epoch,
            "show_iterations": any(row.iterations is not None for row in rows),
            "show_busy_host": any(row.busy_host is not None for row in rows),
            "show_rank_weights": any(row.ranks_identical is not None for row in rows), "show_ranks": show_ranks,
            "show_strategy": show_strategy, "show_params": bool(names),
            "common_params": " ".join(f"{key}={value}" for key, value in common.items()),
            "phases": [phase for phase in ("fit", "predict")
                       if any(getattr(row, phase) is not None for row in rows) or not show_epoch]}


def _scaling_tables(report: RunReport) -> list[dict[str, Any]]:
    tables = []
    for chart in report.scaling_charts():
        for series in chart.series:
            tables.append({
                "title": f"{chart.title}: {series.label}",
                "points": [{
                    "ranks": point.ranks,
                    "epoch": plots.format_seconds(point.epoch_median),
                    "spread": f"{plots.format_seconds(point.epoch_low)}–"
                              f"{plots.format_seconds(point.epoch_high)}",
                    "images": "–" if not math.isfinite(point.images_per_second)
                              else f"{point.images_per_second:,.0f}",
                    "speedup": plots.format_speedup(point.speedup) or "–",
                    "efficiency": "–" if point.efficiency is None else f"{point.efficiency:.0%}",
                } for point in series.points],
            })
    return tables


def _scaling_cards(report: RunReport) -> list[dict[str, Any]]:
    """The largest rank count of each scaling series: its speedup and efficiency."""
    cards = []
    for chart in report.scaling_charts():
        for series in chart.series:
            known = [p for p in series.points if p.speedup is not None and p.ranks > 1]
            if not known:
                continue
            top = max(known, key=lambda p: p.ranks)
            cards.append({"title": chart.title, "series": series.label, "ranks": top.ranks,
                          "speedup": plots.format_speedup(top.speedup),
                          "efficiency": "–" if top.efficiency is None
                          else f"{top.efficiency:.0%}"})
    return cards


def _agreement_table(report: RunReport, matrix: AgreementMatrix) -> dict[str, Any]:
    """A column per measure that applied anywhere (its title says what it measures), a row
    per entry of the matrix."""
    # Name cases as the rest of the page does: parameters only where they tell cases apart.
    names = varying_params(report.results)
    labels = {r.case_id: case_label(r, r.dataset, params=names) for r in report.results}

    def label(ref: CaseRef) -> str:
        return labels.get(ref.case_id, ref.label)

    columns = matrix.columns()
    rows = []
    for row in matrix.entries():
        case, reference = (row.reference, None) if row.other is None else (row.other, row.reference)
        if row.kind == "cross-run":      # the same case in the other run
            case, reference = row.reference, row.other
        cells = []
        for measure in columns:
            reading = row.reading(measure.name)
            cells.append({"text": "–", "css": ""} if reading is None
                         else vars(measure.cell(reading)))
        rows.append({
            "kind": row.kind, "case": label(case),
            "reference": None if reference is None else (
                f"run {reference.run_id}" if row.kind == "cross-run" else label(reference)),
            "repeats": "" if row.repeats is None else (
                "not repeated" if row.repeats < 2 else f"{row.repeats} repeats"),
            "cells": cells, "expected": "yes" if row.expectation.bitwise else "no",
            "why": row.expectation.reason, "unexpected": row.unexpected,
            "notes": list(row.notes),
        })
    return {"columns": [{"name": measure.name, "column": measure.heading,
                         "title": measure.description} for measure in columns],
            "rows": rows}


def _against(report: RunReport) -> dict[str, Any] | None:
    against = report.against
    if against is None:
        return None
    cases = []
    for case in against.cases:
        mine, theirs = dict(case.this_medians), dict(case.other_medians)
        phases = []
        for phase in PHASES:
            if phase not in mine and phase not in theirs:
                continue
            ratio = case.ratio(phase)
            # Only a difference beyond the medians' confidence intervals counts as one.
            real = ratio is not None and case.is_distinct(phase) is not False
            phases.append({
                "phase": phase, "this": plots.format_seconds(mine.get(phase, math.nan)),
                "other": plots.format_seconds(theirs.get(phase, math.nan)),
                "ratio": "–" if ratio is None else f"{ratio:.3g}",
                "verdict": "" if ratio is None else (
                    "within noise" if not real else
                    f"other {1 / ratio:.2g}× faster" if ratio < 1 else
                    f"other {ratio:.2g}× slower" if ratio > 1 else "the same"),
                "faster": real and ratio is not None and ratio < 1,
                "slower": real and ratio is not None and ratio > 1,
            })
        cases.append({"label": case.label, "phases": phases or [{"phase": "–", "this": "–",
                      "other": "–", "ratio": "–", "verdict": "", "faster": False,
                      "slower": False}],
                      "status": f"{case.this_status} / {case.other_status}",
                      "ok": case.this_status == case.other_status == "ok",
                      "env_differs": case.environment_differs})
    means = [(phase, against.geometric_mean_ratio(phase)) for phase in PHASES]
    return {
        "other": against.other, "other_dir": against.other_results_dir, "cases": cases,
        "means": [(phase, f"{value:.3g}") for phase, value in means if math.isfinite(value)],
        "differences": against.environment_differences,
        "this_hash": report.run.env_hash, "other_hash": against.other.env_hash,
        "only_here": against.only_here, "only_there": against.only_there,
    }


def _environments(report: RunReport) -> list[dict[str, Any]]:
    found = []
    for environment, labels in report.environments:
        # Hostname and SLURM job are not part of the hash: list every one measured under it.
        same = [r.environment for r in report.results
                if r.environment is not None and r.env_hash == environment.env_hash]
        several = {
            "hostname": sorted({env.hostname for env in same if env.hostname}),
            "SLURM job": sorted({env.slurm_job_id for env in same if env.slurm_job_id}),
        }
        fields = [(f"{name}s", ", ".join(several[name])) if len(several.get(name, ())) > 1
                  else (name, value) for name, value in environment_fields(environment)]
        found.append({"hash": environment.env_hash, "fields": fields,
                      "libraries": environment.libraries, "cases": labels,
                      "is_run": report.run.environment is not None
                      and environment.env_hash == report.run.environment.env_hash})
    return found


def render_html(report: RunReport) -> str:
    """The whole page as one string (figures drawn now, inlined as SVG)."""
    from markupsafe import Markup

    section = report.agreement_section()
    matrix = section.matrix
    figures: dict[str, list[dict[str, Any]]] = {
        name: [] for name in ("time", "scaling", "agreement", "against")}
    for figure in report.figures(matrix, include_agreement=matrix is not None):
        figures.setdefault(figure.section, []).append({
            "name": figure.name, "title": figure.title, "caption": figure.caption,
            "svg": Markup(plots.figure_svg(figure.draw()))})
    run = report.run
    names = varying_params(report.results)
    failed = [{"case_id": r.case_id, "label": case_label(r, r.dataset, params=names),
               "failure": r.failure.value,
               "reason": r.reason, "attempts": r.attempts} for r in report.failed]
    skipped_cases = [{"case_id": r.case_id, "label": case_label(r, r.dataset, params=names),
                      "reason": r.reason} for r in report.skipped]
    template, css = page_template()
    return template.render(
        css=Markup(css), csp=CONTENT_SECURITY_POLICY, version=__version__,
        title=f"accelml report: {run.spec_name} — run {run.run_id}",
        generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        run=run, description=run.description, reference=report.reference, stored=len(report.results),
        ok_count=sum(1 for r in report.results if r.ok),
        failed=failed, skipped_cases=skipped_cases, missing=report.missing,
        speedups=_speedup_cards(report),
        scaling_cards=_scaling_cards(report), table=_table(report), figures=figures,
        scaling_tables=_scaling_tables(report),
        crossovers=[dict(zip(("measured", "verdict", "basis"), crossover_lines(crossover), strict=True))
                    for crossover in report.crossovers()],
        engines=[comparison.text() for comparison in report.engine_comparisons()],
        paths=report.training_paths(),
        agreement=None if matrix is None else _agreement_table(report, matrix),
        agreement_error=section.error,
        skipped=[] if matrix is None else list(matrix.skipped),
        against=_against(report), environments=_environments(report),
    )


def write_html(report: RunReport, path: str | os.PathLike[str]) -> Path:
    """Write the page to ``path`` (its folder is made when missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report), encoding="utf-8")
    return path
