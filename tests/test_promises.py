"""The promises table: every rule the student files' docstrings state has a row (the lesson's promises file, the
descriptor's ``promises``) anchored in its docstring, naming hidden checks that exist; ``docs/rubric.md`` prints it.

The docstrings are read from ``solutions/`` with ``ast`` (no student stub is imported). The three checks run on the
kit's lesson and on the second one (``tests/fixtures/vector_norms``), and each is shown failing on made-up input.
"""

from dataclasses import replace
from pathlib import Path

import pytest

from autograder.lesson import assignment as assignments
from autograder.lesson import promises
from autograder.errors import KitError
from autograder.judge.hidden_suite import collect_rubric
from autograder.lesson.promises import Explanation, Promise, Promises, anchor_problems, coverage_problems, docstrings, hidden_names, public_tests, reference_problems, rule_units, sentences, states_a_rule
from autograder.reports.rubric_page import render_rubric
from autograder.lesson.catalogue import load_catalogue
from lesson import CATALOGUE, LESSON, RELEASE, SOLUTIONS

SECOND = Path(__file__).resolve().parent / "fixtures" / "vector_norms"


@pytest.fixture(scope="module")
def kept():
    """The kit's lesson: its promises, its docstrings, its hidden and public tests' names."""
    assert LESSON.promises is not None and LESSON.promises.is_file(), "the kit's lesson must have a promises file"
    return (promises.load(LESSON.promises), docstrings(SOLUTIONS, LESSON.contract.modules),
            hidden_names(collect_rubric(LESSON.hidden_tests)), public_tests(SOLUTIONS / "tests"))


def test_the_lesson_states_many_rules_and_keeps_its_explanations_few(kept):
    table, found, _, _ = kept
    units = [unit for where, text in found.items() for unit in rule_units(where, text)]
    assert len(units) >= 40 and sum(unit.raises for unit in units) >= 8
    assert len(table.promises) >= len({unit.where for unit in units}), "a promise per docstring that states rules"
    assert len(table.explanations) <= 3, "explanations are the exception: a rule is cheap"
    assert {"scaled_dot_product_attention", "MultiHeadAttention.forward", "PositionalEncoding.forward",
            "split_heads", "combine_heads", "get_positional_encoding", "shift_matrix"} <= set(found)


def test_every_phrase_is_in_its_docstring(kept):
    table, found, _, _ = kept
    problems = anchor_problems(table, found)
    assert not problems, "\n".join(problems)


def test_every_test_named_exists(kept):
    table, _, hidden, public = kept
    problems = reference_problems(table, hidden, public)
    assert not problems, "\n".join(problems)


def test_every_rule_sentence_has_a_promise_with_a_hidden_check(kept):
    table, found, _, _ = kept
    problems = coverage_problems(table, found)
    assert not problems, "\n".join(problems)


# Anchored checks no single catalogued bug is made to fail, each with the reason. `make test`'s validate run proves
# every bug fails each check its `catches` names; this table makes sure that list reaches every stated rule.
UNBROKEN = {
    "test_gpu_matches_cpu": "runs only where CUDA is: validate --require-cuda (make gpu-check) grades it there",
    "test_batch_elements_are_independent": "every edit found that mixes a batch's sequences also breaks the "
                                           "comparison with torch and the order or mask checks: over 2 concepts",
}


def test_every_check_a_promise_names_is_failed_by_a_catalogued_bug_that_breaks_its_rule(kept):
    """Each stated rule has a mutant violating it: a catalogued bug whose `catches` names the rule's hidden check
    (validate, in make test, proves it fails there and is charged to at most 2 concepts)."""
    table, _, _, _ = kept
    caught = {check for bug in load_catalogue(CATALOGUE / "bugs.toml", "bug") for check in bug.catches}
    anchored = {check for promise in table.promises for check in promise.hidden}
    assert set(UNBROKEN) <= anchored, "a reason for a check no promise names"
    assert not set(UNBROKEN) & caught, "a bug now breaks it: drop it from UNBROKEN"
    missing = sorted(anchored - caught - set(UNBROKEN))
    assert not missing, f"no catalogued bug breaks the rule of: {', '.join(missing)}"


def test_the_second_lesson_keeps_its_promises():
    lesson = assignments.load(SECOND)
    assert lesson.promises == SECOND / "promises.toml"
    assert promises.problems(lesson, hidden_names(collect_rubric(lesson.hidden_tests))) == []
    page = render_rubric(lesson)
    assert "## Promises the docstrings make" in page and "| `normalize` | a zero vector stays zero, never NaN |" in page


