"""Property-based fuzzing of the grader's boundaries: whatever crosses one, the class finishes and every output
parses.

Three boundaries, each fuzzed in-process with many cheap examples, then crossed once end to end:

* a worker's reply (any JSON value, any code point, lone surrogates and controls included, wrong types, nesting
  at and past the caps), read by the judge's real channel and decoded by ``RemoteSubmission``: only a value or a
  SubmissionFailure comes out, its text valid and bounded, and the record it makes saves sealed, ASCII and
  round-trips;
* a student folder's name as bytes: intake, discovery and every report (records, gradebook, ids, feedback,
  report.md, the final gradebook) name each folder once, every file parses, an honest classmate is unchanged;
* a notebook's cell outputs and the notebook's own JSON: the executed notebook is valid nbformat, and a notebook
  printing hostile text costs its student nothing, nbgrader's database holding them.

Deterministic (``derandomize``, no example database) and bounded, so ``make test`` runs it in a few minutes.
"""

import contextlib
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from autograder.commands import judge_loop
from autograder.reports import final_gradebook
from autograder.commands.final_gradebook import export_final_gradebook
from autograder.commands.grading import grade_class
from autograder.commands.planning import NOT_STUDENTS, discover
from autograder.commands.similarity import Pair
from autograder.intake.naming import colliding, folder_id, folder_note, nbgrader_safe_name, result_path, safe_name
from autograder.intake.submission import read_submission
from autograder.judge import failures
from autograder.judge.failures import SubmissionFailure, bounded
from autograder.judge.grade import _result_for
from autograder.judge.hidden_suite import Outcome
from autograder.judge.remote import RemoteSubmission
from autograder.judge.rubric import RubricEntry
from autograder.lesson.catalogue import copy_package
from autograder.notebook.cells import grade_notebook, parse
from autograder.notebook.checks import load_checks
from autograder.notebook.nbgrader_record import _api as nbgrader_api
from autograder.notebook.nbgrader_record import course_dir, db_url, notebook_path, write_notebooks
from autograder.records.results import SubmissionResult, load_record, save, write_atomic
from autograder.reports import class_report, csv_cells, feedback, feedback_text, gradebook, ids, similarity_report
from autograder.reports.escape import file_text
from autograder.sandbox.channel import Channel
from autograder.sandbox.isolation import Limits, choose_sandbox
from autograder.worker import protocol
from autograder.worker.text import NOTE as INVALID_TEXT
from autograder.worker.text import is_valid
from lesson import CONTRACT, LESSON, MODULES, NOTEBOOK, RELEASE, SOLUTIONS
from test_notebooks import SOLVED_CODE, hostile_notebook, student_notebook

# Deterministic and bounded: the same examples on every run, none stored between runs, no wall-clock limit.
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=150,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---------------------------------------------------------------- text and JSON from outside the kit

# Code points chosen to break things: lone surrogates (high, low, the ones a non-UTF-8 byte becomes), C0 and C1
# controls, DEL, an ANSI escape, bidirectional overrides, noncharacters, a byte-order mark, a line separator.
NASTY = ("\udc80", "\ud800", "\udfff", "\ud83d", "\x00", "\x1b[2J\x1b]0;pwned\x07", "\x7f", "\x85", "\x9b",
         "\u202e", "\u2066", "\ufffe", "\uffff", "\ufdd0", "\ufeff", "\u2028", "\r", "\t", "\n", "\\", '"',
         "\U0010ffff", "=cmd|' /C calc'!A0", "<script>", "|", "`", "*")
ANY_CHAR = st.characters(exclude_categories=())  # every code point, surrogates included
TEXT = (st.text(ANY_CHAR, max_size=12) | st.sampled_from(NASTY)
        | st.lists(st.sampled_from(NASTY) | st.text(ANY_CHAR, max_size=3), max_size=6).map("".join))
# Text past the judge's caps (a message of 400 characters, a name of 100, an output budget of 256 KiB).
HUGE_TEXT = st.builds(lambda part, times: part * times, st.sampled_from(NASTY + ("x", "é")),
                      st.sampled_from([101, 401, 5000, 70_000]))
NUMBER = (st.integers(min_value=-2**70, max_value=2**70) | st.floats()  # nan and the infinities too
          | st.sampled_from([0, -1, 2**63, 10**30, 1e308, -0.0]))
LEAF = st.none() | st.booleans() | NUMBER | TEXT
DTYPES = protocol.DTYPE_LIST + ("object", "float8", "")
TENSOR_SPEC = st.fixed_dictionaries({
    "__tensor__": st.integers(min_value=-1, max_value=3) | LEAF,
    "dtype": st.sampled_from(DTYPES) | LEAF,
    "shape": st.lists(st.integers(min_value=-1, max_value=4), max_size=3) | LEAF,
    "device": st.sampled_from(["cpu", "meta", "cuda", "evil"]) | LEAF})
TAGGED_LEAF = (TENSOR_SPEC
               | st.builds(lambda tag, body: {tag: body},
                           st.sampled_from(["__float__", "__dtype__", "__unsupported__", "__reduce__"]),
                           st.sampled_from(["nan", "inf", "-inf", "float32", "os.system"]) | LEAF)
               | st.fixed_dictionaries({"__handle__": NUMBER | LEAF, "type": TEXT | LEAF}))


def _tagged(children):
    return (st.builds(lambda body: {"__tuple__": body}, st.lists(children, max_size=4))
            | st.builds(lambda body: {"__dict__": body},
                        st.lists(st.tuples(TEXT, children).map(list) | children, max_size=4)))


TREE = st.recursive(LEAF | TAGGED_LEAF, lambda children: st.lists(children, max_size=4)
                    | st.dictionaries(TEXT, children, max_size=4) | _tagged(children), max_leaves=25)


