"""docs/authoring.md, the lesson author's guide, against the code it describes.

An author learns every key from the guide alone, so a key the engine reads and the guide omits is a key
nobody will know about, and a key the guide lists that the engine ignores is a silent trap. Each accepted key
is derived from the code (its source parsed with ``ast``, or its signature and constants imported), never from
a list written here. Nothing is graded and no torch-heavy work runs.
"""

import ast
import dataclasses
import functools
import inspect
import re

import pytest

from autograder import paths

GUIDE = paths.REPO_ROOT / "docs" / "authoring.md"
ENGINE = paths.REPO_ROOT / "autograder"
# The lessons whose hidden tests show which ``student`` methods real checks use.
HIDDEN_TEST_FOLDERS = (ENGINE / "lessons" / "mha_pe" / "hidden_tests",
                       paths.REPO_ROOT / "tests" / "fixtures" / "vector_norms" / "hidden_tests")

# The guide's sections, found by words of their headings (numbering may change).
DESCRIPTOR = "The descriptor"
CATALOGUE = "The catalogue"
ENTRY_KEYS = "Entry keys"
EDIT_KEYS = "Edit keys"
EDIT = "edit"  # the key under which an entry lists its edits (``[[bug.edit]]``)
HIDDEN = "Hidden tests"
GRADED = "`@graded(...)` parameters"
STUDENT = "The `student` object"
FAILURES = "Failures of the student's code"
PLACEHOLDERS = "placeholders"
VALIDATE = "What `validate` checks"
CAUSES = "Causes a failed check records"


# ---------------------------------------------------------------- reading the guide

def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def section(text: str, words: str) -> str:
    """The part of ``text`` under the first heading containing ``words``, up to the next heading of the same or a
    higher level (sub-headings stay inside)."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        heading = re.match(r"^(#+)\s+(.*)$", line)
        if heading and words in heading.group(2):
            level = len(heading.group(1))
            end = next((index for index in range(start + 1, len(lines))
                        if (other := re.match(r"^(#+)\s", lines[index])) and len(other.group(1)) <= level),
                       len(lines))
            return "\n".join(lines[start:end])
    raise AssertionError(f"docs/authoring.md has no heading containing {words!r}")


def _is_separator(line: str) -> bool:
    return bool(re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line.strip()))


def data_rows(text: str) -> list[str]:
    """The table rows of ``text`` that are neither a header nor a separator."""
    lines = text.splitlines()
    rows = []
    for index, line in enumerate(lines):
        if not line.startswith("|") or _is_separator(line):
            continue
        if index + 1 < len(lines) and _is_separator(lines[index + 1]):
            continue  # a header row
        rows.append(line)
    return rows


def first_cells(text: str) -> list[str]:
    """The first backticked word of each data row's first cell (rows continuing the previous one have none)."""
    found = []
    for row in data_rows(text):
        cell = row.strip().strip("|").split("|")[0]
        code = re.search(r"`([^`]+)`", cell)
        if code:
            found.append(code.group(1))
    return found


def backticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", text))


def table_key(cell: str) -> str:
    """``[files]`` and ``[classroom.prefixes]`` are written as TOML tables; the key is the dotted name."""
    return cell.strip().strip("[]").strip("{}")


# ---------------------------------------------------------------- reading the code

def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name)


def _constant(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _read(node, tables: dict[str, str]) -> str | None:
    """The dotted key ``node`` reads from a table of ``tables`` (local name -> its dotted path; ``""`` for the
    top), by ``table["key"]`` or ``table.get("key", ...)``, or None when it reads no key."""
    if isinstance(node, ast.Subscript):
        owner, key = node.value, _constant(node.slice)
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
          and node.args):
        owner, key = node.func.value, _constant(node.args[0])
    else:
        return None
    if key is None:
        return None
    prefix = tables.get(owner.id) if isinstance(owner, ast.Name) else _read(owner, tables)
    if prefix is None:
        return None
    return f"{prefix}.{key}" if prefix else key


