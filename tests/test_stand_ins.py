"""Each function graded on its own: a broken helper's stand-in, and that breaking a part never buys points.

When a part fails its own checks, the checks of the code built on it run again with the lesson's stand-in for it
(``autograder/lessons/mha_pe/stand_ins.py``): the helper loses its own checks' points, the code built on it earns
or loses its own. These tests grade one small class and compare it test by test with the reference.
"""

import ast
import inspect
import math

import pytest
import torch

from autograder.commands.grading import grade_class
from autograder.lesson.catalogue import copy_package
from autograder.reports import feedback, feedback_text
from autograder.lessons.mha_pe.hidden_tests import support
from autograder.sandbox.isolation import Limits
from lesson import LESSON, MODULES, SOLUTIONS


SPLIT_TESTS = {"test_split_shape", "test_heads_are_contiguous_chunks", "test_split_keeps_tokens_apart",
               "test_heads_keep_the_dtype", "test_heads_work_on_any_device", "test_bad_shapes_raise_value_error"}
COMBINE_TESTS = {"test_combine_shape", "test_round_trip", "test_combine_places_heads_in_order",
                 "test_heads_keep_the_dtype", "test_heads_work_on_any_device", "test_bad_shapes_raise_value_error"}
TABLE_GROUP_TESTS = {"test_table_shape_and_dtype", "test_starts_at_position_zero", "test_sines_even_cosines_odd",
                     "test_frequency_exponent", "test_values_follow_the_formula", "test_base_argument_is_used",
                     "test_bad_sizes_raise_value_error", "test_table_is_vectorized",
                     "test_encoding_obeys_the_shift_identity"}
MODULE_EXAMPLES = {"test_module_matches_torch_output", "test_module_mask", "test_gradients_reach_every_projection",
                   "test_attention_alone_is_permutation_equivariant"}


def edited(folder, module, old, new):
    """The reference in ``folder`` with one edit of ``module``."""
    copy_package(SOLUTIONS, folder, MODULES)
    path = folder / module
    source = path.read_text()
    assert old in source, old
    path.write_text(source.replace(old, new, 1))
    return folder


SPLIT_BODY = ("    x = x.unflatten(-1, (num_heads, d_model // num_heads))  # (batch, seq, heads, head_dim)\n"
              "    return x.transpose(1, 2)  # (batch, heads, seq, head_dim)")
COMBINE_BODY = ("    x = x.transpose(1, 2)  # (batch, seq, heads, head_dim)\n"
                "    return x.flatten(2)  # (batch, seq, heads * head_dim); copies, since x is not contiguous")
OUT = "        out = self.out_proj(combine_heads(attended))  # (batch, seq, d_model)"
TABLE_END = "    return pe.flatten(1)  # (seq, d_model)"
BASE_KEPT = "get_positional_encoding(max_seq_len, d_model, base))"  # the reference module's table, with its base

EDITS = {
    # The examples by new hands: one slip in a helper.
    "split-seq-batch-swapped": [("heads.py", SPLIT_BODY, "    seq, batch, d = x.shape\n"
                                 "    return x.reshape(batch, seq, num_heads, d // num_heads).transpose(1, 2)")],
    "combine-contiguous-first": [("heads.py", COMBINE_BODY, "    batch, heads, seq, head_dim = x.shape\n"
                                  "    return x.contiguous().transpose(1, 2).view(batch, seq, heads * head_dim)")],
    "table-transposed": [("positional_encoding.py", TABLE_END, "    return pe.flatten(1).T")],
    # A mistake in the module alone, then the same with a helper broken on purpose (raising, or garbage).
    "module-no-out-proj": [("attention.py", OUT, "        out = combine_heads(attended)")],
    "module-no-out-proj-split-raises": [
        ("attention.py", OUT, "        out = combine_heads(attended)"),
        ("heads.py", SPLIT_BODY, "    raise RuntimeError('broken on purpose')")],
    "module-no-out-proj-split-garbage": [
        ("attention.py", OUT, "        out = combine_heads(attended)"),
        ("heads.py", SPLIT_BODY, "    return torch.zeros(x.shape[0], num_heads, x.shape[1], d_model // num_heads)")],
    # Someone who read this repository: split_heads broken on purpose, the module keeping the stand-in it meets, and
    # split_heads answering with it from then on. It buys what writing split_heads (two lines) buys, never more.
    "stand-in-kept": [
        ("heads.py", SPLIT_BODY, "    kept = STASH.get('split')\n"
                                 "    if kept is None:\n"
                                 "        raise RuntimeError('broken on purpose')\n"
                                 "    return kept(x, num_heads)"),
        ("heads.py", "def split_heads(x, num_heads):", "STASH = {}\n\n\ndef split_heads(x, num_heads):"),
        ("attention.py", OUT, OUT + "\n        from . import heads as _heads\n"
                                    "        if _heads.split_heads.__module__ != _heads.__name__:\n"
                                    "            _heads.STASH['split'] = _heads.split_heads")],
}