class Deep:
    """``leaf`` inside ``depth`` lists, written as JSON text directly (json's encoder stops near 1000 levels)."""

    def __init__(self, depth, leaf):
        self.depth, self.leaf = depth, leaf

    def __repr__(self):
        return f"Deep({self.depth}, {self.leaf!r})"

    def placeholder(self):
        return f"@@deep-{id(self)}@@"

    def text(self, ascii_only):
        return "[" * self.depth + json.dumps(self.leaf, ensure_ascii=ascii_only) + "]" * self.depth


# Nesting around the decoder's cap (MAX_DEPTH) and around json's and orjson's own limits (~990, 1023).
DEEP = st.builds(Deep, st.sampled_from([protocol.MAX_DEPTH - 1, protocol.MAX_DEPTH, protocol.MAX_DEPTH + 1, 200,
                                          989, 1000, 1023, 1024, 1500]), st.sampled_from([0, "\udc80", "x"]))
VALUE = TREE | DEEP | HUGE_TEXT
# A tensor without bytes (the fake device's answers, or a lie about one).
META = st.builds(lambda shape, dtype: {"__tensor__": -1, "dtype": dtype, "shape": shape, "device": "meta"},
                 st.lists(st.integers(min_value=0, max_value=2**41), max_size=3), st.sampled_from(DTYPES))
PHASES = st.sampled_from(["forward", "backward", "forward; you pass"]) | LEAF
ERROR_RECORD = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["ImportFailed", "ValueError", "Evil\udc80"]) | LEAF | HUGE_TEXT,
    "mro": st.lists(st.sampled_from(["ValueError", "Exception", "object"]) | TEXT, max_size=25) | LEAF,
    "message": TEXT | HUGE_TEXT | TREE,
    "where": st.sampled_from(["heads.py:3", "heads.py:0", "heads.py:9999", "check_heads.py:1", "../heads.py:3",
                              "heads.py:3\n", "attention.py:1"]) | TEXT | LEAF,
    "cause": st.sampled_from(["MissingFile", "MissingName", "ModuleNotFoundError", "SyntaxError"]) | TEXT,
    "module": st.sampled_from(MODULES) | TEXT | LEAF,
    "missing": st.sampled_from(["torch", "scipy", "os.path"]) | TEXT,
    "phase": PHASES, "on_cpu_too": LEAF, "mixed_devices": LEAF})
FORBIDDEN = st.lists(st.sampled_from(CONTRACT.forbidden) | TEXT, max_size=8) | VALUE
# The shapes of reply the judge expects, each with wrong types in every field, and any other object.
REPLY = st.one_of(
    st.fixed_dictionaries({"value": VALUE}),
    st.fixed_dictionaries({"error": ERROR_RECORD | VALUE}),
    st.fixed_dictionaries({"forbidden": FORBIDDEN}, optional={"value": VALUE}),
    # A call's answer with fields of its own (arguments changed, devices of a fake call, gradients), sent as the
    # protocol's tagged dict, each field of any type.
    st.builds(lambda fields: {"value": {"__dict__": [list(item) for item in fields.items()]}},
              st.fixed_dictionaries({"value": VALUE | META}, optional={
                  "changed": st.lists(st.sampled_from(["arg0", "arg1", "x"]) | TEXT, max_size=3) | VALUE,
                  "devices": st.lists(st.sampled_from(["cpu", "cuda"]) | TEXT, max_size=3) | VALUE,
                  "output": VALUE | META, "grads": st.dictionaries(TEXT, VALUE | META, max_size=2) | VALUE})),
    st.fixed_dictionaries({"batch": st.lists(st.dictionaries(st.sampled_from(["value", "error"]), VALUE,
                                                             max_size=2), max_size=4) | VALUE,
                           "blob_counts": st.lists(st.integers(min_value=-1, max_value=2), max_size=4) | VALUE}),
    st.dictionaries(TEXT, VALUE, max_size=4),
    st.builds(lambda shape, replaced: dict(shape, __replaced_text__=replaced),  # a field only the reader sets
              st.fixed_dictionaries({"value": VALUE}), LEAF),
)
HANDLE = st.fixed_dictionaries({"value": st.fixed_dictionaries({
    "__handle__": st.integers(min_value=0, max_value=3),
    "type": st.sampled_from(["MultiHeadAttention", "Linear"]) | TEXT})})
# A batch's reply: one item per call planned (the judge's batch below plans three), each a reply of its own.
BATCH = st.builds(lambda items: {"batch": items, "blob_counts": [0] * len(items)},
                  st.lists(HANDLE | st.fixed_dictionaries({"value": VALUE | META}) | st.fixed_dictionaries(
                      {"error": ERROR_RECORD}) | st.fixed_dictionaries({"forbidden": FORBIDDEN}), min_size=2,
                      max_size=3))
# How a frame goes wrong, if it does: mostly well-formed (so the judge reads on into the reply), else the nonce left
# out, blob sizes that do not add up or are no list, the JSON cut short, or a JSON value that is no object.
FRAMING = st.sampled_from(["whole"] * 7 + ["no nonce", "wrong sizes", "junk sizes", "cut", "no object"])


