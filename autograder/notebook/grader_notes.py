"""Grading notes: each written answer's model answer and rubric, under the answer on formgrader's grading page.

The notes come from the source notebook (the ``### BEGIN/END SOLUTION`` region
of each manually graded answer cell) and go into the executed notebook that
formgrader shows, as one Markdown cell right after the student's answer,
wrapped in nbgrader's mark-scheme lines. The course configuration makes
nbgrader's own ``generate_feedback`` run nbgrader's ``ClearMarkScheme`` first
(:data:`FEEDBACK_CONFIG`), so its pages, the only part of the course a
student might be sent, never hold them. Students' own text has the
mark-scheme words broken (:func:`defang`), so nothing a student writes can
open or close a region: it can neither hide the notes' end nor cut its own
answer out of the feedback page.
"""

from __future__ import annotations

SOLUTION_BEGIN, SOLUTION_END = "### BEGIN SOLUTION", "### END SOLUTION"
# nbgrader's ClearMarkScheme defaults: a line containing either word pair starts or ends a region.
MARK_BEGIN, MARK_END = "BEGIN MARK SCHEME", "END MARK SCHEME"
NOTE_KEY = "grader_notes"  # the note cell's metadata key: tells it apart from the notebook's own cells

# Lines for the course's nbgrader_config.py: nbgrader's feedback drops the notes (as its release step does).
FEEDBACK_CONFIG = """\
# Each written answer's grading notes (model answer, rubric) sit under it on formgrader's grading page, inside
# mark-scheme lines; nbgrader's own feedback (Generate Feedback) removes them first, so no student page holds them.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearMarkScheme",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
c.ClearMarkScheme.enforce_metadata = False  # the notes sit in plain Markdown cells, not task cells
"""


def solution_text(source: str) -> str:
    """The text between a cell's solution lines (the model answer and rubric), without the lines themselves."""
    lines, inside = [], False
    for line in source.splitlines():
        if line.strip() == SOLUTION_BEGIN:
            inside = True
        elif line.strip() == SOLUTION_END:
            inside = False
        elif inside:
            lines.append(line)
    return "\n".join(lines).strip()


def defang(text: str) -> str:
    """``text`` with each mark-scheme word pair broken by a zero-width space: it reads the same and never
    matches a delimiter, however the pairs overlap or nest (``END MARK SCHEMEND MARK SCHEME`` holds two)."""
    # One str.replace skips an occurrence that overlaps the one before it, so replace until none is left. Each
    # pass breaks at least one and makes none (it only inserts a character no marker holds): it ends, in a few
    # passes for any text.
    while MARK_BEGIN in text or MARK_END in text:
        for words in (MARK_BEGIN, MARK_END):
            text = text.replace(words, words.replace(" ", " \u200b"))  # ClearMarkScheme matches this case only
    return text


def note_cell(grade_id: str, points: float, notes: str, number: int) -> dict:
    """The Markdown cell (nbformat v4) formgrader shows under answer ``grade_id``: for graders only."""
    source = "\n".join([
        f"<!-- {MARK_BEGIN}: graders only, removed from nbgrader's feedback -->",
        f"**Grading notes for `{grade_id}` ({points:g} points)**, for graders only: never shown to the student.",
        "",
        notes,
        f"<!-- {MARK_END} -->",
    ])
    return {"cell_type": "markdown", "id": f"grader-notes-{number}", "metadata": {NOTE_KEY: grade_id},
            "source": source}
