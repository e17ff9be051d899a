"""The promises a lesson's docstrings make to students, and the checks behind each one.

Everything outside the solution regions reaches students as written, so the docstrings of the student files
(module, functions, classes, methods) are the lesson's contract. A lesson may list the rules they state in a
promises file (the descriptor's ``promises``), one ``[[promise]]`` per rule::

    [[promise]]
    function = "normalize"                 # where the docstring is: a function, a class, "Class.method",
                                           # or a module's own docstring as "<module>.py"
    phrase = "a zero vector stays 0"       # words of that docstring (whitespace and ``double backquotes``
                                           # ignored), or a list of such phrases: the row's anchor, so
                                           # rewording the docstring shows
    rule = "a zero vector gives zeros, never NaN"   # the row's text on the rubric page
    hidden = ["test_zero_vector_stays_zero"]        # the hidden tests that check it
    public = []                                     # the public tests that show it (may be empty)

    [[explanation]]                        # a sentence the rule finder flags that states no rule
    function = "normalize"
    phrase = "..."
    reason = "why it is explanation, not a rule"

``rubric`` prints the promises as a table (:func:`table`); :func:`problems` is what the kit's tests hold a
lesson to: every phrase in its docstring, every test named exists, every rule sentence (:func:`rule_units`)
covered, every promise with a hidden check. The judge reads none of this; no grade depends on it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import KitError
from .toml_file import read_toml

if TYPE_CHECKING:
    from .assignment import Assignment

# A sentence states a rule when it holds one of these words (any letter case for the words, exact case for the
# booleans), a bound ("at least 1", "seq <= max_seq_len") or a shape: parentheses around two or more
# comma-separated sizes, one of them named, such as "(batch, seq, d)".
RULE_WORDS = re.compile(r"\b(must|never|exact|exactly|any|every|always|only|refuses?|refused|unchanged|zeros?"
                        r"|nan|at least|at most)\b|<=|>=", re.IGNORECASE)
RULE_BOOLEANS = re.compile(r"\b(True|False)\b")
_SIZE = r"(?:\.\.\.|\w+(?:\s*(?:\*|\+|-|//|/)\s*\w+)*)"  # a size: a name, a number, "heads * head_dim", "..."
SHAPE = re.compile(rf"\(\s*{_SIZE}(?:\s*,\s*{_SIZE})+\s*\)")
SECTION = re.compile(r"^(Args|Arguments|Attributes|Returns|Yields|Raises|Note|Notes|Example|Examples):\s*$")
ENTRY = re.compile(r"^\*{0,2}\w+( \([^)]*\))?:(\s|$)")  # "name: text" or "name (type): text" starts an entry
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")


@dataclass(frozen=True)
class Promise:
    """One rule a docstring states, and the tests behind it."""

    function: str
    phrases: tuple[str, ...]  # normalised; each one in the function's docstring
    rule: str
    hidden: tuple[str, ...]
    public: tuple[str, ...]


@dataclass(frozen=True)
class Explanation:
    """A sentence the rule finder flags that explains rather than promises."""

    function: str
    phrases: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Promises:
    """A lesson's promises file, read."""

    path: Path
    promises: tuple[Promise, ...]
    explanations: tuple[Explanation, ...]


@dataclass(frozen=True)
class Unit:
    """A piece of a docstring the rule finder judges on its own: a ``Raises:`` entry (always a rule) or a
    sentence (a rule when :func:`states_a_rule`)."""

    where: str  # the docstring's owner, as a promise's ``function`` names it
    text: str  # normalised (see :func:`normalise`)
    raises: bool = False


def normalise(text: str) -> str:
    """``text`` as phrases are matched: inline-literal backquotes dropped, whitespace collapsed."""
    return " ".join(text.replace("``", "").split())


def _strings(data, key: str, where: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise KitError(f"{where}: {key} must be a list of test names")
    return tuple(value)


def _phrases(data, where: str) -> tuple[str, ...]:
    value = data.get("phrase")
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and normalise(item) for item in value):
        raise KitError(f"{where}: phrase must be a non-empty string or a list of them")
    return tuple(normalise(item) for item in value)