@functools.cache  # the code's side does not change during a run; the guide's is read each time
def descriptor_keys() -> frozenset[str]:
    """Every key ``assignment.load`` reads: the ``REQUIRED`` tuple, ``data[...]``, ``data.get(...)``,
    ``place(...)``, and keys of nested tables (``classroom.prefixes``), followed through local names bound to
    a table (``classroom = data.get("classroom", {})``)."""
    tree = ast.parse((ENGINE / "lesson" / "assignment.py").read_text(encoding="utf-8"))
    keys = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "REQUIRED" for t in node.targets):
            keys |= {_constant(item) for item in node.value.elts}
    load = _function(tree, "load")
    tables = {"data": ""}
    for _ in range(3):  # aliases of aliases, whatever order ast.walk meets them in
        for node in ast.walk(load):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                key = _read(node.value, tables)
                if key is not None:
                    tables[node.targets[0].id] = key
    for node in ast.walk(load):
        key = _read(node, tables)
        if key is not None:
            keys.add(key)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "place" and node.args:
            keys.add(_constant(node.args[0]))
    keys.discard(None)
    return frozenset(keys)


@functools.cache
def catalogue_keys() -> tuple[frozenset[str], frozenset[str]]:
    """``(keys of each entry, keys of each edit)`` that ``load_catalogue`` reads. An entry is what its outer loop
    binds (``entry``); an edit is what a loop over an entry's ``edit`` list binds, so its keys come out as
    ``edit.file``: the two tables of the guide are told apart (both have a ``file``)."""
    tree = ast.parse((ENGINE / "lesson" / "catalogue.py").read_text(encoding="utf-8"))
    function = _function(tree, "load_catalogue")
    loops = [node for node in ast.walk(function) if isinstance(node, (ast.For, ast.comprehension))
             and isinstance(node.target, ast.Name)]
    tables = {}
    for _ in range(3):  # a loop over a list read from another loop's item: its items are that key's tables
        for loop in loops:
            key = _read(loop.iter, tables)
            tables[loop.target.id] = key if key is not None else tables.get(loop.target.id, "")
    read = {key for node in ast.walk(function) if (key := _read(node, tables)) is not None}
    return frozenset(key for key in read if "." not in key), frozenset(key for key in read if "." in key)


@functools.cache
def catalogue_fields() -> frozenset[str]:
    """The keys that become a field of a Mutant or an Edit (the others only structure the file: ``edit``)."""
    from autograder.lesson.catalogue import Edit, Mutant

    entry, edit = catalogue_keys()
    mutant = {field.name for field in dataclasses.fields(Mutant)}
    edits = {field.name for field in dataclasses.fields(Edit)}
    return frozenset({key for key in entry if key in mutant | edits} | {key for key in edit
                                                                        if key.rpartition(".")[2] in edits})


@functools.cache
def catalogue_kinds_and_files() -> tuple[frozenset[str], frozenset[str]]:
    """The entry kinds (``bug``...) and catalogue files (``bugs.toml``...) the engine's commands read: the kind
    argument of each ``load_catalogue`` call and the ``*.toml`` names in the modules that call it, with the kind
    paired to a file where a module lists them as pairs."""
    kinds, files = set(), set()
    for path in ENGINE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "")
                 == "load_catalogue"]
        if not calls or path.name == "catalogue.py":
            continue
        kinds |= {kind for call in calls if len(call.args) > 1 and (kind := _constant(call.args[1]))}
        names = {value for node in ast.walk(tree) if (value := _constant(node)) and re.fullmatch(r"\w+\.toml", value)}
        files |= names
        for node in ast.walk(tree):
            if isinstance(node, ast.Tuple) and len(node.elts) == 2 and _constant(node.elts[1]) in names:
                kinds.add(_constant(node.elts[0]))
    kinds.discard(None)
    return frozenset(kinds), frozenset(files)


