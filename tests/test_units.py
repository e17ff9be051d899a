"""Small pieces of the engine: the forbidden-API scan, result records, file names."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest

from autograder import paths
from autograder.intake.forbidden import scan_module, scan_submission
from autograder.intake.source_tree import parse
from autograder.records.results import NotebookSummary, SubmissionResult, TestResult
from autograder.intake.naming import safe_name
from autograder.intake.submission import read_files
from lesson import CONTRACT, SOLUTIONS


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.py")), ids=lambda path: path.name)
def test_a_file_is_walked_once_and_every_node_is_listed_under_its_statement(path):
    import ast

    parsed = parse(path.read_bytes())
    tree = ast.parse(path.read_text())
    assert len(parsed.parts) == len(tree.body)
    for (statement, under), expected in zip(parsed.parts, tree.body, strict=True):
        assert ast.dump(statement) == ast.dump(expected)
        assert sorted(map(ast.dump, under)) == sorted(map(ast.dump, ast.walk(expected)))
    assert parse(b"def broken(:\n") is None and parse("x = (" * 10_000) is None


def test_the_scan_finds_forbidden_calls_and_where_they_are():
    source = """
import torch
import torch.nn.functional as F
from torch.nn import MultiheadAttention as MHA

def scaled_dot_product_attention(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v), None

class MultiHeadAttention(torch.nn.Module):
    def __init__(self, d, h):
        self.inner = MHA(d, h)
"""
    found = scan_module(source, "attention", CONTRACT)
    assert found == {"scaled_dot_product_attention": {"torch.nn.functional.scaled_dot_product_attention"},
                     "MultiHeadAttention": {"torch.nn.MultiheadAttention"}}


def test_the_scan_leaves_honest_code_and_names_alone():
    source = """
import torch
from .heads import split_heads

def scaled_dot_product_attention(q, k, v, mask=None):
    '''Unlike torch.nn.functional.scaled_dot_product_attention, this returns the weights.'''
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v, None

class MultiHeadAttention(torch.nn.Module):
    def forward(self, x):
        return scaled_dot_product_attention(x, x, x)
"""
    assert scan_module(source, "attention", CONTRACT) == {}


def test_the_private_attention_kernels_are_caught_whatever_they_are_reached_through():
    source = """
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    return torch._scaled_dot_product_attention_math(q, k, v, attn_mask=mask)

