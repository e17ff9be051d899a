"""The hidden tests, collected once per judge and run against one submission after another.

pytest collects them (imports ``check_*.py``, reads every ``@graded`` mark and
parametrization) once; each submission then costs only the test functions
themselves, called directly with the two fixtures the hidden tests may ask for
(``student`` and ``reference``). A pytest session per submission would cost
more than grading it (configuration, collection, a setup/call/teardown report
per test).

Every call's outcome is captured as a value (:class:`Outcome`), a failing
assertion, a student's failure, a skip and a grader-side crash alike, the way
pytest's ``CallInfo`` does.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from ..errors import KitError
from .remote import RemoteObject
from .rubric import RubricEntry, rubric_entry
from ..worker.contract import Contract

FIXTURES = ("student", "reference")  # all the judge provides; a hidden test asking for more is a grader problem
# Marks the judge honours; others (skip, xfail, usefixtures) would be silently ignored, so they are refused.
MARKS = {"graded", "parametrize", "hypothesis"}
AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
# What a hidden test may do with a student object besides calling it (its forward): the proxy's own methods. Any
# other attribute (``model.encode(x)``, ``model.weight``) would fail each student as a crashed check.
PROXY_METHODS = tuple(sorted(name for name in vars(RemoteObject) if not name.startswith("_")))
PROXY_MAKERS = ("child", "to")  # proxy methods whose answer is a student object again


@dataclass(frozen=True)
class Case:
    """One collected hidden test: its rubric entry, its function and what to call it with."""

    entry: RubricEntry
    function: Callable[..., Any]
    fixtures: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """How one call of a hidden test ended: ``"passed"``, ``"failed"`` or ``"skipped"``."""

    state: Literal["passed", "failed", "skipped"]
    error: BaseException | None = None  # what a failed call raised
    reason: str = ""  # why a skipped call was skipped


def pytest_args(hidden_dir: Path) -> list[str]:
    """Arguments for pytest over the hidden tests in ``hidden_dir`` (their own pytest.ini, no cache)."""
    args = [str(hidden_dir), "-c", str(hidden_dir / "pytest.ini"), "--rootdir", str(hidden_dir), "-q",
            "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    # unraisableexception: its two full garbage collections at the session's end cost a judge ~0.2 s; the collection
    # session runs no test, so nothing is left for it to catch.
    for unused in ("cacheprovider", "junitxml", "pastebin", "doctest", "legacypath", "stepwise", "lfplugin",
                   "unraisableexception"):
        args += ["-p", f"no:{unused}"]
    return args


@contextlib.contextmanager
def _no_plugin_autoload():
    """pytest without the plugins installed packages register (hypothesis' alone costs ~1 s at session end): the
    judge calls the collected functions itself, so no plugin would run anyway."""
    before = os.environ.get(AUTOLOAD)
    os.environ[AUTOLOAD] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[AUTOLOAD]
        else:
            os.environ[AUTOLOAD] = before


class _Collector:
    """pytest plugin: turns each collected item into a :class:`Case` (or a problem)."""

    def __init__(self):
        self.cases, self.problems = [], []

    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            try:
                self.cases.append(self._case(item))
            except ValueError as error:
                self.problems.append(str(error))

    def pytest_collectreport(self, report):
        if report.failed:
            self.problems.append(f"could not collect {report.nodeid or 'the hidden tests'}: "
                                 f"{_last_line(str(report.longrepr))}")

    @staticmethod
    def _case(item):
        entry = rubric_entry(item)
        params = dict(item.callspec.params) if hasattr(item, "callspec") else {}
        # pytest lists its own ``request`` for every test; it matters only when the test's signature asks for it.
        wanted = set(item.fixturenames) - {"request"} | set(inspect.signature(item.obj).parameters) & {"request"}
        unknown = sorted(wanted - set(FIXTURES) - set(params))
        if unknown:
            raise ValueError(f"hidden test {item.nodeid} asks for {', '.join(unknown)}; the judge provides only "
                             f"{' and '.join(FIXTURES)}")
        marks = sorted({mark.name for mark in item.iter_markers()} - MARKS)
        if marks:
            raise ValueError(f"hidden test {item.nodeid} carries marks the judge does not apply: {', '.join(marks)}")
        fixtures = tuple(name for name in item.fixturenames if name in FIXTURES)
        return Case(entry, item.obj, fixtures, params)


def _last_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of a pytest report (``E   SyntaxError: ...``), bounded: one line for an error."""
    lines = [line.strip().removeprefix("E").strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "no detail")[:limit]


class HiddenSuite:
    """The collected hidden tests. ``run(fixtures)`` calls each one and returns its outcome."""

    def __init__(self, cases: list[Case] | tuple[Case, ...], problems: list[str] | tuple[str, ...] = ()) -> None:
        self.cases, self.problems = tuple(cases), tuple(problems)

    @classmethod
    def collect(cls, hidden_dir: Path, reference: Any = None, contract: Contract | None = None) -> HiddenSuite:
        """Collect (import, never run) the hidden tests in ``hidden_dir``. With the lesson's ``contract``, each of
        its classes must be an ``nn.Module`` with a forward in ``reference``; no test may read a student object's
        attribute the judge cannot reach. Either is a problem of the suite, found here, once."""
        collector = _Collector()
        classes = contract.classes if contract is not None else frozenset()
        collector.problems += class_problems(reference, contract) if reference is not None and contract else []
        collector.problems += proxy_problems(hidden_dir, classes)
        sink = io.StringIO()
        before = set(sys.modules)
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), _no_plugin_autoload():
            code = pytest.main(pytest_args(hidden_dir) + ["--collect-only"], plugins=[collector])
        problems = list(collector.problems)
        if problems:  # pytest keeps a module that failed half-way: the next collection would take it as fine
            folder = str(Path(hidden_dir).resolve())
            for name in set(sys.modules) - before:
                if str(getattr(sys.modules[name], "__file__", None) or "").startswith(folder):
                    del sys.modules[name]
        if code not in (0, pytest.ExitCode.NO_TESTS_COLLECTED) and not problems:
            problems.append(f"pytest could not collect the hidden tests (exit code {int(code)}): "
                            f"{_last_line(sink.getvalue())}")
        return cls(collector.cases, problems)

    @property
    def entries(self) -> list[RubricEntry]:
        """The rubric entries, in collection order."""
        return [case.entry for case in self.cases]

    @property
    def topics(self) -> dict[str, str]:
        """``{test id: concept key}``."""
        return {case.entry.id: case.entry.topic for case in self.cases}

    def run(self, fixtures: dict[str, Any]) -> list[tuple[Case, Outcome]]:
        """``[(case, Outcome)]`` for every case, called with ``fixtures`` (``{"student": ..., "reference": ...}``)."""
        outcomes = []
        # A hidden test's prints (hypothesis reports, say) must not reach the judge's stdout: it is a channel.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for case in self.cases:
                outcomes.append((case, call(case, fixtures)))
        return outcomes


