"""``feedback/<student>.md``: what each student reads, in Markdown. Visible checks in full; hidden ones only counted
(what is shown is decided once, in ``feedback_view.py``; ``feedback_text.py`` writes the same as plain text)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..records.results import SubmissionResult
from .context import ReportRun
from .escape import markdown, plain, visible
from .feedback_view import FIX_FIRST_INTRO, FixFirst, hidden_words, shared_words, view, write_each


def render(result: SubmissionResult) -> str:
    """The Markdown feedback of one student (a pure function of the record). Text from outside the kit is
    escaped, except a grader's comment: the instructor's own words, typed in formgrader and trusted, kept as
    written (their ``*emphasis*`` renders as emphasis, never as ``\\*emphasis\\*``; ``<b>`` is not ``&lt;b&gt;``)."""
    shown = view(result)
    lines = [f"# Feedback for {markdown(visible(shown.student))}", "", f"**{shown.score_line}**", ""]
    if shown.unfinished:
        lines += ["Your submission could not be graded automatically; your instructor has been told.", ""]
    lines += [line for notice in shown.notices for line in (f"**Note:** {notice}", "")]
    lines += [line for said in shown.handin for line in (markdown(visible(said)), "")]  # may quote folder names
    lines += ["| part | points |", "| --- | --- |"]
    lines += [f"| {part.replace('_', ' ')} | {points} |" for part, points in shown.parts]
    lines.append("")
    lines += _fix_first(shown.fix_first)
    if shown.failed or shown.shared:
        lines += ["## To work on", ""]
        lines += [f"**One likely cause:** {markdown(shared_words(cause, count))}." for cause, count in shown.shared]
        lines += [""] if shown.shared else []
        for check in shown.failed:
            concept = markdown(check.concept) if check.quotes_student else check.concept
            lines.append(f"- **{check.name}** ({check.score:g}/{check.max_score:g}): {concept}")
            if check.happened:
                lines.append(f"  - What happened: `{_inline(check.happened)}`")
            if check.stood_in:
                lines.append(f"  - {check.stand_in_words().capitalize()}")
            lines += _comment(check.comment)
        lines.append("")
    if shown.passed:
        lines += ["## Passed", ""]
        for check in shown.passed:
            stand_in = f"; {check.stand_in_words()}" if check.stood_in else ""
            lines += [f"- {check.name} ({check.max_score:g}){stand_in}", *_comment(check.comment)]
        lines.append("")
    if shown.missed:
        lines += ["## Also review", "", *(f"- {concept}" for concept in shown.missed), ""]
    if shown.hidden:
        lines += [hidden_words(shown), ""]
    if shown.uncounted:
        lines += [f"{shown.uncounted} check(s) need hardware the grading machine lacks (a GPU); they count neither "
                  "in your score nor in the maximum.", ""]
    if shown.written:
        lines += ["## Written answers", ""]
        if shown.notebook_reason:
            lines += [f"Notebook: {markdown(shown.notebook_reason)}.", ""]
        for answer in shown.written:
            lines.append(f"- **{answer.name}** ({answer.state}): {markdown(answer.text)}")
            lines += _comment(answer.comment)
        lines += ["", f"{shown.pending:g} of these {shown.written_total:g} points are still to be graded by your "
                      "instructor." if shown.pending else "Every written answer has been graded.", ""]
    return "\n".join(lines)


def _comment(comment: str) -> list[str]:
    """A grader's comment under its list item, as written: the first line after the label, every further line
    indented to the item's text, so a comment of several lines or paragraphs stays in its item."""
    if not comment:
        return []
    first, *rest = comment.splitlines()
    return [f"  - Grader's comment: {first}", *(f"    {line}" if line.strip() else "" for line in rest)]


def _fix_first(parts: tuple[FixFirst, ...]) -> list[str]:
    """One line per part whose failure other checks met: fix it first."""
    if not parts:
        return []
    lines = ["## Fix first", "", FIX_FIRST_INTRO, ""]
    lines += [f"- `{part.part}`: {part.words()}" for part in parts]  # the hidden tests' words
    return [*lines, ""]


def _inline(text: str) -> str:
    return plain(text).replace("`", "'")[:400]


def write(results: Sequence[SubmissionResult], out_dir: str | Path, run: ReportRun | None = None) -> list[Path]:
    """Each student's ``feedback/<id>.md`` (a student report, and a class report for those ``run`` has not
    written yet)."""
    return write_each(results, out_dir, ".md", render, run)