def _special_cased_table():
    """The hole the stand-ins close: a module that drops its base, and a table that returns the default base's
    values exactly when asked for the module's size (so the buffer matched "the student's own table")."""
    return [("positional_encoding.py", "    if max_seq_len < 1:\n",
             "    if (max_seq_len, d_model) == (20, 8):\n        base = 10000.0\n    if max_seq_len < 1:\n")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("stand-ins")
    class_dir = root / "class"
    copy_package(SOLUTIONS, class_dir / "reference", MODULES)
    for name, edits in EDITS.items():
        folder = class_dir / name
        copy_package(SOLUTIONS, folder, MODULES)
        for module, old, new in edits:
            source = (folder / module).read_text()
            assert old in source, (name, old)
            (folder / module).write_text(source.replace(old, new, 1))
    drops_base = _module_drops_its_base(class_dir / "module-drops-base")
    _module_drops_its_base(class_dir / "module-drops-base-table-special-cased")
    for module, old, new in _special_cased_table():
        path = class_dir / "module-drops-base-table-special-cased" / module
        path.write_text(path.read_text().replace(old, new, 1))
    assert drops_base.exists()
    results = grade_class(class_dir, root / "out", jobs=2, limits=Limits(call_seconds=4.0), emit=lambda line: None,
                          skip_notebook=True)
    return {result.student: {test.id: test for test in result.tests} for result in results}, \
        {result.student: result for result in results}


def _module_drops_its_base(folder):
    copy_package(SOLUTIONS, folder, MODULES)
    path = folder / "positional_encoding.py"
    source = path.read_text()
    module = source[source.index("class PositionalEncoding"):]
    assert module.count(BASE_KEPT) == 1, "the reference's module passes its base once"
    path.write_text(source.replace(module, module.replace(BASE_KEPT, "get_positional_encoding(max_seq_len, d_model))"),
                                   1))
    return folder


def lost(tests, reference):
    """The ids of the checks that lost points against the reference."""
    return {test_id for test_id, test in tests.items() if test.score < reference[test_id].score}


@pytest.mark.slow
@pytest.mark.parametrize("student, own", [("split-seq-batch-swapped", SPLIT_TESTS),
                                          ("combine-contiguous-first", COMBINE_TESTS),
                                          ("table-transposed", TABLE_GROUP_TESTS)])
def test_a_broken_helper_costs_only_its_own_checks(graded, student, own):
    """The issue's examples: a slip in split_heads (44-46 points before), in combine_heads, in the table (38):
    every check of the code built on the helper keeps its points, graded with the stand-in; the feedback says so."""
    tests, results = graded
    reference = tests["reference"]
    assert lost(tests[student], reference) <= own | {"test_inputs_are_left_unchanged"}, "only the helper pays"
    assert lost(tests[student], reference), "the slip costs its own checks"
    stood = {test_id for test_id, test in tests[student].items() if test.stood_in}
    assert stood and all(tests[student][test_id].score == reference[test_id].score for test_id in stood)
    text = feedback.render(results[student])
    assert "## Fix first" in text and "ran with a working stand-in for it" in text
    assert "checked with a working stand-in for" in feedback_text.render(results[student])


@pytest.mark.slow
def test_a_broken_split_leaves_the_multi_head_checks_gradable(graded):
    tests, _ = graded
    for test_id in MODULE_EXAMPLES:
        test = tests["split-seq-batch-swapped"][test_id]
        assert test.status == "passed" and test.stood_in == ("split_heads",), test_id
        assert not tests["reference"][test_id].stood_in, "the reference needs no stand-in"


@pytest.mark.slow
def test_breaking_a_part_on_purpose_never_raises_a_score(graded):
    """A module with a mistake, then the same module with split_heads broken on purpose (raising, or returning
    zeros): the module's own mistake costs exactly what it cost, and the broken helper costs more on top."""
    tests, results = graded
    alone = tests["module-no-out-proj"]
    mistake = lost(alone, tests["reference"])
    assert mistake and not mistake & SPLIT_TESTS
    for student in ("module-no-out-proj-split-raises", "module-no-out-proj-split-garbage"):
        assert lost(tests[student], tests["reference"]) - SPLIT_TESTS - {"test_inputs_are_left_unchanged"} == \
            mistake, student
        assert results[student].score < results["module-no-out-proj"].score, student


@pytest.mark.slow
def test_a_stand_in_kept_by_the_submission_is_gone_when_the_parts_own_checks_run(graded):
    """The worker runs the student's code beside the stand-in, which that code may keep (in a list, a module's
    attribute) to answer with later. A stand-in block runs in a child of the worker, which ends with the block: what
    it kept is gone when split_heads' own checks run, so the part's points stay unearned, exactly as for a
    split_heads that raises."""
    tests, results = graded
    assert results["stand-in-kept"].score < results["reference"].score
    assert lost(tests["stand-in-kept"], tests["reference"]) - {"test_inputs_are_left_unchanged"} == \
        lost(tests["module-no-out-proj-split-raises"], tests["module-no-out-proj"]) - {"test_inputs_are_left_unchanged"}
    assert tests["stand-in-kept"]["test_module_matches_torch_output"].stood_in == ("split_heads",)


@pytest.mark.slow
def test_a_table_special_cased_at_the_module_checks_sizes_buys_nothing(graded):
    """Before stand-ins, the buffer check accepted the student's own table at its size: a table returning the
    default base's values there hid a module that drops its base. Now the module is judged with the lesson's
    table: the buffer check fails exactly as for the plain mistake, and the special case costs table points."""
    tests, results = graded
    plain, hostile = tests["module-drops-base"], tests["module-drops-base-table-special-cased"]
    assert plain["test_module_keeps_the_table_as_a_buffer"].status == "failed"
    assert hostile["test_module_keeps_the_table_as_a_buffer"].status == "failed"
    assert results["module-drops-base-table-special-cased"].score <= results["module-drops-base"].score


# ---------------------------------------------------------------- the stand-ins themselves

def _stand_ins():
    namespace = {}
    exec(compile(support._STAND_IN_SOURCE, "stand_ins.py", "exec"), namespace)  # the file as the worker gets it
    return namespace


def _reference():
    from autograder.lesson.reference import load_reference
    return load_reference(LESSON)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_each_stand_in_behaves_like_the_reference(dtype):
    """On a battery of contract inputs (ranks, sizes, masks, dtypes, the meta device) and every documented error."""
    mine, reference = _stand_ins(), _reference()
    generator = torch.Generator().manual_seed(0)
    for n, d, base in ((1, 2, 10000.0), (7, 6, 10000.0), (300, 16, 100.0), (50, 64, 10.0)):
        assert torch.equal(mine["get_positional_encoding"](n, d, base), reference.get_positional_encoding(n, d, base))
    for shape, heads in (((2, 5, 12), 3), ((1, 1, 4), 4), ((3, 2, 6), 1)):
        x = torch.randn(*shape, generator=generator, dtype=dtype)
        split = mine["split_heads"](x, heads)
        assert torch.equal(split, reference.split_heads(x, heads)) and split.dtype == dtype
        assert torch.equal(mine["combine_heads"](split), reference.combine_heads(split))
        assert mine["split_heads"](x.to("meta"), heads).shape == split.shape
    masks = (None, torch.tril(torch.ones(4, 5, dtype=torch.bool)),
             torch.tensor([[True] * 5, [False] * 5, [True, False] * 2 + [True], [False] * 4 + [True]]))
    for lead in ((), (2,), (2, 3)):
        q, k, v = (torch.randn(*lead, 4, 3, generator=generator, dtype=dtype),
                   torch.randn(*lead, 5, 3, generator=generator, dtype=dtype),
                   torch.randn(*lead, 5, 2, generator=generator, dtype=dtype))
        for mask in masks:
            for got, expected in zip(mine["scaled_dot_product_attention"](q, k, v, mask),
                                     reference.scaled_dot_product_attention(q, k, v, mask)):
                assert torch.allclose(got, expected, atol=1e-6) and got.dtype == expected.dtype
    refused = [(lambda: mine["get_positional_encoding"](0, 4), ValueError),
               (lambda: mine["get_positional_encoding"](3, 5), ValueError),
               (lambda: mine["get_positional_encoding"](3, 0), ValueError),
               (lambda: mine["split_heads"](torch.zeros(2, 3, 4, 6), 2), ValueError),
               (lambda: mine["split_heads"](torch.zeros(2, 3, 10), 4), ValueError),
               (lambda: mine["split_heads"](torch.zeros(2, 3, 10), 0), ValueError),
               (lambda: mine["combine_heads"](torch.zeros(2, 3, 4)), ValueError),
               (lambda: mine["scaled_dot_product_attention"](q, k, v, torch.ones(4, 5)), TypeError)]
    for call, error in refused:
        with pytest.raises(error):
            call()


def test_a_worker_is_sent_only_the_stand_in_it_needs_and_nothing_instructor_only():
    """Each stand-in goes alone (its imports and one function), and the file holds no solution region and none of
    the reference's docstrings: it is the lesson's recipe, not the reference."""
    source = support.stand_in_source("split_heads")
    names = {node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
    assert names == {"split_heads"}
    text = support._STAND_IN_SOURCE
    assert "BEGIN SOLUTION" not in text
    reference = _reference()
    for name in support.STAND_INS:
        doc = inspect.getdoc(getattr(reference, name))
        assert doc and doc.splitlines()[0] not in text
    assert math.isclose(support.BASE_OF_MODULE, 100.0)