@functools.cache
def placeholders() -> frozenset[str]:
    """The names ``classroom.student_readme`` fills in: its ``PLACEHOLDERS`` list, and (in case the list and the
    filling drift apart) the keys of the ``fields`` it fills from, read with ``ast``: the ``dict(...)`` keywords
    and every ``fields["..."] = ...``. A field filled under a computed name would escape both; none is today."""
    from autograder.commands import classroom

    names = set(getattr(classroom, "PLACEHOLDERS", ()))
    function = _function(ast.parse(inspect.getsource(classroom)), "student_readme")
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "fields" and isinstance(node.value, ast.Call):
                    names |= {keyword.arg for keyword in node.value.keywords if keyword.arg}
                if isinstance(target, ast.Subscript) and getattr(target.value, "id", "") == "fields":
                    names.add(_constant(target.slice))
    names.discard(None)
    return frozenset(names)


@functools.cache
def student_methods_used() -> frozenset[str]:
    """The ``student`` methods the real lessons' hidden tests call (``student.draw(...)``), their lessons' public
    names aside."""
    from autograder.lesson.assignment import load

    used = set()
    for folder in HIDDEN_TEST_FOLDERS:
        names = set(load(folder.parent).contract.names)
        for path in folder.glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "student"
                        and node.attr not in names):
                    used.add(node.attr)
    return frozenset(used)


@functools.cache
def submission_failures() -> frozenset[str]:
    """Every kind of SubmissionFailure the failures module defines (subclasses of subclasses included)."""
    from autograder.judge import failures

    found, stack = set(), [failures.SubmissionFailure]
    while stack:
        for kind in stack.pop().__subclasses__():
            if kind.__module__ == failures.__name__ and kind.__name__ not in found:
                found.add(kind.__name__)
                stack.append(kind)
    return frozenset(found)


# ---------------------------------------------------------------- checks, each a list of problems

def descriptor_problems(text: str) -> list[str]:
    documented = {table_key(cell) for cell in first_cells(section(text, DESCRIPTOR))}
    code = descriptor_keys()
    # A table the engine reads only for its keys (``classroom``) is documented through them.
    missing = [key for key in sorted(code)
               if key not in documented and not any(name.startswith(key + ".") for name in documented)]
    stray = sorted(documented - code)
    return ([f"descriptor key read by assignment.load, not in the guide's table: {key}" for key in missing]
            + [f"descriptor key in the guide's table that assignment.load never reads: {key}" for key in stray])


def catalogue_problems(text: str) -> list[str]:
    part = section(text, CATALOGUE)
    entry_rows = set(first_cells(section(part, ENTRY_KEYS)))
    edit_rows = {f"{EDIT}.{key}" for key in first_cells(section(part, EDIT_KEYS))}
    entry, edit = catalogue_keys()
    fields = catalogue_fields()
    problems = []
    for read, documented in ((entry, entry_rows), (edit, edit_rows)):
        problems += [f"catalogue key read by load_catalogue ({'a Mutant/Edit field' if key in fields else 'structure'}),"
                     f" not in the guide's table: {key}" for key in sorted(read - documented)]
        problems += [f"catalogue key in the guide's table that load_catalogue never reads: {key}"
                     for key in sorted(documented - read)]
    kinds, files = catalogue_kinds_and_files()
    problems += [f"catalogue entry kind [[{kind}]] not in the guide" for kind in sorted(kinds)
                 if f"[[{kind}]]" not in part or f"[[{kind}.{EDIT}]]" not in part]
    problems += [f"catalogue file {name} not in the guide" for name in sorted(files) if f"`{name}`" not in part]
    return problems


def graded_problems(text: str) -> list[str]:
    from autograder.judge.rubric import graded

    documented = set(first_cells(section(text, GRADED)))
    accepted = set(inspect.signature(graded).parameters)
    return ([f"@graded parameter not in the guide: {name}" for name in sorted(accepted - documented)]
            + [f"@graded has no parameter {name}, which the guide lists" for name in sorted(documented - accepted)])


