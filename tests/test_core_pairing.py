"""Each judge and its workers on one core of their own (autograder/sandbox/core_pairing.py).

The plan (which core for which judge) runs on faked affinity masks; the placement itself runs on this machine's
real cores and is skipped, saying why, where this process may use only one."""

import os
import threading

import pytest

from autograder.sandbox import core_pairing
from autograder.commands.grading import grade_class
from autograder.lesson.catalogue import copy_package
from lesson import MODULES, SOLUTIONS
from workers import remote_over, worker_factory


def _cores(monkeypatch, cores):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(cores))


def test_each_judge_gets_a_core_of_its_own_while_there_are_enough(monkeypatch):
    _cores(monkeypatch, {3, 1, 7, 5})
    assert [core_pairing.core_for(index, 4) for index in range(4)] == [1, 3, 5, 7]
    assert core_pairing.core_for(0, 1) == 1


def test_no_placement_with_more_judges_than_cores_or_a_single_core(monkeypatch):
    _cores(monkeypatch, {0, 1})
    assert core_pairing.core_for(0, 3) is None  # oversubscribed: the scheduler balances better than a plan
    assert core_pairing.core_for(2, 2) is None  # no such judge
    assert core_pairing.core_for(0, 1, threads=2) is None  # a worker's threads would take turns on one core
    _cores(monkeypatch, {0})
    assert core_pairing.core_for(0, 1) is None  # nothing to pair on: one core is where everything runs anyway
    assert not core_pairing.place(0, None)


def _two_cores():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("this process may use one core only: judges and workers are never placed")
    return cores


def test_a_judge_thread_is_placed_and_gets_its_cores_back():
    cores = _two_cores()
    seen = {}

    def judge():
        with core_pairing.judge_on(cores[-1]) as core:
            seen["inside"], seen["core"] = os.sched_getaffinity(0), core
        seen["after"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=judge)  # placement is per thread: pytest's own stays where it was
    thread.start()
    thread.join()
    assert seen["inside"] == {cores[-1]} and seen["core"] == cores[-1]
    assert seen["after"] == set(cores)


def test_a_worker_joins_its_judges_core_before_its_first_request():
    cores = _two_cores()
    with worker_factory("grader-pairing-") as factory:
        factory[0].core = cores[-1]
        student = remote_over(factory, SOLUTIONS)
        try:
            student.cuda_available()  # starts the worker: its hello, then its placement
            assert os.sched_getaffinity(student.worker._main_pid()) == {cores[-1]}
        finally:
            student.close()


@pytest.mark.slow
def test_grading_at_jobs_1_places_the_judge_and_every_worker_on_one_core(tmp_path, monkeypatch):
    cores = _two_cores()
    placed, place = [], core_pairing.place

    def recording(pid, core):
        placed.append((pid, core))
        return place(pid, core)

    monkeypatch.setattr(core_pairing, "place", recording)
    aside = []
    monkeypatch.setattr(core_pairing, "set_aside", lambda pid, spare: aside.append((pid, spare)))
    for student in ("ada", "bo"):
        copy_package(SOLUTIONS, tmp_path / "class" / student, MODULES)
    grade_class(tmp_path / "class", tmp_path / "out", jobs=1, skip_notebook=True, emit=lambda line: None)
    assert placed[0] == (0, cores[0])  # the judge's own thread first
    workers = placed[1:]
    assert len(workers) >= 2 and all(pid > 0 and core == cores[0] for pid, core in workers)
    # Each is ended on the cores no judge holds.
    assert {pid for pid, _ in aside} >= {pid for pid, _ in workers}
    assert all(spare == set(cores[1:]) for _, spare in aside)


def test_spare_cores_are_those_no_placed_judge_holds(monkeypatch):
    _cores(monkeypatch, {3, 1, 7, 5})
    assert core_pairing.spare_cores(1) == {3, 5, 7} and core_pairing.spare_cores(2) == {5, 7}
    assert core_pairing.spare_cores(4) == set()  # a judge on every core: an exit runs where its worker ran
    assert core_pairing.spare_cores(5) == set()  # judges not placed at all
    _cores(monkeypatch, {0})
    assert core_pairing.spare_cores(1) == set()


def test_a_worker_being_ended_leaves_its_judges_core_first(monkeypatch):
    """Its exit (memory and page tables freed) then runs beside the judge's work between students, on a core no
    judge holds."""
    cores = _two_cores()
    seen, set_aside = [], core_pairing.set_aside

    def recording(pid, spare):
        took = set_aside(pid, spare)
        seen.append((spare, took, os.sched_getaffinity(pid)))  # the worker is still there: its pipes are open
        return took

    monkeypatch.setattr(core_pairing, "set_aside", recording)
    with worker_factory("grader-pairing-") as factory:
        factory[0].core, factory[0].spare = cores[-1], frozenset(cores[:-1])
        student = remote_over(factory, SOLUTIONS)
        student.get_positional_encoding(4, 8)  # a request: its CPU is read, so the judge holds its process
        student.close()
    assert seen and seen[0][0] == set(cores[:-1]) and seen[0][1]
    assert seen[0][2] == set(cores[:-1])


def test_nothing_is_set_aside_without_a_spare_core():
    assert not core_pairing.set_aside(os.getpid(), frozenset())  # the process stays where it is