@st.composite
def frames(draw):
    """A reply frame's parts: ``(reply, blobs, encoding, framing)``; ``encoding`` is json's ASCII escapes (a
    ``\\udc80`` reads as a lone surrogate) or raw UTF-8 (a lone surrogate as three bytes UTF-8 forbids)."""
    if draw(st.integers(min_value=0, max_value=5)) == 0:  # a batch's reply, well-formed as a whole
        return draw(BATCH), [], draw(st.sampled_from(["ascii", "raw"])), "whole"
    reply = draw(REPLY | HANDLE)
    if draw(st.integers(min_value=0, max_value=3)) == 0:  # a tensor whose bytes are right, as the value
        count = draw(st.integers(min_value=0, max_value=4))
        dtype = draw(st.sampled_from(["float32", "int64", "bool", "bfloat16", "complex64"]))
        itemsize = protocol.DTYPES[dtype].itemsize
        reply = dict(reply, value={"__tensor__": 0, "dtype": dtype, "shape": [count],
                                   "device": draw(st.sampled_from(["cpu", "cuda", "meta"]))})
        blobs = [draw(st.binary(min_size=count * itemsize, max_size=count * itemsize))]
    else:
        blobs = draw(st.lists(st.binary(max_size=16), max_size=3))
    framing = draw(FRAMING)
    if framing == "junk sizes":
        framing = draw(VALUE)
    return reply, blobs, draw(st.sampled_from(["ascii", "raw"])), framing


def frame_bytes(reply, blobs, encoding, framing, nonce):
    """The bytes a worker would write: header, JSON, blobs (the header's sizes always the bytes that follow: a
    header that lies makes the judge wait for bytes until its wall-clock backstop, which tests elsewhere cover)."""
    sizes = [len(blob) for blob in blobs]
    told = sizes if isinstance(framing, str) else framing  # junk: any JSON value
    if framing == "wrong sizes":
        told = [size + 1 for size in sizes] + [-1]
    reply = dict(reply, blob_sizes=told, **({} if framing == "no nonce" else {"nonce": nonce}))
    if framing == "no object":
        reply = list(reply.items())
    deep = []

    def placeholder(value):
        deep.append(value)
        return value.placeholder()

    text = json.dumps(reply, ensure_ascii=encoding == "ascii", default=placeholder)
    for value in deep:
        text = text.replace(json.dumps(value.placeholder()), value.text(encoding == "ascii"), 1)
    body = text.encode("utf-8", "surrogatepass")
    if framing == "cut":
        body = body[: len(body) // 2]
    blob = b"".join(blobs)
    return protocol.HEADER.pack(len(body), len(blob)) + body + blob


class _Output:
    def text(self):
        return ""


class ScriptedWorker(Channel):
    """The judge's real channel (pipes, nonces, :func:`protocol.receive`) over a worker that answers each request
    with the next frame of a script."""

    hello = {"ready": True, "cuda": False}

    def __init__(self, script, imported):
        self.requests, self.replies = os.pipe(), os.pipe()
        super().__init__(self.requests[1], self.replies[0], _Output())
        os.set_blocking(self.requests[0], False)
        self.script, self.imported, self.writers = script, set(imported), []

    def ready(self, deadline):
        return self.hello

    def send(self, message, blobs, deadline):
        nonce = super().send(message, blobs, deadline)
        with contextlib.suppress(BlockingIOError):
            while os.read(self.requests[0], 1 << 20):  # the request, read and dropped
                pass
        data = frame_bytes(*next(self.script, ({"value": None}, [], "ascii", "whole")), nonce)
        writer = threading.Thread(target=_write_all, args=(self.replies[1], data), daemon=True)
        writer.start()  # a frame larger than a pipe holds is written while the judge reads it
        self.writers.append(writer)
        return nonce

    def exit_detail(self):
        return "killed"

    def close(self):
        self._close_pipes()  # the judge's ends; the writer's end too, so a frame the judge refused ends its thread
        for fd in (self.requests[0], self.replies[1]):
            with contextlib.suppress(OSError):
                os.close(fd)
        for writer in self.writers:
            writer.join()


def _write_all(fd, data):
    view = memoryview(data)
    with contextlib.suppress(OSError):  # the judge closed its end: the rest is never read
        while view:
            view = view[os.write(fd, view):]


def _x(*shape):
    return torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)


def _calls_ahead(remote):
    """Three calls the judge plans and sends as one batch (a function, a module made, its forward): the batch's
    reply is decoded item by item, the module's forward keyed by the handle the batch made."""
    cases = [lambda student: student.split_heads(_x(1, 2, 4), 2),
             lambda student: student.MultiHeadAttention(8, 2)(_x(1, 3, 8))]
    values = []
    with remote.calls_ahead(cases) as turn:
        for index, case in enumerate(cases):
            turn(index)
            values.append(case(remote))
    return values


# Each is one way the hidden tests use a submission; every one decodes a reply of its own kind.
CALLS = {
    "call": lambda remote: remote.call("split_heads", _x(1, 2, 4), 2),
    "changes": lambda remote: remote.call_reporting_changes("split_heads", _x(1, 2, 4), 2),
    "fake device": lambda remote: remote.on_fake_device("split_heads", torch.empty(1, 2, 4, device="meta"), 2),
    "module": lambda remote: remote.MultiHeadAttention(8, 2)(_x(1, 3, 8)),
    "gradients": lambda remote: remote.MultiHeadAttention(8, 2).grads(_x(1, 3, 8)),
    "child": lambda remote: remote.MultiHeadAttention(8, 2).child("w_q").tensors(),
    "fake module": lambda remote: remote.MultiHeadAttention(8, 2).on_fake_device(torch.empty(1, 3, 8, device="meta")),
    "cell": lambda remote: remote.ask({"op": "cell", "source": "print(1)", "seconds": 1.0}, "cell 1", 3.0),
    "batch": _calls_ahead,
}
FILES = {module: b"# a student file\n" * 20 for module in MODULES}  # 21 lines each: "heads.py:3" is a place
ENTRY = RubricEntry(id="test_split_heads", name="split_heads splits", group="heads", points=2.0,
                    concept="Splitting heads reshapes the last dimension.")