class MultiHeadAttention(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(x, x, x)[0]
"""
    assert scan_module(source, "attention", CONTRACT) == {
        "scaled_dot_product_attention": {"torch._scaled_dot_product_attention_math"},
        "MultiHeadAttention": {"torch._scaled_dot_product_flash_attention_for_cpu"}}


def test_an_operator_named_by_string_and_torchs_python_attention_are_caught():
    source = """
import torch
from torch.nn.attention.flex_attention import flex_attention

def scaled_dot_product_attention(q, k, v, mask=None):
    return torch._C._jit_get_operation("aten::_scaled_dot_product_attention_math")[0](q, k, v)

def split_heads(x, h):
    return torch._decomp.decompositions.scaled_dot_product_flash_attention_for_cpu(x, x, x)[0]

class MultiHeadAttention(torch.nn.Module):
    def forward(self, x):
        return flex_attention(x, x, x)
"""
    # Each file's contract names only: in attention.py, split_heads is a helper nothing names.
    assert scan_module(source, "attention", CONTRACT) == {
        "scaled_dot_product_attention": {"torch._scaled_dot_product_attention_math"},
        "MultiHeadAttention": {"torch.nn.attention.flex_attention.flex_attention"}}
    assert scan_module(source, "heads", CONTRACT) == {
        "split_heads": {"torch._decomp.decompositions.scaled_dot_product_flash_attention_for_cpu"}}


ATTENTION_IMPORTING = """
import torch
{imports}

def scaled_dot_product_attention(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v, weights

class MultiHeadAttention(torch.nn.Module):
    def forward(self, x):
        return {call}
"""

HELPERS = ATTENTION_IMPORTING.replace("{imports}", """
def _unwrapped(*args):  # a copy of the function no tripwire wraps
    return torch._C._nn.scaled_dot_product_attention(*args)

def _attend(q, k, v):
    return _unwrapped(q, k, v)""")


@pytest.mark.parametrize("call, charged", [
    ("_attend(x, x, x)", {"MultiHeadAttention"}),  # through two helpers: only the name that calls them
    ("x", set())])  # named by nothing (a student's own check against torch, never run by grading): nothing
def test_a_helpers_use_is_charged_to_the_names_that_reach_it(call, charged):
    found = scan_module(HELPERS.format(call=call), "attention", CONTRACT)
    assert found == dict.fromkeys(charged, {"torch.nn.functional.scaled_dot_product_attention"})


HIDDEN = """
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    return torch._C._nn.scaled_dot_product_attention(q, k, v), None

{trick}

class MultiHeadAttention(torch.nn.Module):
    def forward(self, x):
        return {call}(x, x, x)[0]
"""


@pytest.mark.parametrize("trick, call", [
    # defined twice, the first kept under another name: both definitions count
    ("_first = scaled_dot_product_attention\n\ndef scaled_dot_product_attention(q, k, v, mask=None):\n"
     "    return q, q", "_first"),
    ("CALLS = [scaled_dot_product_attention]", "CALLS[0]")])  # named by module-level code: as good as it
def test_a_use_behind_a_redefinition_or_a_module_level_name_reaches_every_name(trick, call):
    found = scan_module(HIDDEN.format(trick=trick, call=call), "attention", CONTRACT)
    assert found == dict.fromkeys(["scaled_dot_product_attention", "MultiHeadAttention"],
                                  {"torch.nn.functional.scaled_dot_product_attention"})


HEADS_WITH_HELPERS = """
import torch

def split_heads(x, h):
    return x.unflatten(-1, (h, -1)).transpose(1, 2)

def combine_heads(x):
    return x.transpose(1, 2).flatten(-2)

{table}
def attend(q, k, v):  # nothing in this file names it: only what imports it is charged
    return torch._C._VariableFunctions._scaled_dot_product_attention_math(q, k, v)

def _against_torch(x):  # the student's own check: named by nothing anywhere
    return torch.nn.functional.scaled_dot_product_attention(x, x, x)
"""



KERNEL = {"torch._scaled_dot_product_attention_math"}


@pytest.mark.parametrize("imports, call, expected", [
    ("from .heads import attend", "attend(x, x, x)", {"MultiHeadAttention": KERNEL}),
    ("from .heads import attend as _a", "_a(x, x, x)", {"MultiHeadAttention": KERNEL}),
    ("from {package}.heads import attend", "attend(x, x, x)", {"MultiHeadAttention": KERNEL}),
    ("from . import heads", "heads.attend(x, x, x)", {"MultiHeadAttention": KERNEL}),
    ("from {package} import heads as h", "h.attend(x, x, x)", {"MultiHeadAttention": KERNEL}),
    ("import {package}.heads", "{package}.heads.attend(x, x, x)", {"MultiHeadAttention": KERNEL}),
    ("import {package}.heads as h", "h.attend(x, x, x)", {"MultiHeadAttention": KERNEL}),
    ("from .heads import *", "attend(x, x, x)", {"MultiHeadAttention": KERNEL}),
    ("def _late():\n    from .heads import attend\n    return attend", "_late()(x, x, x)",
     {"MultiHeadAttention": KERNEL}),
    # the module itself, used bare: anything of it is within reach, its unnamed check too
    ("from . import heads", "getattr(heads, 'att' + 'end')(x, x, x)",
     {"MultiHeadAttention": KERNEL | {"torch.nn.functional.scaled_dot_product_attention"}}),
    # a name heads.py's top-level code binds: that code taints heads.py's own names too
    ("from .heads import KERNEL", "KERNEL(x, x, x)", dict.fromkeys(["MultiHeadAttention", "split_heads",
                                                                      "combine_heads"], KERNEL))])
def test_a_helper_imported_from_a_sibling_file_is_charged_to_the_names_that_reach_it(imports, call, expected):
    """A kernel no tripwire can wrap (a class's attribute), kept in a helper of heads.py that nothing there names
    and called from attention.py: charged to the name that calls it, however the helper is imported."""
    package = CONTRACT.package
    table = "KERNEL = torch._C._VariableFunctions._scaled_dot_product_attention_math" if "KERNEL" in call else ""
    files = {"heads": HEADS_WITH_HELPERS.format(table=table).encode(),
             "attention": ATTENTION_IMPORTING.format(imports=imports.format(package=package),
                                                     call=call.format(package=package)).encode()}
    assert scan_submission(files, CONTRACT) == expected


@pytest.mark.parametrize("imports, call", [
    ("", "torch_tables._scaled_dot_product_attention_math(x, x, x)"),  # a variable holding torch's table
    ("", "self.tables._scaled_dot_product_attention_math(x, x, x)"),  # an attribute holding it
    ("from . import heads", "heads.torch._C._VariableFunctions._scaled_dot_product_attention_math(x, x, x)"),
    ("import operator", 'operator.itemgetter("_scaled_dot_product_attention_math")(vars(torch_tables))(x, x, x)'),
    ("", "match_kernel(torch_tables)(x, x, x)"),  # a pattern reads the attribute
    ("import functools", 'functools.reduce(getattr, ["_C", "_VariableFunctions", '
                         '"_scaled_dot_product_attention_math"], torch)(x, x, x)'),  # getattr handed on
    # a helper reached by a name built at run time: anything of any file is within reach
    ("from . import heads", "eval('heads.att' + 'end')(x, x, x)"),
    ("import importlib", "importlib.import_module('.he' + 'ads', __package__).attend(x, x, x)"),
    ("import sys", "sys.modules[__package__ + '.heads'].attend(x, x, x)"),
    ("from sys import modules as loaded", "loaded[__package__ + '.heads'].attend(x, x, x)"),
    ("from .heads import attend", "globals()['att' + 'end'](x, x, x)"),
    ("from .heads import attend", "globals()['attend'](x, x, x)"),  # a constant key names what it reads
    ("", "globals()['_mine'](x)"),  # this file's own helper, by its name
    ("from . import heads", "heads.__dict__['attend'](x, x, x)"),  # a module's namespace read by a dunder
    ("", "print.__self__.eval('_mi' + 'ne')(x)"),  # the builtins module, reached through a builtin
    ("from .heads import attend", "scaled_dot_product_attention.__globals__['att' + 'end'](x, x, x)")])
def test_a_kernel_held_in_a_variable_or_reached_by_a_computed_name_is_charged(imports, call):
    """A private kernel no contract name shares counts as an attribute of anything (a variable, an attribute, a
    module can hold torch's tables); a name built at run time may reach any helper of any file."""
    attention = ATTENTION_IMPORTING.format(imports=imports, call=call) + (
        "\ntorch_tables = torch._C._VariableFunctions\n\n"
        "def match_kernel(table):\n    match table:\n"
        "        case object(_scaled_dot_product_attention_math=kernel):\n            return kernel\n\n"
        "def _mine(x):  # named by no plain name\n"
        "    return torch._C._VariableFunctions._scaled_dot_product_attention_math(x, x, x)\n")
    files = {"heads": HEADS_WITH_HELPERS.format(table="").encode(), "attention": attention.encode()}
    found = scan_submission(files, CONTRACT)
    assert KERNEL <= found.get("MultiHeadAttention", set()), found
    assert "scaled_dot_product_attention" not in found and "split_heads" not in found, found


@pytest.mark.parametrize("imports, uses", [
    ("import sys", "-sys.float_info.max"),  # a masking constant
    ("import sys", "vars(torch.finfo(x.dtype))['min']"),  # an object's own namespace
    ("import sys", "globals()['scaled_dot_product_attention'](x, x, x)[0]"),  # a contract name read back
    ("import os, sys\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))", "x"),
    ("import sys\nDEBUG = '-v' in sys.argv", "print(sys.exc_info(), sys.getsizeof(x)) or x"),
    ("", "(self.eval(), x)[1]"),  # nn.Module.eval, not the builtin
    ("", "print(locals(), vars()) or x"),  # a debugging print
    ("import logging\nfrom . import heads", "(logging.getLogger(heads.__name__), x)[1]"),  # a module's name
    ("import importlib\nfrom . import heads\nimportlib.reload(heads)", "x"),  # a notebook habit
    ("import functools", "functools.reduce(getattr, 'q_linear.weight'.split('.'), self) and x")])
def test_plain_reads_of_sys_vars_and_globals_charge_nothing(imports, uses):
    """Honest code that looks dynamic (a masking constant from sys, a debugging print of locals(), nn.Module's
    eval(), a module's __name__, reload, getattr handed to reduce for a parameter) reaches nothing by a computed
    name: the checks against torch that nothing names (in heads.py) stay uncharged, and a docstring naming torch's
    class is no look-up."""
    attention = ATTENTION_IMPORTING.format(imports=imports, call=uses).replace(
        "class MultiHeadAttention(torch.nn.Module):\n",
        'class MultiHeadAttention(torch.nn.Module):\n    """Written to match torch.nn.MultiheadAttention."""\n')
    files = {"heads": HEADS_WITH_HELPERS.format(table="").encode(), "attention": attention.encode()}
    assert scan_submission(files, CONTRACT) == {}


@pytest.mark.parametrize("setup", [
    "class _Setup:  # named by nothing; its body runs on import\n"
    "    torch.attend_kernel = torch._C._VariableFunctions._scaled_dot_product_attention_math",
    "def _unused(k=setattr(torch, 'attend_kernel', torch._C._VariableFunctions._scaled_dot_product_attention_math)):"
    "\n    pass",
    "@lambda f: setattr(torch, 'attend_kernel', torch._C._VariableFunctions._scaled_dot_product_attention_math) or f"
    "\ndef _unused():\n    pass",
    "class _Holder:\n    def run(self, kernel=torch._C._VariableFunctions._scaled_dot_product_attention_math):\n"
    "        return kernel"])
def test_what_a_definition_runs_on_import_is_module_level_code(setup):
    """A class body, a default value or a decorator runs when the file is imported, whether or not anything names
    the definition: its uses taint every name, as module-level code's do."""
    attention = ATTENTION_IMPORTING.format(imports="", call="torch.attend_kernel(x, x, x)[0]") + "\n" + setup + "\n"
    files = {"heads": HEADS_WITH_HELPERS.format(table="").encode(), "attention": attention.encode()}
    assert scan_submission(files, CONTRACT) == dict.fromkeys(["scaled_dot_product_attention", "MultiHeadAttention"],
                                                             KERNEL)


@pytest.mark.parametrize("imports", ["from .heads import split_heads, combine_heads", "from . import heads",
                                     "from .heads import *", "import {package}.heads"])
def test_honest_imports_from_a_sibling_charge_nothing(imports):
    """The solution's own layout: attention.py uses heads.py's public names; heads.py keeps a check against
    torch that nothing names. Nothing is charged."""
    uses = "split_heads(x, 2)" if "heads import" in imports else "{package}.heads.split_heads(x, 2)" \
        if imports.startswith("import") else "heads.split_heads(x, 2)"
    package = CONTRACT.package
    files = {"heads": HEADS_WITH_HELPERS.format(table="").encode(),
             "attention": ATTENTION_IMPORTING.format(imports=imports.format(package=package),
                                                     call=uses.format(package=package)).encode()}
    assert scan_submission(files, CONTRACT) == {}


def test_a_forbidden_path_into_a_submodule_torch_leaves_unimported_is_reached():
    """The worker wraps what the path names: a submodule ``import torch`` does not load is imported to reach it
    (validate's check and the tripwires both resolve it so)."""
    path = next(path for path in CONTRACT.forbidden if path.startswith("torch.nn.attention."))
    module = path.rsplit(".", 1)[0]
    probe = (f"import sys, torch; from autograder.worker.contract import resolve_path; "
             f"assert {module!r} not in sys.modules; owner, found = resolve_path({path!r}); "
             f"print(found is not None and owner is sys.modules[{module!r}])")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=paths.REPO_ROOT)
    assert ran.stdout.strip() == "True", ran.stderr


SELF_CHECK = """
import torch
from torch import nn

def scaled_dot_product_attention(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v, weights

def _against_torch(x):
    return nn.MultiheadAttention(4, 2, batch_first=True)(x, x, x)

{prelude}
if __name__ == "__main__":
    x = torch.randn(2, 3, 4)
    print(_against_torch(x), nn.functional.scaled_dot_product_attention(x, x, x))
{orelse}"""


@pytest.mark.parametrize("prelude, orelse, charged", [
    ("", "", False),  # the student's own check, run by hand: never when graded
    ('__name__ = "__main__"', "", True),  # renamed so that it runs on import
    ('globals()["__name__"] = "__main__"', "", True),
    ('globals().update(__name__="__main__")', "", True),  # a keyword argument binds it too
    ("exec('__na' + 'me__ = \"__main__\"')", "", True),  # so may code read by a computed name
    ("", "else:\n    nn.MultiheadAttention(4, 2)", True)])  # the else branch runs on import
def test_a_main_block_is_charged_only_where_it_may_run_when_graded(prelude, orelse, charged):
    found = scan_module(SELF_CHECK.format(prelude=prelude, orelse=orelse), "attention", CONTRACT)
    assert bool(found) == charged and (not charged or set(found) == {"scaled_dot_product_attention",
                                                                     "MultiHeadAttention"}), found


def test_the_copies_of_a_forbidden_function_that_torch_keeps_elsewhere_are_found():
    """torch.nn.functional's attention is torch._C._nn's too: the tripwires watch both (a class's attributes,
    torch._C._VariableFunctions', cannot be replaced and are not listed)."""
    probe = ("import torch; from autograder.worker.contract import copies; "
             "print(sorted(m.__name__ + '.' + a for m, a in copies('torch.nn.functional.scaled_dot_product_attention')), "
             "copies('torch.nn.MultiheadAttention'))")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=paths.REPO_ROOT)
    assert ran.stdout.strip() == "['torch._C._nn.scaled_dot_product_attention'] []", ran.stderr


OPERATOR_PATHS = """
import sys, torch
from autograder.worker.operator_watch import record_into, watch_operators
from lesson import CONTRACT
hits = []
watch_operators(CONTRACT.forbidden)
record_into(hits.append)
torch.manual_seed(0)
q = torch.randn(2, 2, 3, 4, requires_grad=True)
kernel = "_scaled_dot_" + "product_attention_math"
plain = torch.softmax(q @ q.transpose(-2, -1) / 2.0, dim=-1) @ q
calls = {
    "a class's attribute": lambda: getattr(torch._C._VariableFunctions, kernel)(q, q, q)[0],
    "torch.ops": lambda: getattr(torch.ops.aten, kernel)(q, q, q)[0],
    "an operator by name": lambda: torch._C._jit_get_operation("aten::" + kernel)[0](q, q, q)[0],
    "inference mode": lambda: torch.inference_mode()(lambda: getattr(torch._C._VariableFunctions, kernel)(
        q.detach(), q.detach(), q.detach())[0])(),
    "the fused CPU kernel": lambda: torch._C._VariableFunctions._scaled_dot_product_flash_attention_for_cpu(
        q, q, q)[0],
    "the fused kernel, inference mode": lambda: torch.inference_mode()(lambda: getattr(
        torch._C._VariableFunctions, "_scaled_dot_product_flash_attention_for_cpu")(
        q.detach(), q.detach(), q.detach())[0])(),
}
from torch._subclasses.fake_tensor import FakeTensorMode


def fake_mode():  # the fused CPU kernel under a fake-tensor mode (torch.export's): the fake device's kernel answers
    real = q.detach()
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(real)
        return torch.nn.functional.scaled_dot_product_attention(fake, fake, fake).shape == q.shape


def nested():  # a nested tensor's attention goes by its own autograd key
    rows = torch.nested.nested_tensor([q[0].detach(), q[1].detach()], layout=torch.strided)
    return torch.ops.aten.scaled_dot_product_attention.default(rows, rows, rows).is_nested


found = {}
for label, call in {"a fake-tensor mode": fake_mode, "a nested tensor": nested}.items():
    hits.clear()
    answered = call()
    found[label] = [sorted(set(hits)), answered, False]
for label, call in calls.items():
    hits.clear()
    out = call()
    grads = out.requires_grad and torch.autograd.grad(out.sum(), q)[0] is not None
    found[label] = [sorted(set(hits)), torch.allclose(out, plain, atol=1e-5), grads]
hits.clear()
torch.softmax(q @ q.transpose(-2, -1), dim=-1) @ q
found["honest arithmetic"] = [hits, True, False]
print(json.dumps(found))
"""


def test_a_forbidden_operator_is_watched_at_the_dispatcher_whatever_its_name():
    """The private kernels are kept where no tripwire can replace them (a class's attributes, torch.ops, an
    operator looked up by name); the dispatcher sees every call, inference mode's too, and answers it as the
    library would (the same values, gradients kept). Honest arithmetic records nothing."""
    ran = subprocess.run([sys.executable, "-c", "import json\n" + OPERATOR_PATHS], capture_output=True, text=True,
                         cwd=paths.REPO_ROOT, env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "tests")})
    math, fused = ["torch._scaled_dot_product_attention_math"], ["torch._scaled_dot_product_flash_attention_for_cpu"]
    assert json.loads(ran.stdout) == {
        "a class's attribute": [math, True, True], "torch.ops": [math, True, True],
        "an operator by name": [math, True, True], "inference mode": [math, True, False],
        "the fused CPU kernel": [fused, True, True], "the fused kernel, inference mode": [fused, True, False],
        "a fake-tensor mode": [fused + ["torch.nn.functional.scaled_dot_product_attention"], True, False],
        "a nested tensor": [math + ["torch.nn.functional.scaled_dot_product_attention"], True, False],
        "honest arithmetic": [[], True, False]}, ran.stderr


