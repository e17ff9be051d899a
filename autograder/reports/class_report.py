"""``report.md`` for the instructor: who needs a look and the manual work left (both from :mod:`autograder.records.triage`,
as the console says them), the score distribution, the pass rate per check hardest first, and the written answers
as graded / pending."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from .context import ReportRun
from .drawer import Drawer
from .figures import Drawing, draw_aside, pass_rate_chart, score_histogram
from ..records.results import SubmissionResult, write_atomic
from ..records.notebook_groups import WRITTEN
from ..records.triage import manual_line, manual_work, needs_a_look
from . import similarity_report
from .escape import file_text, markdown, visible

NOTES_SHOWN = 5  # per student in "Grader notes"; the record holds them all


def pass_rates(results: list[SubmissionResult]) -> list[tuple[str, str, float]]:
    """``[(test name, group, fraction of students who passed it)]``, hardest first (ties by name), as the chart
    draws them. Written answers have no pass rate: graded by hand, most are pending for a while, and a pending
    answer is neither passed nor failed (:func:`written_answers` counts them)."""
    counts = {}
    for result in results:
        for test in result.tests:
            if not test.counted or test.group == WRITTEN:  # a check not run here has no pass rate either
                continue
            passed, total, group = counts.get(test.name, (0, 0, test.group))
            counts[test.name] = (passed + (test.status == "passed"), total + 1, group)
    rates = [(name, group, passed / total) for name, (passed, total, group) in counts.items()]
    return sorted(rates, key=lambda item: (item[2], item[0]))


def written_answers(results: list[SubmissionResult]) -> list[tuple[str, int, int, float | None]]:
    """``[(answer, graded, pending, mean score of the graded or None)]`` in notebook order. Graded counts every
    answer with a score (given in formgrader, or 0 for one left as released)."""
    answers: dict[str, tuple[list[float], int]] = {}
    for result in results:
        for test in result.tests:
            if test.group == WRITTEN:
                scores, pending = answers.setdefault(test.name, ([], 0))
                if test.status == "pending":
                    answers[test.name] = (scores, pending + 1)
                else:
                    scores.append(test.score)
    return [(name, len(scores), pending, statistics.mean(scores) if scores else None)
            for name, (scores, pending) in answers.items()]


def render(results: list[SubmissionResult], figures: list[str]) -> str:
    """The report's Markdown (a pure function of the records); ``figures``: the histogram's and the chart's paths."""
    scores = [result.score for result in results]
    top = max((result.max_score for result in results), default=0)
    lines = ["# Class report", "", f"{len(results)} students, maximum score {top:g}.", ""]
    if scores:
        lines += [f"Mean {statistics.mean(scores):.1f}, median {statistics.median(scores):g}, "
                  f"full marks: {sum(score == top for score in scores)}, zero: {sum(score == 0 for score in scores)}.",
                  ""]
    written = written_answers(results)
    if written:
        lines += [manual_line(manual_work(results)), ""]
    lines += ["## Needs a look", ""]
    flagged = needs_a_look(results)
    lines += [f"- **{markdown(visible(item.student))}**: {markdown(item.why())}" for item in flagged] or ["Nobody."]
    lines += ["", f"![score histogram]({figures[0]})", "", f"![pass rate per test]({figures[1]})", "",
              "## Pass rate per test, hardest first", "", "| test | part | passed |", "| --- | --- | --- |"]
    for name, group, rate in pass_rates(results):
        lines.append(f"| {markdown(name)} | {markdown(group)} | {rate:.0%} |")
    if written:
        lines += ["", "## Written answers", "", "Graded by hand in formgrader: no pass rate until every answer is "
                  "graded. An answer left as released, or missing, scores 0 and counts as graded.", "",
                  "| answer | graded | pending | mean of graded |", "| --- | --- | --- | --- |"]
        for name, graded, pending, mean in written:
            lines.append(f"| {markdown(name)} | {graded} | {pending} | {'' if mean is None else f'{mean:.1f}'} |")
    noted = [result for result in results if result.notes]
    if noted:
        lines += ["", "## Grader notes", ""]
        for result in noted:
            shown = "; ".join(markdown(note[:200]) for note in result.notes[:NOTES_SHOWN])
            hidden = len(result.notes) - NOTES_SHOWN
            more = f" (and {hidden} more in its record)" if hidden > 0 else ""
            lines.append(f"- **{markdown(visible(result.student))}**: {shown}{more}")
    return "\n".join(lines) + "\n"


def start_charts(results: list[SubmissionResult], out_dir: str | Path, drawer: Drawer | None = None
                 ) -> Callable[[], list[Path]]:
    """Start drawing the report's charts: in ``drawer``'s process when there is one (:mod:`.drawer`), else the
    pass rates in a child process (:func:`figures.draw_aside`) and the histogram here; return ``finish()``, which
    waits for them and returns ``[histogram, pass rates]``."""
    out_dir = Path(out_dir)
    note = "written answers, graded by hand, are counted apart in report.md" if any(
        test.group == WRITTEN for result in results for test in result.tests) else ""
    histogram = Drawing(score_histogram, out_dir / "figures" / "score_histogram.png",
                        [result.score for result in results], max((result.max_score for result in results), default=1))
    rates = Drawing(pass_rate_chart, out_dir / "figures" / "pass_rate.png", pass_rates(results), note=note)
    if drawer is not None:
        drawer.draw(histogram)
        drawer.draw(rates)
        return drawer.finish
    rates_drawn = draw_aside(rates)
    return lambda: [histogram(), rates_drawn()]


def write(results: Sequence[SubmissionResult], out_dir: str | Path, run: ReportRun | None = None) -> list[Path]:
    """Write ``report.md`` and its charts. In a run of every class report (``run``), the charts start drawing now
    (in ``run.drawer``'s process) and the page is written last, once the other reports are written."""
    out_dir = Path(out_dir)
    charts = start_charts(results, out_dir, run.drawer if run is not None else None)
    page = functools.partial(_write_page, results, out_dir, charts)
    if run is None:
        return page()
    run.finish_last(page)
    return []


def _write_page(results: Sequence[SubmissionResult], out_dir: Path, charts: Callable[[], list[Path]]) -> list[Path]:
    histogram, rates = charts()
    path = out_dir / "report.md"
    page = render(results, [histogram.relative_to(out_dir).as_posix(), rates.relative_to(out_dir).as_posix()])
    write_atomic(path, file_text(page + similarity_report.link(out_dir)))
    return [path, histogram, rates]
