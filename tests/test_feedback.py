"""Feedback as a student reads it: the Markdown keeps a grader's comment as written and escapes every other text
from outside the kit; the plain-text version says the same things, from the same record."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autograder.reports import feedback, feedback_text, write_reports
from autograder.notebook.course_grades import graded_output
from autograder.reports.feedback_view import GRADED, instructor_comment, view
from autograder.records.results import Cause, NotebookSummary, SubmissionResult, TestResult

COMMENT = ("Good, but say why it is *invariance*, not <b>equivariance</b>.\n"
           "See [the lesson](https://example.org/lesson#heads) & `split_heads`.\n\n"
           "- first point\n- second point")


def _record(comment=COMMENT, student="ünï <b>"):
    code = [TestResult("split shape", "heads", 2, 2, "passed", "", "visible", "test_split"),
            TestResult("mask blocks keys", "attention", 0, 3, "failed",
                       "A blocked key gets no weight.\nWhat happened: weights[0, 1] was 0.4", "visible", "test_mask",
                       concept="A blocked key gets no weight.", happened="weights[0, 1] was 0.4",
                       cause=Cause("wrong_value")),
            TestResult("hidden layout", "encoding", 0, 4, "failed", "Sine in even columns.", "hidden", "test_layout",
                       concept="Sine in even columns.", cause=Cause("wrong_value")),
            TestResult("notebook: apply", "notebook", 0, 3, "failed", "your *answer* was <i>x</i>", "visible",
                       "notebook::apply")]
    written = [TestResult("written: q1", "written", 3, 4, "failed", graded_output(comment), "visible", "written::q1"),
               TestResult("written: q2", "written", 0, 2, "pending", "To be graded by your instructor.", "visible",
                          "written::q2")]
    return SubmissionResult(student, tuple(code + written),
                            notebook=NotebookSummary("u", pending_manual=2, manual_max=6, seconds=1.0))


def test_a_graders_comment_is_kept_as_written_in_the_markdown():
    text = feedback.render(_record())
    assert "  - Grader's comment: Good, but say why it is *invariance*, not <b>equivariance</b>." in text
    assert "    See [the lesson](https://example.org/lesson#heads) & `split_heads`." in text
    assert "\n    - first point\n    - second point" in text  # its own list, inside its item
    assert "\\*invariance\\*" not in text and "&lt;b&gt;equivariance" not in text
    # everything else from outside the kit stays escaped: the id, a notebook check quoting the student
    assert "# Feedback for ünï &lt;b&gt;" in text
    assert "your \\*answer\\* was &lt;i&gt;x&lt;/i&gt;" in text


def test_a_comment_is_the_graders_only_where_final_gradebook_put_it():
    """A comment is read only from an output that starts with the kit's own line: a notebook check that quotes
    a student's "Grader's comment:" is the student's text, escaped like the rest."""
    forged = TestResult("notebook: apply", "notebook", 0, 3, "failed",
                        "checked\nGrader's comment: <script>x</script>", "visible", "notebook::apply")
    assert instructor_comment(forged) == ""
    text = feedback.render(SubmissionResult("s", (forged,)))
    assert "<script>" not in text and "&lt;script&gt;" in text
    overridden = TestResult("notebook: apply", "notebook", 3, 3, "passed", graded_output("Nice *work*."), "visible",
                            "notebook::apply")
    assert instructor_comment(overridden) == "Nice *work*."
    assert "- notebook: apply (3)\n  - Grader's comment: Nice *work*." in feedback.render(
        SubmissionResult("s", (overridden,)))
    assert instructor_comment(TestResult("w", "written", 1, 1, "passed", GRADED, "visible", "w")) == ""


def test_the_plain_text_says_what_the_markdown_says():
    record = _record()
    text = feedback_text.render(record)
    assert text.startswith("Feedback for ünï <b>\n====")
    assert "Score: 5 / 16 so far · 2 written points still to be graded" in text
    for heading in ("To work on", "Passed", "Also review", "Written answers"):
        assert f"\n{heading}\n{'-' * len(heading)}\n" in text
    assert "* mask blocks keys (0/3): A blocked key gets no weight." in text
    assert "  * What happened: weights[0, 1] was 0.4" in text
    assert "* Sine in even columns." in text and "hidden layout" not in text  # hidden: the concept, never the name
    assert "your *answer* was <i>x</i>" in text  # plain text: nothing escaped
    assert "* q1 (3/4): Graded by your instructor.\n" in text
    assert ("  Grader's comment: Good, but say why it is *invariance*, not\n    <b>equivariance</b>.\n"  # wrapped
            "    See [the lesson](https://example.org/lesson#heads) & `split_heads`.\n\n"
            "    - first point\n    - second point") in text
    assert "* q2 (still to be graded)" in text and "2 of these 6 points are still to be graded" in text
    assert all(len(line) <= feedback_text.WIDTH for line in text.splitlines())
    assert "\\" not in text and "&lt;" not in text and "**" not in text


