"""Hidden tests: the sinusoidal table, the shift matrix and the PositionalEncoding module."""

import torch

from autograder.rubric import graded
from autograder.hidden_tests.support import close, each_case, randn, student_raises, tensor
from autograder.worker.protocol import device_of

GROUP = "positional_encoding"
EVEN = range(2, 65, 2)


@graded(3, "The table has one row per position and one column per feature: shape (max_seq_len, d_model), "
           "dtype float32.")
@each_case(max_seq_len=range(1, 41), d_model=EVEN)
def test_table_shape_and_dtype(student, max_seq_len, d_model):
    """The table has shape (max_seq_len, d_model) and dtype float32"""
    tensor(student.get_positional_encoding(max_seq_len, d_model), (max_seq_len, d_model), torch.float32)


@graded(2, "Positions are counted from 0: at position 0 every angle is 0, so the sine features are 0 and "
           "the cosine features are 1.")
def test_starts_at_position_zero(student):
    """Row 0 encodes position 0"""
    pe = tensor(student.get_positional_encoding(5, 12), (5, 12))
    close(pe[0], torch.tensor([0.0, 1.0] * 6), atol=1e-6)


@graded(3, "Sine and cosine interleave: even feature 2i holds the sine and odd feature 2i+1 the cosine of "
           "the same angle (not all sines first, then all cosines).")
def test_sines_even_cosines_odd(student):
    """Even columns hold sines and odd columns cosines of the same angle"""
    pe = tensor(student.get_positional_encoding(20, 8), (20, 8))
    positions = torch.arange(20, dtype=torch.float64)
    close(pe[:, 0], positions.sin(), atol=1e-5)
    close(pe[:, 1], positions.cos(), atol=1e-5)
    close(pe[:, 0::2].pow(2) + pe[:, 1::2].pow(2), torch.ones(20, 4), atol=1e-4)


@graded(3, "Pair i turns at frequency base^(-2i/d_model): the exponent is the even feature index 2i divided "
           "by d_model (a float division), shared by the sine and the cosine of the pair.", visibility="hidden")
def test_frequency_exponent(student, reference):
    """Each feature pair turns at frequency base^(-2i/d_model)"""
    close(student.get_positional_encoding(64, 16), reference.get_positional_encoding(64, 16), atol=1e-4)


@graded(4, "Every entry follows PE[pos, 2i] = sin(pos / base^(2i/d_model)) and PE[pos, 2i+1] = cos(same "
           "angle), including far along long sequences.", visibility="hidden")
def test_values_follow_the_formula(student, reference):
    """Values follow the formula on long tables"""
    # Tolerance a float32 computation meets (exp/log frequencies, float32 angles up to ~1000 rad).
    for max_seq_len, d_model in ((512, 128), (1000, 64), (3, 2)):
        close(student.get_positional_encoding(max_seq_len, d_model),
              reference.get_positional_encoding(max_seq_len, d_model), atol=2e-3)


@graded(2, "The base argument sets how slowly the later feature pairs turn: use the base you are given, "
           "not a fixed 10000.", visibility="hidden")
def test_base_argument_is_used(student, reference):
    """The base argument changes the frequencies"""
    for base in (100.0, 1e5):
        close(student.get_positional_encoding(30, 8, base=base), reference.get_positional_encoding(30, 8, base=base),
              atol=1e-4)


@graded(2, "Invalid sizes raise ValueError: max_seq_len must be at least 1, and d_model a positive even "
           "integer because sine and cosine come in pairs.")
def test_bad_sizes_raise_value_error(student):
    """Invalid sizes raise ValueError"""
    for args in ((0, 8), (5, 7), (5, 0), (5, -4)):
        with student_raises("ValueError"):
            student.get_positional_encoding(*args)


@graded(2, "Compute the table with whole-tensor operations (a column of positions times a row of "
           "frequencies), not with a Python loop over positions.", visibility="hidden")
def test_table_is_vectorized(student):
    """The table is computed without Python loops over positions"""
    # Many positions, few features: a vectorized table costs a few sin/cos passes over its entries, a loop over
    # 4000 positions pays Python's per-iteration cost 4000 times (hundreds of passes). Same process, same moment.
    # A busy machine can stretch any one measurement (a call preempted once looks 20x slower), never shorten
    # one: a vectorized table needs one quiet round out of three; a loop has none.
    ratios = []
    for repeats in (3, 10, 30):
        timing = student.time_call("get_positional_encoding", 4000, 32, numel=4000 * 16, repeats=repeats, budget=1.0)
        assert isinstance(timing, dict) and {"call", "probe"} <= timing.keys(), "no timing"
        ratios.append(float(timing["call"]) / max(float(timing["probe"]), 1e-6))
        if ratios[-1] <= 25:
            break
    assert min(ratios) <= 25, "too slow"