COMPILED = """
import json, math, torch
from autograder.worker.operator_watch import keep_compiled_attention_unfused, record_into, watch_operators
from lesson import CONTRACT
hits = []
watch_operators(CONTRACT.forbidden)
record_into(hits.append)
keep_compiled_attention_unfused()


def attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


q = torch.randn(2, 4, 16, 8)
out = torch.compile(attention)(q, q, q)
print(json.dumps([hits, torch.allclose(out, attention(q, q, q), atol=1e-5)]))
"""


@pytest.mark.skipif(not (shutil.which("c++") or shutil.which("g++")), reason="torch.compile needs a C++ compiler")
def test_honest_attention_compiled_by_torch_compile_is_not_charged():
    """torch.compile's pattern matcher would rewrite honest softmax(q k^T) v into the fused kernel the dispatcher
    watch records: the worker turns those patterns off, and the compiled code computes the same values."""
    ran = subprocess.run([sys.executable, "-c", COMPILED], capture_output=True, text=True, cwd=paths.REPO_ROOT,
                         env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "tests")})
    assert ran.stdout.strip().splitlines()[-1:] == ['[[], true]'], ran.stderr[-2000:]


def test_getattr_tricks_are_caught():
    source = "import torch\ndef scaled_dot_product_attention(q, k, v, mask=None):\n" \
             "    return getattr(torch.nn.functional, 'scaled_dot_product_attention')(q, k, v), None\n"
    assert scan_module(source, "attention", CONTRACT)


def test_results_round_trip_through_json():
    result = SubmissionResult("ünï", (TestResult("a", "heads", 2, 3, "failed", "why", "hidden", "test_a"),),
                              1.5, "out", "bwrap", "abc", ("note",), {"student_output": "hi"})
    again = SubmissionResult.from_json(result.to_json())
    assert again == result and again.score == 2 and again.max_score == 3


def test_typed_failures_and_the_notebook_summary_round_trip_inside_gradescopes_form():
    """Both ride in ``extra_data``: Gradescope's top-level keys stay as they were, and a record written before
    they existed reads as one without them."""
    from autograder.records.results import GraderFailure

    result = SubmissionResult("ünï", (TestResult("a", "heads", 0, 3, "failed", "why", "visible", "test_a"),),
                              grader_failures=(GraderFailure("suite_problem", "could not collect"),
                                               GraderFailure("check_crashed", "test_a: crashed (TypeError)")),
                              notebook=NotebookSummary("u", pending_manual=13, manual_max=13, seconds=0.5,
                                                       reason="no notebook", output="printed"),
                              extra={"student_output": "hi"})
    record = result.to_json()
    assert set(record) == {"score", "execution_time", "output", "tests", "extra_data"}
    assert record["extra_data"]["notebook_id"] == "u" and record["extra_data"]["notebook_pending_manual"] == 13
    again = SubmissionResult.from_json(json.loads(json.dumps(record)))
    assert again == result and again.extra == {"student_output": "hi"} and again.unfinished is None
    old = dict(record, extra_data={key: value for key, value in record["extra_data"].items()
                                   if key not in ("grader_failures", "notebook_id")})
    assert SubmissionResult.from_json(old).grader_failures == () and SubmissionResult.from_json(old).notebook is None
    with pytest.raises(ValueError):
        GraderFailure("because_i_said_so", "x")


def test_feedback_says_grading_failed_from_the_typed_failure_only():
    """The student's words in the output cannot make their feedback say the grader failed, and a failure the
    submission can cause (a crashed check) does not either."""
    from autograder.reports import feedback
    from autograder.records.results import GraderFailure

    sorry = "could not be graded automatically"
    tests = (TestResult("a", "heads", 0, 2, "failed", "why", "visible", "test_a"),)
    assert sorry in feedback.render(SubmissionResult("s", grader_failures=(GraderFailure("judge_stopped", "x"),)))
    assert sorry not in feedback.render(SubmissionResult("s", tests, output="grading failed: forged"))
    crashed = SubmissionResult("s", tests, grader_failures=(GraderFailure("check_crashed", "test_a: x"),))
    assert sorry not in feedback.render(crashed)


def test_the_feedback_header_keeps_written_points_pending_apart():
    """Written answers not graded yet are neither earned nor lost: the header says so instead of counting them
    as missing, and once a human has graded them it is the plain score."""
    from autograder.reports import feedback

    code = TestResult("a", "heads", 3, 3, "passed", "", "visible", "test_a")
    pending = TestResult("written: q1", "written", 0, 4, "pending", "my answer", "visible", "q1")
    graded = TestResult("written: q1", "written", 3, 4, "passed", "my answer", "visible", "q1")
    header = feedback.render(SubmissionResult("s", (code, pending))).splitlines()[2]
    assert header == "**Score: 3 / 3 so far · 4 written points still to be graded**"
    assert feedback.render(SubmissionResult("s", (code, graded))).splitlines()[2] == "**Score: 6 / 7**"
    assert feedback.render(SubmissionResult("s", (code,))).splitlines()[2] == "**Score: 3 / 3**"


@pytest.mark.parametrize("student", ["alice", "a b", "..", ".hidden", "-rf", "ünï/x", "a\nb"])
def test_safe_names_are_plain_file_names(student):
    name = safe_name(student)
    assert "/" not in name and "\n" not in name and not name.startswith((".", "-")) and name not in ("", "..")


def test_safe_names_do_not_collide():
    students = ["a b", "a%20b", "A B", ".x", "%2Ex", "-x", "%2Dx"]
    assert len({safe_name(student) for student in students}) == len(students)


def test_oversized_and_linked_files_are_refused(tmp_path):
    (tmp_path / "heads.py").write_bytes(b"x" * (2 << 20))
    (tmp_path / "attention.py").symlink_to("/etc/passwd")
    (tmp_path / "positional_encoding.py").write_text("ok = 1\n")
    files, problems = read_files(tmp_path, CONTRACT)
    assert set(files) == {"positional_encoding"}
    assert "larger than" in problems["heads"] and "symbolic link" in problems["attention"]


_PID_NAMESPACES = """
import json, os, sys
from worker import zygote

pidns = zygote.own_pid_namespace([os.open(os.devnull, os.O_RDONLY)])  # stands in for the control socket
seen = {"zygote": os.getpid(), "workers": [], "plain": None}
for _ in range(3):
    r, w = os.pipe()
    pid = zygote.fork_in_fresh_pid_namespace(pidns)
    if pid == 0:
        os.write(w, str(os.getpid()).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    seen["workers"].append(int(os.read(r, 16)))
r, w = os.pipe()
pid = os.fork()  # any other child of the zygote: born in the zygote's own namespace
if pid == 0:
    os.write(w, str(os.getpid()).encode())
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
seen["plain"] = int(os.read(r, 16))
print(json.dumps(seen), flush=True)
"""


