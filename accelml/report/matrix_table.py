"""The agreement matrix as a text table (the terminal report, ``compare`` and ``check`` print
it): what tells the rows apart, a column per measure, the expectation, then notes.

The matrix itself is computed in :mod:`accelml.agreement.matrix`; this module only shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields

from accelml.agreement.matrix import AgreementMatrix, MatrixRow
from accelml.agreement.point import Measure
from accelml.report.layout import Column, Form, fit, render, wrap_lines

KIND_SHORT = {"run-to-run": "repeats", "cross-backend": "backend", "cross-device": "device",
              "cross-scale": "scale", "cross-run": "run", "cross-container": "container"}


def _join(parts: Iterable[tuple[str, str]]) -> str:
    return " ".join(text for _, text in parts if text)


@dataclass(frozen=True)
class _Line:
    """A matrix row as the table shows it: what both cases share (less what every case
    shares), what is the reference's own and the other's own."""

    row: MatrixRow
    case: str
    reference: str
    other: str


def _lines(rows: Sequence[MatrixRow]) -> tuple[list[_Line], str]:
    """Each row's distinguishing labels, and the parts common to every case ("every case: ...")."""
    refs = [ref for row in rows for ref in (row.reference, row.other) if ref is not None]
    fields = list(dict.fromkeys(name for ref in refs for name, _ in ref.parts))
    values = [dict(ref.parts) for ref in refs]
    common = {name for name in fields if len({found.get(name, "") for found in values}) == 1}
    paired = {name for row in rows if row.other is not None
              for name in fields if dict(row.reference.parts).get(name, "")
              != dict(row.other.parts).get(name, "")}
    lines = []
    for row in rows:
        mine = [(name, text) for name, text in row.reference.parts if name not in common]
        if row.other is None:   # its own parts where comparisons show theirs
            lines.append(_Line(row, _join((name, text) for name, text in mine
                                          if name not in paired),
                               _join((name, text) for name, text in mine if name in paired),
                               f"{row.repeats} repeats" if row.repeats else ""))
            continue
        theirs = dict(row.other.parts)
        ours = dict(row.reference.parts)
        names = [name for name in dict.fromkeys([*ours, *theirs]) if name not in common]
        shared = [(name, ours.get(name, "")) for name in names
                  if ours.get(name, "") == theirs.get(name, "")]
        own = [(name, ours.get(name, "")) for name in names if (name, ours.get(name, "")) not in shared]
        other = [(name, theirs.get(name, "")) for name in names
                 if ours.get(name, "") != theirs.get(name, "")]
        lines.append(_Line(row, _join(shared), _join(own) or "-", _join(other) or "-"))
    everywhere = _join((name, dict(refs[0].parts).get(name, "")) for name in fields
                       if name in common and name != "run") if refs else ""
    return lines, everywhere


def _measure_cell(measure: Measure) -> Callable[[_Line], str]:
    def text(line: _Line) -> str:
        reading = line.row.reading(measure.name)
        return "-" if reading is None else measure.cell(reading).text

    return text


def _expected(line: _Line) -> str:
    return ("yes" if line.row.expectation.bitwise else "NO") + (" !" if line.row.unexpected else "")


def matrix_columns(columns: Sequence[Measure]) -> list[Column[_Line]]:
    """The matrix's columns: the comparison, the case, the reference's and the other's own
    parts, a column per measure, then whether identity was expected. At a narrow width the
    labels are shortened (with a legend, as the comparison table's names are) and measures
    are left out: first those that never head a comparison (the highest ``order`` first),
    the headline ones (``summary``) last; one ``always_shown`` (bitwise identity) never."""
    def rank(measure: Measure) -> int | None:
        if measure.always_shown:
            return None
        return 90 - measure.summary if measure.summary is not None else 70 - measure.order // 2

    return [
        Column((Form("comparison", lambda line: line.row.kind),
                Form("kind", lambda line: KIND_SHORT.get(line.row.kind, line.row.kind))),
               compact_rank=10),
        Column((Form("case", lambda line: line.case),), min_width=12, abbreviate_rank=20),
        Column((Form("reference", lambda line: line.reference),), min_width=9,
               abbreviate_rank=22),
        Column((Form("other", lambda line: line.other),), min_width=9, abbreviate_rank=22),
        *(Column((Form(measure.heading, _measure_cell(measure)),), justify="right",
                 drop_rank=rank(measure)) for measure in columns),
        Column((Form("expected", _expected),)),
    ]


def format_rows(rows: Sequence[MatrixRow], columns: Sequence[Measure],
                width: int | None = None) -> str:
    """Matrix rows as a text table at most ``width`` wide (None: natural width): what tells
    the rows apart, a column per measure, then the expectation; under it the parts every
    case shares, the columns left out, and why identity was not expected."""
    if not rows:
        return "(no agreement to show)"
    lines, everywhere = _lines(rows)
    layout = fit(matrix_columns(columns), lines, width)
    text = [render(layout)]
    notes: list[str] = []
    if everywhere:
        notes.append(f"every case: {everywhere}")
    notes.extend(layout.legend)
    reasons = list(dict.fromkeys(row.expectation.reason for row in rows
                                 if not row.expectation.bitwise and row.expectation.reason))
    if reasons:
        notes.append("not expected to be bitwise identical:")
        notes.extend(f"  - {reason}" for reason in reasons)
    for row in rows:
        for note in row.notes:
            other = f"{row.other.label} against " if row.other is not None else ""
            notes.append(f"note ({row.kind}) {other}{row.reference.label}: {note}")
    for row in rows:
        if row.unexpected:
            other = f" vs {row.other.label}" if row.other is not None else ""
            notes.append(f"! {row.kind}: {row.reference.label}{other}: identity was expected "
                         f"({row.expectation.reason})")
    text.extend(wrap_lines(notes, width))
    return "\n".join(text)


def format_matrix(matrix: AgreementMatrix, width: int | None = None) -> str:
    """A plain-text table of ``matrix`` at most ``width`` wide (None: its natural width)."""
    return format_rows(matrix.entries(), matrix.columns(), width)


@dataclass(frozen=True)
class ShownMatrix(AgreementMatrix):
    """An :class:`AgreementMatrix` that can print itself (``res.agreement_matrix().format()``)."""

    @classmethod
    def of(cls, matrix: AgreementMatrix) -> ShownMatrix:
        return cls(**{item.name: getattr(matrix, item.name) for item in fields(matrix)})

    def format(self, width: int | None = None) -> str:
        """A plain-text table at most ``width`` wide (None: its natural width)."""
        return format_matrix(self, width)