def hidden_test_problems(text: str) -> list[str]:
    """The fixtures and marks the judge allows, the failures of the student's code and the ``student`` methods:
    each the code's, each in the guide."""
    from autograder.judge.hidden_suite import FIXTURES, MARKS
    from autograder.judge.remote import RemoteObject, RemoteSubmission

    part = section(text, HIDDEN)
    words = backticked(part)
    problems = [f"hidden-test fixture or mark not in the guide: {name}" for name in sorted({*FIXTURES, *MARKS} - words)]
    failures = set(first_cells(section(text, FAILURES)))
    kinds = submission_failures()
    problems += [f"SubmissionFailure kind not in the guide's table: {name}" for name in sorted(kinds - failures)]
    problems += [f"the guide's failure table lists {name}, no SubmissionFailure" for name in sorted(failures - kinds)]
    student = section(text, STUDENT)
    listed = {call.split("(")[0].removeprefix("student.") for call in first_cells(student)}
    problems += [f"student method that real hidden tests call, not in the guide's table: {name}"
                 for name in sorted(student_methods_used() - listed)]
    problems += [f"the guide lists student.{name}, which RemoteSubmission lacks" for name in sorted(listed)
                 if name != "NAME" and not hasattr(RemoteSubmission, name)]
    proxies = set(re.findall(r"`obj\.(\w+)\(", student))
    problems += [f"the guide lists obj.{name}, which RemoteObject lacks" for name in sorted(proxies)
                 if not hasattr(RemoteObject, name)]
    return problems


def placeholder_problems(text: str) -> list[str]:
    documented = {table_key(cell) for cell in first_cells(section(text, PLACEHOLDERS))}
    filled = placeholders()
    return ([f"student_readme.md placeholder not in the guide: {{{name}}}" for name in sorted(filled - documented)]
            + [f"the guide lists {{{name}}}, which is never filled in" for name in sorted(documented - filled)])


def validate_problems(text: str) -> list[str]:
    from autograder.records.results import CAUSE_KINDS
    from autograder.commands.validate import MAX_CONCEPTS, PRECISION_GOAL

    part = section(text, VALIDATE)
    causes = set(first_cells(section(part, CAUSES)))
    problems = [f"cause kind not in the validate section's table of causes: {kind}" for kind in CAUSE_KINDS
                if kind not in causes]
    problems += [f"the validate section lists a cause {kind!r} the results never give"
                 for kind in sorted(causes - set(CAUSE_KINDS))]
    for phrase in (f"`MAX_CONCEPTS` (now {MAX_CONCEPTS})", f"`PRECISION_GOAL` (now {PRECISION_GOAL:.0%})"):
        if phrase not in " ".join(part.split()):
            problems.append(f"the validate section should say {phrase}")
    return problems


CHECKS = {
    "descriptor": (descriptor_problems, DESCRIPTOR),
    "catalogue": (catalogue_problems, CATALOGUE),
    "graded": (graded_problems, GRADED),
    "failures": (hidden_test_problems, FAILURES),
    "student": (hidden_test_problems, STUDENT),
    "placeholders": (placeholder_problems, PLACEHOLDERS),
    "validate": (validate_problems, CAUSES),
}


# ---------------------------------------------------------------- the tests

def test_the_descriptor_table_lists_exactly_the_keys_load_reads():
    """Every key ``assignment.load`` reads is a row of the descriptor table, and every row is a key it reads."""
    from autograder.lesson.assignment import REQUIRED

    assert set(REQUIRED) < descriptor_keys(), "the parse of assignment.load found no key beyond REQUIRED"
    assert descriptor_problems(guide()) == []


