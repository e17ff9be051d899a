"""The one result record per student, in Gradescope's ``results.json`` form.

Frozen dataclasses with ``to_json`` / ``from_json`` and no rendering: every
report (gradebook, feedback, class report, Classroom, Gradescope) is a view
computed from these records.
"""

import json
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


@dataclass(frozen=True)
class TestResult:
    """One rubric line for one student."""

    __test__ = False  # a record, not a pytest test class

    name: str
    group: str
    score: float
    max_score: float
    # "passed", "failed", "pending" (a written answer not graded yet: 0 points so far) or "skipped" (not run on
    # this machine and counted nowhere: 0 of 0)
    status: str
    output: str = ""
    visibility: str = "visible"
    id: str = ""  # the hidden test's function name: stable across renames of its title

    @property
    def counted(self):
        return self.status != "skipped"

    def to_json(self):
        record = {
            "name": self.name,
            "score": self.score,
            "max_score": self.max_score,
            "status": "passed" if self.status == "passed" else "failed",  # Gradescope knows these two
            "output": self.output,
            "visibility": self.visibility,
            "tags": [self.group],
            "extra_data": {"id": self.id, **({"pending": True} if self.status == "pending" else {})},
        }
        if not self.counted:  # Gradescope knows only passed and failed; a 0/0 test without a status is neutral
            del record["status"]
            record["extra_data"]["counted"] = False
        return record

    @classmethod
    def from_json(cls, data):
        tags = data.get("tags") or ["other"]
        extra = data.get("extra_data") or {}
        status = "skipped" if extra.get("counted") is False else str(data.get("status", "failed"))
        status = "pending" if extra.get("pending") else status
        return cls(
            name=str(data["name"]), group=str(tags[0]), score=float(data["score"]),
            max_score=float(data["max_score"]), status=status,
            output=str(data.get("output", "")), visibility=str(data.get("visibility", "visible")),
            id=str(extra.get("id", "")),
        )


@dataclass(frozen=True)
class SubmissionResult:
    """Everything graded for one student; ``notes`` are grader-side remarks (sandbox off, crashes)."""

    student: str
    tests: tuple = ()
    execution_time: float = 0.0
    output: str = ""
    sandbox: str = "bwrap"
    fingerprint: str = ""
    notes: tuple = ()
    extra: dict = field(default_factory=dict)

    @property
    def score(self):
        return round(sum(test.score for test in self.tests), 6)

    @property
    def max_score(self):
        return round(sum(test.max_score for test in self.tests), 6)

    def group_scores(self):
        """``{group: (score, max_score)}`` in first-seen order."""
        groups = {}
        for test in self.tests:
            score, top = groups.get(test.group, (0.0, 0.0))
            groups[test.group] = (round(score + test.score, 6), round(top + test.max_score, 6))
        return groups

    def with_tests(self, tests):
        return replace(self, tests=tuple(tests))

    def to_json(self):
        return {
            "score": self.score,
            "execution_time": round(self.execution_time, 3),
            "output": self.output,
            "tests": [test.to_json() for test in self.tests],
            "extra_data": dict(self.extra, student=self.student, max_score=self.max_score, sandbox=self.sandbox,
                               fingerprint=self.fingerprint, notes=list(self.notes)),
        }

    @classmethod
    def from_json(cls, data):
        extra = dict(data.get("extra_data") or {})
        student = str(extra.pop("student"))
        extra.pop("max_score", None)
        return cls(
            student=student,
            tests=tuple(TestResult.from_json(test) for test in data.get("tests", [])),
            execution_time=float(data.get("execution_time", 0.0)),
            output=str(data.get("output", "")),
            sandbox=str(extra.pop("sandbox", "bwrap")),
            fingerprint=str(extra.pop("fingerprint", "")),
            notes=tuple(str(note) for note in extra.pop("notes", [])),
            extra=extra,
        )


def _umask():
    """This process's umask, read without changing it (Linux reports it in /proc; elsewhere set and restore)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path, text):
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a part; with the mode an
    ordinary file would get (the umask's: ``umask 027`` lets a teaching team's group read the outputs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would keep the team out
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(result, path):
    write_atomic(path, json.dumps(result.to_json(), indent=1, ensure_ascii=False) + "\n")


def load(path):
    return SubmissionResult.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
