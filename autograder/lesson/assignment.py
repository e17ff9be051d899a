"""An assignment as data: the descriptor (``assignment.toml``) that tells the engine everything about a lesson.

The engine holds no lesson's names. Each lesson is a folder with an ``assignment.toml``
(``autograder/lessons/<id>/`` for the kit's own; any folder for another course): the package students
write, its files and public names, the library calls it forbids, and where its reference, release, hidden
tests, bug catalogue, notebook and optional hooks live. Paths in the file are relative to it.

A descriptor, abridged::

    id = "vector_norms"              # the package students write; nbgrader's course and assignment id
    title = "Vector norms"
    solutions = "solutions/vector_norms"     # the reference package (### BEGIN/END SOLUTION regions)
    release = "assignments/vector_norms"     # where `release` writes the student package
    hidden_tests = "hidden_tests"
    catalogue = "catalogue"          # bugs.toml and variants.toml, for `validate`
    notebook = "questions.ipynb"     # optional: an nbgrader notebook inside the solutions package
    promises = "promises.toml"       # optional: the rules the docstrings state and the tests behind each
                                     # (autograder/lesson/promises.py; `rubric` prints them, the judge never reads them)
    packages = ["torch"]             # what student files may import besides the standard library and their own
                                     # package: top-level names, each also its distribution's name, pinned in
                                     # pyproject.toml (the template's requirements and setup.sh install them)
    forbidden = ["torch.linalg.vector_norm"]
    classes = []                     # public names whose instances stay in the worker

    [files]                          # student files, in the order students write them -> their public names
    norms = ["l2_norm", "normalize"]

    [classroom.prefixes]             # optional: short prefixes of the Classroom steps' ids, per student file
    norms = "norm"

    [classroom]                      # optional
    public_test_seconds = 5          # one run of the public tests, measured (the student README's {seconds})

    [classroom.schedule]             # optional: the student README's {schedule}, each a sentence
    grading = "..."                  # when the instructor's run happens
    submission = "..."               # what counts as the submission
    feedback = "..."                 # how often feedback comes

A lesson's folder may also hold ``student_readme.md``, the Classroom template's README (the placeholders
``classroom.PLACEHOLDERS`` lists are filled in; any other brace stays as written). docs/authoring.md has every key.
"""

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from ..errors import KitError
from .toml_file import read_toml
from ..worker.contract import Contract

DESCRIPTOR = "assignment.toml"
LESSONS_DIR = Path(__file__).resolve().parents[1] / "lessons"
REQUIRED = ("id", "title", "solutions", "release", "hidden_tests", "catalogue", "files")
OPTIONAL = ("notebook", "warm_up", "hooks", "promises", "packages", "forbidden", "classes", "classroom")
CLASSROOM = ("prefixes", "public_test_seconds", "schedule")  # the keys of the optional [classroom] table
SCHEDULE = ("grading", "submission", "feedback")  # the keys of [classroom.schedule]
# What the README says of the schedule when the descriptor does not say it.
DEFAULT_SCHEDULE = {
    "grading": "Your instructor runs the grader after the deadline, once for the whole class.",
    "submission": "What is graded is your repository as it was at your last push before the deadline.",
    "feedback": "Feedback comes with that run: a file per student with your score and what each missed check is "
                "about; the Classroom points come at every push.",
}
DEFAULT_PACKAGES = ("torch",)  # what a descriptor without ``packages`` allows: the engine's own library


@dataclass(frozen=True)
class Assignment:
    """One lesson, read from its descriptor. Paths are absolute."""

    id: str
    title: str
    descriptor: Path
    contract: Contract
    solutions: Path  # the reference package folder
    release: Path  # the generated student package folder
    hidden_tests: Path
    catalogue: Path
    notebook: str | None = None  # file name inside the package
    warm_up: Path | None = None  # trusted source run by each judge's zygote before it forks workers
    hooks: Path | None = None  # a module with the lesson's figures and speed goals
    promises: Path | None = None  # the docstrings' rules and their tests (instructor-side, for the rubric page)
    step_prefixes: dict = field(default_factory=dict)  # module -> short prefix of its Classroom steps' ids
    public_test_seconds: float | None = None  # a run of the public tests, measured (the student README's {seconds})
    schedule: dict = field(default_factory=lambda: dict(DEFAULT_SCHEDULE))  # the README's {schedule} sentences

    @property
    def pages(self) -> Path:
        """Where ``rubric`` and ``figures`` write by default: the kit's ``docs/`` for a lesson under
        ``autograder/lessons/``, else the lesson's own folder (never another lesson's pages)."""
        return LESSONS_DIR.parent.parent / "docs" if self.descriptor.is_relative_to(LESSONS_DIR) else self.folder

    @property
    def folder(self) -> Path:
        """The lesson's own folder (where the descriptor is)."""
        return self.descriptor.parent

    @property
    def student_files(self) -> tuple[str, ...]:
        """``("norms.py", ...)``: the files students write."""
        return tuple(f"{module}.py" for module in self.contract.modules)

    @property
    def package_variable(self) -> str:
        """The environment variable the public tests' conftest reads to find the package (``<ID>_PATH``)."""
        return f"{self.id.upper()}_PATH"

    def source_notebook(self) -> Path | None:
        return self.solutions / self.notebook if self.notebook else None

    def released_notebook(self) -> Path | None:
        return self.release / self.notebook if self.notebook else None

    def grading_inputs(self) -> list[Path]:
        """Every file whose content decides a grade (beyond the engine's code): the reference package's Python
        files, the hidden tests, the lesson folder's Python files (its stand-ins, its hooks), the warm-up, the notebook
        and its release, the descriptor itself."""
        inputs = [self.descriptor, *sorted(self.solutions.rglob("*.py")), *sorted(self.hidden_tests.rglob("*.py"))]
        inputs += [path for path in sorted(self.folder.rglob("*.py")) if path not in inputs]
        inputs += [path for path in (self.warm_up, self.source_notebook(), self.released_notebook()) if path]
        return inputs

    def instructor_folders(self) -> list[Path]:
        """Folders no worker may read: the reference, the hidden tests, the catalogue, the lesson's folder."""
        return [self.solutions, self.hidden_tests, self.catalogue, self.folder]

    def load_hooks(self) -> ModuleType | None:
        """The lesson's hooks module (trusted, the instructor's), or None."""
        if self.hooks is None:
            return None
        name = f"_lesson_hooks_{self.id}"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, self.hooks)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[name] = module
        return sys.modules[name]