@graded(4, "Relative position is a fixed linear map: PE[pos+k] = M_k PE[pos] with the rotation M_k built from "
           "the true frequencies; it holds only for the exact interleaved sin/cos layout.", visibility="hidden")
@each_case(examples=[dict(k=-5, d_model=8), dict(k=7, d_model=16)], k=range(-12, 13), d_model=[4, 8, 16, 32])
def test_encoding_obeys_the_shift_identity(student, reference, k, d_model):
    """The encoding satisfies PE[pos + k] = M_k PE[pos] with the true M_k"""
    n = 40
    pe = tensor(student.get_positional_encoding(n, d_model), (n, d_model)).double()
    m = reference.shift_matrix(k, d_model).double()
    src = torch.arange(max(0, -k), min(n, n - k))
    close(pe[src] @ m.T, pe[src + k], atol=1e-4)


@graded(4, "M_k is block diagonal with one 2x2 rotation per (sin, cos) pair, [[cos kw, sin kw], "
           "[-sin kw, cos kw]] from the angle-addition formulas; negative k moves backwards.")
@each_case(examples=[dict(k=3, d_model=8), dict(k=-3, d_model=8)], k=range(-15, 16), d_model=[2, 6, 8, 16])
def test_shift_matrix_moves_the_true_encoding(student, reference, k, d_model):
    """shift_matrix(k) moves the true encoding k positions, forwards and backwards"""
    n = 40
    m = tensor(student.shift_matrix(k, d_model), (d_model, d_model), torch.float32).double()
    pe = reference.get_positional_encoding(n, d_model).double()
    src = torch.arange(max(0, -k), min(n, n - k))
    close(pe[src] @ m.T, pe[src + k], atol=1e-4)


@graded(1, "shift_matrix raises ValueError for a d_model that is not a positive even integer.")
def test_shift_matrix_rejects_odd_width(student):
    """shift_matrix rejects an odd d_model"""
    with student_raises("ValueError"):
        student.shift_matrix(1, 5)


@graded(3, "The table is fixed, not learned: register it as a buffer named pe, so the module has no "
           "parameters and the table moves with .to(device) and .to(dtype).")
def test_module_keeps_the_table_as_a_buffer(student):
    """PositionalEncoding keeps the table in a buffer named pe and has no parameters"""
    module = student.PositionalEncoding(8, max_seq_len=20)
    info = module.describe()
    assert isinstance(info, dict) and info.get("is_module"), "not an nn.Module"
    assert info["parameters"] == [], "has parameters"
    buffers = {name: (shape, dtype) for name, shape, dtype, _ in info["buffers"]}
    assert buffers.get("pe", (None,))[0] == [20, 8], "no (max_seq_len, d_model) buffer named pe"
    moved = {name: dtype for name, _, dtype, _ in module.to(torch.float64).describe()["buffers"]}
    assert moved.get("pe") == "float64", "pe does not follow .to()"


@graded(3, "forward adds the first seq rows of the table to every sequence in the batch and keeps the "
           "shape (batch, seq, d_model).")
def test_module_adds_the_encoding(student, reference):
    """forward adds the encoding of each position to every sequence"""
    x = randn(3, 7, 16, seed=1)
    out = student.PositionalEncoding(16, max_seq_len=50)(x)
    close(out, x + reference.get_positional_encoding(7, 16), atol=1e-5)


@graded(2, "forward raises ValueError for a sequence longer than max_seq_len or a last dimension other than "
           "d_model, instead of failing somewhere inside.", visibility="hidden")
def test_module_checks_its_input(student):
    """forward rejects too long sequences and the wrong width"""
    module = student.PositionalEncoding(8, max_seq_len=4)
    with student_raises("ValueError"):
        module(torch.zeros(1, 5, 8))
    with student_raises("ValueError"):
        module(torch.zeros(1, 3, 6))


@graded(2, "Slice the buffer inside forward rather than building a new tensor there: a buffer follows "
           "module.to(device), a tensor made in forward stays on the CPU (checked on PyTorch's meta device).",
        visibility="hidden")
def test_module_follows_its_device(student):
    """PositionalEncoding works after .to(device)"""
    module = student.PositionalEncoding(8, max_seq_len=10).to("meta")
    out = tensor(module(torch.empty(2, 6, 8, device="meta")), (2, 6, 8))
    assert device_of(out) == "meta", "output not on the module's device"