def test_each_worker_is_forked_straight_into_a_pid_namespace_of_its_own():
    """In a sandbox as the zygote's: the zygote is PID 1 of its own PID namespace; each worker fork is PID 1 of a
    fresh one, one after another, and any other child of the zygote is born in the zygote's namespace, not in
    the last worker's."""
    from workers import run_in_bwrap

    done = run_in_bwrap(_PID_NAMESPACES)
    assert done.returncode == 0, done.stderr[-500:]
    seen = json.loads(done.stdout)
    assert seen["zygote"] == 1 and seen["workers"] == [1, 1, 1] and seen["plain"] not in (None, 1)


def test_the_zygote_stops_a_worker_through_a_pidfd_that_names_it_alone():
    """A worker that has ended (reaped or not) is no error to stop and no other process is hit; a running one is
    killed and its status read once it is reaped."""
    import os
    import select
    import signal
    import time

    from autograder.worker.zygote import _Child

    ended = os.fork()
    if ended == 0:
        os._exit(3)
    child = _Child(ended)
    assert select.select([child.pidfd], [], [], 30)[0]  # it has ended (the pidfd says so) and is not reaped yet
    child.kill()  # a zombie takes the signal harmlessly
    status = child.wait(30)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3
    child.kill()  # reaped: nothing is sent, so a newcomer holding its pid is never hit
    child.close()

    running = os.fork()
    if running == 0:
        time.sleep(60)
        os._exit(0)
    child = _Child(running)
    assert child.wait(0) is None
    child.kill()
    status = child.wait(30)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    child.close()


def test_the_sandbox_choice_is_the_strongest_that_works_and_isolated_never_means_none(monkeypatch):
    from autograder.sandbox import isolation as sandboxes
    from autograder.errors import KitError

    monkeypatch.setattr(sandboxes, "_bwrap_problem", lambda limits, threads: "user namespaces are refused")
    monkeypatch.setattr(sandboxes, "_uid_problem", lambda limits, threads: (None, 4))
    chosen = sandboxes.choose_sandbox("auto")
    assert chosen.mode == "uid" and chosen.isolated and chosen.landlock == 4 and chosen.fork
    assert sandboxes.choose_sandbox("isolated").mode == "uid"
    with pytest.raises(KitError, match="user namespaces are refused"):
        sandboxes.choose_sandbox("bwrap")

    monkeypatch.setattr(sandboxes, "_uid_problem", lambda limits, threads: ("needs root", 0))
    # Fail closed: auto never grades unisolated; only the kit's own material (demo, validate) may fall back.
    with pytest.raises(KitError, match="no sandbox works here") as refused:
        sandboxes.choose_sandbox("auto")
    assert "user namespaces are refused" in str(refused.value) and "needs root" in str(refused.value)
    assert "\n" not in str(refused.value)
    fallback = sandboxes.choose_sandbox("auto", unisolated_ok=True)
    assert fallback.mode == "none" and not fallback.isolated
    assert "user namespaces are refused" in fallback.note and "needs root" in fallback.note
    assert sandboxes.choose_sandbox("none").mode == "none"  # asked for by name
    for mode in ("isolated", "uid"):
        with pytest.raises(KitError, match="does not work here"):
            sandboxes.choose_sandbox(mode)


def test_the_gradescope_run_refuses_to_grade_unisolated(tmp_path, monkeypatch):
    from autograder.commands import gradescope
    from autograder.sandbox import isolation as sandboxes

    monkeypatch.setattr(sandboxes, "_bwrap_problem", lambda limits, threads: "user namespaces are refused")
    monkeypatch.setattr(sandboxes, "_uid_problem", lambda limits, threads: ("no Landlock, no root", 0))
    (tmp_path / "submission").mkdir()
    result = gradescope.run(tmp_path, emit=lambda line: None)  # nothing graded; Gradescope still gets a results.json
    written = json.loads((tmp_path / "results" / "results.json").read_text())
    assert written["tests"] == [] and written["score"] == 0 and result.tests == ()
    assert [failure.kind for failure in result.grader_failures] == ["grader_error"]
    assert "isolated does not work here" in result.grader_failures[0].reason


def test_the_system_call_filter_is_well_formed():
    """Every jump lands inside the program, which ends in returns only (the kernel refuses anything else)."""
    import struct

    from autograder.worker.confine import _ARCHES, seccomp_program

    for machine in _ARCHES:
        program = seccomp_program(machine)
        ops = [struct.unpack("<HBBI", program[index:index + 8]) for index in range(0, len(program), 8)]
        for index, (code, jt, jf, _) in enumerate(ops):
            if code & 0x07 == 0x05:  # a jump
                assert index + 1 + max(jt, jf) < len(ops)
        assert ops[-1][0] == 0x06 and ops[-2][0] == 0x06


def test_a_confined_process_cannot_open_sockets_or_read_the_kit():
    """The confinement itself, in a child process: no network, nothing of the kit, writes only at home."""
    import os
    import shutil
    import socket
    import tempfile
    from pathlib import Path

    from autograder.worker import confine

    if os.geteuid() != 0:
        pytest.skip("confining to another user needs root")
    base = Path(tempfile.mkdtemp(prefix="mha-pe-confine-"))  # pytest's folders are not passable by other users
    os.chmod(base, 0o711)
    home = base / "home"
    home.mkdir()
    uid = 0x6FFF0000 + os.getpid() % 4096
    os.chown(home, uid, uid)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        report = []
        try:
            applied = confine.confine({"uid": uid, "gid": uid, "read": ["/usr", "/lib", "/lib64", "/etc"],
                                       "write": [str(home)]})
            report.append(f"uid={os.getuid()} landlock={applied['landlock']}")
            for label, attempt in (("socket", lambda: socket.socket()),
                                   ("kit", lambda: open(SOLUTIONS / "heads.py").read()),
                                   ("home", lambda: open(home / "note.txt", "w").write("ok"))):
                try:
                    attempt()
                    report.append(f"{label}:allowed")
                except OSError:
                    report.append(f"{label}:refused")
        finally:
            os.write(write, " ".join(report).encode())
            os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as handle:
        report = handle.read().split()
    shutil.rmtree(base)
    assert report[0] == f"uid={uid}"
    assert "socket:refused" in report and "kit:refused" in report and "home:allowed" in report


def test_what_a_confined_worker_left_in_shared_folders_is_removed_with_it(tmp_path):
    """Without Landlock a confined worker's user could park files in /tmp for the next student: gone at its end."""
    import os
    import tempfile

    from autograder.worker.confine import _remove_owned

    if os.geteuid() != 0:
        pytest.skip("files of another user need root to make")
    uid = 0x6FFE0000 + os.getpid() % 4096
    parked = tempfile.mkdtemp(prefix="parked-", dir="/tmp")
    (open(os.path.join(parked, "data"), "w")).close()
    other = tempfile.NamedTemporaryFile(prefix="not-parked-", dir="/tmp", delete=False)
    other.close()
    for path in (parked, os.path.join(parked, "data")):
        os.chown(path, uid, uid)
    try:
        _remove_owned(uid)
        assert not os.path.exists(parked)
        assert os.path.exists(other.name)  # someone else's file stays
    finally:
        os.unlink(other.name)



def test_every_ready_takes_an_absolute_deadline():
    """Zygotes and workers alike wait until a ``time.monotonic()`` instant, never for a number of seconds: a
    deadline already past gives up at once (a timeout of minus one second would not even be accepted)."""
    import inspect
    import socket
    import time

    from autograder.sandbox.worker_process import WorkerProcess
    from autograder.sandbox.zygote_client import ForkedWorker, Zygote
    from autograder.worker.protocol import ChannelClosed

    assert all(list(inspect.signature(kind.ready).parameters) == ["self", "deadline"]
               for kind in (Zygote, WorkerProcess, ForkedWorker))
    silent = Zygote.__new__(Zygote)  # only what ready() reads: no sandbox, a zygote that never says hello
    silent.hello = None
    silent.control, other_end = socket.socketpair()
    try:
        with pytest.raises(ChannelClosed, match="did not answer"):
            silent.ready(time.monotonic() - 1)
    finally:
        silent.control.close()
        other_end.close()

def test_plain_strings_equal_to_a_contract_name_are_not_uses():
    """``__all__`` lists the contract's own scaled_dot_product_attention, which shares the forbidden API's name."""
    source = '''
import torch

__all__ = ["MultiHeadAttention", "scaled_dot_product_attention"]
NAMES = ("scaled_dot_product_attention", "MultiheadAttention")

def scaled_dot_product_attention(q, k, v, mask=None):
    print("scaled_dot_product_attention")
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v, None
'''
    assert scan_module(source, "attention", CONTRACT) == {}


@pytest.mark.parametrize("lookup", ['vars(F)["scaled_dot_product_attention"]',
                                    'F.__dict__.get("scaled_dot_product_attention")',
                                    'operator.attrgetter("scaled_dot_product_attention")(F)',
                                    'getattr(F, "scaled_dot_product_attention")',
                                    'object.__getattribute__(F, "scaled_dot_product_attention")',
                                    'getattr(importlib.import_module("torch.nn.functional"), '
                                    '"scaled_dot_product_attention")',
                                    'getattr(self.kernels, "scaled_dot_product_attention")',
                                    'getattr(kernels, "scaled_dot_product_attention")',
                                    'STEPS.get("scaled_dot_product_attention")',
                                    'getattr(self, "scaled_dot_product_attention")'])
