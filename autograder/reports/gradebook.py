"""``gradebook.csv``, written by every ``grade`` run: student, score, max_score, then one column per test group
(written answers pending). After formgrader, ``final-gradebook`` adds ``final_gradebook.csv``
(:mod:`.final_gradebook`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..records.notebook_groups import pending_points
from ..records.results import SubmissionResult, write_atomic
from .context import ReportRun
from .csv_cells import table


def groups_of(results: list[SubmissionResult]) -> list[str]:
    """Every test group, in first-seen order across the class."""
    seen = {}
    for result in results:
        for group in result.group_scores():
            seen.setdefault(group, None)
    return list(seen)


def write(results: Sequence[SubmissionResult], out_dir: str | Path, run: ReportRun | None = None) -> list[Path]:
    """Write ``gradebook.csv`` (``run``: unused here; every class report is given it)."""
    groups = groups_of(results)
    # Written notebook answers wait for formgrader; say how many points are still open.
    pending = any(result.notebook is not None for result in results)
    # A deadline run says, for everyone, which commit was graded and what lateness cost.
    dated = any(result.handin is not None and result.handin.commit is not None for result in results)
    rows = []
    for result in results:  # numbers as numbers, text (the id) through csv_cells' rule
        scores = result.group_scores()
        row = [result.student, result.score, result.max_score,
               *(scores[group][0] if group in scores else "" for group in groups)]
        if pending:
            row.append(pending_points(result.tests) if result.notebook is not None else 0)
        if dated:
            commit = result.handin.commit if result.handin is not None else None
            row += [commit.sha if commit else "", commit.time if commit else "",
                    result.handin.late_days if result.handin else 0, result.penalty]
        rows.append(row)
    header = ["student", "score", "max_score", *groups] + (["notebook_pending_manual"] if pending else []) + (
        ["commit", "commit_time", "late_days", "late_penalty"] if dated else [])
    path = Path(out_dir) / "gradebook.csv"
    write_atomic(path, table(header, rows))
    return [path]