# What the judge keeps of a failure: its summary is the judge's words, in ASCII (labels, Python's own type names,
# a checked place); its detail the submission's, bounded (a type name, ": ", a message).
SUMMARY_LIMIT = 600
DETAIL_LIMIT = failures.NAME_LIMIT + 2 + failures.TEXT_LIMIT
ALLOWED = (SubmissionFailure,) + tuple(  # a sandbox that lost a file, where this tree has that kind (not charged)
    kind for kind in (getattr(failures, "SandboxFault", None),) if kind is not None)


def _strings(value):
    """Every str in a decoded value or a JSON tree (keys too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, (protocol.Handle, protocol.Unsupported)):
        yield value.type


def drive(call, script, imported):
    """``(outcome, remote)``: what ``CALLS[call]`` returned or raised, its replies taken from ``script``."""
    sandbox = choose_sandbox("none", limits=Limits(call_seconds=5.0, submission_seconds=100.0))
    workers = []

    def launch():
        workers.append(ScriptedWorker(script, MODULES if imported else ()))
        return workers[-1]

    remote = RemoteSubmission(sandbox, launch, CONTRACT, files=FILES)
    try:
        outcome = CALLS[call](remote)
    except BaseException as error:  # noqa: BLE001 - the property says which may come out
        outcome = error
    finally:
        remote.close()
    assert all(worker.discarded for worker in workers), "every worker the judge started is ended"
    return outcome, remote


def frame(reply, encoding="ascii", framing="whole"):
    """One scripted frame, as :func:`frames` draws them (no blobs)."""
    return reply, [], encoding, framing


def tagged_dict(**fields):
    return {"__dict__": [[key, value] for key, value in fields.items()]}


def meta(*shape):
    return {"__tensor__": -1, "dtype": "float32", "shape": list(shape), "device": "meta"}


@settings(FUZZ, max_examples=1000)
@given(call=st.sampled_from(sorted(CALLS)), script=st.lists(frames(), min_size=1, max_size=4),
       imported=st.booleans())
@example(call="call", script=[frame({"error": {"type": "ValueError", "message": "bad \udc80 text"}})], imported=True)
@example(call="call", imported=False, script=[frame(
    {"error": {"type": "ImportFailed", "module": "heads\udc80", "cause": "ModuleNotFoundError",
               "missing": "scipy\udc80", "message": "\x1b[2J" * 500, "mro": [None]}}, "raw")])
@example(call="call", imported=False,  # a worker that says a file sent to it is missing
         script=[frame({"error": {"type": "ImportFailed", "cause": "MissingFile", "module": "heads"}})])
@example(call="changes", script=[frame({"value": tagged_dict(value=1, changed=["arg0", "\udc80"])})], imported=True)
@example(call="fake device", imported=True,
         script=[frame({"value": tagged_dict(value=meta(1, 2, 2, 2), devices=["cuda\udc80" * 30])})])
@example(call="gradients", imported=True, script=[
    frame({"value": {"__handle__": 2**70, "type": "MultiHeadAttention"}}),
    frame({"value": tagged_dict(output=meta(1), grads=tagged_dict(**{"w\udc80": None}))}, "raw")])
@example(call="batch", imported=True, script=[frame({"batch": [
    {"value": [1, "\udc80"]}, {"value": {"__handle__": 2**70, "type": "Linear"}}, {"value": meta(1)}],
    "blob_counts": [0, 0, 0]})])
@example(call="call", script=[frame({"value": Deep(1023, "\udc80")})], imported=True)
@example(call="cell", script=[frame({"value": {"outputs": [{"text": "\udc80" * 70_000}]}})], imported=True)
def test_any_reply_becomes_a_value_or_a_failure_whose_record_is_sealed_ascii_and_round_trips(call, script, imported):
    outcome, remote = drive(call, iter(script), imported)
    event(f"{call}: {type(outcome).__name__}")  # what the examples reached (pytest --hypothesis-show-statistics)
    assert not isinstance(outcome, BaseException) or isinstance(outcome, ALLOWED), repr(outcome)
    assert all(is_valid(note) for note in remote.events)
    if not isinstance(outcome, BaseException):
        assert all(is_valid(text) for text in _strings(outcome)), "a decoded value holds valid text only"
        return
    if not isinstance(outcome, SubmissionFailure):
        return
    summary, detail = outcome.summary, outcome.detail
    assert summary.isascii() and summary.isprintable() and len(summary) <= SUMMARY_LIMIT, summary
    assert is_valid(detail) and len(detail) <= DETAIL_LIMIT

    test, crashed = _result_for(ENTRY, Outcome("failed", outcome))
    assert crashed is None and test.happened == summary and test.cause == outcome.cause
    result = SubmissionResult(student="fuzzed student", tests=(test,), notes=tuple(remote.events),
                              extra={"student_messages": {test.id: bounded(detail, 400)}} if detail else {})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{safe_name(result.student)}.json"  # where its id puts it
        save(result, path)
        raw = path.read_bytes()
        assert raw.isascii()
        again = SubmissionResult.from_json(json.loads(raw))
        assert again.to_json() == result.to_json()
        loaded, problem = load_record(path)
        assert problem == "" and loaded.tests == result.tests


# ---------------------------------------------------------------- folder names as bytes, and every report


def folder_named(class_dir, name: bytes) -> Path:
    """The path of the folder called ``name`` (bytes) in ``class_dir``, as ``os.listdir`` gives it."""
    return Path(os.fsdecode(os.fsencode(class_dir) + b"/" + name))


NAME_PARTS = st.sampled_from([b"\xff", b"\xfc", b"\xc3", b"\xed\xb2\x80", b"\xed\xa0\x80", b"\xef\xbf\xbe",
                              "é".encode(), "\u202e".encode(), b"\x1b[31m", b"\x1b]0;x\x07", b"\n", b"\r", b"\t",
                              b"\x7f", b"\xc2\x85", b"=", b"-", b"+", b"@", b"'", b".", b"..", b"%", b"%2F", b"%FC",
                              b"FC", b"\\x", b"_", b"_5F", b"~", b" ", b'"', b",", b"M", b"x" * 60])
POSIX_NAME = (st.binary(min_size=1, max_size=200) | st.lists(NAME_PARTS, min_size=1, max_size=8).map(b"".join)).filter(
    lambda name: 1 <= len(name) <= 200 and b"/" not in name and b"\0" not in name and name not in (b".", b"..")
    and os.fsdecode(name) not in NOT_STUDENTS and name != b"alice")
# What a Markdown or plain-text report may hold of the control characters: its line ends and tabs, nothing else
# (no C0, DEL, C1, and no bidirectional override or isolate).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_text_report(path):
    text = Path(path).read_bytes().decode("utf-8")  # strict: no lone surrogate, no stray byte
    assert CONTROL.search(text) is None, f"{path.name}: {CONTROL.search(text).group()!r}"
    return text


def assert_csv(path, students, columns=None):
    """``path`` parses as CSV: a header, then one row per student (the ids in order, as written), each as wide."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    assert columns is None or header == columns
    assert [csv_cells.original(row[0]) for row in body] == list(students)
    assert all(len(row) == len(header) for row in body)
    for row in body:  # no cell a spreadsheet would run: a number the kit wrote, or text marked as text
        assert not any(cell.startswith(csv_cells.FORMULA_START) and not _is_number(cell) for cell in row), row
    return header, body


