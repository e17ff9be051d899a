"""``report.md`` for the instructor: score distribution, pass rate per test, students who need a look."""

from __future__ import annotations

import statistics
from pathlib import Path

from ..figures import pass_rate_chart, score_histogram
from ..results import SubmissionResult, write_atomic
from . import similarity_report
from .escape import markdown


def pass_rates(results: list[SubmissionResult]) -> list[tuple[str, str, float]]:
    """``[(test name, group, fraction of students who passed it)]`` in rubric order."""
    counts = {}
    for result in results:
        for test in (test for test in result.tests if test.counted):  # a check not run here has no pass rate
            passed, total, group = counts.get(test.name, (0, 0, test.group))
            counts[test.name] = (passed + (test.status == "passed"), total + 1, group)
    return [(name, group, passed / total) for name, (passed, total, group) in counts.items()]


def render(results: list[SubmissionResult], figures: list[str]) -> str:
    scores = [result.score for result in results]
    top = max((result.max_score for result in results), default=0)
    lines = ["# Class report", "", f"{len(results)} students, maximum score {top:g}.", ""]
    if scores:
        lines += [f"Mean {statistics.mean(scores):.1f}, median {statistics.median(scores):g}, "
                  f"full marks: {sum(score == top for score in scores)}, zero: {sum(score == 0 for score in scores)}.",
                  ""]
    lines += [f"![score histogram]({figures[0]})", "", f"![pass rate per test]({figures[1]})", "",
              "## Pass rate per test", "", "| test | part | passed |", "| --- | --- | --- |"]
    for name, group, rate in pass_rates(results):
        lines.append(f"| {name} | {group} | {rate:.0%} |")
    flagged = [result for result in results if result.notes or _notebook_reason(result)]
    if flagged:
        lines += ["", "## Needs a look", ""]
        for result in flagged:
            reason = _notebook_reason(result)
            lines.append(f"- **{markdown(result.student)}**: " + "; ".join(markdown(note[:200]) for note in (
                *result.notes, *([f"notebook: {reason}"] if reason else []))))
    return "\n".join(lines) + "\n"


def _notebook_reason(result: SubmissionResult) -> str:
    return result.notebook.reason if result.notebook is not None else ""


def write(results: list[SubmissionResult], out_dir: str | Path) -> list[Path]:
    out_dir = Path(out_dir)
    histogram = score_histogram([result.score for result in results],
                                max((result.max_score for result in results), default=1),
                                out_dir / "figures" / "score_histogram.png")
    rates = pass_rate_chart(pass_rates(results), out_dir / "figures" / "pass_rate.png")
    path = out_dir / "report.md"
    write_atomic(path, render(results, [histogram.relative_to(out_dir).as_posix(),
                                        rates.relative_to(out_dir).as_posix()]) + similarity_report.link(out_dir))
    return [path, histogram, rates]
