"""docs/design.md is the map, and a map is only useful while it is true and short enough to scan: every engine
module is on it with one line of its job, every module it names exists, and no line grows into a story (those
live in docs/mechanisms.md, docs/performance.md and the modules' docstrings)."""

import re

from autograder import paths

MAP = paths.REPO_ROOT / "docs" / "design.md"
# A table row naming one engine module: | `worker/main.py` | its job |
ROW = re.compile(r"^\| `([\w/]+\.py)` \| (.+) \|$", re.M)
MAX_WORDS = 25  # a line of its job, not a paragraph
# The map's length when this test was written was 8,824 words; the issue that split it asked for a third at most.
MAX_MAP_WORDS = 8824 // 3


def engine_modules() -> set[str]:
    """Every engine module, relative to ``autograder/`` (packages' ``__init__`` files and the lessons aside)."""
    root = paths.REPO_ROOT / "autograder"
    return {path.relative_to(root).as_posix() for path in root.rglob("*.py")
            if path.name != "__init__.py" and "lessons" not in path.relative_to(root).parts}


def mapped() -> dict[str, str]:
    return dict(ROW.findall(MAP.read_text(encoding="utf-8")))


def test_every_module_is_on_the_map_and_every_module_on_it_exists():
    on_map, modules = set(mapped()), engine_modules()
    assert len(modules) > 90
    assert sorted(modules - on_map) == [], "modules missing from docs/design.md"
    assert sorted(on_map - modules) == [], "docs/design.md names modules that do not exist"


def test_each_module_has_one_short_line():
    long = {module: len(job.split()) for module, job in mapped().items() if len(job.split()) > MAX_WORDS}
    assert long == {}
    rows = ROW.findall(MAP.read_text(encoding="utf-8"))
    assert len(rows) == len({module for module, _ in rows}), "a module is on the map twice"


def test_the_map_is_short_and_points_to_the_stories():
    text = MAP.read_text(encoding="utf-8")
    assert len(text.split()) <= MAX_MAP_WORDS
    for story in re.findall(r"\]\(([\w-]+\.md)\)", text):
        assert (MAP.parent / story).is_file(), story


def test_a_missing_module_would_be_caught(tmp_path):
    """The row pattern is what the first test relies on: a row it cannot read would pass silently."""
    sample = "| `judge/grade.py` | grades one submission |\n| not a module | x |\n"
    assert ROW.findall(sample) == [("judge/grade.py", "grades one submission")]
