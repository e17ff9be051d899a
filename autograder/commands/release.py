"""Generate the student release (``assignments/``) from the reference solutions (``solutions/``).

``solutions/`` is the single source of truth. In every ``.py`` file, each
region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (nbgrader's
markers, so one convention serves files and notebooks) becomes::

    # YOUR CODE HERE
    # Hint: <the region's ``### HINT:`` lines, if any>
    raise NotImplementedError("<function> is not implemented yet")

Notebooks go through ``nbgrader generate_assignment`` (which strips solution
regions, hidden tests and written model answers). Everything else is copied
unchanged. The output is a pure
function of the input files, so ``release --check`` can regenerate in memory
and compare with what is committed.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ..lesson.assignment import Assignment
from ..errors import KitError

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
HINT = "### HINT:"
# Never released: build litter. Instructor-only files live outside solutions/<id>/.
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".hypothesis"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")
_CLASS = re.compile(r"^(\s*)class\s+(\w+)")


@dataclass(frozen=True)
class Region:
    """One solution region: 1-based line numbers of its markers, and its hint."""

    begin: int
    end: int
    indent: str
    hint: str


def find_regions(text, name="<text>"):
    """Return the solution regions of ``text`` in order; raise KitError on unbalanced markers."""
    regions, open_at, indent, hints = [], None, "", []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(BEGIN):
            if open_at is not None:
                raise KitError(f"{name}:{number}: '{BEGIN}' inside the region opened at line {open_at}")
            open_at, indent, hints = number, line[: len(line) - len(line.lstrip())], []
        elif stripped.startswith(END):
            if open_at is None:
                raise KitError(f"{name}:{number}: '{END}' without a matching '{BEGIN}'")
            regions.append(Region(open_at, number, indent, " ".join(hints)))
            open_at = None
        elif stripped.startswith(HINT):
            if open_at is None:
                raise KitError(f"{name}:{number}: '{HINT}' outside a solution region")
            hints.append(stripped[len(HINT):].strip())
    if open_at is not None:
        raise KitError(f"{name}:{open_at}: '{BEGIN}' is never closed by '{END}'")
    return regions


def _enclosing_name(lines, index, indent):
    """Qualified name of the function that contains line ``index`` (0-based), e.g. ``Cls.method``."""
    names = []
    for line in reversed(lines[:index]):
        for pattern in (_DEF, _CLASS):
            match = pattern.match(line)
            if match and len(match.group(1)) < len(indent):
                names.insert(0, match.group(2))
                indent = match.group(1)
                break
        if not indent:
            break
    return ".".join(names) or "this part"


def _stub_lines(region, lines):
    name = _enclosing_name(lines, region.begin - 1, region.indent)
    out = [f"{region.indent}# YOUR CODE HERE"]
    if region.hint:
        width = max(40, 88 - len(region.indent))
        wrapped = textwrap.wrap(f"Hint: {region.hint}", width=width - 2)
        out += [f"{region.indent}# {part}" for part in wrapped]
    out.append(f'{region.indent}raise NotImplementedError("{name} is not implemented yet")')
    return out


def strip_solutions(text: str, name: str = "<text>") -> str:
    """Return ``text`` with every solution region replaced by a stub that raises NotImplementedError."""
    lines = text.splitlines()
    regions = find_regions(text, name)
    out, cursor = [], 0
    for region in regions:
        out += lines[cursor : region.begin - 1]
        out += _stub_lines(region, lines)
        cursor = region.end
    out += lines[cursor:]
    return "\n".join(out) + "\n"


def notebook_solution_lines(text: str) -> list[str]:
    """Instructor-only lines of an nbgrader source notebook: solution regions, hidden tests, model answers."""
    found = []
    for cell in json.loads(text)["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        meta = cell.get("metadata", {}).get("nbgrader", {})
        inside = False
        for line in source.splitlines():
            stripped = line.strip()
            if stripped.startswith(("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")):
                inside = True
            elif stripped.startswith(("### END SOLUTION", "### END HIDDEN TESTS")):
                inside = False
            elif stripped and (inside or (meta.get("solution") and cell["cell_type"] == "markdown")):
                found.append(stripped)
    return found


def solution_lines(text: str, name: str = "<text>") -> list[str]:
    """The non-blank lines inside solution regions (markers and hints excluded), stripped."""
    lines = text.splitlines()
    found = []
    for region in find_regions(text, name):
        for line in lines[region.begin : region.end - 1]:
            stripped = line.strip()
            if stripped and not stripped.startswith(HINT):
                found.append(stripped)
    return found


def _source_files(source):
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if path.is_file() and not _SKIP_DIRS & set(rel.parts) and path.suffix not in _SKIP_SUFFIXES:
            yield rel, path


def render_release(source: Path) -> dict[str, bytes]:
    """Map each released file's relative path to its bytes, generated from the folder ``source``."""
    if not source.is_dir():
        raise KitError(f"solutions folder not found: {source}")
    files = {}
    for rel, path in _source_files(source):
        data = path.read_bytes()
        if path.suffix == ".py":
            data = strip_solutions(data.decode("utf-8"), str(rel)).encode("utf-8")
        elif path.suffix == ".ipynb":
            from ..notebook.nbgrader_tools import release_notebook  # nbgrader's own generate_assignment

            data = release_notebook(path, source.name)  # the package folder is named for the assignment
        files[rel.as_posix()] = data
    return files


def _existing_files(target):
    if not target.is_dir():
        return {}
    return {rel.as_posix(): path.read_bytes() for rel, path in _source_files(target)}


def diff_release(source: Path, target: Path) -> list[str]:
    """Describe how ``target`` differs from a fresh release of ``source``; an empty list means equal."""
    wanted, have = render_release(source), _existing_files(target)
    problems = [f"missing: {rel}" for rel in sorted(wanted.keys() - have.keys())]
    problems += [f"not generated from solutions/: {rel}" for rel in sorted(have.keys() - wanted.keys())]
    problems += [f"differs: {rel}" for rel in sorted(wanted.keys() & have.keys()) if wanted[rel] != have[rel]]
    return problems


def write_release(source: Path, target: Path) -> list[str]:
    """Make ``target`` exactly a fresh release of ``source``; return the paths written or removed."""
    wanted, have = render_release(source), _existing_files(target)
    changed = []
    for rel in sorted(have.keys() - wanted.keys()):
        (target / rel).unlink()
        changed.append(f"removed {rel}")
    for rel, data in sorted(wanted.items()):
        if have.get(rel) != data:
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
            changed.append(f"wrote {rel}")
    return changed


def release(assignment: Assignment, check: bool = False) -> tuple[bool, list[str]]:
    """The ``release`` command: regenerate (or with ``check``, verify) ``assignment``'s student package from its
    reference. Returns ``(ok, lines)``: the lines describe what was written or what differs."""
    source, target = assignment.solutions, assignment.release
    if check:
        problems = diff_release(source, target)
        if problems:
            return False, problems + [f"run 'python -m autograder release' to regenerate {target}"]
        return True, [f"{target} matches {source}"]
    changed = write_release(source, target)
    return True, changed or [f"{target} already up to date"]