def test_the_catalogue_tables_list_exactly_the_keys_load_catalogue_reads():
    """Every key of a ``[[bug]]``/``[[variant]]``/``[[hostile]]`` entry and of its edits that ``load_catalogue``
    reads is in the guide's table for it (and only those), with every entry kind and catalogue file a command
    reads."""
    entry, edit = catalogue_keys()
    kinds, files = catalogue_kinds_and_files()
    assert {"id", "catches", EDIT} <= entry and f"{EDIT}.old" in edit, "the parse of load_catalogue found nothing"
    assert {"id", "catches", f"{EDIT}.old"} <= catalogue_fields()
    assert {"bug", "variant"} <= kinds and "variants.toml" in files, "the scan for catalogue readers found nothing"
    assert catalogue_problems(guide()) == []


def test_the_graded_table_lists_exactly_graded_s_parameters():
    """``@graded``'s signature is the hidden tests' rubric API: each parameter is a row, no row is made up."""
    assert graded_problems(guide()) == []


def test_the_hidden_test_api_is_the_judges():
    """The fixtures and marks the judge accepts, every SubmissionFailure a call can raise, every ``student``
    method the real lessons' hidden tests call: each in the guide; no method the guide lists is missing."""
    assert student_methods_used(), "the real lessons' hidden tests call no student method: the scan is broken"
    assert hidden_test_problems(guide()) == []


def test_the_placeholder_table_lists_exactly_what_student_readme_fills_in():
    """An author writes the template's README with these names; a name filled in but not listed is unusable,
    and a listed name that is not filled in would reach students in braces."""
    assert placeholder_problems(guide()) == []


def test_the_validate_section_names_every_cause_and_states_the_goals():
    """validate reads a failed check's typed cause; the guide names every kind and restates the two limits."""
    assert validate_problems(guide()) == []


def test_the_stated_time_limits_are_the_sandboxes():
    """The guide restates the per-call and per-submission CPU limits."""
    from autograder.sandbox.isolation import Limits

    text = " ".join(guide().split())
    limits = Limits()
    for phrase in (f"`call_seconds`, now {limits.call_seconds:g} s",
                   f"`submission_seconds`, now {limits.submission_seconds:g} s"):
        assert phrase in text, phrase


def test_every_command_and_flag_the_guide_names_exists():
    """Each command the guide writes (``python -m autograder grade ...``, or a code span starting with a command's
    name and giving flags: ``release --check``) is one of the CLI's, and each of its flags one that command takes."""
    from autograder.cli import build_parser

    # argparse has no public way to reach its subcommands; the command action's choices are them.
    commands = next(action for action in build_parser()._actions if action.dest == "command").choices
    checked = 0
    for span in re.findall(r"`([^`\n]+)`", guide()):
        full = span.startswith("python -m autograder ")
        words = span.removeprefix("python -m autograder ").split()
        if not words or not (full or (words[0] in commands and any(word.startswith("--") for word in words))):
            continue
        assert words[0] in commands, f"no command {words[0]!r}: {span}"
        flags = {flag for action in commands[words[0]]._actions for flag in action.option_strings}
        for flag in (word for word in words[1:] if word.startswith("--")):
            assert flag in flags, f"{words[0]} has no {flag}: {span}"
        checked += 1
    assert checked >= 10, "the guide's commands were not found"


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_each_check_fails_when_a_row_of_its_table_is_deleted(name):
    """The checks above can fail: deleting any row of a table they derive from the code is reported."""
    check, heading = CHECKS[name]
    text = guide()
    part = section(text, heading)
    rows = [row for row in data_rows(part) if re.search(r"`[^`]+`", row.split("|")[1])]
    if name == "student":  # the rows derived from the code are the methods the real hidden tests call
        used = student_methods_used()
        rows = [row for row in rows if re.search(r"`student\.(\w+)\(", row) and
                re.search(r"`student\.(\w+)\(", row).group(1) in used]
    assert rows, f"no table rows under {heading!r}"
    for row in rows:
        assert check(text.replace(part, part.replace(row + "\n", "", 1))), f"deleting this row goes unnoticed: {row}"