def check_key(case: Case) -> tuple[str, str, str]:
    """The name a running hidden test goes by in its ``student``'s records (``checking``): as unique as pytest's
    node id."""
    return case.function.__module__, case.function.__qualname__, case.entry.id


def call(case: Case, fixtures: dict[str, Any]) -> Outcome:
    """Call one hidden test; its outcome as a value, whatever it raised."""
    kwargs = {name: fixtures[name] for name in case.fixtures}
    kwargs.update(case.params)
    # The test, named as uniquely as pytest's node id, names its plans (judge/ahead.py).
    checking = getattr(fixtures.get("student"), "checking", None)
    test = check_key(case)
    try:
        with checking(test) if checking is not None else contextlib.nullcontext(), _calls_ahead(case.function, kwargs):
            case.function(**kwargs)
    except pytest.skip.Exception as skip:
        return Outcome("skipped", reason=str(skip.msg or "skipped"))
    except (Exception, pytest.fail.Exception) as error:  # noqa: BLE001 - every failure is an outcome
        return Outcome("failed", error=error)
    return Outcome("passed")


@contextlib.contextmanager
def _calls_ahead(function: Callable[..., Any], kwargs: dict[str, Any]) -> Iterator[None]:
    """Within the block, the calls ``function`` makes before it reads an answer go to the worker together, when
    its ``student`` plans calls (:mod:`.ahead`): one turn between judge and worker instead of one a call. A table
    of cases plans its own (its ``cases``), a hypothesis test none (its examples are drawn as it runs)."""
    student = kwargs.get("student")
    ahead = getattr(student, "calls_ahead", None)
    if ahead is None or getattr(function, "cases", None) is not None or hasattr(function, "hypothesis"):
        yield
        return
    with ahead([lambda planner: function(**dict(kwargs, student=planner))], key="the whole check") as turn:
        if turn is not None:
            turn(0)
        yield


