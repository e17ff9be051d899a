"""The notebook formgrader shows: the student's cells (Markdown escaped), the locked and test cells as released,
the captured outputs, each check's verdict and, under each written answer, its grading notes."""

import copy
import html

from . import grader_notes


def executed_notebook(executed, verdicts, assignment):
    """The autograded notebook (nbformat v4 JSON): the student's cells (Markdown escaped, so formgrader renders
    no HTML of theirs), the locked and test cells as released, the captured outputs, each check's verdict, and
    under each written answer its grading notes (:mod:`autograder.notebook.grader_notes`; the students' text cannot
    open or close their region)."""
    cells = []
    for number, (cell, grade_id, source, outputs) in enumerate(executed, 1):
        kind = cell.cell_type if cell is not None else "code"
        metadata = {"nbgrader": dict(assignment.release_meta[grade_id])} if grade_id else {}
        node = {"cell_type": kind, "id": f"cell-{number}", "metadata": metadata}
        if kind == "code":
            if grade_id in verdicts:
                passed, why = verdicts[grade_id]
                outputs = [] if passed else [error_output("CheckFailed", why)]
            node.update(source=grader_notes.defang(source), execution_count=number, outputs=list(outputs or []))
        else:
            node["source"] = grader_notes.defang(html.escape(source, quote=False))
        cells.append(node)
        if grade_id in assignment.notes:
            cells.append(grader_notes.note_cell(grade_id, assignment.written[grade_id], assignment.notes[grade_id],
                                                number))
    return {"cells": cells, "metadata": copy.deepcopy(assignment.release.get("metadata", {})), "nbformat": 4,
            "nbformat_minor": 5}


def error_output(name, text):
    return {"output_type": "error", "ename": name, "evalue": text, "traceback": [f"{name}: {text}"]}