def test_names_looked_up_as_strings_are_caught(lookup):
    """In any object but the module's own namespace (fail closed): torch's names can hide in an attribute
    (``self.kernels``), an annotated name (``kernels``), a table (``STEPS``), even ``self``."""
    source = ("import importlib, operator\nimport torch\nimport torch.nn.functional as F\n"
              "kernels: object = torch._C._nn\nSTEPS = {**vars(torch._C._nn)}\n"
              "def scaled_dot_product_attention(q, k, v, mask=None):\n    return q, None\n"
              "class MultiHeadAttention(torch.nn.Module):\n"
              "    def forward(self, q, k, v):\n"
              f"        return {lookup}(q, k, v)\n")
    assert scan_module(source, "attention", CONTRACT) == {
        "MultiHeadAttention": {"torch.nn.functional.scaled_dot_product_attention"}}


OWN_ATTENTION = '''
import importlib
import sys
import torch
{prelude}
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
    return weights @ v, weights

def multi_head_attention_forward(*args):
    return args

class MultiHeadAttention(torch.nn.Module):
    def forward(self, q, k, v, mask=None):
        return {lookup}(q, k, v, mask)
'''


@pytest.mark.parametrize("lookup", ['globals()["scaled_dot_product_attention"]',
                                    'globals().get("scaled_dot_product_attention")'])
def test_the_students_own_function_read_from_globals_is_not_a_use(lookup):
    """The contract's scaled_dot_product_attention shares the forbidden API's name: the module's own, read back
    from its globals() (exactly what the plain name reads), charges nothing."""
    assert scan_module(OWN_ATTENTION.format(prelude="", lookup=lookup), "attention", CONTRACT) == {}


@pytest.mark.parametrize("prelude, lookup, api", [
    ("", 'getattr(sys.modules[__name__], "scaled_dot_product_attention")', "scaled_dot_product_attention"),
    ("", 'getattr(importlib.import_module(__name__), "scaled_dot_product_attention")',
     "scaled_dot_product_attention"),
    ("", 'globals()["multi_head_attention_forward"]', "multi_head_attention_forward"),  # defined, not the contract's
    ("globals = lambda: vars(torch._C._nn)", 'globals()["scaled_dot_product_attention"]',
     "scaled_dot_product_attention"),
    ("import builtins", 'globals()["scaled_dot_product_attention"]', "scaled_dot_product_attention"),
    ("try:\n    pass\nexcept Exception as globals:\n    pass", 'globals()["scaled_dot_product_attention"]',
     "scaled_dot_product_attention"),
    ("sys.modules['builtins']", 'globals()["scaled_dot_product_attention"]', "scaled_dot_product_attention")])
def test_the_globals_exemption_holds_only_where_globals_is_pythons(prelude, lookup, api):
    """Any other namespace of the module's (one a rebound ``__name__`` or ``sys`` redirects), a name that is
    not the contract's, or a file that may have its own ``globals`` (bound, or reached through builtins): a use."""
    found = scan_module(OWN_ATTENTION.format(prelude=prelude, lookup=lookup), "attention", CONTRACT)
    assert {path.rsplit(".", 1)[-1] for path in found.get("MultiHeadAttention", ())} == {api}, found


@pytest.mark.parametrize("lookup", ['globals()["_scaled_dot_product_attention_math"]',
                                    'globals().get("_scaled_dot_product_attention_math")'])
def test_a_name_the_module_does_not_define_read_from_globals_is_a_use(lookup):
    """Only there by a namespace filled from torch's: a use of the kernel of that name."""
    source = ("import sys\nimport torch\n"
              "def scaled_dot_product_attention(q, k, v, mask=None):\n"
              f"    return {lookup}(q, k, v)\n")
    assert scan_module(source, "attention", CONTRACT) == {
        "scaled_dot_product_attention": {"torch._scaled_dot_product_attention_math"}}


def test_a_check_not_run_here_counts_nowhere_and_says_so():
    """The GPU check on a machine without CUDA: 0 of 0, no pass rate, not a thing to work on."""
    from autograder.reports import class_report, feedback

    gpu = TestResult("On a GPU", "properties", 0, 0, "skipped", "Not counted here: no CUDA.", "hidden", "test_gpu")
    other = TestResult("a", "heads", 2, 2, "passed", "", "visible", "test_a")
    result = SubmissionResult("ünï", (other, gpu))
    record = result.to_json()
    assert "status" not in record["tests"][1] and record["tests"][1]["extra_data"]["counted"] is False
    assert SubmissionResult.from_json(record) == result and (result.score, result.max_score) == (2, 2)
    text = feedback.render(result)
    assert "To work on" not in text and "count neither in your score nor in the maximum" in text
    assert [name for name, _, _ in class_report.pass_rates([result])] == ["a"]