def test_a_lesson_without_a_promises_file_has_no_table():
    lesson = replace(assignments.load(SECOND), promises=None)
    assert promises.problems(lesson, set()) == []
    assert "Promises" not in render_rubric(lesson)


def test_the_table_stays_with_the_instructor():
    """The promises name hidden checks: they live in the lesson's folder (no worker reads it) and in the rubric
    page, never in what students get."""
    assert LESSON.promises.is_relative_to(LESSON.folder) and LESSON.folder in LESSON.instructor_folders()
    assert not LESSON.promises.is_relative_to(RELEASE.parent) and not LESSON.promises.is_relative_to(SOLUTIONS)
    for path in RELEASE.parent.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert "Promises the docstrings make" not in path.read_text(errors="replace")


# ---- each check can fail ----

SOURCE = '''\
"""A module. Its functions never change their inputs."""


def f(x):
    """Return ``x`` doubled.

    Shapes: ``(batch, seq)`` in, the same out. Explained at length here.

    Args:
        x: a tensor; any dtype.

    Raises:
        ValueError: ``x`` is empty. An empty tensor is
            refused.
        TypeError: ``x`` is not a tensor.
    """
    ### BEGIN SOLUTION
    return x * 2
    ### END SOLUTION


class Box:
    """Holds one value (exactly one)."""

    def get(self):
        """The value; it is never None."""
'''


@pytest.fixture
def made_up(tmp_path):
    (tmp_path / "box.py").write_text(SOURCE + "raise SystemExit('imported: the docstrings must be read, not run')\n")
    return docstrings(tmp_path, ("box",))


def test_docstrings_are_read_without_importing_and_named_by_owner(made_up):
    assert set(made_up) == {"box.py", "f", "Box", "Box.get"}
    units = {(unit.where, unit.text, unit.raises) for where, text in made_up.items()
             for unit in rule_units(where, text)}
    assert units == {
        ("box.py", "Its functions never change their inputs.", False),
        ("f", "Shapes: (batch, seq) in, the same out.", False),
        ("f", "x: a tensor; any dtype.", False),
        ("f", "ValueError: x is empty. An empty tensor is refused.", True),
        ("f", "TypeError: x is not a tensor.", True),
        ("Box", "Holds one value (exactly one).", False),
        ("Box.get", "The value; it is never None.", False),
    }


def _promise(function, phrase, hidden=("test_hidden",), public=()):
    return Promise(function, (phrase,), "a rule", tuple(hidden), tuple(public))


COVERED = Promises(Path("promises.toml"), (
    _promise("box.py", "never change their inputs"), _promise("f", "(batch, seq) in"), _promise("f", "any dtype"),
    _promise("f", "ValueError: x is empty"), _promise("f", "TypeError"), _promise("Box.get", "never None"),
), (Explanation("Box", ("exactly one",), "a count, not a rule"),))


def test_a_covered_docstring_passes_every_check(made_up):
    assert anchor_problems(COVERED, made_up) == []
    assert coverage_problems(COVERED, made_up) == []
    assert reference_problems(COVERED, {"test_hidden"}, set()) == []


def test_a_made_up_phrase_or_owner_fails_the_anchor_check(made_up):
    reworded = replace(COVERED, promises=(*COVERED.promises, _promise("f", "never returns NaN"),
                                          _promise("g", "anything")))
    assert anchor_problems(reworded, made_up) == ["f: its docstring does not say 'never returns NaN'",
                                                  "g: no such docstring in the student files"]
    several = replace(COVERED, promises=(Promise("f", ("Return x doubled", "tripled"), "r", ("t",), ()),))
    assert anchor_problems(several, made_up) == ["f: its docstring does not say 'tripled'"]


def test_an_unknown_test_name_fails_the_reference_check():
    named = replace(COVERED, promises=(_promise("f", "any dtype", hidden=("test_hidden", "test_made_up"),
                                                public=("test_public_made_up",)),))
    assert reference_problems(named, {"test_hidden"}, {"test_public"}) == [
        "f: no hidden test test_made_up (for 'a rule')", "f: no public test test_public_made_up (for 'a rule')"]