def test_both_formats_take_the_same_decisions():
    """One view decides what is shown; each format only lays it out."""
    record = _record()
    shown = view(record)
    markdown, plain = feedback.render(record), feedback_text.render(record)
    for check in shown.failed + shown.passed:
        assert check.name in markdown and check.name in plain
    for concept in shown.missed:
        assert concept in markdown and concept in plain
    assert "hidden layout" not in markdown


@pytest.mark.parametrize("student", ["a\x1bb", "x\u202eevil", "two\nlines"])
def test_plain_text_drops_control_characters_from_outside_text(student):
    first = feedback_text.render(_record(student=student)).splitlines()[0]
    assert first.isprintable() and "\u202e" not in first


def test_every_report_run_writes_both_feedback_files(tmp_path):
    paths = write_reports([_record(student="ada")], tmp_path)
    assert {path.name for path in paths if path.parent.name == "feedback"} == {"ada.md", "ada.txt"}
    assert (tmp_path / "feedback" / "ada.txt").read_text() == feedback_text.render(_record(student="ada"))


def test_a_students_own_reports_are_written_once_and_left_alone_by_the_class_reports(tmp_path):
    """The grade command writes each student's feedback as their record is final (``write_student_reports``); the
    class's reports at the end then write only the students not written yet."""
    from autograder.reports import write_student_reports

    paths = write_student_reports(_record(student="ada"), tmp_path)
    assert sorted(path.name for path in paths) == ["ada.md", "ada.txt"]
    assert (tmp_path / "feedback" / "ada.md").read_text() == feedback.render(_record(student="ada"))
    (tmp_path / "feedback" / "ada.md").write_text("kept")
    paths = write_reports([_record(student="ada"), _record(student="bob")], tmp_path, written={"ada"})
    assert {path.name for path in paths if path.parent.name == "feedback"} == {"bob.md", "bob.txt"}
    assert (tmp_path / "feedback" / "ada.md").read_text() == "kept"
    assert (tmp_path / "feedback" / "bob.txt").read_text() == feedback_text.render(_record(student="bob"))


def test_a_record_written_before_the_typed_fields_shows_its_concept_and_what_happened_apart():
    """Records graded before concept and happened were kept apart still read right (``final-gradebook`` on an
    older run): the fields are taken from the output once, when the record is read."""
    old = {"name": "mask blocks keys", "score": 0, "max_score": 3, "status": "failed", "visibility": "visible",
           "output": "A blocked key gets no weight.\nWhat happened: attention raised ValueError", "tags": ["attention"],
           "extra_data": {"id": "test_mask"}}
    test = TestResult.from_json(old)
    assert (test.concept, test.happened) == ("A blocked key gets no weight.", "attention raised ValueError")
    failed, = view(SubmissionResult("s", (test,))).failed
    assert (failed.concept, failed.happened) == ("A blocked key gets no weight.", "attention raised ValueError")
    assert TestResult.from_json(test.to_json()) == test


@settings(max_examples=400, deadline=None)
@example(text="a " + "x" * 74, indent=0)  # fills the line exactly
@example(text="a " + "x" * 75, indent=0)  # one column more: two lines
@example(text="a " + "x" * 72, indent=2)
@example(text="a " + "x" * 73, indent=2)
@given(text=st.lists(st.sampled_from(list("ab -\t\n\r\x0b\x0c\u00a0\u2003é") + ["word", "x" * 40]), max_size=40)
       .map("".join) | st.text(max_size=90), indent=st.integers(0, 6))
def test_a_feedback_item_is_what_textwrap_makes_of_it(text, indent):
    """Items that fit on one line skip textwrap (most of the plain feedback's cost): the lines are the same."""
    import textwrap

    wrapped = textwrap.wrap(text, feedback_text.WIDTH, initial_indent=" " * indent + "* ",
                            subsequent_indent=" " * (indent + 2), break_long_words=False,
                            break_on_hyphens=False) or [" " * indent + "*"]
    assert feedback_text._item(text, indent) == wrapped


def test_plain_text_drops_exactly_the_control_characters_and_the_bidirectional_marks():
    """``escape.plain`` reads every code point as the rule says: Unicode's control characters (category Cc) and
    the bidirectional embeddings, overrides and isolates become spaces, and nothing else changes."""
    import unicodedata

    from autograder.reports import escape

    dropped = [char for char in map(chr, range(0x110000)) if escape.plain(f"a{char}b") == "a b"]
    expected = [char for char in map(chr, range(0x110000)) if unicodedata.category(char) == "Cc"
                or "\u202a" <= char <= "\u202e" or "\u2066" <= char <= "\u2069" or char.isspace()]
    assert dropped == expected
    assert escape.plain("  x\u202e\tsay\n  ") == "x say"
