"""``feedback/<student>.txt``: the same feedback as ``feedback/<student>.md``, as plain text for an e-mail body
or an LMS's plain-text field.

What is shown is decided once (``feedback_view.py``); here it is only laid out: headings underlined, items
wrapped at :data:`WIDTH` columns, nothing escaped (plain text has no markup), control characters dropped from
text that comes from outside the kit. A grader's comment keeps its own lines. Where a field renders HTML or
Markdown, send the ``.md`` instead: it escapes everything a student wrote.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from ..records.results import SubmissionResult
from .context import ReportRun
from .escape import plain, visible
from .feedback_view import FIX_FIRST_INTRO, hidden_words, shared_words, view, write_each

WIDTH = 78


def _heading(title: str) -> list[str]:
    return [title, "-" * len(title), ""]


def _item(text: str, indent: int = 0) -> list[str]:
    """One bullet, wrapped, its further lines under its text."""
    bullet = " " * indent + "* "
    if _one_line(text, len(bullet)):  # most items: what textwrap would make of them, without its tokenizing
        return [bullet + text]
    return textwrap.wrap(text, WIDTH, initial_indent=bullet, subsequent_indent=" " * (indent + 2),
                         break_long_words=False, break_on_hyphens=False) or [" " * indent + "*"]


def _one_line(text: str, indent: int) -> bool:
    """Whether ``textwrap.wrap`` would give ``text`` back as it is, on one line after an indent of ``indent``
    columns: it fits, and holds no whitespace wrap would change (other than single spaces) or drop (at its ends).
    Feedback has thousands of such items a class: wrap's tokenizing was most of the feedback's cost."""
    return (0 < len(text) <= WIDTH - indent and text == text.strip()
            and not any(char in text for char in "\t\n\r\x0b\x0c"))


def _comment(comment: str) -> list[str]:
    """A grader's comment, as written: each of its lines kept (long ones wrapped), indented under its item."""
    if not comment:
        return []
    label, indent = "  Grader's comment: ", " " * 4
    lines = []
    for index, line in enumerate(comment.splitlines()):
        line = "".join(char for char in line.rstrip() if char == "\t" or char.isprintable())
        lines += textwrap.wrap(line, WIDTH, initial_indent=label if index == 0 else indent,
                               subsequent_indent=indent, break_long_words=False) or [""]
    return lines


def render(result: SubmissionResult) -> str:
    """The plain-text feedback of one student (a pure function of the record)."""
    shown = view(result)
    title = f"Feedback for {plain(visible(shown.student))}"
    lines = [title, "=" * len(title), "", shown.score_line, ""]
    if shown.unfinished:
        lines += ["Your submission could not be graded automatically; your instructor has been told.", ""]
    for notice in shown.notices:
        lines += [*textwrap.wrap(f"Note: {plain(notice)}", WIDTH), ""]
    for said in shown.handin:
        lines += [*textwrap.wrap(plain(visible(said)), WIDTH), ""]
    width = max(len(part) for part, _ in shown.parts) if shown.parts else 0
    lines += [f"  {part.replace('_', ' '):<{width}}  {points}" for part, points in shown.parts]
    lines.append("")
    if shown.fix_first:
        lines += _heading("Fix first")
        lines += textwrap.wrap(FIX_FIRST_INTRO, WIDTH) + [""]
        for part in shown.fix_first:
            lines += _item(f"{part.part}: {part.words()}")
        lines.append("")
    if shown.failed or shown.shared:
        lines += _heading("To work on")
        for cause, count in shown.shared:
            lines += textwrap.wrap(f"One likely cause: {shared_words(cause, count)}.", WIDTH) + [""]
        for check in shown.failed:
            lines += _item(f"{check.name} ({check.score:g}/{check.max_score:g}): {plain(check.concept)}")
            if check.happened:
                lines += _item(f"What happened: {plain(check.happened)[:400]}", indent=2)
            if check.stood_in:
                lines += _item(check.stand_in_words().capitalize(), indent=2)
            lines += _comment(check.comment)
        lines.append("")
    if shown.passed:
        lines += _heading("Passed")
        for check in shown.passed:
            stand_in = f"; {check.stand_in_words()}" if check.stood_in else ""
            lines += [*_item(f"{check.name} ({check.max_score:g}){stand_in}"), *_comment(check.comment)]
        lines.append("")
    if shown.missed:
        lines += _heading("Also review")
        lines += [line for concept in shown.missed for line in _item(plain(concept))] + [""]
    if shown.hidden:
        lines += textwrap.wrap(hidden_words(shown), WIDTH) + [""]
    if shown.uncounted:
        lines += textwrap.wrap(f"{shown.uncounted} check(s) need hardware the grading machine lacks (a GPU); they "
                               "count neither in your score nor in the maximum.", WIDTH) + [""]
    if shown.written:
        lines += _heading("Written answers")
        if shown.notebook_reason:
            lines += [*textwrap.wrap(f"Notebook: {plain(shown.notebook_reason)}.", WIDTH), ""]
        for answer in shown.written:
            lines += [*_item(f"{answer.name} ({answer.state}): {plain(answer.text)}"), *_comment(answer.comment)]
        lines += ["", f"{shown.pending:g} of these {shown.written_total:g} points are still to be graded by your "
                      "instructor." if shown.pending else "Every written answer has been graded.", ""]
    return "\n".join(lines)


def write(results: Sequence[SubmissionResult], out_dir: str | Path, run: ReportRun | None = None) -> list[Path]:
    """Each student's ``feedback/<id>.txt`` (a student report, and a class report for those ``run`` has not
    written yet)."""
    return write_each(results, out_dir, ".txt", render, run)
