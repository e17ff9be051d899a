"""The one public API for lessons: what a lesson's hidden tests, conftest, hooks, public checks, stand-ins, catalogue
tools and lesson tests may import from the kit (``from autograder.lesson_api import graded, Gates, ...``).

Public, and kept stable:

- the rubric: ``graded`` (a hidden test's points, concept, visibility, topic), ``NotChecked`` (not checked yet,
  charged to another part), ``Symptom`` (a failure in the check's own words), ``WrongShape`` and ``shape_symptom``;
- what a student's code can do to a check: ``SubmissionFailure`` and its kinds ``StudentError`` (the code raised),
  ``ImportFailure``, ``WorkerCrash``, ``CallTimeout``, ``SubmissionTimeout``, ``ForbiddenCall``, ``BadValue``;
  ``Unplanned`` (a call made while a check is planned);
- values from the worker: ``Handle`` (an object kept in the worker), ``Unsupported`` (a value it cannot send),
  ``device_of`` (the device a tensor was on there);
- the lesson: ``load`` (its descriptor, assignment.toml), ``load_reference`` (the trusted reference package),
  ``load_module`` (one trusted file as a module), ``load_catalogue`` (bugs, variants, hostile entries), ``build``
  (one catalogue entry made into a submission folder) and ``copy_package`` (the reference or the release copied);
  ``open_submission`` (a submission behind a sandboxed worker,
  for running hidden tests by hand);
- figures for hooks: ``heatmap`` and ``attention_maps``;
- engine helpers: ``Gates`` (dependency gates: ``needs``, ``first``, stand-ins), and the CPU-time checks ``allowance``,
  ``Yardstick``, ``cpu_of_call``, ``within_cpu``.

Everything else in ``autograder.*`` is private to the engine and may move or change in any release;
``tests/test_lesson_api.py`` checks that every lesson imports only this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .judge.ahead import Unplanned
from .judge.cpu_checks import Yardstick, allowance, cpu_of_call, within_cpu
from .judge.failures import (BadValue, CallTimeout, ForbiddenCall, ImportFailure, StudentError, SubmissionFailure,
                              SubmissionTimeout, WorkerCrash)
from .judge.gates import Gates
from .judge.rubric import NotChecked, Symptom, WrongShape, graded, shape_symptom
from .lesson.assignment import load
from .lesson.catalogue import build, copy_package, load_catalogue
from .lesson.reference import load_module, load_reference
from .worker.protocol import Handle, Unsupported, device_of

if TYPE_CHECKING:  # resolved on first use, below
    from .judge.grade import open_submission
    from .reports.figures import attention_maps, heatmap

__all__ = [
    "graded", "NotChecked", "Symptom", "WrongShape", "shape_symptom",
    "SubmissionFailure", "StudentError", "ImportFailure", "WorkerCrash", "CallTimeout", "SubmissionTimeout",
    "ForbiddenCall", "BadValue", "Unplanned",
    "Handle", "Unsupported", "device_of",
    "load", "load_reference", "load_module", "load_catalogue", "build", "copy_package", "open_submission",
    "attention_maps", "heatmap",
    "Gates", "allowance", "Yardstick", "cpu_of_call", "within_cpu",
]

# Resolved on first use: the judge's grading machinery and the reports' figures cost a process that only loads a
# lesson's public checks or hooks a few hundred milliseconds it may never need.
_LAZY = {"open_submission": "autograder.judge.grade", "attention_maps": "autograder.reports.figures",
         "heatmap": "autograder.reports.figures"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'autograder.lesson_api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
