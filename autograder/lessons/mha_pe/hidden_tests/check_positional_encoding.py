"""Hidden tests: the sinusoidal table, the shift matrix and the PositionalEncoding module.

Each test reads only what its own concept decides: the table's pairs are found wherever its layout put them
(:func:`~.support.sine_pairs`), so a layout mistake costs the layout test alone, a
frequency mistake the frequency test alone, and so on.
"""

import math

import torch

from autograder.lesson_api import NotChecked, Symptom, Yardstick, allowance, device_of, graded, within_cpu
from .support import BASE_OF_MODULE, Calls, close, each_case, expected_rates, is_close, needs, pair_rates, randn, recurrence_residual, sine_pairs, student_raises, tensor, unwrapped_angle

GROUP = "positional_encoding"
EVEN = range(2, 65, 2)
TABLE = ("get_positional_encoding",)
# The checks that read the table's angles need them to turn steadily: a table whose columns jump (a wrong period of
# the angles' remainder, say) is charged once, to the long-sequence concept, not to every angle it spoils.
STEADY = (*TABLE, "steady table")
MODULE = (*TABLE, "PositionalEncoding")
# The module's values are the lesson's table's: with a table of the student's that is not it (in any way its own
# checks charge), the module is graded with the stand-in's.
MODULE_VALUES = (*TABLE, "true table", "PositionalEncoding")


def pairs_of(table):
    """The table's (sine, cosine) pairs; when its columns do not pair up, the check cannot read frequencies at all:
    that is the layout check's concern, so it is charged there (fails soft)."""
    pairs = sine_pairs(table)
    if pairs is None:
        raise NotChecked("get_positional_encoding", "pe-layout",
                         "gives columns that are not sine/cosine pairs of one angle (see the layout check)")
    return pairs


@graded(3, "The table has one row per position and one column per feature: shape (max_seq_len, d_model), "
           "dtype float32.", topic="pe-shape")
@each_case(examples=[dict(max_seq_len=9, d_model=6), dict(max_seq_len=4, d_model=6)],  # one width twice
           max_seq_len=range(1, 41), d_model=EVEN)
def test_table_shape_and_dtype(student, max_seq_len, d_model):
    """The table has shape (max_seq_len, d_model) and dtype float32"""
    tensor(student.get_positional_encoding(max_seq_len, d_model), (max_seq_len, d_model), torch.float32)


@graded(2, "Positions are counted from 0: at position 0 every angle is 0, so the sine features are 0 and "
           "the cosine features are 1.", topic="pe-position-zero")
@needs(*TABLE)
def test_starts_at_position_zero(student):
    """Row 0 encodes position 0"""
    pe = tensor(student.get_positional_encoding(8, 12), (8, 12)).double()
    # Angle 0 in each (sine, cosine) pair: one 0 and one 1, whichever column the layout gave each.
    for columns in pairs_of(pe):
        close(pe[0, list(columns)].sort().values, torch.tensor([0.0, 1.0]), atol=1e-6)


@graded(3, "Sine and cosine interleave: even feature 2i holds the sine and odd feature 2i+1 the cosine of "
           "the same angle (not all sines first, then all cosines).", topic="pe-layout")
@needs(*STEADY)
def test_sines_even_cosines_odd(student):
    """Even columns hold sines and odd columns cosines of the same angle"""
    pe = tensor(student.get_positional_encoding(20, 8), (20, 8)).double()
    close(pe[:, 0::2].pow(2) + pe[:, 1::2].pow(2), torch.ones(20, 4), atol=1e-4)  # (2i, 2i+1) share an angle
    # The first pair turns at one radian per position: its angle grows when column 0 is the sine.
    steps = unwrapped_angle(pe[:, 0], pe[:, 1]).diff()
    assert bool((steps > 0).all()), "column 0 is not the sine of its pair"


@graded(3, "Pair i turns at frequency base^(-2i/d_model): the exponent is the even feature index 2i divided "
           "by d_model (a float division), shared by the sine and the cosine of the pair.",
        topic="pe-frequencies")
@needs(*STEADY)
def test_frequency_exponent(student):
    """Each feature pair turns at frequency base^(-2i/d_model)"""
    pe = tensor(student.get_positional_encoding(64, 16), (64, 16))
    close(pair_rates(pe, pairs_of(pe)), expected_rates(16), atol=1e-6, rtol=1e-3)


@graded(4, "Far along long sequences each feature is still one steady sine wave: compute positions and angles "
           "in float32 or better (float16 counts whole numbers exactly only up to 2048).",
        topic="pe-long-sequences")
