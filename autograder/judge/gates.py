"""Dependency gates: a check that fails because a part it builds on is broken is charged to that part, once.

A lesson names its gates (``parts``: gate name -> the function it tries, the concept charged when it fails, and a
probe). A probe is one ordinary call of its part, as the code built on it makes it: it returns None when the part
works, ``(topic, reason)`` when it fails in a way of its own; an ``AssertionError`` means "returns the wrong shape",
a :class:`~.failures.SubmissionFailure` "raises an error". Gates are tried only when a check fails, once per student
(and set of stand-ins). A check of other code that uses a broken part with a stand-in (the lesson's recipe,
``stand_ins.py``) is graded again with the stand-in in its place, so the student's own code earns or loses its points
by itself (:meth:`Gates.graded_on_its_own`). Trusted code: it runs in the judge, never in a worker.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from .failures import ForbiddenCall, ImportFailure, SubmissionFailure, SubmissionTimeout
from .rubric import NotChecked

Problem = tuple[str, str, str]  # (part, topic, reason)


class Gates:
    """One lesson's gates (see the module docstring); a hidden-test helper module builds one and its checks use
    :meth:`needs` (a decorator) or :meth:`first` (a context manager)."""

    def __init__(self, parts: Mapping[str, tuple[str, str, Callable]], stand_ins: str | Path | None = None,
                 stand_in_parts: Iterable[str] = ()):
        self.parts = dict(parts)
        self.stand_in_parts = tuple(stand_in_parts)
        if self.stand_in_parts and stand_ins is None:
            raise ValueError("stand_in_parts need the stand_ins file that defines them")
        self.stand_ins = None if stand_ins is None else Path(stand_ins)
        self._source = None if stand_ins is None else self.stand_ins.read_text(encoding="utf-8")
        # student -> {(gate, stand-ins in use): None or (part, topic, reason)}: each gate tried once
        self._known: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._recipes: dict[str, Callable] = {}
        self._sources: dict[str, str] = {}

    @property
    def source(self) -> str:
        """The stand-ins file's text (the whole recipe, as the lesson wrote it)."""
        if self._source is None:
            raise ValueError("this lesson has no stand-ins")
        return self._source

    def recipe(self, name: str) -> Callable:
        """The stand-in for ``name``, run here in the judge: what a working part gives."""
        if name not in self._recipes:
            namespace = {"__name__": "stand_ins"}
            exec(compile(self.source, "stand_ins.py", "exec"), namespace)  # noqa: S102 - the lesson's own file
            self._recipes[name] = namespace[name]
        return self._recipes[name]

    def stand_in_source(self, name: str) -> str:
        """The source of the stand-in for ``name`` alone (the file's imports, then that function): a worker is sent
        only the part it stands in for."""
        if name not in self._sources:
            tree = ast.parse(self.source)
            imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
            function = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name)
            self._sources[name] = "\n".join(ast.get_source_segment(self.source, node)
                                            for node in (*imports, function)) + "\n"
        return self._sources[name]

    def broken(self, student, gate: str, standing: Iterable[str] | None = None) -> Problem | None:
        """``(part, topic, reason)`` when ``gate`` fails (its part raises, returns the wrong shape, or fails the
        probe's own test), else None; tried with stand-ins for the parts ``standing`` (by default those in use now).
        A forbidden API, a file that does not import and a submission out of CPU time are no broken part: every
        check they reach fails as itself, with its own words."""
        known = self._known.setdefault(student, {})
        standing = tuple(sorted(getattr(student, "stand_ins", None) or () if standing is None else standing))
        key = (gate, standing)
        if key not in known:
            part, topic, probe = self.parts[gate]
            alone = getattr(student, "alone", contextlib.nullcontext)
            try:
                with alone(), self._standing(student, standing):  # a gate's own calls, never a planned call's answers
                    problem = probe(student)
                known[key] = None if problem is None else (part, *problem)
            except (ForbiddenCall, ImportFailure, SubmissionTimeout):
                known[key] = None
            except AssertionError:
                known[key] = part, topic, "returns the wrong shape (see its shape check)"
            except SubmissionFailure as failure:  # its summary: the judge's words, the error's type and line
                known[key] = part, topic, f"raises an error (see its own checks): {failure.summary}"
        return known[key]

    def _standing(self, student, parts) -> contextlib.AbstractContextManager:
        """The block runs with the stand-ins for ``parts`` (none: as it is)."""
        if not parts:
            return contextlib.nullcontext()
        return student.standing_in({part: self.stand_in_source(part) for part in sorted(parts)})

    def graded_on_its_own(self, student, gates: tuple[str, ...], own: tuple[str, ...], check: Callable[[], object]):
        """``check()``, for a check of the functions ``own`` that needs what ``gates`` try to work.

        When it fails and a gate of another function fails (a broken helper with a stand-in), it is graded again
        with that part's stand-in in place of the student's: the helper pays only in its own checks. A gate of
        ``own`` that fails (with those stand-ins) means the check's own idea was not checked yet:
        :class:`~.rubric.NotChecked`, charged to that gate's concept, and the feedback names the part to fix first.
        Its points are never earned unchecked, so breaking a part never buys another part's points."""
        try:
            return check()
        except Exception as error:
            if getattr(student, "planning", False):  # planning a table's calls: no gate is tried
                raise
            problems = [problem for problem in (self.broken(student, gate) for gate in gates) if problem]
            others = {part for part, _, _ in problems if part not in own and part in self.stand_in_parts}
            if others and getattr(student, "standing_in", None) is not None:
                with self._standing(student, others):
                    try:
                        return check()
                    except NotChecked:
                        raise
                    except Exception as again:
                        for gate in gates:
                            problem = self.parts[gate][0] in own and self.broken(student, gate, others)
                            if problem:
                                raise NotChecked(*problem) from again
                        raise
            if problems and not isinstance(error, NotChecked):
                raise NotChecked(*problems[0]) from error
            raise

    def own_of(self, gates: tuple[str, ...], own: str | Iterable[str] | None = None) -> tuple[str, ...]:
        """The functions a check grades: ``own`` (a name or names), else the function of its last gate."""
        if own is None:
            return (self.parts[gates[-1]][0],)
        return (own,) if isinstance(own, str) else tuple(own)

    @contextlib.contextmanager
    def first(self, student, *gates: str) -> Iterator[None]:
        """A block whose concept needs what ``gates`` try to work, every gate its own function's: when it fails and
        one of them fails, it is not checked (:class:`~.rubric.NotChecked`, charged to that gate's concept). A check
        that uses other functions' parts uses :meth:`needs` instead, which grades it with stand-ins for them."""
        try:
            yield
        except NotChecked:
            raise
        except Exception as error:
            if getattr(student, "planning", False):  # planning a table's calls: no gate is tried
                raise
            for gate in gates:
                problem = self.broken(student, gate)
                if problem:
                    raise NotChecked(*problem) from error
            raise

    def needs(self, *gates: str, own: str | Iterable[str] | None = None) -> Callable[[Callable], Callable]:
        """Decorate a check ``check(student, ...)`` whose concept needs what ``gates`` try to work and which grades
        the functions ``own`` (by default its last gate's): it runs under :meth:`graded_on_its_own`."""
        mine = self.own_of(gates, own)

        def decorate(check):
            @functools.wraps(check)  # keeps the signature pytest reads (a case table's included)
            def run(student, *args, **kwargs):
                return self.graded_on_its_own(student, gates, mine, lambda: check(student, *args, **kwargs))

            return run

        return decorate
