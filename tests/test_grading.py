"""The grade command end to end: results, reports, broken and odd submissions, resume, errors."""

import csv
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from autograder import paths
from autograder.errors import KitError
from autograder.commands.grading import grade_class
from autograder.commands.planning import discover
from autograder.intake.naming import result_path
from autograder.lesson.catalogue import copy_package
from autograder.records.results import load
from autograder.reports.csv_cells import original
from autograder.sandbox.isolation import Limits
from lesson import CONTRACT, LESSON, MODULES, RELEASE, SOLUTIONS

REFERENCE = SOLUTIONS
ODD_IDS = ["a student with spaces", "ünïcödé-学生", "..dots", "-dash"]


def reference_with(folder, module, text=None, edit=None):
    """Copy the reference into ``folder`` and replace one module's text (or apply ``edit=(old, new)``)."""
    copy_package(REFERENCE, folder, MODULES)
    path = Path(folder) / module
    if text is not None:
        path.write_text(text)
    if edit is not None:
        source = path.read_text()
        assert edit[0] in source
        path.write_text(source.replace(edit[0], edit[1], 1))
    return folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One class with every kind of submission, graded once (2 judges)."""
    root = tmp_path_factory.mktemp("grading")
    class_dir = root / "class"
    copy_package(REFERENCE, class_dir / "reference", MODULES)
    copy_package(RELEASE, class_dir / "stubs", MODULES)
    reference_with(class_dir / "syntax-error", "heads.py", text="def split_heads(x, num_heads)\n    return x\n")
    copy_package(REFERENCE, class_dir / "missing-attention", MODULES)
    (class_dir / "missing-attention" / "attention.py").unlink()
    reference_with(class_dir / "crash-in-split", "heads.py",
                   edit=("    if x.dim() != 3:", "    import os; os._exit(3)\n    if x.dim() != 3:"))
    reference_with(class_dir / "hang-in-encoding", "positional_encoding.py",
                   edit=("    if max_seq_len < 1:", "    while True:\n        pass\n    if max_seq_len < 1:"))
    repo = class_dir / "as-a-repository" / "assignments"
    copy_package(REFERENCE, repo / CONTRACT.package, MODULES)
    for student in ODD_IDS:
        copy_package(REFERENCE, class_dir / student, MODULES)
    out = root / "out"
    results = grade_class(class_dir, out, jobs=2, limits=Limits(call_seconds=4.0), emit=lambda line: None,
                          skip_notebook=True)
    return {result.student: result for result in results}, out, class_dir


def groups(result):
    return {group: score for group, (score, _) in result.group_scores().items()}


def full(result, group):
    score, top = result.group_scores()[group]
    return score == top > 0


@pytest.mark.slow
def test_reference_gets_full_marks_and_stubs_zero(graded):
    results, _, _ = graded
    assert results["reference"].score == results["reference"].max_score >= 100
    assert results["stubs"].score == 0


@pytest.mark.slow
def test_a_syntax_error_costs_only_the_parts_that_depend_on_the_file(graded):
    result = graded[0]["syntax-error"]
    assert full(result, "positional_encoding")
    assert groups(result)["heads"] == 0 and groups(result)["attention"] == 0
    failed = [test.output for test in result.tests if test.group == "heads"]
    assert all("heads.py could not be imported: SyntaxError (heads.py:1)" in output for output in failed)


@pytest.mark.slow
def test_a_missing_file_costs_only_its_parts(graded):
    result = graded[0]["missing-attention"]
    assert full(result, "positional_encoding") and full(result, "heads")
    assert groups(result)["attention"] == 0
    assert any("attention.py is missing from the submission" in test.output for test in result.tests)


@pytest.mark.slow
def test_a_crashing_call_fails_only_the_tests_that_reach_it(graded):
    result = graded[0]["crash-in-split"]
    assert full(result, "positional_encoding")
    assert groups(result)["heads"] < result.group_scores()["heads"][1]
    assert any("exit code 3" in test.output for test in result.tests)
    assert any("restarted" in note for note in result.notes)
    combine = [test for test in result.tests if test.id == "test_combine_places_heads_in_order"]
    assert combine[0].status == "passed", "combine_heads does not call split_heads, so it keeps its points"


@pytest.mark.slow
def test_a_hanging_encoding_keeps_the_heads_and_attention_points(graded):
    result = graded[0]["hang-in-encoding"]
    assert full(result, "heads") and full(result, "attention")
    assert groups(result)["positional_encoding"] < result.group_scores()["positional_encoding"][1]
    assert any("used more than 4 s of CPU time" in test.output for test in result.tests)


@pytest.mark.slow
def test_a_student_repository_layout_is_found(graded):
    result = graded[0]["as-a-repository"]
    assert result.score == result.max_score


@pytest.mark.slow
def test_odd_student_ids_are_kept_exactly_and_files_are_safe(graded):
    results, out, _ = graded
    for student in ODD_IDS:
        assert results[student].score == results[student].max_score
        path = result_path(out, student)
        assert path.parent == out / "results" and path.exists()
        assert not path.name.startswith((".", "-"))
        assert load(path).student == student
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as handle:
        rows = {original(row["student"]): row for row in csv.DictReader(handle)}
    assert set(ODD_IDS) <= set(rows)  # as written, once the leading ' that keeps "-dash" from being a formula is off


@pytest.mark.slow
def test_results_are_gradescope_records(graded):
    _, out, _ = graded
    data = json.loads(result_path(out, "reference").read_text())
    assert {"score", "execution_time", "output", "tests"} <= data.keys()
    for test in data["tests"]:
        assert {"name", "score", "max_score", "output", "visibility"} <= test.keys()
        assert test["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
        # Gradescope knows passed and failed; a check not run here (no GPU) is 0 of 0 with no status.
        counted = test["extra_data"].get("counted", True)
        assert test.get("status") in ("passed", "failed") if counted else (
            "status" not in test and test["score"] == test["max_score"] == 0)
    assert data["score"] == sum(test["score"] for test in data["tests"])


@pytest.mark.slow
def test_gradebook_has_a_column_per_group(graded):
    results, out, _ = graded
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames[:3] == ["student", "score", "max_score"]
        assert set(reader.fieldnames[3:]) == {"positional_encoding", "heads", "attention", "whole_model"}
        rows = list(reader)
    assert len(rows) == len(results)
    for row in rows:
        total = sum(float(row[group]) for group in reader.fieldnames[3:])
        assert total == pytest.approx(float(row["score"]))


@pytest.mark.slow
def test_reports_exist_with_pictures(graded):
    _, out, _ = graded
    report = (out / "report.md").read_text()
    assert "figures/score_histogram.png" in report and "figures/pass_rate.png" in report
    for name in ("score_histogram.png", "pass_rate.png"):
        assert (out / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "hang-in-encoding" in report, "students whose grading needed restarts are listed for a look"


@pytest.mark.slow
def test_feedback_names_concepts_never_hidden_test_code_or_values(graded):
    results, out, _ = graded
    hidden_sources = [path.read_text() for path in LESSON.hidden_tests.glob("*.py")]
    code_lines = {line.strip() for source in hidden_sources for line in source.splitlines()
                  if len(line.strip()) > 25 and not line.strip().startswith(("\"", "#", "@graded", "\"\"\""))}
    code_lines = {line for line in code_lines if not line.startswith(("'", "f\"", "\"")) and "(" in line}
    for path in (out / "feedback").glob("*.md"):
        text = path.read_text()
        for line in code_lines:
            assert line not in text, f"{path.name} shows hidden test code: {line}"
        assert "assert " not in text and "reference." not in text
    stub_feedback = (out / "feedback" / "stubs.md").read_text()
    assert "Heads must be contiguous chunks of the projected vector" in stub_feedback
    assert "NotImplementedError" in stub_feedback


@pytest.mark.slow
def test_nothing_half_written_is_left(graded):
    _, out, _ = graded
    assert not [path for path in out.rglob("*") if path.name.startswith(".tmp-")]


@pytest.mark.slow
def test_resume_skips_unchanged_students_and_regrades_changed_ones(graded, tmp_path):
    class_dir = tmp_path / "class"
    copy_package(REFERENCE, class_dir / "alice", MODULES)
    copy_package(RELEASE, class_dir / "bob", MODULES)
    out = tmp_path / "out"
    grade_class(class_dir, out, jobs=2, emit=lambda line: None, skip_notebook=True)
    first = {path.name: path.read_bytes() for path in (out / "results").iterdir()}
    lines = []
    grade_class(class_dir, out, jobs=2, resume=True, emit=lines.append, skip_notebook=True)
    assert any("2 student(s) unchanged" in line for line in lines)
    assert {path.name: path.read_bytes() for path in (out / "results").iterdir()} == first, "idempotent"
    copy_package(REFERENCE, class_dir / "bob", MODULES)
    lines = []
    results = grade_class(class_dir, out, jobs=2, resume=True, emit=lines.append, skip_notebook=True)
    assert any("1 student(s) unchanged" in line for line in lines)
    assert {result.student: result.score == result.max_score for result in results} == {"alice": True, "bob": True}


def test_class_folder_errors_are_clear(tmp_path):
    with pytest.raises(KitError, match="class folder not found"):
        discover(tmp_path / "nope")
    with pytest.raises(KitError, match="no student folders"):
        discover(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(KitError, match="not a folder"):
        discover(tmp_path / "file")


@pytest.mark.slow
def test_cli_reports_a_missing_class_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "none"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=paths.REPO_ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "class folder not found" in done.stderr


@pytest.mark.slow
def test_single_job_through_the_cli_and_the_sandbox_flag(tmp_path):
    class_dir = tmp_path / "class"
    copy_package(REFERENCE, class_dir / "alice", MODULES)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(class_dir), "--out", str(tmp_path / "out"),
                           "--sandbox", "none", "--skip-notebook"], capture_output=True, text=True, cwd=paths.REPO_ROOT)
    assert done.returncode == 0, done.stderr
    assert "SANDBOX OFF" in done.stdout or "sandbox off" in done.stdout
    result = load(result_path(tmp_path / "out", "alice"))
    assert result.score == result.max_score
    assert result.sandbox == "none" and any("without isolation" in note for note in result.notes)


def test_only_a_worker_that_could_not_start_is_retried(tmp_path, monkeypatch):
    """The grading machine's trouble earns one more try; nothing a submission can cause does (a second try would
    be a second chance: learn in the first run, do better in the second)."""
    from autograder.commands import judge_loop
    from autograder.commands.planning import Task
    from autograder.records.results import GraderFailure
    from autograder.sandbox.isolation import choose_sandbox

    calls = []
    real = judge_loop.grade_prepared

    def flaky(prepared, sandbox, judge, out_dir=None):
        calls.append(prepared.task.student)
        if len(calls) == 1:
            return judge_loop.failed_result(prepared.task, sandbox, GraderFailure("no_worker", "the zygote vanished"))
        return real(prepared, sandbox, judge, out_dir)

    monkeypatch.setattr(judge_loop, "grade_prepared", flaky)
    copy_package(REFERENCE, tmp_path / "class" / "alice", MODULES)
    done = []
    task = Task("alice", str(tmp_path / "class" / "alice"), "fp")
    judge_loop.judge_loop([task], choose_sandbox("auto"), tmp_path / "out", done.append, LESSON)
    assert calls == ["alice", "alice"]
    assert done[0].score == done[0].max_score and "graded again (try 2)" in done[0].notes[-1]
    assert done[0].grader_failures == ()
    sandbox = choose_sandbox("auto")
    assert judge_loop.needs_retry(judge_loop.failed_result(task, sandbox, GraderFailure("no_worker", "x")))
    for kind in ("grader_error", "judge_stopped", "result_lost"):
        assert not judge_loop.needs_retry(judge_loop.failed_result(task, sandbox, GraderFailure(kind, "x")))
    crashed = replace(done[0], grader_failures=(GraderFailure("suite_problem", "x"),
                                                GraderFailure("check_crashed", "test_x: the check could not use")))
    assert not judge_loop.needs_retry(crashed)
    # Words are never a decision: a note that reads like the machine's trouble (a submission's text can reach
    # the notes) earns nothing, and survives the record's round trip as a note only.
    claimed = replace(done[0], notes=(f"grading failed: {judge_loop.NO_WORKER}: x", f"{judge_loop.NO_WORKER}: x"))
    assert not judge_loop.needs_retry(claimed)
    assert not judge_loop.needs_retry(type(claimed).from_json(claimed.to_json()))


@pytest.fixture
def warm_factory(tmp_path):
    """A judge's worker factory whose workers are forked from a warm zygote (skips where there is none)."""
    from autograder.sandbox.isolation import choose_sandbox
    from autograder.sandbox.launch import WorkerFactory

    factory = WorkerFactory(choose_sandbox("auto"), tmp_path, LESSON)
    try:
        if not factory.forks:
            pytest.skip("no warm zygote on this machine")
        yield factory
    finally:
        factory.close()