def _is_number(cell):
    try:
        float(cell)
    except ValueError:
        return False
    return True


def write_every_report(results, out):
    """Every file a class's records make, in-process: the records (through the judge's barrier, which makes their
    text valid), gradebook.csv, ids.csv, each feedback (.md, .txt), report.md (its charts named, not drawn) and
    the final gradebook's CSV; the records as written."""
    results = [judge_loop.save_result(result, out) for result in results]
    assert not any(result.grader_failures for result in results), "every record was written"
    gradebook.write(results, out)
    ids.write(results, out)
    feedback.write(results, out)
    feedback_text.write(results, out)
    students = [result.student for result in results]
    pairs = [Pair(a, b, 0.5, 0.25, (("heads", 0.5),)) for a, b in zip(students, students[1:])]
    page = similarity_report.render(pairs, students, "figures/s.png", 30)
    write_atomic(out / similarity_report.NAME, file_text(page))
    write_atomic(out / "similarity.csv", similarity_report._csv(pairs))
    write_atomic(out / "report.md", file_text(class_report.render(results, ["figures/a.png", "figures/b.png"])
                                              + similarity_report.link(out)))
    final_gradebook.write(results, out)
    return results


def assert_every_output_parses(out, students, final=True):
    """Every record, CSV and Markdown or text report under ``out`` parses, one per student where per student
    (``final``: the final gradebook's CSV too)."""
    for student in students:
        path = result_path(out, student)
        raw = path.read_bytes()
        assert raw.isascii() and all(is_valid(text) for text in _strings(json.loads(raw))), "no lone surrogate"
        loaded, problem = load_record(path)
        assert problem == "" and loaded.student == student
    assert sorted(path.name for path in (out / "results").iterdir()) == sorted(
        f"{safe_name(student)}.json" for student in students), "one record per student, nothing else"
    assert_csv(out / "gradebook.csv", students)
    _, rows = assert_csv(out / "ids.csv", students, ids.COLUMNS)
    for row in rows:
        assert (out / row[1]).is_file() and (out / row[2]).is_file(), "ids.csv leads to each file"
    if final:
        assert_csv(out / "final_gradebook.csv", students, final_gradebook.COLUMNS)
    for student in students:
        for suffix in (".md", ".txt"):
            assert_text_report(out / "feedback" / f"{safe_name(student)}{suffix}")
    assert len(list((out / "feedback").iterdir())) == 2 * len(students)
    assert_text_report(out / "report.md")
    if (out / "similarity.csv").is_file():  # written in-process here (the command's figure is matplotlib's)
        assert_text_report(out / similarity_report.NAME)
        with open(out / "similarity.csv", newline="", encoding="utf-8") as handle:
            pairs = [(csv_cells.original(row[0]), csv_cells.original(row[1])) for row in list(csv.reader(handle))[1:]]
        assert pairs == list(zip(students, students[1:]))


# What else of a record reaches the reports: the grader's notes, the notebook's reason, what intake refused.
RECORD_TEXT = st.fixed_dictionaries({"notes": st.lists(TEXT | HUGE_TEXT, max_size=3), "reason": TEXT,
                                     "problems": st.dictionaries(st.sampled_from(MODULES + ("folder",)), TEXT,
                                                                 max_size=2)})


@pytest.mark.slow
@settings(FUZZ, max_examples=150)
@given(names=st.lists(POSIX_NAME, min_size=1, max_size=5, unique=True), texts=st.lists(RECORD_TEXT, max_size=5))
@example(names=[b"M\xfcller", b"M%FCller", b"M\\xfcller", b"M_FCller", b".\xff", b"\x1b[31m\n=1+1"],
         texts=[{"notes": ["\udc80\x1b[2J"], "reason": "\x00\u202e", "problems": {"heads": "=1+1\r\n"}}])