def test_a_record_is_written_one_test_a_line_and_reads_back_as_it_was(tmp_path):
    from autograder.records import results as records

    tests = (TestResult("a \"quoted\" name", "heads", 2, 2, "passed", "", "visible", "test_a"),
             TestResult("ünï\ncode", "properties", 0, 3, "failed", "What happened: x", "hidden", "test_b"))
    result = SubmissionResult("ünï", tests, notes=("a note",))
    records.save(result, tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text(encoding="utf-8")
    assert records.load(tmp_path / "r.json") == result
    lines = text.splitlines()
    assert [json.loads(line.strip().rstrip(","))["name"] for line in lines if line.startswith("  {")] == [
        test.name for test in tests]


_COMPILER_STAND_IN = r"""
import json, os, sys
from worker import main
torch, _ = main.prepare_torch(1)
os.environ[main.WARM_UP_ENV] = sys.argv[2]
main.warm_up(torch)
def kinds():  # what stands in for the compiler, symbolic shapes and sympy: a stand-in's class, or "module"
    names = ("torch._dynamo", "torch.fx.experimental.symbolic_shapes", "sympy")
    return [type(sys.modules[name]).__name__ for name in names]
seen = {"warm": kinds()}
kept = sys.modules["torch.fx.experimental.symbolic_shapes"], sys.modules["sympy"]  # held as a module would hold them
from sympy import Basic as held_basic  # taken before sympy is loaded: a placeholder that no object is
import importlib.util
seen["found"] = [importlib.util.find_spec(name).name for name in ("sympy", "torch._dynamo")] + kinds()
from worker.session import on_fake_device, seed_everything
before = set(sys.modules)
seed_everything()  # what every request does first: nothing left to import in each worker
seen["imported"] = sorted(set(sys.modules) - before)
out = on_fake_device(lambda x: (x @ x.transpose(-2, -1)).softmax(-1), (torch.ones(2, 3, 4),), {})
seen["fake"] = [out["devices"], list(out["value"].shape), kinds()]
weight = torch.ones(2, requires_grad=True)
(weight * 3).sum().backward()
torch.optim.SGD([weight], lr=0.5).step()  # an optimizer's step asks torch._dynamo for a graph break
seen["step"] = [weight.tolist(), kinds()]
x = torch.linspace(0, 1, 5)
if sys.argv[1] == "submodule":  # a submodule asked for first: the real package, and that submodule run once
    import torch._dynamo.config as config
    import torch._dynamo.eval_frame as eval_frame
    seen["once"] = (sys.modules["torch._dynamo.eval_frame"] is eval_frame is torch._dynamo.eval_frame
                    and eval_frame.config is config)  # the module the package loaded, never a second copy
compiled = torch.compile(lambda x: x.sin() * 2, backend="eager")
seen["compiled"] = torch.equal(compiled(x), x.sin() * 2)
seen["after"] = kinds()
w, b = torch.ones(3, 4), torch.ones(3)
linear = torch.compile(torch.nn.functional.linear, backend="eager", dynamic=True)  # symbolic shapes: Python kernels
seen["dynamic"] = all(torch.equal(linear(torch.ones(n, 4), w, b), torch.full((n, 3), 5.0)) for n in (2, 5))
seen["after dynamic"] = kinds()
shapes, sympy = sys.modules["torch.fx.experimental.symbolic_shapes"], sys.modules["sympy"]
seen["kept"] = [kept[0].guard_or_false is shapes.guard_or_false, kept[1].Basic is sympy.Basic,
                kept[1].__version__ == sympy.__version__, isinstance(sympy.Symbol("n"), kept[1].Basic),
                isinstance(sympy.Symbol("n"), held_basic), not isinstance(2, held_basic)]
print(json.dumps(seen))
"""


@pytest.mark.parametrize("first", ["attribute", "submodule"])
def test_a_worker_warms_up_without_the_compiler_and_a_submission_that_compiles_still_works(first):
    """The worker's torch answers the Python kernels' imports of ``torch._dynamo``, of symbolic shapes and of sympy
    with stand-ins (those imports cost more than torch's own): the lesson's warm-up and a fake-device call leave
    the real ones unloaded, the seeding every request starts with imports nothing more, and a submission that
    compiles gets the real ones, whichever way it first reaches for them (symbolic shapes only once it compiles
    with them), and symbolic shapes work."""
    import subprocess
    import sys

    from autograder.sandbox.isolation import WORKER_DIR
    from lesson import LESSON

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(WORKER_DIR.parent), "HOME": "/nonexistent"}
    done = subprocess.run([sys.executable, "-B", "-c", _COMPILER_STAND_IN, first, LESSON.warm_up.read_text()],
                          capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-800:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    stand_ins = ["CompilerStandIn", "ShapesStandIn", "SympyStandIn"]
    assert seen["warm"] == stand_ins and seen["fake"] == [["meta"], [2, 3, 3], stand_ins] and seen["imported"] == []
    assert seen["step"] == [[-0.5, -0.5], stand_ins]
    assert seen["compiled"] is True and seen["after"][0] == "module"
    assert seen.get("once", True) is True
    assert seen["dynamic"] is True and seen["after dynamic"] == ["module"] * 3
    assert seen["kept"] == [True] * 6  # a stand-in held from before the swap then answers as the real module
    assert seen["found"] == ["sympy", "torch._dynamo", *stand_ins]  # found as the real ones, none swapped in


_DEFERRED = r"""
import json, sys
from worker import main, stand_ins
keep = tuple(sys.argv[2:])
if sys.argv[1] == "plain":
    import torch
else:
    torch, _ = main.prepare_torch(1, keep)
    main.warm_up(torch)
    from worker.operator_watch import watch_operators
    watch_operators(("torch.nn.functional.scaled_dot_product_attention",))
def deferred():  # the packages still stood in for: a stand-in as their parent's attribute (read, not asked)
    return [name for name in stand_ins.DEFERRED
            if isinstance(vars(sys.modules[name.rpartition(".")[0]]).get(name.rpartition(".")[2]), stand_ins.StandIn)]
seen = {"deferred": deferred()}
seen["operators"] = sorted(torch._C._dispatch_get_all_op_names())
seen["bound"] = all(name.rpartition(".")[2] in vars(sys.modules[name.rpartition(".")[0]]) for name in stand_ins.DEFERRED)
seen["out of the import system"] = not [name for name in stand_ins.DEFERRED if name in sys.modules and name in seen["deferred"]]
from concurrent.futures import ThreadPoolExecutor
import importlib.util
with ThreadPoolExecutor(4) as pool:  # four threads meet the package first, at once
    threads = sorted(pool.map(lambda _: type(torch.optim.Adam(torch.nn.Linear(2, 2).parameters())).__name__, range(4)))
found = importlib.util.find_spec("torch.utils.data.dataloader") is not None  # found, then imported
from torch.utils.data.dataloader import DataLoader as found_loader
import torch.utils.data
from torch.utils.data import TensorDataset
held = torch.distributions  # held before the swap, as torch's own modules hold it
weight = torch.ones(2, requires_grad=True)
(weight * 3).sum().backward()
torch.optim.SGD([weight], lr=0.5).step()
from torch.distributions.normal import Normal  # a submodule asked for first
loader = torch.utils.data.DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2)
seen["used"] = [weight.tolist(), [batch[0].tolist() for batch in loader], "Normal" in dir(held),
                held.Normal is Normal is torch.distributions.Normal, float(Normal(0.0, 1.0).log_prob(torch.tensor(0.0)))]
seen["after"] = deferred()
seen["same"] = [sys.modules["torch.utils.data"] is torch.utils.data, held.__file__ == sys.modules["torch.distributions"].__file__,
                threads == ["Adam"] * 4, found and found_loader is torch.utils.data.DataLoader]
print(json.dumps(seen))
"""


def _run_deferred(*args):
    import subprocess
    import sys

    from autograder.sandbox.isolation import WORKER_DIR

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(WORKER_DIR.parent), "HOME": "/nonexistent"}
    return subprocess.Popen([sys.executable, "-B", "-c", _DEFERRED, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL)


def test_a_worker_defers_the_packages_of_torch_it_does_not_use_and_a_submission_that_uses_them_gets_them():
    """The zygote's torch import leaves the packages of ``stand_ins.DEFERRED`` (data loading, optimizers,
    distributions, export, ...) to stand-ins through its warm-up and the dispatcher watch, with the same operators
    registered save export's own; each is then its parent's attribute only, out of the import system. A
    submission that imports or uses any of them gets the real one, whichever way it reaches it (the same module
    object as ``sys.modules`` holds), and a stand-in held from before answers as the real package, dunder names
    too. A package holding a forbidden path is imported as torch imports it (its tripwire goes on the module every
    holder sees)."""
    from autograder.worker.stand_ins import DEFERRED

    runs = {"deferred": _run_deferred("deferred"), "plain": _run_deferred("plain"),
            "kept": _run_deferred("deferred", "torch.optim.SGD", "torch.nn.MultiheadAttention")}
    seen = {}
    for how, run in runs.items():
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-800:]
        seen[how] = json.loads(out.strip().splitlines()[-1])
    assert seen["deferred"]["deferred"] == list(DEFERRED) and seen["deferred"]["bound"] is True
    assert seen["deferred"]["out of the import system"] is True
    assert seen["plain"]["deferred"] == [] and seen["plain"]["bound"] is True
    assert seen["kept"]["deferred"] == [name for name in DEFERRED if name != "torch.optim"]
    plain, deferred = set(seen["plain"]["operators"]), set(seen["deferred"]["operators"])
    assert deferred <= plain and all(name.startswith("export::") for name in plain - deferred)
    assert seen["deferred"]["used"] == seen["plain"]["used"]
    assert seen["deferred"]["used"][:4] == [[-0.5, -0.5], [[0.0, 1.0], [2.0, 3.0]], True, True]
    used = {"torch.utils.data", "torch.optim", "torch.distributions"}
    assert seen["plain"]["after"] == [] and not used & set(seen["deferred"]["after"])  # real once used
    assert seen["deferred"]["same"] == seen["plain"]["same"] == [True] * 4


_REGISTERED_AT = """
import contextlib, inspect, json, sys
from autograder.worker.stand_ins import inspect_shortcuts
original = inspect.getframeinfo, inspect.getmodule
modules = []  # what torch's import was told of each frame it asked getmodule about: (file, line, module)


def recorded(answer):
    def getmodule(thing, _filename=None):
        module = answer(thing, _filename)
        if inspect.isframe(thing) and sys._getframe(1).f_code.co_filename != inspect.__file__:  # torch's asking
            modules.append((thing.f_code.co_filename, thing.f_lineno, getattr(module, "__name__", None)))
        return module
    return getmodule


with inspect_shortcuts() if sys.argv[1] == "shortcuts" else contextlib.nullcontext():
    if sys.argv[1] == "shortcuts":
        assert inspect.getframeinfo(sys._getframe()).code_context is None  # no line read
    answer = inspect.getmodule
    inspect.getmodule = recorded(answer)
    import torch
    inspect.getmodule = answer
from torch._library.simple_registry import singleton
print(json.dumps({"restored": (inspect.getframeinfo, inspect.getmodule) == original, "modules": modules, "places": {
    name: entry.fake_impl.kernel.source for name, entry in singleton._data.items() if entry.fake_impl.kernel}}))
"""


def test_torch_is_told_the_same_places_and_modules_when_its_import_takes_inspects_shortcuts():
    """The zygote's and the judge's torch import skip the source lines ``inspect.getframeinfo`` reads for torch's
    record of where each Python kernel was registered, and find a frame's module from its globals rather than by
    mapping every loaded module's file: torch records the same file and line for every kernel (it keeps no more),
    is told the same module for every frame it asks about, and ``inspect`` is itself again once the import is
    done."""
    import subprocess
    import sys

    from autograder.sandbox.isolation import WORKER_DIR

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(WORKER_DIR.parent), "HOME": "/nonexistent"}
    runs = {how: subprocess.Popen([sys.executable, "-B", "-c", _REGISTERED_AT, how], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL)
            for how in ("shortcuts", "plain")}
    seen = {}
    for how, run in runs.items():
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-800:]
        seen[how] = json.loads(out.strip().splitlines()[-1])
    assert seen["shortcuts"]["restored"] and seen["plain"]["restored"]
    places = seen["plain"]["places"]
    assert len(places) > 50 and all(":" in place and place.split(":")[-1].isdigit() for place in places.values())
    assert seen["shortcuts"]["places"] == places
    modules = seen["plain"]["modules"]
    assert len(modules) > 50 and all(module and module.startswith("torch") for _, _, module in modules)
    assert seen["shortcuts"]["modules"] == modules