def test_a_worker_started_ahead_that_died_with_its_zygote_costs_nothing(warm_factory, tmp_path):
    """The next student's worker is forked early; if its zygote goes meanwhile, it is replaced, not held against
    the student."""
    from autograder.judge.grade import Judge
    from autograder.intake.submission import read_files

    files, problems = read_files(REFERENCE, CONTRACT)
    launch = warm_factory.launcher(files, tmp_path)
    ahead = launch()
    warm_factory.zygote.close()  # the zygote goes (torn down, or crashed) before the student is graded
    result = Judge(LESSON).grade("late", files, problems, warm_factory.sandbox, launch, worker=ahead)
    assert result.score == result.max_score > 0
    assert any("started ahead was lost" in note for note in result.notes)


def test_a_worker_that_ends_as_it_is_stopped_is_still_confirmed_gone(warm_factory):
    """Closing a worker closes its pipes (so it ends by itself) and then stops it: the two race, and whichever
    wins, the zygote must confirm the end. A lost confirmation tears down the zygote: a torch import per loss."""
    from autograder.intake.submission import read_files

    zygote = warm_factory.zygote
    files, _ = read_files(REFERENCE, CONTRACT)
    ends = []
    for _ in range(60):
        worker = zygote.spawn(files, warm_factory.sandbox.limits)
        if len(ends) % 2:  # half are stopped at once, half once they serve requests
            worker.request({"op": "nothing"}, [], time.monotonic() + 10)
        worker._close_pipes()
        time.sleep(0.0005 * (len(ends) % 5))  # vary which side wins
        ends.append(zygote.kill(worker.ident))
        worker.output.join(timeout=5)
    assert None not in ends, f"{ends.count(None)} of {len(ends)} ends went unconfirmed"
    assert warm_factory.zygote is zygote and zygote.alive