def test_folder_names_as_bytes_are_each_one_student_in_every_report(honest, names, texts):
    with tempfile.TemporaryDirectory() as root:
        class_dir, out = Path(root) / "class", Path(root) / "out"
        folders = [folder_named(class_dir, name) for name in names] + [class_dir / "alice"]
        for folder in folders:
            copy_package(RELEASE, folder, MODULES)
        students = discover(class_dir, contract=CONTRACT)
        ids_of = {os.fsencode(folder.name): student for student, folder in students}
        assert sorted(ids_of) == sorted(names + [b"alice"]), "every folder is a student, once"
        assert len(set(ids_of.values())) == len(folders) and not colliding(list(ids_of.values()))
        assert all(is_valid(student) for student in ids_of.values())
        for student, folder in students:
            intake = read_submission(folder, CONTRACT, NOTEBOOK)
            assert intake.files == {module: (RELEASE / f"{module}.py").read_bytes() for module in MODULES}
        results = []
        for index, (student, folder) in enumerate(students):
            text = texts[index] if index < len(texts) and student != "alice" else {
                "notes": [], "reason": honest.notebook.reason, "problems": honest.intake_problems}
            results.append(replace(
                honest, student=student, notes=honest.notes + tuple(filter(None, [folder_note(folder.name)]))
                + tuple(text["notes"]), notebook=replace(honest.notebook, reason=text["reason"]),
                intake_problems=text["problems"]))
        write_every_report(results, out)
        assert_every_output_parses(out, [student for student, _ in students])
        write_every_report([honest], Path(root) / "alone")
        for path in ("results/alice.json", "feedback/alice.md", "feedback/alice.txt"):  # as without them
            assert (out / path).read_bytes() == (Path(root) / "alone" / path).read_bytes()


# ---------------------------------------------------------------- a notebook's JSON and its cells' outputs

ASSIGNMENT = load_checks(LESSON.source_notebook(), LESSON.released_notebook())
RELEASED_NOTEBOOK = json.loads(LESSON.released_notebook().read_text(encoding="utf-8"))
GRADE_IDS = sorted(ASSIGNMENT.release_meta)
# What a decoded reply holds (the protocol's values: data, tensors, objects kept in the worker, unsupported ones),
# its text unchecked here: the notebook stage must make valid whatever it keeps.
DECODED = st.recursive(
    LEAF | HUGE_TEXT | st.builds(protocol.Handle, st.integers(min_value=0, max_value=3),
                                 st.sampled_from(["function", "module torch", "module os", "Linear"]) | TEXT)
    | st.builds(protocol.Unsupported, TEXT) | st.builds(lambda n: torch.arange(float(n)), st.integers(0, 3)),
    lambda children: st.lists(children, max_size=4) | st.lists(children, max_size=3).map(tuple)
    | st.dictionaries(TEXT, children, max_size=3), max_leaves=15)
OUTPUT_ITEM = st.fixed_dictionaries({}, optional={
    "text": TEXT | HUGE_TEXT | DECODED, "name": st.sampled_from(["stdout", "stderr"]) | LEAF,
    "output_type": st.sampled_from(["stream", "execute_result", "display_data", "error"]) | LEAF})
CELL_REPLY = st.fixed_dictionaries({}, optional={
    "outputs": st.lists(OUTPUT_ITEM | DECODED, max_size=4) | DECODED,
    "error": st.fixed_dictionaries({}, optional={"ename": TEXT | DECODED, "evalue": TEXT | HUGE_TEXT | DECODED,
                                                 "line": NUMBER | DECODED}) | DECODED})
NAMES_REPLY = st.dictionaries(st.sampled_from(sorted({name for check in ASSIGNMENT.checks.values()
                                                      for name in check.names})) | TEXT, DECODED, max_size=5)
# A reply the stage reads, or a failure the remote raises for it (a crash ends the notebook's worker).
STOP = st.sampled_from(["crash", "timeout", "student error"])
NOTEBOOK_REPLY = CELL_REPLY | NAMES_REPLY | DECODED | STOP
NB_SOURCE = TEXT | HUGE_TEXT | st.lists(TEXT, max_size=4) | LEAF | st.sampled_from(
    ["print('\\udc80 \\x1b[31m \\x00')", "answer = head_dim(64, 8)", "raise SystemExit"])
NB_OUTPUTS = st.lists(st.dictionaries(st.sampled_from(["output_type", "name", "text", "data", "metadata",
                                                       "execution_count", "ename", "evalue", "traceback"]),
                                      VALUE, max_size=4) | VALUE, max_size=3) | VALUE
NB_CELL = st.fixed_dictionaries({"cell_type": st.sampled_from(["code", "markdown", "raw"]) | LEAF}, optional={
    "source": NB_SOURCE, "outputs": NB_OUTPUTS, "execution_count": LEAF,
    "metadata": st.fixed_dictionaries({"nbgrader": st.fixed_dictionaries({}, optional={
        "grade_id": st.sampled_from(GRADE_IDS) | LEAF, "grade": LEAF, "points": LEAF, "locked": LEAF,
        "solution": LEAF})}) | VALUE})