def collect_rubric(hidden_dir: Path, assignment: Any = None) -> list[RubricEntry]:
    """The rubric entries of every hidden test, in order, without running any of them; a one-line KitError when
    any cannot be collected. With the ``assignment`` (an Assignment), its classes are checked too (see
    :meth:`HiddenSuite.collect`)."""
    if assignment is None:
        suite = HiddenSuite.collect(hidden_dir)
    else:
        from ..lesson.reference import load_reference

        suite = HiddenSuite.collect(hidden_dir, load_reference(assignment), assignment.contract)
    if suite.problems:
        raise KitError(f"the hidden tests in {hidden_dir} could not all be collected: {suite.problems[0]}"
                       + (f" (and {len(suite.problems) - 1} more)" if len(suite.problems) > 1 else ""))
    return suite.entries


def class_problems(reference: Any, contract: Contract) -> list[str]:
    """The contract's classes that are no ``torch.nn.Module`` with a forward of its own in ``reference`` (the
    package; each read from its own file): the worker builds a student's instance and calls only its ``forward``,
    so such a class would fail every student (as a device or value problem) instead of this one line."""
    import importlib

    import torch

    problems = []
    for name in sorted(contract.classes):
        try:
            module = importlib.import_module(f"{reference.__name__}.{contract.names[name]}")
        except ImportError:
            module = reference
        made = getattr(module, name, None)
        if not (isinstance(made, type) and issubclass(made, torch.nn.Module)
                and made.forward is not torch.nn.Module.forward):
            problems.append(f"class {name} (the descriptor's classes) is not a torch.nn.Module with its own forward "
                            "in the reference: the judge calls a student object's forward only (docs/authoring.md)")
    return problems


def proxy_problems(hidden_dir: Path, classes: frozenset[str] | tuple[str, ...] = ()) -> list[str]:
    """Uses of a student object's attribute the proxy lacks, in every module of ``hidden_dir``: a name bound to
    ``student.new(...)``, ``student.<class>(...)`` (a name in ``classes``, or capitalised when none are known),
    or a proxy's ``child``/``to``, then read as ``name.other``. Read from the source (trusted), per function."""
    problems = []
    for path in sorted(Path(hidden_dir).rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # pytest reports it, with its own line
        for function in (node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node, name in _proxy_attributes(function, classes):  # a nested function is walked twice: once said
                problems.append(f"{path.name} line {node.lineno} uses {name} on a student object: its proxy is "
                                f"called for forward (obj(...)) and offers only {', '.join(PROXY_METHODS)} "
                                "(docs/authoring.md, The student object)")
    return list(dict.fromkeys(problems))


def _proxy_attributes(function: ast.AST, classes: frozenset[str] | tuple[str, ...]) -> Iterator[tuple[ast.AST, str]]:
    """``(node, "obj.name")`` for each attribute outside :data:`PROXY_METHODS` read on a student object."""
    proxies: set[str] = set()

    def is_proxy(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in proxies
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return False
        owner, attribute = node.func.value, node.func.attr
        if isinstance(owner, ast.Name) and owner.id == "student":
            return attribute == "new" or (attribute in classes if classes else attribute[:1].isupper())
        return attribute in PROXY_MAKERS and is_proxy(owner)

    # In source order, so a name is a proxy after the line that binds it (a later rebinding to other data ends it).
    for node in sorted((node for node in ast.walk(function) if hasattr(node, "lineno")),
                       key=lambda node: ((node.end_lineno, 1, 0) if isinstance(node, ast.Assign)
                                         else (node.lineno, 0, node.col_offset))):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            (proxies.add if is_proxy(node.value) else proxies.discard)(node.targets[0].id)
        elif isinstance(node, ast.Attribute) and node.attr not in PROXY_METHODS and not node.attr.startswith("__") \
                and is_proxy(node.value):
            yield node, ast.unparse(node)[:80]
