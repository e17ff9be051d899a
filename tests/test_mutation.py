"""Automatic mutants (validate's): what the operators make, where, and how the report judges them."""

import textwrap
from pathlib import Path

import torch

from autograder.commands.auto_mutants import AutoVerdict, report, same
from autograder.lesson.mutation import generate, mutants_of
from lesson import LESSON

SOURCE = textwrap.dedent('''\
    """A module: only the solution region is the student's."""
    import torch


    def helper(x, n):
        """Docstring: never mutated (n < 1)."""
        outside = 1 + 2
        ### BEGIN SOLUTION
        if n < 1:
            raise ValueError("n")
        return x.transpose(1, 2).sin() * n
        ### END SOLUTION
    ''')


def test_each_operator_edits_only_the_solution_region(tmp_path):
    path = tmp_path / "helpers.py"
    path.write_text(SOURCE)
    made = mutants_of(path)
    edits = {(mutant.operator, mutant.old, mutant.new) for mutant in made}
    assert ("comparison", "n < 1", "n <= 1") in edits
    assert ("constant", "1", "2") in edits and ("raise removed", 'raise ValueError("n")', "pass") in edits
    assert ("call dropped", "x.transpose(1, 2)", "x") in edits
    assert ("sin/cos", "x.transpose(1, 2).sin()", "x.transpose(1, 2).cos()") in edits
    assert ("arguments swapped", "x.transpose(1, 2)", "x.transpose(2, 1)") in edits
    assert ("arithmetic", "x.transpose(1, 2).sin() * n", "(x.transpose(1, 2).sin() / n)") in edits
    for mutant in made:
        assert 9 <= mutant.line <= 11, mutant.diff_line()
        assert "outside = 1 + 2" in mutant.text and "never mutated (n < 1)" in mutant.text
        assert mutant.text != SOURCE and mutant.function == "helper"
        compile(mutant.text, "helpers.py", "exec")
    assert len({mutant.key for mutant in made}) == len(made) == len({mutant.text for mutant in made})
    assert len({mutant.id for mutant in made}) == len(made)


def test_the_lessons_mutants_are_many_and_distinct():
    made = generate(LESSON.solutions, LESSON.contract.modules)
    assert len(made) > 150
    assert {mutant.file for mutant in made} == {f"{module}.py" for module in LESSON.contract.modules}
    assert len({mutant.key for mutant in made}) == len(made)


def test_probe_answers_compare_by_value_type_and_shape():
    assert same([torch.ones(2), "ValueError", (1, 2.0)], [torch.ones(2) + 1e-8, "ValueError", (1, 2.0)])
    assert not same(torch.ones(2), torch.ones(2, dtype=torch.float64))
    assert not same(torch.ones(2), torch.ones(3)) and not same("ValueError", "TypeError")
    assert same(torch.tensor([float("nan")]), torch.tensor([float("nan")])) and not same(1, 1.0)


def _verdict(caught, concepts=("a",), lost=3.0, key_line=1):
    from autograder.lesson.mutation import AutoMutant

    mutant = AutoMutant("helpers.py", key_line, "constant", "1", "2", "text", 0, f"line {key_line}", "after",
                        "helper")
    return AutoVerdict(mutant, caught, tuple(concepts), lost)


def test_the_report_holds_the_goals_and_wants_a_reason_for_every_survivor_and_every_mutant_set_aside():
    caught = [_verdict(True, key_line=line) for line in range(100)]
    lines, ok = report(caught, [], {}, {}, 2)
    assert ok and "100 graded: 100 caught (100.0%" in lines[0] and "median 3" in lines[1]
    survivor = _verdict(False, key_line=200)
    lines, ok = report([*caught, survivor], [], {}, {}, 2)
    assert not ok and any("survivor" in line and "WRONG" in line for line in lines)
    lines, ok = report([*caught, survivor], [], {survivor.mutant.key: "no check can see it"}, {}, 2)
    assert ok and any(line.endswith("no check can see it") for line in lines)
    wide = [_verdict(True, ("a", "b", "c"), key_line=300 + line) for line in range(4)]
    lines, ok = report([*caught, *wide], [], {}, {}, 2)
    assert not ok and sum(line.startswith("  WRONG: -3 [a, b, c]") for line in lines) == 4  # 100/104: under 97%
    assert sum(line.startswith("  -3 [a] helpers.py:") for line in lines) == 100  # each mutant's points lost
    aside = _verdict(False, key_line=400).mutant
    lines, ok = report(caught, [aside], {}, {}, 2)
    assert not ok and any("set aside without a reason" in line for line in lines)
    assert report(caught, [aside], {}, {aside.key: "the same program"}, 2)[1]


def test_the_survivors_catalogue_is_read_and_a_bad_one_is_refused(tmp_path):
    from autograder.errors import KitError
    from autograder.lesson.mutation import survivor_reasons
    import pytest

    class Lesson:
        catalogue = tmp_path

    assert survivor_reasons(Lesson) == {}
    (tmp_path / "survivors.toml").write_text('[[equivalent]]\nedit = "e"\nreason = "r"\n')
    assert survivor_reasons(Lesson, "equivalent") == {"e": "r"} and survivor_reasons(Lesson) == {}
    (tmp_path / "survivors.toml").write_text('[[survivor]]\nedit = "e"\n')
    with pytest.raises(KitError, match="needs an edit and a reason"):
        survivor_reasons(Lesson)
    assert Path(LESSON.catalogue / "survivors.toml").is_file()