def test_a_closed_worker_is_killed_while_the_judge_goes_on_and_an_unconfirmed_kill_retires_its_zygote(
        warm_factory, tmp_path, monkeypatch):
    """Closing a forked worker does not wait for its end: the zygote's confirmation is read with its next replies.
    Confirmed, the worker's process is gone; a kill it cannot confirm retires the zygote, and the next worker
    comes from a fresh one (the retired sandbox torn down first)."""
    from autograder.sandbox import clocks
    from autograder.intake.submission import read_files

    zygote = warm_factory.zygote
    files, _ = read_files(REFERENCE, CONTRACT)
    worker = warm_factory.launcher(files, tmp_path)()
    assert worker.ready(time.monotonic() + 10) and worker.request({"op": "nothing"}, [], time.monotonic() + 10)
    pid = worker._main_pid()
    assert pid is not None and clocks.tree(pid)
    worker.close()
    assert zygote.unsettled  # sent, not awaited
    zygote.settle()
    assert not zygote.retired and not Path(f"/proc/{pid}").exists()

    worker = warm_factory.launcher(files, tmp_path)()
    worker.ready(time.monotonic() + 10)
    worker.close()
    unconfirmed = zygote._receive
    monkeypatch.setattr(zygote, "_receive", lambda timeout: dict(unconfirmed(timeout), status=None))
    zygote.settle()
    assert zygote.retired
    fresh = warm_factory.launcher(files, tmp_path)()
    assert warm_factory.zygote is not zygote and not zygote.alive
    assert fresh.ready(time.monotonic() + 30) and fresh.request({"op": "nothing"}, [], time.monotonic() + 10)
    fresh.close()


