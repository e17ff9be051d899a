"""``gradebook.csv``: student, score, max_score, then one column per test group."""

import csv
import io
from pathlib import Path

from ..results import write_atomic


def groups_of(results):
    """Every test group, in first-seen order across the class."""
    seen = {}
    for result in results:
        for group in result.group_scores():
            seen.setdefault(group, None)
    return list(seen)


def write(results, out_dir):
    groups = groups_of(results)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "score", "max_score", *groups])
    for result in results:
        scores = result.group_scores()
        writer.writerow([result.student, f"{result.score:g}", f"{result.max_score:g}",
                         *(f"{scores[group][0]:g}" if group in scores else "" for group in groups)])
    path = Path(out_dir) / "gradebook.csv"
    write_atomic(path, buffer.getvalue())
    return [path]