@needs(*TABLE)
def test_values_follow_the_formula(student):
    """Values stay exact far along long sequences"""
    # Whatever the frequencies and the layout, a steady wave obeys c[p+1] + c[p-1] = 2 cos(w) c[p] at every p.
    # Tolerance: what float32 angles meet thousands of radians out.
    for max_seq_len, d_model in ((3000, 16), (1000, 64)):
        pe = tensor(student.get_positional_encoding(max_seq_len, d_model), (max_seq_len, d_model))
        assert recurrence_residual(pe) < 2e-3, "a column stalls or jumps"
        assert float((pe.amax(0) - pe.amin(0)).max()) > 1.0, "the table stands still"  # the fastest pair turns


@graded(2, "The base argument sets how slowly the later feature pairs turn: use the base you are given, "
           "not a fixed 10000.", topic="pe-base")
@needs(*STEADY, "frequencies")
def test_base_argument_is_used(student):
    """The base argument changes the frequencies"""
    # Whatever exponent a pair has, its frequency is base ** exponent: the exponents read with each base agree.
    # A pair turning faster than pi per position cannot be read from whole positions (its angle aliases): only
    # the pairs readable with every base count.
    exponents, readable = [], torch.ones(4, dtype=torch.bool)
    bases, later = (10000.0, 100.0, 1e5), Calls(student)
    tables = [later(lambda base=base: student.get_positional_encoding(30, 8, base=base)) for base in bases]
    for base, table in zip(bases, tables):
        pe = tensor(table.get(), (30, 8))
        rates = pair_rates(pe, pairs_of(pe))
        exponents.append(rates.log() / math.log(base))
        readable &= rates < 3.0
    for other in exponents[1:]:
        close(other[readable], exponents[0][readable], atol=1e-3)


@graded(2, "Invalid sizes raise ValueError: max_seq_len must be at least 1, and d_model a positive even "
           "integer because sine and cosine come in pairs.", topic="validation")
def test_bad_sizes_raise_value_error(student):
    """Invalid sizes raise ValueError"""
    later = Calls(student)
    answers = [later(lambda args=args: student.get_positional_encoding(*args))  # every call before any read
               for args in ((0, 8), (5, 7), (5, 0), (5, -4))]
    for answer in answers:
        with student_raises("ValueError"):
            answer.get()


def _is_own_table(table, head, max_seq_len):
    """Whether a measured table is the student's own table for these arguments: its first rows are what an
    ordinary call returned (``head``) and every column goes on as the same steady wave. Whatever the table's
    mistakes (the value checks charge for those), nothing cheaper than computing it passes."""
    table = tensor(table, (max_seq_len, 32))
    # Angles of tens of thousands of radians formed in float32 are off by a few thousandths (honest and common):
    # the tolerance allows that, and a stall or a jump (a table of zeros after some row) is off by about 1.
    return is_close(table[:48], head, atol=1e-5) and recurrence_residual(table) < 0.02


@graded(2, "Compute the table with whole-tensor operations (a column of positions times a row of "
           "frequencies), not with a Python loop over positions.", visibility="hidden", topic="pe-vectorized")