@pytest.mark.filterwarnings("ignore::FutureWarning")  # guard_size_oblivious's own, at each call (values compared)
def test_the_symbolic_shapes_stand_in_answers_as_torch_does():
    """Each question the worker's stand-in for ``torch.fx.experimental.symbolic_shapes`` answers itself, asked of
    plain values, gets torch's own answer (value and type); asked of anything else, it is torch's function that
    answers or refuses (the same error)."""
    from torch.fx.experimental import symbolic_shapes as real

    from autograder.worker.stand_ins import PLAIN, ShapesStandIn

    def outcome(function, args):
        try:
            value = function(*args)
        except Exception as error:  # noqa: BLE001 - the refusal is part of the answer
            return "raised", type(error).__name__, str(error)
        return "value", type(value).__name__, value

    truth = [(True,), (False,)]
    plain = {name: truth for name in ("guard_bool", "guard_or_false", "guard_or_true", "statically_known_true")}
    plain.update(expect_true=truth + [(True, 2)], guard_int=[(3,), (0,)], is_nested_int=[(3,), (2.5,), (True,)],
                 has_guarding_hint=[(3,), (2.5,), (False,)], guarding_hint_or_throw=[(3,), (True,)],
                 sym_and=[(True,), (True, False), (True, True, True)], sym_or=[(False,), (False, True), (False,) * 3],
                 sym_eq=[(3, 3), (3, 4), ((1, 2), [1, 2]), ((1,), (1, 2)), ((), ()), ((1, 2), (1, 3))])
    other = {name: [(1,), (None,)] for name in plain}
    other.update(guard_int=[(True,), (2.0,)], is_nested_int=[("x",)], has_guarding_hint=[(None,)],
                 guarding_hint_or_throw=[(1.5,)], sym_and=[(1, 1), (True, 2)], sym_or=[(1, 0)],
                 sym_eq=[(True, 1), ("a", "a"), ((1, 2.0), (1, 2))])
    plain["guard_size_oblivious"], other["guard_size_oblivious"] = [], [(True,), (1,)]  # always torch's own
    assert set(plain) == set(PLAIN)
    stand_in = ShapesStandIn()
    for name in PLAIN:
        for args in plain[name]:
            assert PLAIN[name][0](*args), (name, args)  # answered by the stand-in itself
            assert outcome(getattr(stand_in, name), args) == outcome(getattr(real, name), args), (name, args)
        for args in other[name]:
            assert not PLAIN[name][0](*args), (name, args)  # passed on to torch's own
            assert outcome(getattr(stand_in, name), args) == outcome(getattr(real, name), args), (name, args)


def test_the_grade_command_imports_torch_only_once_its_zygote_is_starting():
    """Importing the grading code does not import torch: the judge's torch import runs beside its zygote's, not
    before it (the first student waits for whichever is later)."""
    import subprocess
    import sys

    script = "import sys, autograder.commands.grading, autograder.commands.judge_pool; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-500:]


def test_the_fake_device_applies_the_gpus_device_rules():
    """The simulated GPU carries values: a CPU 0-dim tensor may join a computation on it (CUDA allows it), any
    other CPU tensor may not; a module's registered state moves with it, a plain tensor attribute does not; code
    that branches on values, reads a number or indexes with a boolean mask runs as on a GPU (the meta device,
    which the checks used to run on, refuses all three)."""
    import torch

    from autograder.worker.session import on_fake_device

    scores, mask = torch.randn(2, 3, 3), torch.tril(torch.ones(3, 3, dtype=torch.bool))
    filled = on_fake_device(lambda s, m: s.masked_fill(~m, torch.tensor(float("-inf"))), (scores, mask), {})
    assert filled["devices"] == ["meta"] and filled["value"].shape == (2, 3, 3)
    with pytest.raises(RuntimeError, match="device"):
        on_fake_device(lambda s: s.masked_fill(torch.ones(3, 3, dtype=torch.bool), 0.0), (scores,), {})

    def by_value(s, m):  # x-transformers' all-blocked fix, a number read, a boolean index: values, not shapes
        blocked = ~m.any(dim=-1, keepdim=True)
        weights = s.masked_fill(~m, float("-inf")).softmax(-1)
        if blocked.any():
            weights = weights.masked_fill(blocked, 0.0)
        return weights * float(s.abs().max().item() > 0), s[:, m]

    plain = torch.empty(2, 3, 3, device="meta")
    with pytest.raises((RuntimeError, NotImplementedError)):
        by_value(plain, torch.empty(3, 3, dtype=torch.bool, device="meta"))

    # Correct code in other common styles (a red team's finds): a tensor made with new_tensor, an in-place
    # transpose of a copy, a named tuple returned, a CPU value copied into a slice; and wrong code, CPU values put
    # at GPU indices, refused as a GPU refuses it.
    import collections

    def styles(x):
        y = (x * x.new_tensor(0.5)).clone()
        y.transpose_(-2, -1)
        table = torch.empty(3, 3, dtype=x.dtype, device=x.device)
        table[:] = torch.ones(3, 3)
        return collections.namedtuple("Pair", "out table")(y.reshape(2, -1), table)

    done = on_fake_device(styles, (scores,), {})
    assert done["devices"] == ["meta", "meta"] and tuple(done["value"].out.shape) == (2, 9)
    with pytest.raises(RuntimeError, match="device"):
        on_fake_device(lambda s: s.index_put((torch.arange(2),), torch.zeros(2, 3, 3)), (scores,), {})
    done = on_fake_device(by_value, (scores, mask), {})
    assert done["devices"] == ["meta", "meta"] and done["value"][1].shape == (2, 6)

    class Table(torch.nn.Module):
        def __init__(self, persistent):
            super().__init__()
            self.register_buffer("pe", torch.zeros(5, 4), persistent=persistent)
            self.plain = torch.zeros(5, 4)

        def forward(self, x, plain=False):
            return x + (self.plain if plain else self.pe)

    for persistent in (True, False):
        assert on_fake_device(Table(persistent), (torch.ones(2, 5, 4),), {})["devices"] == ["meta"]
    with pytest.raises(RuntimeError, match="device"):
        on_fake_device(Table(True), (torch.ones(2, 5, 4),), {"plain": True})


def test_a_failed_fake_call_is_rerun_on_the_cpu_with_real_tensors_of_the_same_shapes():
    """The rerun's tensors are the fake ones made real: the same shapes and dtypes, zeros, and all True for a mask
    (so no query is left without a key); a module runs with its state as it is on the CPU (zeros where it was
    moved to meta); what the CPU run raised comes back (None when it ran)."""
    import torch

    from autograder.worker.cpu_rerun import real_twin, rerun_on_cpu

    twin = real_twin({"x": [torch.empty(2, 3, device="meta")],
                      "mask": torch.empty(3, 3, dtype=torch.bool, device="meta"), "n": 4})
    assert twin["n"] == 4 and twin["x"][0].device.type == "cpu" and torch.equal(twin["x"][0], torch.zeros(2, 3))
    assert twin["mask"].dtype == torch.bool and bool(twin["mask"].all())
    layer = torch.nn.Linear(3, 2)
    assert rerun_on_cpu(layer, (torch.empty(4, 3, device="meta"),), {}) is None
    assert rerun_on_cpu(layer.to("meta"), (torch.empty(4, 3, device="meta"),), {}) is None
    assert isinstance(rerun_on_cpu(lambda x: x.tolist()[9], (torch.empty(2, device="meta"),), {}), IndexError)

