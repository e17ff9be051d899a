"""A table of cases sends its calls ahead, in one batch (autograder/judge/ahead.py): fewer turns between judge and
worker, and the same grade. Each submission here is graded twice through the judge, with batches and without,
and must get the same outcome, word for word, whatever its worker does with a batch."""

import contextlib
from dataclasses import replace

import pytest

from autograder.judge import ahead, remote as remote_module
from autograder.judge.grade import Judge
from autograder.lesson.catalogue import Edit, Mutant, build
from autograder.intake.submission import read_files
from lesson import CONTRACT, LESSON
from workers import worker_factory

TABLES = ("test_table_shape_and_dtype", "test_split_shape", "test_attention_shapes", "test_module_shapes")


@pytest.fixture(scope="module")
def factory():
    with worker_factory("mha-pe-ahead-", call_seconds=5) as made:
        yield made


@pytest.fixture(scope="module")
def judge():
    return Judge(LESSON)


def grade(judge, factory, folder, monkeypatch, batches):
    """``(result, round trips)`` of the submission in ``folder``, its tables' calls batched or one at a time."""
    made, scratch = factory
    trips = []
    real = remote_module.RemoteSubmission._round_trip

    def counted(self, worker, message, *args, **kwargs):
        trips.append(message.get("op"))
        return real(self, worker, message, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(remote_module.RemoteSubmission, "_round_trip", counted)
        if not batches:
            patch.setattr(remote_module.RemoteSubmission, "calls_ahead",
                          lambda self, cases, key=None: contextlib.nullcontext())
        files, problems = read_files(folder, CONTRACT)
        result = judge.grade("student", files, problems, made.sandbox, made.launcher(files, scratch))
    return replace(result, execution_time=0.0), trips


def same_outcome(one, other):
    """The two results agree on every test's outcome and words, and on the notes."""
    assert [(t.id, t.status, t.score, t.output) for t in one.tests] == [
        (t.id, t.status, t.score, t.output) for t in other.tests]
    assert one.notes == other.notes and one.score == other.score


def submission(tmp_path, *edits):
    return build(Mutant(id="edited", title="edited", edits=edits), tmp_path / "submission", LESSON)


def test_the_reference_sends_each_table_in_one_batch_and_keeps_every_point(judge, factory, tmp_path, monkeypatch):
    folder = submission(tmp_path)
    batched, trips = grade(judge, factory, folder, monkeypatch, batches=True)
    alone, trips_alone = grade(judge, factory, folder, monkeypatch, batches=False)
    same_outcome(batched, alone)
    assert batched.score == batched.max_score
    assert trips.count("batch") >= len(TABLES) and "batch" not in trips_alone
    # Every check's calls made before it reads an answer go together, not only the tables': about half the turns.
    assert len(trips) < 0.6 * len(trips_alone), (len(trips), len(trips_alone))


# A submission's code runs in the worker and may rewrite it: here, its batches' answers.
GARBLED_BATCHES = '''
import sys as _sys
_session = _sys.modules[[name for name in _sys.modules if name.endswith("worker.session")][0]]
_session.Session.handle_batch = lambda self, message, blobs, reply_blobs: {MODE}
'''


@pytest.mark.parametrize("mode", [
    '{"batch": []}',  # too few replies
    '{"batch": [{"value": 1}] * len(message["items"]), "blob_counts": [5] * len(message["items"])}',  # no blobs
    '{"error": {"type": "SystemExit", "mro": ["SystemExit"], "message": "", "where": None}}',
    '__import__("os")._exit(3)',  # the worker dies mid-batch
])
def test_a_worker_that_garbles_its_batches_gains_and_loses_nothing(judge, factory, tmp_path, monkeypatch, mode):
    """Whatever a batch's reply is, the calls are made again one at a time, forgiven: the same grade as the
    worker would get answering one call at a time, with no note of a worker restarted."""
    folder = submission(tmp_path, Edit("heads.py", "def split_heads(x, num_heads):\n",
                                       GARBLED_BATCHES.replace("{MODE}", mode) + "\n\ndef split_heads(x, num_heads):\n"))
    batched, trips = grade(judge, factory, folder, monkeypatch, batches=True)
    alone, trips_alone = grade(judge, factory, folder, monkeypatch, batches=False)
    same_outcome(batched, alone)
    assert batched.score == batched.max_score
    # Its first batch failed (attention.py, the first file checked, imports heads.py), and no later table was
    # batched.
    _, reference_trips = grade(judge, factory, submission(tmp_path / "reference"), monkeypatch, batches=True)
    assert trips.count("batch") == 1 < reference_trips.count("batch") and "batch" not in trips_alone


def test_a_case_that_crashes_the_worker_inside_a_batch_is_charged_as_when_asked_alone(judge, factory, tmp_path,
                                                                                     monkeypatch):
    """A later case's call ends the worker while the batch runs: the batch is forgiven, and the first case that
    crashes it alone is charged, exactly as without batches."""
    folder = submission(tmp_path, Edit("heads.py", "    x = x.unflatten(-1, (num_heads, d_model // num_heads))",
                                       "    if x.shape[0] * x.shape[1] > 6:\n        __import__('os')._exit(9)\n"
                                       "    x = x.unflatten(-1, (num_heads, d_model // num_heads))"))
    batched, trips = grade(judge, factory, folder, monkeypatch, batches=True)
    alone, _ = grade(judge, factory, folder, monkeypatch, batches=False)
    same_outcome(batched, alone)
    (split,) = [test for test in batched.tests if test.id == "test_split_shape"]
    assert split.status == "failed" and "batch" in trips


def test_a_measured_call_is_never_answered_from_a_batch(factory, tmp_path):
    """cpu_of_call asks alone even inside a plan whose batch holds the same call: its CPU is the call's own."""
    from workers import remote_over

    remote = remote_over(factory, submission(tmp_path))
    try:
        cases = [lambda student, n=n: student.get_positional_encoding(4000 + n, 32) for n in range(3)]
        with remote.calls_ahead(cases):
            first = remote.get_positional_encoding(4000, 32)  # sends the batch
            assert first.shape == (4000, 32)
            _, cpu = remote.cpu_of_call("get_positional_encoding", 4001, 32)
            assert cpu > 0
            kept = ahead.key_of(*ahead.encoded(ahead.call_message("get_positional_encoding", (4001, 32), {})))
            assert len(remote.ahead.replies[kept]) == 1  # the batch's answer to it, left untaken
    finally:
        remote.close()


def test_a_batch_over_its_cpu_limit_is_forgiven_and_later_tables_go_one_call_at_a_time(judge, factory, tmp_path,
                                                                                        monkeypatch):
    """One case of the split table is slow (about 1.5 s of CPU, under the call's limit, over a batch's): its batch
    is ended and forgiven, the calls are made alone and pass, and no later table is batched."""
    slow = ("    if tuple(x.shape) == (2, 3, 4) and num_heads == 4:\n"
            "        import time\n        end = time.process_time() + 1.5\n"
            "        while time.process_time() < end:\n            pass\n")
    folder = submission(tmp_path, Edit("heads.py", "    x = x.unflatten(-1, (num_heads, d_model // num_heads))",
                                       slow + "    x = x.unflatten(-1, (num_heads, d_model // num_heads))"))
    batched, trips = grade(judge, factory, folder, monkeypatch, batches=True)
    alone, _ = grade(judge, factory, folder, monkeypatch, batches=False)
    same_outcome(batched, alone)
    assert batched.score == batched.max_score
    _, reference_trips = grade(judge, factory, submission(tmp_path / "reference"), monkeypatch, batches=True)
    assert 0 < trips.count("batch") < reference_trips.count("batch")


def test_an_answer_given_ahead_is_taken_only_while_its_own_case_runs():
    """A gate tried after case 0 fails may make the very call case 1 planned: it is asked alone, never given the
    object or the answer the worker made ahead for case 1."""
    calls = [(0, "split_heads", ahead.call_message("split_heads", (1, 2), {})),
             (1, "MultiHeadAttention", ahead.new_message("MultiHeadAttention", (8, 2), {}))]
    planned = ahead.Ahead(ahead.Plan.of(calls))
    key = ahead.key_of(*ahead.encoded(calls[1][2]))
    planned.keep(key, ("reply", "decode"), 1)
    planned.turn(0)
    assert planned.take(key) is None
    planned.turn(1)
    assert planned.take(key) == ("reply", "decode") and planned.take(key) is None


def test_a_plan_ends_at_the_first_answer_read_and_numbers_objects_for_the_whole_table():
    def case(student, n):
        module = student.MultiHeadAttention(n, 1)
        out = module(n)
        assert out.shape == (n,)  # reading an answer: the plan of this case ends here
        module(n + 1)

    calls = ahead.plan_calls(CONTRACT, [lambda student, n=n: case(student, n) for n in (4, 8)])
    assert [(index, message["op"]) for index, _, message in calls] == [(0, "new"), (0, "method"), (1, "new"),
                                                                      (1, "method")]
    assert [message["handle"] for _, _, message in calls if message["op"] == "method"] == [{"__item__": 0},
                                                                                         {"__item__": 2}]


def test_a_call_a_check_never_reaches_is_never_made_and_costs_the_checks_after_it_nothing(judge, factory,
                                                                                        tmp_path, monkeypatch):
    """A check plans every call it reads later (support.Later), but when it runs it makes each where it reads it,
    in its own order: a call after a failing one is never made. Here split_heads raises the wrong error for the
    first bad shape and hangs on the second, which the bad-shape check never reaches: the batch that ran it ahead
    is forgiven, the judge does not learn there that split_heads hangs, and the later checks of split_heads on
    good shapes keep their points, as without batches."""
    folder = submission(tmp_path, Edit("heads.py", "    if x.dim() != 3:\n",
                                       "    if x.shape[-1] == 10:\n        raise TypeError('not this one')\n"
                                       "    if x.dim() == 2 and x.shape[-1] == 12:\n        while True:\n            pass\n"
                                       "    if x.dim() != 3:\n"))
    batched, trips = grade(judge, factory, folder, monkeypatch, batches=True)
    alone, _ = grade(judge, factory, folder, monkeypatch, batches=False)
    same_outcome(batched, alone)
    outcomes = {test.id: test.status for test in batched.tests}
    assert outcomes["test_bad_shapes_raise_value_error"] == "failed" and "batch" in trips
    # split_heads after the bad-shape check, on good shapes: not taken for a function that hung
    assert outcomes["test_inputs_are_left_unchanged"] == outcomes["test_split_shape"] == "passed"


def batches_sent(judge, factory, folder, monkeypatch):
    """``(result, plans made, batches sent)`` of grading ``folder`` with ``judge``: each batch as the bytes of its
    items and blobs."""
    made, scratch = factory
    planned, sent = [], []
    real_plan, real_trip = ahead.plan_calls, remote_module.RemoteSubmission._round_trip

    def counted_plan(*args, **kwargs):
        planned.append(1)
        return real_plan(*args, **kwargs)

    def recorded(self, worker, message, blobs, *args, **kwargs):
        if message.get("op") == "batch":
            sent.append((repr(message), [bytes(blob) for blob in blobs]))
        return real_trip(self, worker, message, blobs, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(ahead, "plan_calls", counted_plan)
        patch.setattr(remote_module.RemoteSubmission, "_round_trip", recorded)
        files, problems = read_files(folder, CONTRACT)
        result = judge.grade("student", files, problems, made.sandbox, made.launcher(files, scratch))
    return replace(result, execution_time=0.0), len(planned), sent


def test_a_judge_plans_each_check_once_and_later_submissions_send_the_same_batches(factory, tmp_path, monkeypatch):
    """The calls a check plans are the judge's own (the planner offers nothing of the submission's), so a judge
    plans them at its first submission only. A later submission, whatever the first one did (here it rewrote its
    worker's answers to every batch), gets the batches and the grade a fresh judge gives it."""
    hostile = submission(tmp_path / "hostile", Edit("heads.py", "def split_heads(x, num_heads):\n",
                                                    GARBLED_BATCHES.replace("{MODE}", '{"batch": []}')
                                                    + "\n\ndef split_heads(x, num_heads):\n"))
    buggy = submission(tmp_path / "buggy", Edit("heads.py", "    x = x.unflatten(-1, (num_heads, d_model // num_heads))",
                                                "    x = x.unflatten(-1, (d_model // num_heads, num_heads))"))
    warm = Judge(LESSON)
    result, _, _ = batches_sent(warm, factory, hostile, monkeypatch)
    same_outcome(result, batches_sent(Judge(LESSON), factory, hostile, monkeypatch)[0])
    for folder in (submission(tmp_path / "reference"), buggy):
        result, plans, sent = batches_sent(warm, factory, folder, monkeypatch)
        fresh, fresh_plans, fresh_sent = batches_sent(Judge(LESSON), factory, folder, monkeypatch)
        assert plans < fresh_plans and sent == fresh_sent and len(sent) >= len(TABLES)
        same_outcome(result, fresh)
    assert plans == 0 and result.score < result.max_score  # every check planned before; the bug is still found


def test_a_judge_makes_a_named_plan_once():
    """A plan named twice is made once; under another name, it is made again. Its calls' keys are kept with it."""
    plans, made = ahead.Plans(), []

    def make():
        made.append(1)
        return ahead.Plan.of([(0, "split_heads", ahead.call_message("split_heads", (1, 2), {}))])

    one = plans.made(("test_a", "table"), make)
    assert plans.made(("test_a", "table"), make) is one and len(made) == 1
    assert plans.made(("test_b", "table"), make) is not one and len(made) == 2
    assert one.keys == (one.first,) and one.first == ahead.key_of(*ahead.encoded(
        ahead.call_message("split_heads", (1, 2), {})))
