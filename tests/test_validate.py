"""``python -m autograder validate``: the reference gets full marks, the stubs zero, through the grade path."""

from autograder.validate import validate


def test_validate_passes_and_prints_the_table():
    lines = []
    assert validate(jobs=2, emit=lines.append)
    table = "\n".join(lines)
    assert "reference" in table and "stubs" in table and "WRONG" not in table
