"""The notebook's checks, judged in the judge: each source check run in a namespace of the notebook's names
fetched as data; its verdict and the reason the student reads (never the hidden lines' text)."""

import builtins
import copy

from ..judge.failures import SubmissionFailure, bounded, public_type
from ..worker import protocol
from .names import TRUSTED_MODULES, NotData, NotebookFunction, is_plain, trusted_module


REASON_LIMIT = 300


def one_line(text):
    """``text`` as one bounded line: the reason a student reads under a check."""
    return bounded(" ".join(str(text).split()), REASON_LIMIT)


def _namespace_value(runner, name, value):
    """What a notebook name becomes in a check's namespace: data, a trusted module, a function proxy, or NotData."""
    if isinstance(value, protocol.Handle):
        if value.type == "function":
            return NotebookFunction(runner, value.id, name)
        if value.type.startswith("module ") and value.type[len("module "):] in TRUSTED_MODULES:
            return trusted_module(value.type[len("module "):])
        return NotData(f"{name} (a module)", runner.touched)
    if isinstance(value, protocol.Unsupported):
        kind = public_type([value.type], "an object of a class of its own")
        return NotData(f"{name} ({kind})", runner.touched)
    if not is_plain(value):
        return NotData(name, runner.touched)
    return value


def run_checks(runner, assignment):
    """``{grade_id: (passed, reason)}``; the reason names what failed, never a hidden test's code or values."""
    wanted = sorted({name for check in assignment.checks.values() for name in check.names})
    fetched, failure = {}, None
    try:
        values = runner.request({"op": "names", "names": wanted}, "reading the notebook's answers")
        fetched = values if isinstance(values, dict) else {}
    except SubmissionFailure as error:
        failure = error
    verdicts = {}
    for grade_id, check in assignment.checks.items():
        if failure is not None or runner.stopped:
            verdicts[grade_id] = (False, one_line(runner.stopped or failure.summary))
            continue
        runner.touched.clear()
        verdicts[grade_id] = _judge(check, check_namespace(runner, check, fetched), runner)
    return verdicts


def check_namespace(runner, check, fetched):
    """The namespace ``check`` runs in: the judge's builtins, and of the worker's reply only the names the check
    declared (``check.names``: never a builtin or dunder name), so a reply that answers for names nobody asked
    (``abs``, ``isinstance``, ``__builtins__``) shadows nothing."""
    namespace = {"__builtins__": builtins, "__name__": "check"}
    for name in check.names:
        if name in fetched and name not in namespace:
            value = fetched[name]
            namespace[name] = _namespace_value(runner, name, copy.deepcopy(value) if is_plain(value) else value)
    return namespace


def _judge(check, namespace, runner):
    filename = check.filename
    try:
        exec(check.code, namespace)  # noqa: S102 - the instructor's own test code, compiled once
        return True, ""
    except BaseException as error:  # noqa: BLE001 - any failure of a check is a failed check, never a crash
        line = None
        tb = error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        hidden = line in check.hidden_lines
        if runner.touched:
            return False, one_line(f"{runner.touched[0]} is not plain data (numbers, strings, booleans, tensors "
                                  "and lists, tuples or dicts of them): the check cannot use it")
        if isinstance(error, SubmissionFailure):
            return False, one_line(f"What happened: {error.summary}")
        if hidden:
            return False, "A further check of this answer, not shown in the notebook, did not pass."
        if isinstance(error, AssertionError):
            message = str(error.args[0]) if error.args and isinstance(error.args[0], str) else ""
            return False, one_line(f"The notebook's check did not pass: {message}" if message
                                  else "The notebook's check for this answer did not pass.")
        if isinstance(error, NameError) and error.name and error.name in check.visible_text:
            return False, one_line(f"{error.name} is not defined in your notebook")
        return False, one_line(f"The check could not use your answer ({public_type([type(error).__name__])}).")
