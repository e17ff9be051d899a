"""The one public API for lessons (autograder.lesson_api): every lesson imports only it, every lesson still collects
with the engine's private modules hidden, old import paths fail with one line, and the engine's gates work."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import lesson_api, paths
from autograder.lesson_api import Gates, NotChecked, SubmissionFailure, load, allowance, within_cpu

LESSONS = paths.REPO_ROOT / "autograder" / "lessons"
FIXTURES = paths.REPO_ROOT / "tests" / "fixtures"  # the second lesson, which proves the engine takes any lesson
KIT_LESSONS = sorted(path.parent for path in [*LESSONS.glob("*/assignment.toml"), *FIXTURES.glob("*/assignment.toml")])


def _autograder_imports(path: Path):
    """``(line, module)`` of every absolute ``autograder`` import in ``path`` (lazy ones included)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module] if node.module != "autograder" else [f"autograder.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        yield from ((node.lineno, name) for name in names if name.split(".")[0] == "autograder")


def test_every_lesson_and_lesson_test_imports_only_the_public_api():
    files = [*LESSONS.rglob("*.py"), *FIXTURES.rglob("*.py"), *paths.REPO_ROOT.glob("solutions/*/tests/*.py")]
    assert KIT_LESSONS and len(files) > 10
    private = [f"{path.relative_to(paths.REPO_ROOT)}:{line}: {name}" for path in files
               for line, name in _autograder_imports(path)
               if name != "autograder.lesson_api" and name != "autograder.lessons"
               and not name.startswith("autograder.lessons.")]
    assert private == []


def test_the_public_names_are_all_there_and_nothing_more():
    assert sorted(lesson_api.__all__) == sorted(set(lesson_api.__all__))
    for name in lesson_api.__all__:
        assert getattr(lesson_api, name) is not None, name
    with pytest.raises(AttributeError):
        lesson_api.RemoteSubmission  # noqa: B018 - engine internals are not re-exported


# ---------------------------------------------------------------- every lesson, through the public API alone

HIDDEN = r'''
import importlib, importlib.util, json, sys, types
from pathlib import Path

mode, lessons = sys.argv[1], json.loads(sys.argv[2])
import autograder.lesson_api
from autograder.lesson_api import *  # noqa: F403 - every public name resolved (the lazy ones too)
import pytest

def allowed(name):
    return name in ("autograder", "autograder.lesson_api", "autograder.lessons") or name.startswith("autograder.lessons.")

class Hidden(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):  # what tools ask of any module (inspect's __file__): absent, as for a builtin
            raise AttributeError(attr)
        raise ImportError(f"{self.__name__} is private to the engine")

class Refuse:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.startswith("autograder.") and not allowed(name):
            raise ModuleNotFoundError(f"{name} is private to the engine")
        return None

if mode == "hide":
    import autograder
    for name in [name for name in sys.modules if name.startswith("autograder.") and not allowed(name)]:
        sys.modules[name] = Hidden(name)
    for attr in [attr for attr, value in vars(autograder).items()
                 if isinstance(value, types.ModuleType) and attr not in ("lesson_api", "lessons")]:
        delattr(autograder, attr)
    sys.meta_path.insert(0, Refuse)

def module_of(path):
    """Import ``path`` as the module its packages make it (a loose file: by its own name)."""
    root = path.parent
    while (root / "__init__.py").exists():
        root = root.parent
    parts = path.relative_to(root).with_suffix("").parts
    if len(parts) > 1:
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        return importlib.import_module(".".join(parts))
    spec = importlib.util.spec_from_file_location(f"loose_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

class Count:
    items = None
    def pytest_collection_finish(self, session):
        self.items = len(session.items)

found = {}
for lesson in lessons:
    imported = [module_of(Path(path)).__name__ for path in lesson["files"]]
    count = Count()
    rc = pytest.main(["--collect-only", "-q", "-c", lesson["ini"], lesson["hidden"]], plugins=[count])
    found[lesson["id"]] = {"rc": int(rc), "items": count.items, "imported": len(imported)}
print("RESULT " + json.dumps(found))
'''


def _lesson(folder: Path) -> dict:
    """What the script needs of one lesson: every Python file of it but the reference's, and its hidden tests."""
    assignment = load(folder)
    files = [path for path in sorted(folder.rglob("*.py"))
             if not path.is_relative_to(assignment.solutions) and "__pycache__" not in path.parts]
    return {"id": assignment.id, "files": [str(path) for path in files], "hidden": str(assignment.hidden_tests),
            "ini": str(assignment.hidden_tests / "pytest.ini")}


def _collect(tmp_path: Path, mode: str, lessons: list[dict]) -> dict:
    script = tmp_path / "hidden_engine.py"
    script.write_text(HIDDEN, encoding="utf-8")
    run = subprocess.run([sys.executable, str(script), mode, json.dumps(lessons)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    result = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and result, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(result[-1].removeprefix("RESULT "))


def _same_with_the_engine_hidden(tmp_path, lessons):
    plain, hidden = _collect(tmp_path, "plain", lessons), _collect(tmp_path, "hide", lessons)
    for lesson in lessons:
        assert plain[lesson["id"]]["rc"] == 0 and plain[lesson["id"]]["items"], plain
        assert hidden[lesson["id"]] == plain[lesson["id"]], (hidden, plain)


def test_every_kit_lesson_collects_through_the_public_api_alone(tmp_path):
    lessons = [_lesson(folder) for folder in KIT_LESSONS]
    assert {"mha_pe", "vector_norms"} <= {lesson["id"] for lesson in lessons}
    _same_with_the_engine_hidden(tmp_path, lessons)


def test_the_new_lesson_skeleton_collects_through_the_public_api_alone(tmp_path):
    folder = tmp_path / "demo1"
    made = subprocess.run([sys.executable, "-m", "autograder", "new-lesson", "demo1", "--to", str(folder)],
                          cwd=paths.REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    _same_with_the_engine_hidden(tmp_path, [_lesson(folder)])


# ---------------------------------------------------------------- old import paths: one line naming the new one

@pytest.mark.parametrize(("old", "name"), [("autograder.rubric", "graded"), ("autograder.assignment", "load"),
                                           ("autograder.mutants", "build"), ("autograder.catalogue", "load_catalogue")])
def test_an_old_import_path_fails_with_one_line_naming_the_new_one(old, name):
    package, _, module = old.rpartition(".")
    for statement in (f"import {old}", f"from {package} import {module}", f"from {old} import {name}"):
        run = subprocess.run([sys.executable, "-c", statement], cwd=paths.REPO_ROOT, capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 1
        assert run.stderr.splitlines()[-1] == (f"ModuleNotFoundError: {old} moved: import {name} from "
                                               "autograder.lesson_api"), statement


def test_a_module_that_never_existed_is_still_an_ordinary_error():
    with pytest.raises(ModuleNotFoundError, match="No module named 'autograder.no_such_module'"):
        __import__("autograder.no_such_module")


# ---------------------------------------------------------------- the gates, on a tiny fake student

class Student:
    """A submission in the judge's hands, reduced to what the gates read."""

    planning = False

    def __init__(self, f):
        self.f = f


def _gates(probe):
    return Gates({"f": ("f", "f-shape", probe)})


def _wrong_values(student):
    assert student.f() == 2, "values differ"


def test_a_gate_whose_probe_fails_charges_the_check_to_its_part():
    def probe(student):
        assert student.f() == 1, "not its shape"

    gates = _gates(probe)
    check = gates.needs("f")(_wrong_values)
    with pytest.raises(NotChecked) as raised:
        check(Student(lambda: 3))
    assert (raised.value.part, raised.value.topic, raised.value.reason) == (
        "f", "f-shape", "returns the wrong shape (see its shape check)")


def test_a_gate_whose_part_raises_says_so_in_the_judges_words():
    class Raised(SubmissionFailure):
        summary = "f raised ValueError"

    def probe(student):
        raise Raised()

    with pytest.raises(NotChecked) as raised:
        _gates(probe).needs("f")(_wrong_values)(Student(lambda: 3))
    assert raised.value.reason == "raises an error (see its own checks): f raised ValueError"


def test_a_passing_gate_leaves_the_checks_own_failure():
    tried = []
    gates = _gates(lambda student: tried.append(student))
    student = Student(lambda: 3)
    with pytest.raises(AssertionError, match="values differ"):
        gates.needs("f")(_wrong_values)(student)
    with pytest.raises(AssertionError, match="values differ"), gates.first(student, "f"):
        _wrong_values(student)
    assert tried == [student]  # tried once per student, then remembered
    assert gates.needs("f")(_wrong_values)(Student(lambda: 2)) is None  # a passing check never tries its gates
    assert tried == [student]


def test_a_gate_may_name_its_own_concept():
    gates = _gates(lambda student: ("f-values", "gives other values"))
    assert gates.broken(Student(lambda: 3), "f") == ("f", "f-values", "gives other values")


def test_stand_ins_are_read_from_the_lessons_file(tmp_path):
    stand_ins = tmp_path / "stand_ins.py"
    stand_ins.write_text("import math\n\n\ndef f(x):\n    return math.sqrt(x)\n\n\ndef g():\n    return 1\n")
    gates = Gates({"f": ("f", "f-shape", lambda student: None)}, stand_ins, ["f"])
    assert gates.recipe("f")(9) == 3.0
    assert gates.stand_in_source("f") == "import math\ndef f(x):\n    return math.sqrt(x)\n"
    with pytest.raises(ValueError, match="stand_in_parts need the stand_ins file"):
        Gates({}, None, ["f"])


# ---------------------------------------------------------------- CPU-time checks

def test_the_allowance_is_a_multiple_of_the_yardstick_within_its_bounds():
    assert allowance(0.004, times=5, floor=0.03, ceiling=0.06) == 0.03
    assert allowance(0.01, times=5, floor=0.03, ceiling=0.06) == 0.05
    assert allowance(1.0, times=5, floor=0.03, ceiling=0.06) == 0.06


def test_within_cpu_measures_again_with_new_arguments_until_one_fits():
    class Measured:
        def __init__(self, seconds):
            self.seconds, self.calls = list(seconds), []

        def cpu_of_call(self, name, *args):
            self.calls.append((name, args))
            return sum(args), self.seconds.pop(0)

    student = Measured([0.9, 0.2, 0.01])
    limits, checked = [], []
    value = within_cpu(student, "table", lambda attempt: (attempt, 10), lambda fresh: limits.append(fresh) or 0.1,
                       tries=3, check=lambda value, args: checked.append((value, args)))
    assert value == 12 and student.calls == [("table", (0, 10)), ("table", (1, 10)), ("table", (2, 10))]
    assert limits == [False, True, True] and checked == [(10, (0, 10)), (11, (1, 10)), (12, (2, 10))]
    with pytest.raises(AssertionError, match="too slow"):
        within_cpu(Measured([0.5, 0.5]), "table", lambda attempt: (), lambda fresh: 0.1, tries=2)


def test_cpu_of_call_measures_an_objects_forward_alone_on_its_worker():
    """The real proxy of a student object (judge/remote.py's RemoteObject) over a stand-in submission."""
    import contextlib
    from types import SimpleNamespace

    from autograder.judge.remote import RemoteObject
    from autograder.lesson_api import cpu_of_call

    class Worker:
        cpu = 1.0

        def precise_cpu(self):
            return self.cpu

    class Submission:
        generation = 0

        def __init__(self):
            self.worker, self.asked, self.alone_now = Worker(), [], False

        def _worker(self, label):
            self.asked.append(label)
            return self.worker

        @contextlib.contextmanager
        def alone(self):
            self.alone_now = True
            yield
            self.alone_now = False

        def request(self, name, label, message):
            assert self.alone_now and label == "Model.forward"
            self.worker.cpu += 0.25
            return 6

    model = RemoteObject(Submission(), SimpleNamespace(id=1), "Model", 0)
    assert cpu_of_call(model, "forward", 3) == (6, 0.25)
    assert cpu_of_call(model, "__call__", 3) == (6, 0.25)
    assert model._submission.asked == ["Model"] * 4
    with pytest.raises(TypeError, match="no CPU time can be measured for RemoteObject.step"):
        cpu_of_call(model, "step", 3)
    with pytest.raises(TypeError, match="no CPU time can be measured for int.forward"):
        cpu_of_call(3, "forward")