@pytest.mark.slow
def test_a_file_system_error_with_one_student_costs_that_student_only(tmp_path, monkeypatch):
    """Reading or writing one student's files can fail (a disk error, a full quota): the class goes on."""
    import errno
    import os as real_os

    from autograder.records import results as records
    from autograder.intake import submission

    for student in ("alice", "broken-read", "broken-write"):
        copy_package(REFERENCE, tmp_path / "class" / student, MODULES)
    real_read, real_save = real_os.read, records.save
    unreadable = str(tmp_path / "class" / "broken-read")

    def failing_read_submission(folder, contract, notebook=None, stubs=None):
        if str(folder) == unreadable:
            def eio(fd, size):
                raise OSError(errno.EIO, "I/O error")
            monkeypatch.setattr(submission.os, "read", eio)
            try:
                return original(folder, contract, notebook, stubs)
            finally:
                monkeypatch.setattr(submission.os, "read", real_read)
        return original(folder, contract, notebook, stubs)

    def failing_save(result, path):
        if result.student == "broken-write":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(result, path)

    original = submission.read_submission
    monkeypatch.setattr(submission, "read_submission", failing_read_submission)
    monkeypatch.setattr(records, "save", failing_save)
    results = {result.student: result for result in grade_class(
        tmp_path / "class", tmp_path / "out", jobs=1, emit=lambda line: None, skip_notebook=True)}
    assert set(results) == {"alice", "broken-read", "broken-write"}
    assert results["alice"].score == results["alice"].max_score > 0
    assert results["broken-read"].score == 0
    assert any("could not be read" in note for note in results["broken-read"].notes)
    assert any("could not be written" in note for note in results["broken-write"].notes)
    assert (tmp_path / "out" / "gradebook.csv").exists()


