"""The grades of record as a learning management system imports them: one :data:`Exporter` per format in
:data:`FORMATS` (another LMS is one function, in a module of its own if it is long, and one line there). Every cell
goes through :mod:`.csv_cells`: an id such as ``=HYPERLINK(...)`` is written inert, scores are written as numbers.

Canvas (Grades > Import) reads a header whose first columns identify the student (``Student,ID,SIS User ID,SIS
Login ID,Section``), then one column per assignment, an optional row whose first cell is ``Points Possible``, then
one row per student. Canvas matches a row to a student by ``ID`` (its own numeric user id) if given, else ``SIS
User ID``, else ``SIS Login ID``, else the name. The kit's id goes in ``SIS Login ID`` (and in ``Student``, for
the eye): an id is a login (a roster's identifier, a GitHub or campus username), never Canvas's own number, and
the login is what a roster can be made of; ``ID`` is left empty so that Canvas does not look a number up in it.
An assignment column named ``Title (12345)`` updates Canvas's assignment 12345; any other name makes a new one
with the points of the ``Points Possible`` row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..records.results import SubmissionResult
from .csv_cells import table

CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
PLAIN_COLUMNS = ["student", "score", "max_score", "earned", "late_days", "late_penalty", "commit"]


@dataclass(frozen=True)
class ExportContext:
    """What an exporter is told besides the records (a field added here reaches every format unasked)."""

    column: str  # the assignment's column in the LMS (the lesson's title unless --column names it)


# export(the grades of record, sorted by id; the context) -> the file's text, which the command writes atomically
Exporter = Callable[[Sequence[SubmissionResult], ExportContext], str]


def canvas(results: Sequence[SubmissionResult], context: ExportContext) -> str:
    """Canvas's gradebook import: the header, the ``Points Possible`` row (the most any record could earn), and
    each student's score (late penalty included) under the context's column."""
    points = max((result.max_score for result in results), default=0.0)
    rows: list[list[str | float]] = [["Points Possible", "", "", "", "", points]]
    rows += [[result.student, "", "", result.student, "", result.score] for result in results]
    return table([*CANVAS_IDENTITY, context.column], rows)


def plain(results: Sequence[SubmissionResult], context: ExportContext) -> str:
    """A plain table for any other system: the score (late penalty taken off), its maximum, the points earned
    before the penalty, the days late and their cost, and the commit graded (``""`` without one)."""
    del context  # the plain table names its columns itself
    rows: list[list[str | float]] = []
    for result in results:
        handin = result.handin
        commit = handin.commit.sha if handin is not None and handin.commit is not None else ""
        rows.append([result.student, result.score, result.max_score, result.earned,
                     handin.late_days if handin is not None else 0, result.penalty, commit])
    return table(PLAIN_COLUMNS, rows)


# {--format name: its Exporter}
FORMATS: dict[str, Exporter] = {"canvas": canvas, "csv": plain}
