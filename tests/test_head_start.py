"""The zygote started before the sandbox check (``sandbox/head_start.py``): used only when the check picks the
very sandbox it runs in, ended unused otherwise, and never handed a student's file before the check."""

import shutil

import pytest

from autograder.commands import grading
from autograder.sandbox import head_start, isolation, zygote_client
from autograder.sandbox.head_start import HeadStart
from autograder.sandbox.isolation import Limits, Sandbox
from lesson import LESSON, MODULES, SOLUTIONS


def _class(root, count):
    from autograder.lesson.catalogue import copy_package

    for index in range(count):
        copy_package(SOLUTIONS, root / "class" / f"s{index}", MODULES)
    return root / "class"


def _forking_sandbox():
    """The sandbox a run picks here, where workers fork from a zygote in bwrap (else the test is skipped)."""
    chosen = isolation.choose_sandbox("auto", unisolated_ok=True)
    if chosen.mode != "bwrap" or not chosen.fork:
        pytest.skip(f"no bwrap sandbox with forked workers here ({chosen.note})")
    return chosen


@pytest.mark.parametrize("mode, fork", [("none", True), ("uid", True), ("auto", False), ("bwrap", False)])
def test_nothing_starts_ahead_where_workers_would_not_fork_from_a_zygote_in_bwrap(mode, fork):
    started = HeadStart.start(mode, None, fork, LESSON)
    assert started.zygote is None and started.take(Sandbox("bwrap", "", Limits(), 1, fork)) is None


def test_nothing_starts_ahead_without_bwrap(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert isolation.bwrap_candidate("auto") is None
    assert HeadStart.start("auto", None, True, LESSON).zygote is None


def test_the_head_start_runs_in_the_sandbox_the_check_picks_when_bwrap_works():
    chosen = _forking_sandbox()
    assert isolation.bwrap_candidate("auto", None, chosen.threads, chosen.fork) == chosen
    assert isolation.bwrap_candidate("isolated", Limits(), chosen.threads, chosen.fork) == chosen


def test_a_head_start_in_another_sandbox_is_ended_unused():
    chosen = _forking_sandbox()
    for other in (Sandbox("uid", "", Limits(), 1, False), Sandbox("bwrap", "", Limits(call_seconds=3.0), 1, True)):
        started = HeadStart.start("auto", None, True, LESSON)
        zygote = started.zygote
        assert zygote is not None
        started.keep_for(other)
        assert started.zygote is None and zygote.process.poll() is not None, "ended at once, not left running"
    started = HeadStart.start("auto", None, True, LESSON, lend=1)
    zygote = started.zygote
    assert started.take(chosen, lend=2) is None, "too few sockets for the judges that would share it"
    assert zygote.process.poll() is not None
    with HeadStart.start("auto", None, True, LESSON) as started:
        zygote = started.zygote
    assert zygote.process.poll() is not None, "ended with the run when no judge took it"


@pytest.mark.slow
def test_a_run_grades_with_the_zygote_it_started_ahead_and_no_worker_before_the_check(tmp_path, monkeypatch):
    _forking_sandbox()
    events = []

    def recorded(cls, method, name):
        original = getattr(cls, method)

        def wrapped(*args, **kwargs):
            events.append(name)
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, method, wrapped)

    recorded(zygote_client.Zygote, "__init__", "zygote")
    recorded(zygote_client.Zygote, "spawn", "worker")
    recorded(grading, "choose_sandbox", "check")
    for jobs in (1, 2):
        events.clear()
        results = grading.grade_class(_class(tmp_path / f"jobs{jobs}", 3), tmp_path / f"out{jobs}", jobs=jobs,
                                      skip_notebook=True, emit=lambda line: None)
        assert len(results) == 3 and all(result.score == result.max_score > 0 for result in results)
        assert events[:2] == ["zygote", "check"], "the zygote starts before the check, the check before any worker"
        assert events.count("zygote") == 1, "the one started ahead grades the class: no second zygote"
        if jobs == 1:  # (with --jobs 2 the workers are spawned by the forked judges, whose calls are not seen here)
            assert events.count("worker") >= 3


@pytest.mark.slow
def test_when_the_check_picks_another_sandbox_the_head_start_is_ended_before_grading(tmp_path, monkeypatch):
    _forking_sandbox()
    ahead, zygotes = [], []
    start = HeadStart.start.__func__

    def recorded_start(cls, *args, **kwargs):
        ahead.append(start(cls, *args, **kwargs))
        zygotes.append(ahead[-1].zygote)
        return ahead[-1]

    monkeypatch.setattr(head_start.HeadStart, "start", classmethod(recorded_start))
    # bwrap refused at the check: this run grades without isolation, as the demo may.
    monkeypatch.setattr(grading, "choose_sandbox", lambda *args, **kwargs: Sandbox("none", "bwrap refused", Limits()))
    ended_before_grading = []
    judge_loop = grading.judge_loop

    def checked_judge_loop(*args, **kwargs):
        ended_before_grading.append(ahead[0].zygote is None and zygotes[0].process.poll() is not None
                                    and ahead[0] is kwargs["head_start"])
        return judge_loop(*args, **kwargs)

    monkeypatch.setattr(grading, "judge_loop", checked_judge_loop)
    results = grading.grade_class(_class(tmp_path, 2), tmp_path / "out", jobs=1, skip_notebook=True,
                                  emit=lambda line: None, unisolated_ok=True)
    assert len(ahead) == 1 and zygotes[0] is not None and ended_before_grading == [True]
    assert all(result.score == result.max_score > 0 and not result.isolated for result in results)
