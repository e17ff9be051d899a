"""``feedback/<student>.md``: what each student reads. Visible checks in full; hidden ones only counted."""

from __future__ import annotations

from pathlib import Path

from ..results import SubmissionResult, write_atomic
from ..submission import safe_name
from .escape import markdown

SHOWN = ("visible", "after_due_date", "after_published")


def render(result: SubmissionResult) -> str:
    """The Markdown feedback of one student (a pure function of the record)."""
    lines = [f"# Feedback for {markdown(result.student)}", "", f"**{score_line(result)}**", ""]
    if result.unfinished is not None:
        lines += ["Your submission could not be graded automatically; your instructor has been told.", ""]
    lines += [line for notice in result.notices for line in (f"**Note:** {notice}", "")]
    lines += ["| part | points |", "| --- | --- |"]
    for group, (score, top) in result.group_scores().items():
        lines.append(f"| {group.replace('_', ' ')} | {score:g} / {top:g} |")
    lines.append("")
    written = [test for test in result.tests if test.group == "written"]
    checks = [test for test in result.tests if test.group != "written"]
    blocked = [test for test in checks if test.status == "failed" and test.blocked_by]
    failed = [test for test in checks if test.status == "failed" and test.visibility in SHOWN]
    passed = [test for test in checks if test.status == "passed" and test.visibility in SHOWN]
    hidden = [test for test in checks if test.visibility not in SHOWN and test.counted]
    uncounted = [test for test in checks if not test.counted]
    lines += _fix_first(blocked)
    if failed:
        lines += ["## To work on", ""]
        for test in failed:
            concept, _, happened = test.output.partition("\nWhat happened: ")
            concept = markdown(concept) if test.group == "notebook" else concept.strip()  # may quote an answer
            lines.append(f"- **{test.name}** ({test.score:g}/{test.max_score:g}): {concept}")
            if happened:
                lines.append(f"  - What happened: `{_inline(happened)}`")
        lines.append("")
    if passed:
        lines += ["## Passed", ""] + [f"- {test.name} ({test.max_score:g})" for test in passed] + [""]
    missed = [test for test in hidden if test.status == "failed" and not test.blocked_by]
    if missed:
        # Hidden checks stay unnamed, but the idea each one missed is what the student needs to learn.
        lines += ["## Also review", ""]
        lines += [f"- {concept}" for concept in dict.fromkeys(test.output.split("\nWhat happened: ")[0].strip()
                                                               for test in missed)]
        lines.append("")
    if hidden:
        lines += [f"Your score includes {len(hidden)} further checks whose details are not shown.", ""]
    if uncounted:
        lines += [f"{len(uncounted)} check(s) need hardware the grading machine lacks (a GPU); they count neither in "
                  "your score nor in the maximum.", ""]
    if written:
        lines += ["## Written answers", ""]
        if result.notebook is not None and result.notebook.reason:
            lines += [f"Notebook: {markdown(result.notebook.reason)}.", ""]
        pending = sum(test.max_score for test in written if test.status == "pending")
        for test in written:
            state = "still to be graded" if test.status == "pending" else f"{test.score:g}/{test.max_score:g}"
            answer, _, comment = test.output.partition("\nGrader's comment: ")
            lines.append(f"- **{test.name.removeprefix('written: ')}** ({state}): {markdown(answer)}")
            if comment:
                lines.append(f"  - Grader's comment: {markdown(comment)}")
        lines += ["", f"{pending:g} of these {sum(test.max_score for test in written):g} points are still to be "
                      "graded by your instructor." if pending else "Every written answer has been graded.", ""]
    return "\n".join(lines)


def _fix_first(blocked: list) -> list[str]:
    """One line per part whose failure kept other checks from running: fix it first, those checks follow it."""
    if not blocked:
        return []
    lines = ["## Fix first", "",
             "These parts fail their own checks, and other checks use them, so those could not check their own "
             "ideas yet (their points are not earned until they can). Fix these parts first:", ""]
    for part in dict.fromkeys(test.blocked_by for test in blocked):
        mine = [test for test in blocked if test.blocked_by == part]
        lines.append(f"- `{part}`: {len(mine)} further check(s), "  # the hidden tests' words, not the student's
                     f"{sum(test.max_score for test in mine):g} points, wait for it")
    return [*lines, ""]


def score_line(result: SubmissionResult) -> str:
    """The header's score. Written answers a human has not graded yet are neither earned nor lost: they are named
    apart ("Score: 111 / 111 so far · 13 written points still to be graded"), not counted as missing points."""
    pending = sum(test.max_score for test in result.tests if test.group == "written" and test.status == "pending")
    if not pending:
        return f"Score: {result.score:g} / {result.max_score:g}"
    return (f"Score: {result.score:g} / {result.max_score - pending:g} so far · {pending:g} written points still to "
            "be graded")


def _inline(text: str) -> str:
    return " ".join(text.split()).replace("`", "'")[:400]


def write(results: list[SubmissionResult], out_dir: str | Path) -> list[Path]:
    written = []
    for result in results:
        path = Path(out_dir) / "feedback" / f"{safe_name(result.student)}.md"
        write_atomic(path, render(result))
        written.append(path)
    return written
