"""A student's first hour: what the template says before they ask a TA (the README's start, the graded errors, the
allowed tools, the grading schedule), the all-blocked row told one way everywhere, a notebook whose visible checks
show no answer, and a feedback table that shows pending points as pending."""

import dataclasses
import json
import math
import re
import shutil

import torch

from autograder.commands.classroom import student_readme
from autograder.lesson.catalogue import Edit, Mutant, build
from autograder.lesson.public_tests import run_public_tests_many
from autograder.records.results import SubmissionResult, TestResult
from autograder.reports import feedback, feedback_text
from lesson import LESSON, MODULES, RELEASE, SOLUTIONS


def test_the_readme_starts_with_a_checklist_and_says_what_is_graded_allowed_and_when():
    text = student_readme(LESSON, tests=40)
    start = text.split("## Start here", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^\d+\. (.*)$", start, re.M)
    assert items[0].startswith("Set up") and items[-1].startswith("Commit and push")
    written = [module for item in items for module in MODULES if f"-k {module}`" in item]
    assert written == list(MODULES), "each student file in the descriptor's order, with its own public tests"
    assert any(LESSON.notebook in item for item in items)
    assert text.index("## Start here") < text.index("## Set up"), "the checklist comes first"
    assert "**Every error a docstring's \"Raises\" section names is graded**" in text
    allowed = text.split("**Not allowed**", 1)[1].split("\n\n", 1)[0]
    assert all(f"`{tool}`" in allowed for tool in ("torch.softmax", "torch.nn.Linear", "torch.einsum",
                                                   "Tensor.masked_fill"))
    assert all(sentence in text for sentence in LESSON.schedule.values())
    other = dataclasses.replace(LESSON, schedule={"grading": "Graded every Friday at noon.",
                                                  "submission": "Your last push counts.",
                                                  "feedback": "Feedback comes every week."})
    assert "**When.** Graded every Friday at noon." in student_readme(other, tests=40), "another lesson says its own"


def _without_the_all_blocked_fix(fill):
    """The reference's attention with the all-blocked rows left as the fill makes them."""
    edits = (Edit("attention.py", "        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)\n",
                  "        pass\n"),
             Edit("attention.py", 'scores = scores.masked_fill(~mask, float("-inf"))', f"scores = scores.masked_fill(~mask, {fill})"))
    return Mutant(id=f"fill-{fill.replace('.', '')}", title=f"no all-blocked fix, fill {fill}", edits=edits)


def test_the_public_test_and_the_docstring_tell_the_all_blocked_row_alike_for_both_fills(tmp_path):
    folders = {}
    for fill in ('float("-inf")', "-1e9"):
        mutant = _without_the_all_blocked_fix(fill)
        package = build(mutant, tmp_path / mutant.id / LESSON.id, LESSON)
        shutil.copyfile(SOLUTIONS / "__init__.py", package / "__init__.py")
        folders[fill] = tmp_path / mutant.id
    runs = run_public_tests_many(list(folders.values()), LESSON)
    test = "test_attention::test_a_query_with_every_key_blocked_attends_to_nothing"
    messages = {fill: runs[str(folder.resolve())].messages.get(test, "") for fill, folder in folders.items()}
    account = "filling the blocked scores with -inf makes that row NaN, with -1e9 equal weights"
    assert all(account in message for message in messages.values()), messages
    assert "this row is NaN" in messages['float("-inf")'] and "equal (1/seq_k each)" in messages["-1e9"], messages
    docstring = " ".join((RELEASE / "attention.py").read_text().split())
    assert "with ``-inf`` such a row's softmax is NaN, with ``-1e9`` it is equal weights" in docstring


def _checks(notebook):
    """The released notebook's automatically graded cells, as code."""
    cells = json.loads(notebook.read_text())["cells"]
    return {cell["metadata"]["nbgrader"]["grade_id"]: "".join(cell["source"]) for cell in cells
            if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader", {}).get("grade")}


def test_the_notebooks_visible_checks_show_no_answer_and_still_tell_right_from_wrong():
    checks = _checks(RELEASE / LESSON.notebook)
    assert set(checks) == {"understand_test", "apply_test"}
    answers = ("1000 / 1001", "1000/1001", "0.999", "== 8", "10000 **", "math.sin", "math.cos", "d_model // num_heads")
    for grade_id, code in checks.items():
        assert not [answer for answer in answers if answer in code], grade_id
    positions = torch.arange(1001, dtype=torch.float64)[:, None]
    angles = positions * 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    right = torch.stack((angles.sin(), angles.cos()), -1).flatten(1)
    wrong = {"sin and cos swapped": torch.stack((angles.cos(), angles.sin()), -1).flatten(1),
             "not interleaved": torch.cat((angles.sin(), angles.cos()), -1),
             "the pair index as exponent": torch.stack(((positions * 10000.0 ** (-torch.arange(32) / 64)).sin(),
                                                        (positions * 10000.0 ** (-torch.arange(32) / 64)).cos()),
                                                       -1).flatten(1)}

    def passes(code, **names):
        try:
            exec(code, {"torch": torch, **names})  # noqa: S102 - the kit's own released notebook
        except AssertionError:
            return False
        return True

    understand = dict(raw_share=1000 / 1001, largest_wave_value=right.abs().max().item())
    assert passes(checks["understand_test"], waves=right, **understand)
    assert passes(checks["understand_test"], waves=right.float(), **understand), "float32 is close enough"
    for name, table in wrong.items():
        assert not passes(checks["understand_test"], waves=table, **dict(understand,
                          largest_wave_value=table.abs().max().item())), name
    assert not passes(checks["understand_test"], waves=right, **dict(understand, raw_share=1 / 1001))
    apply = checks["apply_test"].split("### BEGIN HIDDEN TESTS")[0]
    assert passes(apply, head_dim=lambda d, h: d // h)
    assert not passes(apply, head_dim=lambda d, h: d / h) and not passes(apply, head_dim=lambda d, h: d // (h + 1))
    assert math.isclose(1000 / 1001, 0.999000999, rel_tol=1e-9)


def test_each_question_states_its_points_and_length_and_the_notebook_says_how_to_commit_it():
    cells = json.loads((RELEASE / LESSON.notebook).read_text())["cells"]
    points = {cell["metadata"]["nbgrader"]["grade_id"]: cell["metadata"]["nbgrader"]["points"] for cell in cells
              if cell["metadata"].get("nbgrader", {}).get("grade")}
    questions = ["".join(cell["source"]) for cell in cells if cell["source"] and "".join(cell["source"]).startswith("## ")
                 and re.match(r"## \d\. ", "".join(cell["source"]))]
    assert len(questions) == 6
    for text in questions:
        assert re.search(r"\*\d+ points", text) and re.search(r"sentence|lines of code|paragraph", text), text
    stated = sum(float(number) for text in questions for number in re.findall(r"(\d+) points?", text.split("\n")[2]))
    assert stated == sum(points.values())
    assert "run or not" in "".join(cells[0]["source"])


def test_the_feedback_table_shows_pending_written_points_as_pending():
    tests = (TestResult("A check", "heads", 2, 2, "passed"),
             TestResult("written: q1", "written", 0, 2, "pending"), TestResult("written: q2", "written", 0, 3, "pending"))
    text, plain = feedback.render(SubmissionResult("s", tests)), feedback_text.render(SubmissionResult("s", tests))
    assert "| written | 5 points still to be graded |" in text and "0 / 5" not in text
    assert re.search(r"written\s+5 points still to be graded", plain)
    half = (*tests[:2], dataclasses.replace(tests[2], score=2, status="failed"))
    assert "| written | 2 / 3, 2 points still to be graded |" in feedback.render(SubmissionResult("s", half))
    assert all(group != "properties" for group in {test.group for test in tests})