@needs(*TABLE, "steady table")
def test_table_is_vectorized(student, reference):
    """The table is computed without Python loops over positions"""
    # Many positions, few features: a vectorized table costs a few sin/cos passes over its entries, a Python loop
    # over positions pays Python's per-iteration price thousands of times (over 15 times the reference's table on
    # any machine). Work is measured, never seconds: the CPU time the worker's whole process tree spends on the
    # call (threads and child processes included), read by the judge to the nanosecond, against the CPU time this
    # judge spends on the reference's table. The arguments are drawn for this submission under the judge's secret
    # (the same every run, known to no submission in advance), so no table prepared at import or cached can
    # answer. Each try draws its own size and base and measures the call before any other call with that base,
    # so nothing an earlier call kept or made ahead (a small call that quietly builds the longest table) helps.
    # Another process can only stretch a measurement: a miss is measured again, up to MEASUREMENTS times, with one
    # more reading of the yardstick each time. The table must still be the student's own (a fast wrong answer
    # earns nothing): its first rows are what an ordinary call then returns.
    draw = student.draw("pe-vectorized")

    def own_table(table, args):
        max_seq_len, _, base = args
        head = tensor(student.get_positional_encoding(48, 32, base), (48, 32))
        assert _is_own_table(table, head, max_seq_len), "the measured table is not the function's table"

    within_cpu(student, "get_positional_encoding",
               lambda attempt: (draw.randrange(LONGEST // 4 * 3, LONGEST), 32, draw.uniform(5e3, 2e4)),
               lambda fresh: _allowance(reference, fresh), tries=MEASUREMENTS, check=own_table)


LONGEST = 13_000  # rows of the longest table the check draws (three quarters of it at the least)
MEASUREMENTS = 3  # tries of the student's table before it counts as too slow
# Measured beside busy loops (3 per core), in fresh workers: an honest table cost at most 6 ms, the catalogue's
# loops 78 ms at the least. The allowance sits between the two, at 5 yardsticks within these bounds (CPU seconds),
# so even a yardstick stretched many times over cannot let a loop through.
FLOOR, CEILING = 0.03, 0.06
_YARDSTICK_READINGS = Yardstick()  # the judge's least CPU seconds on the reference's longest table
_YARDSTICK = _YARDSTICK_READINGS.least  # [] until read, then [the least reading so far in this judge]


def _allowance(reference, fresh: bool) -> float:
    """CPU seconds the student's table may take: five times the judge's own on a reference table of the largest
    size drawn, between :data:`FLOOR` and :data:`CEILING`."""
    return allowance(_yardstick(reference, fresh), times=5, floor=FLOOR, ceiling=CEILING)


def _yardstick(reference, fresh: bool = False) -> float:
    """The judge's CPU seconds for a reference table of the largest size drawn (the engine's Yardstick: the least
    of five readings the first time, and of every reading since, one more each time ``fresh``)."""
    return _YARDSTICK_READINGS.read(lambda: reference.get_positional_encoding(LONGEST, 32, 1e4), fresh)


@graded(4, "Relative position is a fixed linear map: PE[pos+k] = M_k PE[pos], because the sine and the cosine of "
           "each pair share one angle that grows steadily with the position, so a shift turns each pair by a fixed "
           "angle.", visibility="hidden", topic="pe-shift")
@needs(*STEADY)
@each_case(examples=[dict(k=-5, d_model=8), dict(k=7, d_model=16)], k=range(-12, 13), d_model=[4, 8, 16, 32])
def test_encoding_obeys_the_shift_identity(student, k, d_model):
    """The encoding satisfies PE[pos + k] = M_k PE[pos]"""
    n = 40
    pe = tensor(student.get_positional_encoding(n, d_model), (n, d_model)).double()
    pairs = pairs_of(pe)
    # M_k built from the table's own pairs and frequencies: one rotation by k times its rate per (sine, cosine) pair.
    s, c = (torch.tensor(columns) for columns in zip(*pairs))
    angle = k * pair_rates(pe, pairs)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[s, s], m[s, c], m[c, s], m[c, c] = angle.cos(), angle.sin(), -angle.sin(), angle.cos()
    src = torch.arange(max(0, -k), min(n, n - k))
    close(pe[src] @ m.T, pe[src + k], atol=1e-4)


@graded(4, "M_k is block diagonal: one 2x2 rotation per (sin, cos) pair, turning that pair by k times its "
           "frequency, as the angle-addition formulas give it; a negative k moves backwards.", topic="shift-matrix")
@each_case(examples=[dict(k=3, d_model=8), dict(k=-3, d_model=8)], k=range(-15, 16), d_model=[2, 6, 8, 16])
def test_shift_matrix_moves_the_true_encoding(student, reference, k, d_model):
    """shift_matrix(k) moves the true encoding k positions, forwards and backwards"""
    n = 40
    m = tensor(student.shift_matrix(k, d_model), (d_model, d_model), torch.float32).double()
    pe = reference.get_positional_encoding(n, d_model).double()
    src = torch.arange(max(0, -k), min(n, n - k))
    if not is_close(pe[src] @ m.T, pe[src + k], atol=1e-4):
        raise Symptom(_shift_symptom(pe, m, k))


def _shift_symptom(pe, m, k):
    """What a wrong M_k does to the true encoding, in words with no number: which way it moves it and how far."""
    n = len(pe)
    for moved in sorted(range(-2 * abs(k) - 2, 2 * abs(k) + 3), key=abs):
        src = torch.arange(max(0, -moved), min(n, n - moved))
        if moved != k and len(src) and is_close(pe[src] @ m.T, pe[src + moved], atol=1e-4):
            if moved == 0:
                return "leaves the encoding where it is instead of moving it"
            if (moved > 0) != (k > 0) or k == 0:
                return "moves the encoding the opposite way (backwards for a positive k, forwards for a negative one)"
            return f"moves the encoding the right way but {'too far' if abs(moved) > abs(k) else 'not far enough'}"
    return "does not move the true encoding by k positions (no rotation of each pair by k times its frequency)"


@graded(1, "shift_matrix takes the base of the encoding it moves: its rotations turn each pair by k times that "
           "pair's frequency under the base it is given.", topic="shift-matrix")
def test_shift_matrix_uses_its_base(student, reference):
    """shift_matrix moves an encoding built with another base"""
    n, k, d_model, base = 30, 4, 8, 100.0
    m = tensor(student.shift_matrix(k, d_model, base), (d_model, d_model)).double()
    pe = reference.get_positional_encoding(n, d_model, base).double()
    close(pe[: n - k] @ m.T, pe[k:], atol=1e-4)


@graded(1, "shift_matrix raises ValueError for a d_model that is not a positive even integer.", topic="validation")
def test_shift_matrix_rejects_odd_width(student):
    """shift_matrix rejects a d_model that is odd, zero or negative"""
    later = Calls(student)
    answers = [later(lambda d_model=d_model: student.shift_matrix(1, d_model)) for d_model in (5, 0, -4)]
    for answer in answers:  # every call before any read
        with student_raises("ValueError"):
            answer.get()


@graded(3, "The table is fixed, not learned: register it as a buffer named pe, built with the sizes and "
           "the base it is given, so the module has no parameters and the table moves with .to(device) and .to(dtype).",
        topic="pe-buffer")
@needs(*MODULE_VALUES)
def test_module_keeps_the_table_as_a_buffer(student, reference):
    """PositionalEncoding keeps the table for its own base in a buffer named pe and has no parameters"""
    module = student.PositionalEncoding(8, max_seq_len=20, base=BASE_OF_MODULE)
    state = module.tensors()
    assert isinstance(state, dict) and state.get("parameters") == {}, "has parameters"
    pe = tensor(state["buffers"].get("pe"), (20, 8))
    # It holds the table for the module's base (a table of the student's that is not the lesson's is replaced by
    # the stand-in's and charged by the table's own checks: see MODULE_VALUES) ...
    assert not is_close(pe, reference.get_positional_encoding(20, 8)), (
        "the buffer holds the table for the default base 10000, not for the base the module was given")
    close(pe, reference.get_positional_encoding(20, 8, BASE_OF_MODULE))
    # What forward adds is the forward check's concern; the buffer's is to be the table and to move with the module.
    moved = tensor(module.to(torch.float64).tensors()["buffers"].get("pe"), (20, 8), torch.float64)
    close(moved, pe)


@graded(3, "forward adds the first seq rows of the table to every sequence in the batch and keeps the "
           "shape (batch, seq, d_model).", topic="pe-module-forward")
@needs(*MODULE_VALUES)
def test_module_adds_the_encoding(student, reference):
    """forward adds the encoding of each position to every sequence"""
    x = randn(3, 7, 16, seed=1)
    added = tensor(student.PositionalEncoding(16, max_seq_len=50)(x), (3, 7, 16)) - x
    # The lesson's table (a table of the student's that is not, replaced by the stand-in's: see MODULE_VALUES).
    close(added, reference.get_positional_encoding(7, 16).expand(3, 7, 16), atol=1e-5)


@graded(2, "forward accepts any sequence up to max_seq_len positions, max_seq_len itself included, and raises "
           "ValueError for a sequence longer than max_seq_len or a last dimension other than d_model, instead of "
           "failing somewhere inside.", topic="validation")
@needs(*MODULE)
def test_module_checks_its_input(student):
    """forward rejects too long sequences and the wrong width"""
    module, later = student.PositionalEncoding(8, max_seq_len=4), Calls(student)
    fits, *refused = (later(lambda x=x: module(x)) for x in  # every call before any read
                      (torch.zeros(1, 4, 8), torch.zeros(1, 5, 8), torch.zeros(1, 3, 6)))
    tensor(fits.get(), (1, 4, 8))  # a sequence of exactly max_seq_len fits: both sides of it
    for answer in refused:
        with student_raises("ValueError"):
            answer.get()


@graded(2, "Slice the buffer inside forward rather than building a new tensor there: a buffer follows "
           "module.to(device), a tensor made in forward stays on the CPU (checked on a simulated GPU "
           "under the GPU's device rules).", topic="device")
@needs(*MODULE)
def test_module_follows_its_device(student):
    """PositionalEncoding works after .to(device)"""
    module = student.PositionalEncoding(8, max_seq_len=10)
    out = tensor(module.on_fake_device(randn(2, 6, 8, seed=52)), (2, 6, 8))
    assert device_of(out) == "meta", "output not on the module's device"
