"""``python -m autograder gradebook OUT_DIR``: the final gradebook, code and notebook together.

Run it after grading the written answers in formgrader (the course folder is
``OUT_DIR/nbgrader``): it reads the code and autograded points from the result
records and the manual scores from nbgrader's database.
"""

import csv
import io
from pathlib import Path

from . import notebooks
from .errors import KitError
from .results import load, write_atomic

COLUMNS = ["student", "total", "max_total", "code", "max_code", "notebook_auto", "max_notebook_auto",
           "notebook_manual", "max_notebook_manual", "notebook_pending_manual", "notebook_note"]


def export_gradebook(out_dir):
    """Write ``OUT_DIR/final_gradebook.csv``; return its path."""
    out_dir = Path(out_dir)
    paths = sorted((out_dir / "results").glob("*.json"))
    if not paths:
        raise KitError(f"no results in {out_dir / 'results'}: run 'python -m autograder grade' first")
    results = [load(path) for path in paths]
    ids = {result.student: result.extra["notebook_id"] for result in results if "notebook_id" in result.extra}
    course = out_dir / "nbgrader"
    grades = notebooks.read_grades(course, ids) if ids and (course / "gradebook.db").exists() else {}
    manual_cells = {grade_id: points for grade_id, (points, auto) in notebooks.source_cells().items() if not auto}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for result in sorted(results, key=lambda r: r.student):
        code = [test for test in result.tests if test.group != "notebook"]
        auto = [test for test in result.tests if test.group == "notebook"]
        grade = grades.get(result.student)
        manual = sum(cell.score for cell in grade.cells if not cell.autograded and not cell.pending) if grade else 0
        pending = sum(cell.max_score for cell in grade.cells if cell.pending) if grade else 0
        manual_max = sum(manual_cells.values()) if ids else 0
        values = [sum(t.score for t in code), sum(t.max_score for t in code), sum(t.score for t in auto),
                  sum(t.max_score for t in auto), manual, manual_max]
        total, max_total = values[0] + values[2] + values[4], values[1] + values[3] + values[5]
        note = result.extra.get("notebook_reason", "") or (grade.reason if grade else "")
        writer.writerow([result.student, f"{total:g}", f"{max_total:g}", *(f"{v:g}" for v in values),
                         f"{pending:g}", note])
    path = out_dir / "final_gradebook.csv"
    write_atomic(path, buffer.getvalue())
    return path
