"""``python -m autograder modes`` (run by ``make check``): which sandboxes work here, and whether they agree."""

from autograder.commands.modes import ModeRun, compare


def test_modes_that_agree_pass_and_a_missing_mode_is_no_failure():
    runs = [ModeRun("bwrap", {"a": "passed", "b": "failed"}, 1, 2),
            ModeRun("uid", problem="bubblewrap works here")]
    assert compare(runs) == []
    runs.append(ModeRun("uid", {"a": "passed", "b": "failed"}, 1, 2))
    assert compare(runs) == []


def test_modes_that_differ_are_named_with_the_checks_that_differ():
    runs = [ModeRun("bwrap", {"a": "passed", "b": "passed"}, 2, 2), ModeRun("uid", {"a": "passed", "b": "failed"}, 1, 2)]
    assert compare(runs) == ["uid differs from bwrap in 1 checks: b"]
    assert compare([ModeRun("bwrap", problem="x"), ModeRun("uid", problem="y")]) == ["no sandbox works on this machine"]