def _text(data, key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not normalise(value):
        raise KitError(f"{where}: {key} must be a non-empty string")
    return value


def load(path: str | Path) -> Promises:
    """Read a promises file; KitError with one line on any problem."""
    path = Path(path)
    data = read_toml(path, "promises file")
    unknown = set(data) - {"promise", "explanation"}
    if unknown:
        raise KitError(f"promises file {path}: unknown tables {', '.join(sorted(unknown))}")
    promises, explanations = [], []
    for number, entry in enumerate(data.get("promise", []), 1):
        where = f"promises file {path}, promise {number}"
        extra = set(entry) - {"function", "phrase", "rule", "hidden", "public"}
        if extra:
            raise KitError(f"{where}: unknown keys {', '.join(sorted(extra))}")
        promises.append(Promise(_text(entry, "function", where), _phrases(entry, where),
                                normalise(_text(entry, "rule", where)), _strings(entry, "hidden", where),
                                _strings(entry, "public", where)))
    for number, entry in enumerate(data.get("explanation", []), 1):
        where = f"promises file {path}, explanation {number}"
        extra = set(entry) - {"function", "phrase", "reason"}
        if extra:
            raise KitError(f"{where}: unknown keys {', '.join(sorted(extra))}")
        explanations.append(Explanation(_text(entry, "function", where), _phrases(entry, where),
                                        normalise(_text(entry, "reason", where))))
    return Promises(path, tuple(promises), tuple(explanations))


def docstrings(solutions: Path, modules: tuple[str, ...]) -> dict[str, str]:
    """Every docstring of the student files in ``solutions`` (read with ``ast``, nothing imported), by owner:
    ``"<module>.py"`` for a module's own, ``"name"`` for a function or class, ``"Class.method"`` for a method."""
    found = {}
    for module in modules:
        tree = ast.parse((solutions / f"{module}.py").read_text(encoding="utf-8"))
        if ast.get_docstring(tree):
            found[f"{module}.py"] = ast.get_docstring(tree)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and ast.get_docstring(node):
                found[node.name] = ast.get_docstring(node)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(member):
                        found[f"{node.name}.{member.name}"] = ast.get_docstring(member)
    return found


def _blocks(docstring: str) -> list[tuple[str, str]]:
    """``[(section, text)]``: the docstring's paragraphs (section ``""``) and its sections' entries (an
    ``Args:`` argument, a ``Raises:`` exception, a ``Returns:`` text), each with its continuation lines."""
    blocks, section, current, entry_indent = [], "", [], None

    def close():
        if current:
            blocks.append((section, "\n".join(current)))
            current.clear()

    for line in docstring.splitlines():
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        heading = SECTION.match(line) if indent == 0 else None
        if heading:
            close()
            section, entry_indent = heading.group(1), None
        elif not stripped:
            if not section:
                close()  # a blank line ends a paragraph; inside a section, entries end at the next one
        elif section and indent == 0:  # text after a section is a paragraph again
            close()
            section = ""
            current.append(stripped)
        elif section:
            entry_indent = indent if entry_indent is None else entry_indent
            if indent <= entry_indent and ENTRY.match(stripped):
                close()
            current.append(stripped)
        else:
            current.append(stripped)
    close()
    return blocks


def sentences(text: str) -> list[str]:
    """``text`` (normalised) cut into sentences: at a full stop, question or exclamation mark followed by a
    capital, a quote or a parenthesis, and never inside parentheses (so ``x[None].`` or ``0 .. d/2`` cut nothing)."""
    text = normalise(text)
    # Mask the marks inside parentheses so that none of them ends a sentence.
    masked, depth = [], 0
    for char in text:
        depth += char == "("
        masked.append("x" if depth and char in ".!?" else char)
        depth -= char == ")" and depth > 0
    starts = [0] + [match.end() for match in SENTENCE_END.finditer("".join(masked))]
    return [text[a:b].strip() for a, b in zip(starts, starts[1:] + [len(text)]) if text[a:b].strip()]


def is_shape(text: str) -> bool:
    """Whether ``text`` holds a shape: two or more sizes in parentheses, one of them named (``(batch, 1, seq)``,
    ``(..., seq_q, d)``; not ``(0, 1, 2, ...)``)."""
    return any(re.search(r"[(,]\s*[A-Za-z_]", match.group(0)) for match in SHAPE.finditer(text))


def states_a_rule(sentence: str) -> bool:
    """Whether a sentence states a rule: a rule word or bound, ``True``/``False``, or a shape."""
    return bool(RULE_WORDS.search(sentence) or RULE_BOOLEANS.search(sentence) or is_shape(sentence))


def rule_units(where: str, docstring: str) -> list[Unit]:
    """The pieces of one docstring that state rules: every ``Raises:`` entry, every sentence that
    :func:`states_a_rule`."""
    units = []
    for section, text in _blocks(docstring):
        if section == "Raises":
            units.append(Unit(where, normalise(text), raises=True))
        else:
            units += [Unit(where, sentence) for sentence in sentences(text) if states_a_rule(sentence)]
    return units


def anchor_problems(promises: Promises, found: dict[str, str]) -> list[str]:
    """Each promise and explanation whose phrase is not in its owner's docstring, or whose owner has none."""
    problems = []
    for item in (*promises.promises, *promises.explanations):
        if item.function not in found:
            problems.append(f"{item.function}: no such docstring in the student files")
            continue
        problems += [f"{item.function}: its docstring does not say {phrase!r}" for phrase in item.phrases
                     if phrase not in normalise(found[item.function])]
    return problems


def reference_problems(promises: Promises, hidden: set[str], public: set[str]) -> list[str]:
    """Each test a promise names that does not exist: ``hidden`` are the collected hidden tests' names, ``public``
    the public test functions' names."""
    problems = []
    for promise in promises.promises:
        problems += [f"{promise.function}: no hidden test {name} (for {promise.rule!r})"
                     for name in promise.hidden if name not in hidden]
        problems += [f"{promise.function}: no public test {name} (for {promise.rule!r})"
                     for name in promise.public if name not in public]
    return problems


def coverage_problems(promises: Promises, found: dict[str, str]) -> list[str]:
    """Each rule unit of the docstrings that no promise or explanation anchors in, and each promise without a
    hidden check."""
    anchors = [(item.function, phrase) for item in (*promises.promises, *promises.explanations)
               for phrase in item.phrases]
    problems = []
    for where, docstring in found.items():
        for unit in rule_units(where, docstring):
            if not any(function == where and phrase in unit.text for function, phrase in anchors):
                kind = "Raises entry" if unit.raises else "rule"
                problems.append(f"{where}: {kind} with no promise: {unit.text!r}")
    problems += [f"{promise.function}: no hidden test checks {promise.rule!r}"
                 for promise in promises.promises if not promise.hidden]
    return problems


def problems(assignment: Assignment, hidden: set[str]) -> list[str]:
    """Everything :func:`anchor_problems`, :func:`reference_problems` and :func:`coverage_problems` find in a
    lesson's promises (its docstrings from its solutions, its public tests from their ``tests`` folder; ``hidden``
    the collected hidden tests' names); none for a lesson without a promises file."""
    if assignment.promises is None:
        return []
    promises = load(assignment.promises)
    found = docstrings(assignment.solutions, assignment.contract.modules)
    return [*anchor_problems(promises, found),
            *reference_problems(promises, hidden, public_tests(assignment.solutions / "tests")),
            *coverage_problems(promises, found)]


def hidden_names(entries) -> set[str]:
    """The hidden tests' function names from their rubric entries (a parametrized test's id without its
    parameters)."""
    return {entry.id.split("[")[0] for entry in entries}


def public_tests(tests_dir: Path) -> set[str]:
    """The names of the public test functions in ``tests_dir/test_*.py`` (read with ``ast``)."""
    names = set()
    for path in sorted(tests_dir.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                names.add(node.name)
    return names


def table(promises: Promises, hidden: set[str]) -> list[str]:
    """The promises as Markdown lines: one row per rule, its hidden and public tests; a hidden test not among
    ``hidden`` (the collected ones) is marked as not written yet."""

    def cell(text: str) -> str:  # Markdown: a pipe ends a cell, a star may start emphasis
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")

    def names(tests, known=None):
        shown = [f"`{name}`" + ("" if known is None or name in known else " (not written yet)") for name in tests]
        return "<br>".join(shown) or "none"

    lines = ["| function | rule | hidden checks | public tests |", "| --- | --- | --- | --- |"]
    for promise in promises.promises:
        lines.append(f"| `{promise.function}` | {cell(promise.rule)} | {names(promise.hidden, hidden)} | "
                     f"{names(promise.public)} |")
    return lines