def load(path: str | Path) -> Assignment:
    """Read a descriptor (the file, or the folder holding ``assignment.toml``); KitError with one line on any
    problem."""
    path = Path(path).resolve()
    if path.is_dir():
        path = path / DESCRIPTOR
    data = read_toml(path, "assignment descriptor")
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise KitError(f"assignment descriptor {path} lacks {', '.join(missing)}")
    _known(path, "", data, REQUIRED + OPTIONAL)
    here = path.parent

    def place(key):
        return (here / data[key]).resolve() if data.get(key) else None

    files = data["files"]
    classroom = data.get("classroom", {})
    if not isinstance(classroom, dict):
        raise KitError(f"assignment descriptor {path}: [classroom] must be a table")
    _known(path, "classroom.", classroom, CLASSROOM)
    schedule = classroom.get("schedule", {})
    if not isinstance(schedule, dict) or not all(isinstance(value, str) and value.strip() for value in schedule.values()):
        raise KitError(f"assignment descriptor {path}: [classroom.schedule] must be a table of sentences")
    _known(path, "classroom.schedule.", schedule, SCHEDULE)
    packages = data.get("packages", list(DEFAULT_PACKAGES))
    if (not isinstance(packages, list) or not all(isinstance(name, str) and name.isidentifier() for name in packages)
            or "torch" not in packages):
        raise KitError(f"assignment descriptor {path}: packages must be a list of top-level module names, torch "
                       f"among them, got {packages!r}")
    if data["id"] in packages or set(packages) & sys.stdlib_module_names:
        raise KitError(f"assignment descriptor {path}: packages names the standard library or the package itself")
    try:
        contract = Contract(package=str(data["id"]), modules=tuple(files),
                            names={str(name): module for module, names in files.items() for name in names},
                            classes=frozenset(data.get("classes", ())), forbidden=tuple(data.get("forbidden", ())),
                            packages=tuple(packages))
    except (TypeError, ValueError) as error:
        raise KitError(f"assignment descriptor {path}: {error}") from None
    if not str(data["id"]).isidentifier():
        raise KitError(f"assignment descriptor {path}: id must be a Python package name, got {data['id']!r}")
    return Assignment(id=str(data["id"]), title=str(data["title"]), descriptor=path, contract=contract,
                      solutions=place("solutions"), release=place("release"), hidden_tests=place("hidden_tests"),
                      catalogue=place("catalogue"), notebook=data.get("notebook") or None,
                      warm_up=place("warm_up"), hooks=place("hooks"), promises=place("promises"),
                      step_prefixes=dict(classroom.get("prefixes", {})),
                      public_test_seconds=_seconds(path, classroom.get("public_test_seconds")),
                      schedule={**DEFAULT_SCHEDULE, **{key: value.strip() for key, value in schedule.items()}})


def _known(path: Path, prefix: str, table: dict, keys: tuple[str, ...]) -> None:
    """A misspelt key would silently do nothing (``forbiden``): refused by name, in one line."""
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise KitError(f"assignment descriptor {path}: unknown key {', '.join(prefix + key for key in unknown)} "
                       f"(docs/authoring.md lists every key)")


def _seconds(path: Path, value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise KitError(f"assignment descriptor {path}: classroom.public_test_seconds must be a positive number, "
                       f"got {value!r}")
    return float(value)


def default() -> Assignment:
    """The kit's own lesson: the one descriptor under ``autograder/lessons/``."""
    found = sorted(LESSONS_DIR.glob(f"*/{DESCRIPTOR}"))
    if len(found) != 1:
        raise KitError(f"expected one lesson under {LESSONS_DIR}, found {len(found)}: pass --assignment")
    return load(found[0])


def resolve(assignment: "Assignment | str | Path | None") -> Assignment:
    """An Assignment from one, from a descriptor's path, or the kit's own lesson for None."""
    if isinstance(assignment, Assignment):
        return assignment
    return default() if assignment is None else load(assignment)