@pytest.mark.slow
def test_each_students_feedback_is_there_as_soon_as_they_are_graded(tmp_path):
    """The run's end writes the class's reports; each student's own feedback is written as they are done (the
    progress line says a student is done once their feedback is there), and it is the same as the end would write."""
    from autograder.records import results as records
    from autograder.reports import feedback

    for student in ("ada", "bob"):
        copy_package(REFERENCE, tmp_path / "class" / student, MODULES)
    seen = []

    class Watch:
        def advance(self, detail=""):
            student = detail.split(":")[0]
            seen.append((student, sorted(path.name for path in (tmp_path / "out" / "feedback").glob("*"))))

        def close(self):
            pass

    grade_class(tmp_path / "class", tmp_path / "out", jobs=1, emit=lambda line: None, skip_notebook=True,
                progress=Watch())
    assert seen == [("ada", ["ada.md", "ada.txt"]), ("bob", ["ada.md", "ada.txt", "bob.md", "bob.txt"])]
    record = records.load(tmp_path / "out" / "results" / "bob.json")
    assert (tmp_path / "out" / "feedback" / "bob.md").read_text() == feedback.render(record)


def test_resume_fingerprints_only_what_decides_a_grade(tmp_path):
    """Editing the bench, the demo or a report keeps every saved result; the judge, the worker, the hidden tests,
    the reference and the notebook do not."""
    from autograder.intake.fingerprints import grader_fingerprint, grading_code

    engine = paths.REPO_ROOT / "autograder"
    hashed = {path.relative_to(engine).as_posix() for path in grading_code()}
    assert {"judge/grade.py", "judge/remote.py", "judge/hidden_suite.py", "worker/session.py", "worker/protocol.py",
            "intake/source_tree.py"} <= hashed
    assert not hashed & {"commands/bench.py", "commands/demo.py", "reports/figures.py", "cli.py", "reports/feedback.py",
                         "commands/classroom.py"}
    inputs = LESSON.grading_inputs()
    assert {LESSON.descriptor, LESSON.source_notebook(), LESSON.hidden_tests / "check_heads.py",
            LESSON.solutions / "heads.py"} <= set(inputs)
    copy = tmp_path / "heads.py"
    copy.write_text((LESSON.solutions / "heads.py").read_text())
    before = grader_fingerprint([copy])
    copy.write_text(copy.read_text() + "\n# an edit\n")
    assert grader_fingerprint([copy]) != before


def test_a_notebooks_worker_starts_with_the_codes_and_ends_when_it_goes_unused(warm_factory, tmp_path):
    """The notebook's worker is forked ahead with the code's, so its start overlaps the previous student; the
    notebook stage takes it (its cells run there), and a student whose code must be graded again never leaves it
    running."""
    from autograder.commands import judge_loop
    from autograder.judge.grade import Judge
    from autograder.commands.planning import Task
    from autograder.records.results import GraderFailure

    folder = copy_package(REFERENCE, tmp_path / "class" / "ada", MODULES)
    (folder / LESSON.notebook).write_bytes(LESSON.source_notebook().read_bytes())
    task = Task("ada", str(folder), "fp")
    judge, sandbox = Judge(LESSON), warm_factory.sandbox
    prepared = judge_loop.prepare(task, warm_factory, tmp_path, LESSON.notebook)
    ahead = prepared.notebook_worker
    assert ahead is not None and ahead is not prepared.worker
    result = judge_loop.grade_prepared(prepared, sandbox, judge, tmp_path / "out")
    assert result.notebook is not None and result.notebook.reason == ""
    assert ahead.discarded and prepared.notebook_worker is None  # the notebook stage used it, and ended it

    prepared = judge_loop.prepare(task, warm_factory, tmp_path, LESSON.notebook)
    unused = prepared.notebook_worker
    unused.ready(time.monotonic() + 30)
    pid = unused._main_pid()
    prepared.failure = GraderFailure("no_worker", "the zygote vanished")  # graded again: no notebook stage
    assert judge_loop.needs_retry(judge_loop.grade_prepared(prepared, sandbox, judge, tmp_path / "out"))
    warm_factory.zygote.settle()
    assert not Path(f"/proc/{pid}").exists()
