"""``junit.xml``, a class report of the registry: a suite per student and a case per check, with exact totals,
and valid XML whatever a student put in their id or their code's messages."""

from xml.etree import ElementTree

from autograder.reports import CLASS_REPORTS, junit, write_reports
from autograder.records.results import Cause, GraderFailure, NotebookSummary, SubmissionResult, TestResult

SECRET = "assert torch.allclose(out, reference_secret(x))"  # a hidden check's code: never in the report


def _reference() -> SubmissionResult:
    return SubmissionResult("ada", (
        TestResult("split shape", "heads", 2, 2, "passed", id="test_split"),
        TestResult("mask", "attention", 3, 3, "passed", id="test_mask"),
        TestResult("layout", "encoding", 4, 4, "passed", visibility="hidden", id="test_layout"),
        TestResult("on the GPU", "device", 0, 0, "skipped", "no CUDA on this machine", id="test_gpu"),
        TestResult("written: q1", "written", 0, 2, "pending", "To be graded by your instructor.",
                   id="written::q1")), execution_time=1.5, notebook=NotebookSummary("ada", pending_manual=2))


def _buggy() -> SubmissionResult:
    return SubmissionResult("bo", (
        TestResult("split shape", "heads", 0, 2, "failed", "Heads split the last axis.\nWhat happened: shape (2, 3)",
                   id="test_split", concept="Heads split the last axis.", happened="shape (2, 3)",
                   cause=Cause("wrong_shape")),
        TestResult("mask", "attention", 0, 3, "failed", "Not checked: heads fails first.", id="test_mask",
                   blocked_by="heads", charged_to="heads", cause=Cause("not_checked")),
        TestResult("layout", "encoding", 0, 4, "failed", "Sine in even columns.", visibility="hidden",
                   id="test_layout", concept="Sine in even columns.", happened=SECRET, cause=Cause("wrong_value")),
        TestResult("scale", "attention", 0, 1, "failed", "The check could not use the answer.", id="test_scale",
                   cause=Cause("check_crashed")),
        TestResult("written: q1", "written", 1, 2, "failed", "Graded by your instructor.", id="written::q1")),
        execution_time=2.25)


def _counts(element) -> tuple[int, int, int, int]:
    return tuple(int(element.get(key)) for key in ("tests", "failures", "errors", "skipped"))


def test_a_suite_per_student_a_case_per_check_and_exact_totals(tmp_path):
    paths = write_reports([_reference(), _buggy()], tmp_path)
    assert tmp_path / "junit.xml" in paths
    root = ElementTree.parse(tmp_path / "junit.xml").getroot()
    assert root.tag == "testsuites" and _counts(root) == (10, 3, 1, 3)
    ada, bo = root.findall("testsuite")
    assert (ada.get("name"), bo.get("name")) == ("ada", "bo")
    assert _counts(ada) == (5, 0, 0, 2) and ada.get("time") == "1.500"
    assert _counts(bo) == (5, 3, 1, 1) and bo.get("time") == "2.250"
    assert {prop.get("name"): prop.get("value") for prop in bo.iter("property")} == {"score": "1", "max_score": "12"}
    cases = {case.get("name"): case for case in bo.findall("testcase")}
    assert [(case.get("classname"), name) for name, case in cases.items()] == [
        ("heads", "split shape"), ("attention", "mask"), ("encoding", "layout"), ("attention", "scale"),
        ("written", "written: q1")]
    failure = cases["split shape"].find("failure")
    assert (failure.get("message"), failure.get("type"), failure.text) == (
        "Heads split the last axis.", "wrong_shape", "What happened: shape (2, 3)")
    assert cases["mask"].find("skipped").get("message") == "not checked: heads fails first"
    hidden = cases["layout"].find("failure")
    assert (hidden.get("message"), hidden.text) == ("Sine in even columns.", None)  # the idea, never the check
    assert cases["scale"].find("error").get("type") == "check_crashed"
    assert [child.tag for child in ada.findall("testcase/*")] == ["skipped", "skipped"]
    assert SECRET not in (tmp_path / "junit.xml").read_text()


def test_an_unfinished_grading_is_an_error_case():
    result = SubmissionResult("cy", grader_failures=(GraderFailure("no_worker", "no worker could be started"),))
    suite = ElementTree.fromstring(junit.render([result])).find("testsuite")
    assert _counts(suite) == (1, 0, 1, 0)
    error = suite.find("testcase/error")
    assert (error.get("type"), error.get("message")) == ("no_worker", "no worker could be started")


def test_a_hostile_id_and_message_stay_valid_xml(tmp_path):
    student = 'x]]><y a="1">\x00\x1b[2J&\ufffe'
    message = 'bad ]]> <!-- \x00\x1b]0;pwned\x07 "quoted" & <b>'
    result = SubmissionResult(student, (
        TestResult(f"t {student}", f"g{student}", 0, 1, "failed", message, concept=message,
                   happened=f"{message}\nsecond line", cause=Cause("wrong_value")),))
    junit.write([result], tmp_path)
    text = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert not any(char in text for char in "\x00\x1b\x07\ufffe") and "]]>" not in text
    suite = ElementTree.fromstring(text.encode("utf-8")).find("testsuite")  # parses: valid XML
    assert suite.get("name") == 'x]]><y a="1">\\x00\\x1b[2J&'  # each control shown as its escape, as report.md
    failure = suite.find("testcase/failure")
    assert failure.get("message") == 'bad ]]> <!-- ]0;pwned "quoted" & <b>'
    assert failure.text == 'What happened: bad ]]> <!-- ]0;pwned "quoted" & <b> second line'


def test_the_registry_names_every_class_report_once():
    assert list(CLASS_REPORTS) == ["report.md", "gradebook.csv", "ids.csv", "feedback/<id>.md",
                                   "feedback/<id>.txt", "junit.xml"]