@st.composite
def notebooks(draw):
    """A student's notebook as bytes: the release with cells replaced, added, given outputs of every wrong type,
    written with json's escapes or as raw UTF-8 (a lone surrogate as bytes UTF-8 forbids); or not a notebook."""
    kind = draw(st.sampled_from(["edited"] * 6 + ["any JSON", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "any JSON":
        notebook = draw(VALUE)
    else:
        notebook = json.loads(json.dumps(RELEASED_NOTEBOOK))
        cells = notebook["cells"]
        for _ in range(draw(st.integers(min_value=0, max_value=4))):
            index = draw(st.integers(min_value=0, max_value=len(cells)))
            cell = draw(NB_CELL)
            if draw(st.booleans()) and index < len(cells):
                cells[index] = dict(cells[index], **cell)
            else:
                cells.insert(index, cell)
    text = json.dumps(notebook, ensure_ascii=draw(st.sampled_from([True, True, True, False])), default=nested_list)
    return text.encode("utf-8", "surrogatepass")


def nested_list(deep):
    value = deep.leaf
    for _ in range(min(deep.depth, 200)):  # json writes what Python can nest
        value = [value]
    return value


class ScriptedRemote:
    """The notebook stage's remote (``ask``, ``worker``), answering each request with the next reply."""

    def __init__(self, replies):
        self.replies, self.worker, self.asked = iter(replies), "a worker", []

    def ask(self, message, label, seconds=None):
        self.asked.append(message.get("op"))
        reply = next(self.replies, {})
        if reply == "crash":
            self.worker = None
            raise failures.WorkerCrash(label, "killed")
        if reply == "timeout":
            self.worker = None
            raise failures.CallTimeout(label, 30.0)
        if reply == "student error":
            raise failures.StudentError(label, failures.clean_record({"type": "ValueError"}, None, MODULES))
        return reply


@pytest.mark.slow
@settings(FUZZ, max_examples=400)
@given(data=notebooks(), replies=st.lists(NOTEBOOK_REPLY, max_size=12))
@example(data=json.dumps({"cells": [{"cell_type": "code", "source": "x\udc80", "outputs": [{"text": None}]}]}).encode(),
         replies=[{"outputs": [{"text": "\udc80\x1b[2J\x00", "output_type": "execute_result"}],
                   "error": {"ename": ["\udc80"], "evalue": "\ud800" * 3000, "line": 10**30}}])
@example(data=b'{"cells": [{"cell_type": "markdown", "source": "<script>\\udc80</script>"}]}', replies=[])
@example(data=LESSON.released_notebook().read_bytes(),  # hostile outputs, and the apply check passing beside them
         replies=[{"outputs": [{"text": "\udc80\x00\x1b[2J" * 30_000}]}] * 7
         + [{"head_dim": protocol.Handle(1, "function")}, 8, 8])
def test_any_notebook_and_any_cell_outputs_make_a_valid_executed_notebook(data, replies):
    remote = ScriptedRemote(replies)
    cells, why, replaced = parse(data)
    assert (cells is None) == bool(why) and isinstance(replaced, bool)
    outcome = grade_notebook(data, "", remote, Limits(), ASSIGNMENT)
    event("unreadable" if cells is None else f"{len(remote.asked)} requests, "
          f"{sum(test.status == 'passed' for test in outcome.tests)} checks passed")
    assert [test.id for test in outcome.tests] == [f"notebook::{grade_id}" for grade_id in ASSIGNMENT.checks] + [
        f"written::{grade_id}" for grade_id in ASSIGNMENT.written], "one result per check and written answer"
    for test in outcome.tests:
        assert is_valid(test.output) and test.score in (0, test.max_score)
    assert all(is_valid(note) for note in outcome.notes) and is_valid(outcome.reason)
    if cells is None:
        assert outcome.executed is None and remote.asked == []
        return
    executed = outcome.executed
    assert all(is_valid(text) for text in _strings(executed)), "every text of the executed notebook is valid"
    nbformat.validate(nbformat.from_dict(executed))
    with tempfile.TemporaryDirectory() as course:
        write_notebooks(course, LESSON, "student", data, executed)
        written = notebook_path(course, "autograded", "student", LESSON)
        assert nbformat.reads(written.read_bytes().decode("utf-8"), as_version=4) == nbformat.from_dict(executed)
        notebook_path(course, "submitted", "student", LESSON).read_bytes().decode("utf-8")
    result = SubmissionResult("student", tests=tuple(outcome.tests), notes=tuple(outcome.notes))
    with tempfile.TemporaryDirectory() as folder:
        save(result, Path(folder) / "student.json")
        assert load_record(Path(folder) / "student.json") == (result, "")


# ---------------------------------------------------------------- one class, graded end to end

HOSTILE_NAMES = (b"M\xfcller", b"M%FCller", b"\xff\xfe\x1b[31mred", b"-rf \xc3", b".hidden \xed\xb2\x80",
                 b'=HYPERLINK("http:x","y")', b"a\nb\r\tc", "\u202eevil".encode(), "é".encode() * 100)
# What a notebook prints: lone surrogates (as escapes in its source), a terminal's escapes, NULs, an override.
HOSTILE_PRINT = "\udc80 \ud800 \x1b[2J\x1b]0;pwned\x07 \x00NUL\x00 \u202e rtl \x85 \r\n" + "\x1b[31m" * 2000


def loud_notebook(path):
    """The solved notebook, its answer cell printing hostile text to stdout and stderr and ending in it."""
    code = (f"import sys\nprint({ascii(HOSTILE_PRINT)})\nsys.stderr.write({ascii(HOSTILE_PRINT)})\n"
            + SOLVED_CODE["apply_code"] + f"{ascii(HOSTILE_PRINT)}\n")
    return hostile_notebook(path, code)


def junk_outputs_notebook(path):
    """The solved notebook, every cell carrying outputs and counts of every wrong type (the stage ignores them)."""
    notebook = json.loads(student_notebook(path).read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        cell["outputs"] = [{"output_type": "stream", "name": 7, "text": ["\udc80", None]}, {"output_type": None},
                           "junk", {"data": {"text/plain": {"x": [1e300, -0.0, 2**70]}}}, [[[[]]]]]
        cell["execution_count"] = "\x00"
        cell.setdefault("metadata", {})["tags"] = [None, "\udc80"]
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


def grade(class_dir, out, said=None):
    """``{student: result}`` of grading ``class_dir`` into ``out``; ``said`` collects what the console was told."""
    said = [] if said is None else said
    return {result.student: result for result in grade_class(class_dir, out, emit=said.append)}


def outcomes(result, groups=None):
    """Per test: what a student is graded and told (status, points, what happened, the typed cause)."""
    return {test.id: (test.status, test.score, test.max_score, test.happened, test.cause) for test in result.tests
            if groups is None or (test.group in ("notebook", "written")) == (groups == "notebook")}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """``(results, out, alone, said)``: a class of hostile folder names and notebooks beside an honest classmate
    (``alice``), graded with its notebooks; ``alice`` graded alone; and the console's lines."""
    root = tmp_path_factory.mktemp("fuzz-class")
    class_dir = root / "class"
    for folder in (class_dir / "alice", root / "alone" / "alice"):
        student_notebook(copy_package(SOLUTIONS, folder, MODULES) / NOTEBOOK)
    for name in HOSTILE_NAMES:
        loud_notebook(copy_package(SOLUTIONS, folder_named(class_dir, name), MODULES) / NOTEBOOK)
    junk_outputs_notebook(copy_package(SOLUTIONS, class_dir / "junk-outputs", MODULES) / NOTEBOOK)
    copy_package(SOLUTIONS, class_dir / "no-notebook", MODULES)
    alone = grade(root / "alone", root / "alone-out")["alice"]
    said = []
    return grade(class_dir, root / "out", said), root / "out", alone, said


@pytest.fixture(scope="module")
def honest(graded_class):
    """The honest classmate's record, as graded."""
    return graded_class[0]["alice"]


@pytest.mark.slow
def test_a_class_of_hostile_names_and_notebooks_is_graded_once_each_and_every_output_parses(graded_class):
    results, out, alone, said = graded_class
    assert said and all(is_valid(line) and CONTROL.search(line) is None for line in said), "the console is inert"
    hostile = {folder_id(os.fsdecode(name)) for name in HOSTILE_NAMES}
    students = sorted(hostile | {"alice", "junk-outputs", "no-notebook"})
    assert sorted(results) == students and len(hostile) == len(HOSTILE_NAMES), "each folder graded once"
    honest = results["alice"]
    assert outcomes(honest) == outcomes(alone), "the honest classmate is graded as alone"
    assert honest.score == honest.max_score - sum(ASSIGNMENT.written.values()) and honest.grader_failures == ()
    for student in students:
        result = results[student]
        assert result.grader_failures == () and result.tries == 1, student
        assert outcomes(result, "code") == outcomes(honest, "code"), f"{student}: the code's points, as alice's"
        if student != "no-notebook":
            assert outcomes(result, "notebook") == outcomes(honest, "notebook"), f"{student}: the notebook's too"
    assert outcomes(results["no-notebook"], "notebook") != outcomes(honest, "notebook")
    for student in hostile:  # the printed text made valid, said once, costing nothing
        assert any(INVALID_TEXT in note for note in results[student].notes), student
    assert not any(INVALID_TEXT in note for note in honest.notes)

    assert_every_output_parses(out, students, final=False)
    export_final_gradebook(out)
    assert_every_output_parses(out, students)
    course = course_dir(out)
    for student in students:
        executed = notebook_path(course, "autograded", nbgrader_safe_name(student), LESSON)
        if student != "no-notebook":
            nbformat.validate(nbformat.reads(executed.read_bytes().decode("utf-8"), as_version=4))
    Gradebook, _ = nbgrader_api()
    with Gradebook(db_url(course)) as database:
        assert sorted(row.id for row in database.students) == sorted(nbgrader_safe_name(s) for s in students)
        for row in database.students:  # formgrader prints names unescaped: no control, no HTML of theirs
            assert CONTROL.search(row.last_name) is None and not set(row.last_name) & set("<>&\"'")
        for student in students:
            database.find_submission(LESSON.id, nbgrader_safe_name(student))


# A process whose locale is not UTF-8 (an ASCII one: no coercion, no UTF-8 mode): its file names decode as ASCII
# (each other byte a lone surrogate) and its text files default to ASCII.
ASCII_LOCALE = dict(os.environ, LC_ALL="C", LANG="C", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0")
IN_ASCII_LOCALE = """
import json, sys
from pathlib import Path
from autograder.commands.planning import discover
from autograder.commands.similarity import Pair
from autograder.lesson.assignment import default
from autograder.reports import similarity_report

class_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
students = [student for student, _ in discover(class_dir, contract=default().contract)]
pairs = [Pair(a, b, 0.5, 0.25, (("heads", 0.5),)) for a, b in zip(students, students[1:])]
similarity_report.write(pairs, students, out)
print(json.dumps([sys.getfilesystemencoding(), students]))
"""


@pytest.mark.slow
def test_ids_and_the_similarity_report_are_the_same_in_a_locale_that_is_not_utf8(graded_class, tmp_path):
    """A folder's id is read from its name's bytes as UTF-8 whatever the process's locale (else ``é`` would be
    graded as ``/C3/A9`` on one machine and ``é`` on another: two students across shards or a --resume), and
    ``similarity`` links ``report.md`` (UTF-8, its ids non-ASCII) without reading it in the locale's encoding."""
    results, out, _, _ = graded_class
    report = (out / "report.md").read_bytes()
    (tmp_path / "report.md").write_bytes(report)
    done = subprocess.run([sys.executable, "-c", IN_ASCII_LOCALE, str(out.parent / "class"), str(tmp_path)],
                          env=ASCII_LOCALE, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    encoding, students = json.loads(done.stdout.splitlines()[-1])
    assert encoding == "ascii", "the child's file names are decoded as ASCII"
    assert students == sorted(results), "the ids of a UTF-8 machine"
    assert (tmp_path / "report.md").read_bytes() == report + similarity_report.link(tmp_path).encode()
    assert_text_report(tmp_path / "similarity.md")
    with open(tmp_path / "similarity.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(csv_cells.original(row["student_a"]), csv_cells.original(row["student_b"])) for row in rows] == list(
        zip(students, students[1:]))