def test_the_device_rules_agree_with_pytorchs_fake_tensors():
    """The simulated GPU's rules are the ones PyTorch's fake tensors apply (CUDA's), case by case: mixing a CPU
    tensor into a GPU computation fails exactly where it fails under ``FakeTensorMode``."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from autograder.worker.simulated_gpu import on_gpu, simulated_gpu

    bools = torch.ones(3, 3, dtype=torch.bool)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def cases(gpu, cpu):
        return {
            "add a CPU matrix": lambda: gpu + cpu,
            "add a CPU 0-dim tensor": lambda: gpu + torch.tensor(2.0),
            "CPU 0-dim tensor first": lambda: torch.tensor(2.0) * gpu,
            "a CPU mask": lambda: gpu.masked_fill(bools, 0.0),
            "a CPU 0-dim fill value": lambda: gpu.masked_fill(bools.to(gpu.device), torch.tensor(-1e9)),
            "matmul with a CPU matrix": lambda: gpu @ cpu,
            "where with a CPU condition": lambda: torch.where(bools, gpu, 0.0),
            "concatenate a CPU tensor": lambda: torch.cat([gpu, torch.ones(1, 3, 3)]),
            "index with CPU indices": lambda: gpu[:, torch.tensor([0, 1])],
            "a CPU mask moved first": lambda: gpu.masked_fill(~bools.tril().to(gpu.device), 0.0),
            "copy a CPU tensor in": lambda: torch.empty(3, 3, device=gpu.device).copy_(cpu),
            "built-in attention": lambda: sdpa(gpu, gpu, gpu),
            "built-in attention, CPU mask": lambda: sdpa(gpu, gpu, gpu, attn_mask=bools),
            "only CPU tensors": lambda: cpu.tril() + cpu,
        }

    def outcomes(mode, gpu):
        seen = {}
        for name, case in cases(gpu, torch.ones(3, 3)).items():
            try:
                with mode():
                    seen[name] = "gpu" if case().device == gpu.device else "cpu"
            except RuntimeError:
                seen[name] = "refused"
        return seen

    ours = outcomes(simulated_gpu, on_gpu(torch.ones(2, 3, 3)))
    theirs = outcomes(lambda: FakeTensorMode(allow_non_fake_inputs=True), torch.empty(2, 3, 3, device="meta"))
    assert ours == theirs
    assert ours["a CPU mask"] == "refused" and ours["a CPU 0-dim fill value"] == "gpu"


def test_the_class_report_lists_every_student_who_needs_a_look():
    """Refused files, a notebook that earned nothing (the records' typed fields): listed under "Needs a look", id
    escaped; a note alone (a crash of the student's own code) is shown under "Grader notes"."""
    from autograder.reports import class_report

    fine = SubmissionResult("fine", (TestResult("a", "heads", 2, 2, "passed"),))
    refused = SubmissionResult("<b>noted</b>", (TestResult("a", "heads", 0, 2, "failed"),),
                               notes=("heads.py was not used: it is a symbolic link",),
                               intake_problems={"heads": "it is a symbolic link (links are not followed)"})
    no_notebook = SubmissionResult("quiet", (TestResult("a", "heads", 2, 2, "passed"),),
                                   notebook=NotebookSummary("quiet", reason="no check_your_understanding.ipynb in the "
                                                                             "submission"))
    crashed = SubmissionResult("crashy", (TestResult("a", "heads", 2, 2, "passed"), TestResult("b", "heads", 0, 2,
                                                                                         "failed")),
                               notes=("the worker crashed during heads.split_heads",))
    report = class_report.render([fine, refused, no_notebook, crashed], ["h.png", "p.png"])
    text = report.split("## Needs a look", 1)[1].split("![", 1)[0]
    assert "&lt;b&gt;noted&lt;/b&gt;" in text and "symbolic link" in text
    assert "**quiet**" in text and "no check\\_your\\_understanding" in text
    assert "fine" not in text and "crashy" not in text
    assert "**crashy**: the worker crashed" in report.split("## Grader notes", 1)[1]


def test_a_check_a_broken_part_blocks_fails_charged_to_that_part_and_the_feedback_says_fix_it_first():
    """A check that cannot judge its concept because a part it needs is broken is not earned (breaking a part never
    buys another part's points), is charged to the part's concept, and the feedback names the part to fix first."""
    from autograder.judge.hidden_suite import Outcome
    from autograder.judge.grade import _result_for
    from autograder.reports import feedback
    from autograder.judge.rubric import NotChecked, RubricEntry

    entry = RubricEntry("test_mask", "The mask reaches every head", "attention", 3, "The mask reaches every head.",
                        topic="mha-mask")
    try:
        try:
            raise AssertionError("values differ")
        except AssertionError as error:
            raise NotChecked("combine_heads", "heads-shape", "raises an error (see its own checks)") from error
    except NotChecked as error:
        outcome = Outcome("failed", error)
    result, crashed = _result_for(entry, outcome)
    assert crashed is None and result.status == "failed" and result.score == 0 and result.max_score == 3
    assert (result.blocked_by, result.charged_to) == ("combine_heads", "heads-shape")
    assert "fix combine_heads first" in result.output and "values differ" not in result.output
    assert TestResult.from_json(result.to_json()) == result  # the record keeps both
    own = TestResult("Heads combine", "heads", 0, 2, "failed", "combine_heads turns ...", "visible", "test_combine")
    text = feedback.render(SubmissionResult("s", (own, result, replace(result, visibility="hidden", id="t2"))))
    fix_first = text.split("## Fix first")[1].split("##")[0]
    assert "`combine_heads`: 2 further check(s), 6 points, wait for it" in fix_first
    assert "## Also review" not in text, "a blocked hidden check's idea is not what to review"
    assert "(0/3): The mask reaches every head." in text.split("## To work on")[1], "a visible one keeps its idea"
    plain = feedback.render(SubmissionResult("s", (own,)))
    assert "Fix first" not in plain


def test_the_grade_summary_states_rate_jobs_cores_and_load_and_leaves_out_what_it_cannot_read():
    from autograder.commands.machine_load import LoadWatch, RunLoad

    line = RunLoad(seconds=10.0, cores=2, busy_cores=1.94, load_start=0.4, load_end=2.06).describe(40, 2)
    assert line == ("4.00 students a second at --jobs 2 (0.25 s a student); 1.9 of 2 cores busy; "
                    "load average 0.4 at the start, 2.1 at the end")
    assert RunLoad(10.0, 2, None, None, None).describe(5, 1) == "0.50 students a second at --jobs 1 (2.00 s a student)"
    measured = LoadWatch().finish()
    assert measured.seconds > 0 and measured.cores >= 1
    shared = RunLoad(10.0, 2, 5.34, None, None, machine_cores=16).describe(40, 2)
    assert shared.endswith("; 5.3 of the machine's 16 cores busy, 2 usable here")


def test_usable_cores_honour_a_containers_cpu_quota_in_cgroup_v1_and_v2(tmp_path, monkeypatch):
    """``docker --cpus 2`` on a 16-core host: ``os.cpu_count()`` says 16, the quota says 2. The bench measures
    ``--jobs`` 4 and 8 only where they can run at once, and the grade summary counts the cores the run had."""
    from autograder.commands import machine_load
    from autograder.commands.bench import jobs_to_measure

    def tree(cgroup, files):
        (tmp_path / "proc").write_text(cgroup)
        for name, text in files.items():
            (tmp_path / "cg" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "cg" / name).write_text(text)
        return machine_load.cpu_quota(tmp_path / "proc", tmp_path / "cg")

    # v2: the tightest of the cgroup and those above it
    assert tree("0::/outer/inner\n", {"outer/inner/cpu.max": "max 100000\n", "outer/cpu.max": "150000 100000\n"}) == 1.5
    # v1, as a container sees it: cpu,cpuacct mounted together
    assert tree("4:cpu,cpuacct:/docker/x\n2:memory:/docker/x\n", {"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "200000\n",
                "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n"}) == 2.0
    assert tree("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}) is None
    assert machine_load.cpu_quota(tmp_path / "missing", tmp_path / "cg") is None
    monkeypatch.setattr(machine_load, "cpu_quota", lambda: 2.5)
    monkeypatch.setattr(machine_load.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert machine_load.usable_cores() == 3
    monkeypatch.setattr(machine_load, "cpu_quota", lambda: 0.5)
    assert machine_load.usable_cores() == 1 and jobs_to_measure() == [1, 2]
    monkeypatch.setattr(machine_load, "cpu_quota", lambda: None)
    assert machine_load.usable_cores() == 16 and jobs_to_measure() == [1, 2, 4, 8]


def test_the_reports_head_start_never_stops_a_run(monkeypatch):
    """``warm_reporting`` runs before the class is graded: an import it cannot make is left to the real use
    (which says so), never raised."""
    from autograder.commands import grading
    from autograder.notebook import nbgrader_record

    tried = []

    def broken():
        tried.append(True)
        raise ImportError("no nbgrader here")

    monkeypatch.setattr(nbgrader_record, "warm", broken)
    assert grading.warm_reporting(notebook=True) is None
    assert tried == [True], "it did try: the failure was met and kept from the run"
    grading.warm_reporting(notebook=False)
    assert tried == [True], "no notebook graded: nbgrader is not needed"


_KERNEL_SETS = r"""
import json, sys
import torch
from worker.simulated_gpu import on_gpu, simulated_gpu
f, d = torch.float32, torch.float64
def t(*shape, dtype=f, gpu=False):
    made = torch.zeros(*shape, dtype=dtype)
    return on_gpu(made) if gpu else made
cases = {  # each with operands of two dtypes where the CPU and a GPU refuse them, and some where they do not
    "mm": lambda g: t(3, 4, gpu=g) @ t(4, 5, dtype=d, gpu=g),
    "bmm": lambda g: t(2, 3, 4, gpu=g) @ t(2, 4, 5, dtype=d, gpu=g),
    "4-d matmul": lambda g: t(2, 2, 3, 4, gpu=g) @ t(2, 2, 4, 5, dtype=d, gpu=g),
    "linear": lambda g: torch.nn.functional.linear(t(2, 3, 4, dtype=d, gpu=g), t(5, 4, gpu=g), t(5, gpu=g)),
    "linear, no bias": lambda g: torch.nn.functional.linear(t(2, 3, 4, dtype=d, gpu=g), t(5, 4, gpu=g)),
    "addmm": lambda g: torch.addmm(t(5, dtype=d, gpu=g), t(3, 4, gpu=g), t(4, 5, gpu=g)),
    "baddbmm": lambda g: torch.baddbmm(t(2, 3, 5, gpu=g), t(2, 3, 4, gpu=g), t(2, 4, 5, dtype=d, gpu=g)),
    "einsum": lambda g: torch.einsum("bij,bjk->bik", t(2, 3, 4, gpu=g), t(2, 4, 5, dtype=d, gpu=g)),
    "mv": lambda g: t(3, 4, gpu=g) @ t(4, dtype=d, gpu=g),
    "add": lambda g: t(3, 4, gpu=g) + t(3, 4, dtype=d, gpu=g),
    "where": lambda g: torch.where(t(3, 4, dtype=torch.bool, gpu=g), t(3, 4, gpu=g), t(3, 4, dtype=d, gpu=g)),
    "matmul of one dtype": lambda g: t(2, 3, 4, dtype=d, gpu=g) @ t(2, 4, 5, dtype=d, gpu=g),
}
def outcome(case, gpu):
    try:
        if gpu:
            with simulated_gpu():
                value = case(gpu)
        else:
            value = case(gpu)
        return ["ok", str(value.dtype), list(value.shape)]
    except RuntimeError:
        return ["refused"]
seen = {"cpu": {name: outcome(case, False) for name, case in cases.items()},
        "gpu": {name: outcome(case, True) for name, case in cases.items()}}
print(json.dumps(seen))
"""


def test_the_simulated_gpu_refuses_operands_of_two_dtypes_as_the_cpu_does():
    """The matrix products refuse operands of two dtypes on the CPU and a GPU: the simulated GPU agrees with the
    CPU on every one, so a device check never passes code the CPU refuses, nor the other way round."""
    import subprocess
    import sys

    from autograder.sandbox.isolation import WORKER_DIR

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(WORKER_DIR.parent), "HOME": "/nonexistent"}
    done = subprocess.run([sys.executable, "-B", "-c", _KERNEL_SETS], capture_output=True, text=True, timeout=300,
                          env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-800:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["gpu"] == seen["cpu"]
    assert [name for name, result in seen["cpu"].items() if result == ["refused"]] == [
        "mm", "bmm", "4-d matmul", "linear", "linear, no bias", "addmm", "baddbmm", "einsum", "mv"]