def test_a_rule_sentence_without_a_promise_fails_the_coverage_check(made_up):
    added = dict(made_up, f=made_up["f"] + "\n\nThe result must always be finite.\n")
    assert coverage_problems(COVERED, added) == ["f: rule with no promise: 'The result must always be finite.'"]
    missing = replace(COVERED, promises=tuple(p for p in COVERED.promises if p.phrases != ("TypeError",)))
    assert coverage_problems(missing, made_up) == ["f: Raises entry with no promise: 'TypeError: x is not a tensor.'"]
    elsewhere = replace(COVERED, explanations=(Explanation("f", ("exactly one",), "wrong owner"),))
    assert coverage_problems(elsewhere, made_up) == ["Box: rule with no promise: 'Holds one value (exactly one).'"]


def test_a_promise_without_a_hidden_check_fails_the_coverage_check(made_up):
    unchecked = replace(COVERED, promises=(*COVERED.promises, _promise("f", "any dtype", hidden=())))
    assert coverage_problems(unchecked, made_up) == ["f: no hidden test checks 'a rule'"]


@pytest.mark.parametrize("sentence", [
    "x must be 3-D.", "It never returns NaN.", "A blocked key gets weight exactly 0.", "Any number of dimensions.",
    "Every head.", "It is always finite.", "Work on the last axes only.", "Bad input is refused.",
    "The inputs are left unchanged.", "Its row is all zeros.", "True means the query may attend.",
    "x: (batch, seq, d_model) features.", "output (..., seq_q, d_v).", "(batch, seq, heads * head_dim).",
    "number of positions, at least 1.", "seq <= max_seq_len.",
])
def test_rule_sentences_are_found(sentence):
    assert states_a_rule(sentence)


@pytest.mark.parametrize("sentence", [
    "Build the table with whole-tensor operations.", "Dividing by sqrt(d) keeps the spread steady.",
    "The lesson's i runs over the even columns (0, 2, 4, ...).", "Each pair (2i, 2i+1) turns.",
    "Its error is small (about 1e-4 near position 1000, more further along).", "A truly nice sentence.",
])
def test_explanations_are_not_taken_for_rules(sentence):
    assert not states_a_rule(sentence)


def test_sentences_are_not_cut_inside_parentheses_or_literals():
    text = "Use ``x[None]``. Dims ``0 .. d/2 - 1`` (see e.g. Fig. 2. Then more) stay. Last one? Yes."
    assert sentences(text) == ["Use x[None].", "Dims 0 .. d/2 - 1 (see e.g. Fig. 2. Then more) stay.", "Last one?",
                               "Yes."]


@pytest.mark.parametrize("text, message", [
    ("[[promise]]\nfunction = 'f'\nrule = 'r'\nhidden = []\n", "phrase must be"),
    ("[[promise]]\nfunction = 'f'\nphrase = 'p'\nrule = 'r'\nhidden = 'test_x'\n", "hidden must be a list"),
    ("[[promise]]\nfunction = 'f'\nphrase = 'p'\nrule = 'r'\ntests = []\n", "unknown keys tests"),
    ("[[explanation]]\nfunction = 'f'\nphrase = 'p'\n", "reason must be"),
    ("[[promises]]\n", "unknown tables promises"),
    ("[[promise]\n", "promises file"),
])
def test_a_malformed_promises_file_is_a_one_line_error(tmp_path, text, message):
    path = tmp_path / "promises.toml"
    path.write_text(text)
    with pytest.raises(KitError, match=message) as info:
        promises.load(path)
    assert "\n" not in str(info.value)


def test_the_table_marks_hidden_checks_not_written_yet_and_escapes_markdown():
    table = Promises(Path("p.toml"), (Promise("f", ("p",), "a * b | c", ("test_there", "test_missing"), ()),), ())
    assert promises.table(table, {"test_there"})[2] == (
        "| `f` | a \\* b \\| c | `test_there`<br>`test_missing` (not written yet) | none |")


def test_the_descriptor_names_the_file_relative_to_itself(tmp_path):
    descriptor = (SECOND / "assignment.toml").read_text().replace('promises = "promises.toml"', 'promises = "p/x.toml"')
    (tmp_path / "assignment.toml").write_text(descriptor)
    assert assignments.load(tmp_path).promises == (tmp_path / "p" / "x.toml").resolve()
    (tmp_path / "assignment.toml").write_text(descriptor.replace('promises = "p/x.toml"\n', ""))
    assert assignments.load(tmp_path).promises is None
