"""Hidden tests: scaled dot-product attention and the MultiHeadAttention module.

Each test takes its expectations from its own concept only. The attention tests read the student's own
weights (the mask test compares masked weights with the student's unmasked ones, renormalised); the module
tests accept the composition of the student's own parts (a wrong split or softmax is charged by its own
tests); structure and gradients are fetched as tensors and confirmed by recomputing in the judge.
"""

import torch

from autograder.lesson_api import graded
from .support import MODULE_PARTS, PROJECTIONS, Calls, close, each_case, expected_attention, first, graded_on_its_own, gradient_agrees, gradient_reaches, is_close, module_and_twin, needs, pair, randn, student_raises, tensor

ATTEND = ("scaled_dot_product_attention",)
# The checks that read the weights' values need each query's weights normalised over the keys: a softmax over another
# axis is charged once, to the softmax concept, not to every value it spoils.
NORMALISED = (*ATTEND, "softmax over keys")
MODULE = (*MODULE_PARTS, "MultiHeadAttention")  # the parts first: a module check waits for the parts it uses

GROUP = "attention"


@graded(2, "Attention returns (output, weights): output (..., seq_q, d_v) and weights (..., seq_q, seq_k), "
           "for any sizes, including one query, one key and one feature.", topic="sdpa-shapes")
@each_case(lead=[(1, 1), (2, 3), (3, 1), (1, 4)], seq_q=range(1, 6), seq_k=range(1, 6), d=range(1, 7),
           d_v=range(1, 7))
def test_attention_shapes(student, lead, seq_q, seq_k, d, d_v):
    """scaled_dot_product_attention returns output and weights of the right shapes"""
    # (batch, heads, seq, head_dim), as the module calls it: other ranks are the rank check's alone.
    q, k, v = torch.zeros(*lead, seq_q, d), torch.zeros(*lead, seq_k, d), torch.zeros(*lead, seq_k, d_v)
    out, weights = pair(student.scaled_dot_product_attention(q, k, v))
    tensor(out, (*lead, seq_q, d_v))
    tensor(weights, (*lead, seq_q, seq_k))


@graded(2, "Attention works on the last two axes only, so any number of leading dimensions works, zero "
           "included: (seq, d), (batch, seq, d), (batch, heads, seq, d), and more.", topic="sdpa-ranks")
@needs(*NORMALISED)
def test_attention_accepts_any_number_of_leading_dimensions(student):
    """scaled_dot_product_attention accepts any number of leading dimensions"""
    # Judged against the submission's own (batch, heads, seq, d) answer: only the rank is this check's concern.
    q, k, v = randn(1, 2, 3, 4, seed=25), randn(1, 2, 5, 4, seed=26), randn(1, 2, 5, 3, seed=27)
    indices, later = ((0, 0), (0,), (None,)), Calls(student)
    answers = [later(lambda: student.scaled_dot_product_attention(q, k, v))] + [  # every call before any read
        later(lambda index=index: student.scaled_dot_product_attention(q[index], k[index], v[index]))
        for index in indices]
    out, weights = pair(answers[0].get())
    tensor(out, (1, 2, 3, 3))
    for index, answer in zip(indices, answers[1:]):
        small_out, small_weights = pair(answer.get())
        close(small_out, out[index], atol=1e-6)
        close(small_weights, weights[index], atol=1e-6)


def _centred(matrix):
    """``matrix`` minus its row means and column means (over the last two axes)."""
    return matrix - matrix.mean(-1, keepdim=True) - matrix.mean(-2, keepdim=True) + matrix.mean((-2, -1), keepdim=True)


@graded(4, "The scores are divided by sqrt(d), d the size of one query vector, and scaled before the softmax; "
           "output = weights @ v.", topic="sdpa-scaling")
@needs(*NORMALISED)
def test_attention_values(student):
    """Attention computes softmax(q k^T / sqrt(d)) v"""
    q, k, v = randn(2, 3, 4, 8, seed=4), randn(2, 3, 6, 8, seed=5), randn(2, 3, 6, 5, seed=6)
    out, weights = pair(student.scaled_dot_product_attention(q, k, v))
    tensor(weights, (2, 3, 4, 6))
    # log(softmax(scores / s)) = scores / s minus one number per row (or per column, whichever axis the softmax
    # took): with the row and column means removed from both, only the scale s is left between them.
    logs, scores = _centred(weights.double().log()), _centred(q.double() @ k.double().transpose(-2, -1))
    scale = float((scores * scores).sum() / (scores * logs).sum())
    assert abs(scale - 8 ** 0.5) < 1e-3 * 8 ** 0.5, "scores are not scaled by 1/sqrt(d) before the softmax"
    close(logs * scale, scores, atol=1e-3)
    close(out, weights.double() @ v.double(), atol=1e-5)


@graded(2, "Each query's weights are a probability distribution over the keys: take the softmax over the "
           "last (key) dimension.", topic="sdpa-softmax")
@needs(*ATTEND)
def test_attention_rows_sum_to_one(student):
    """Each query's weights sum to 1 over the keys"""
    _, weights = pair(student.scaled_dot_product_attention(randn(2, 2, 4, 3, seed=7), randn(2, 2, 6, 3, seed=8),
                                                           randn(2, 2, 6, 2, seed=9)))
    close(tensor(weights, (2, 2, 4, 6)).sum(-1), torch.ones(2, 2, 4))


def renormalised(weights, mask):
    """``weights`` with the blocked entries removed, renormalised along the rows and along the columns: what
    masking does to a softmax over keys (rows) or over queries (columns), whatever its scale; each with whether
    NaN may appear in it. Over keys, every query keeps a key in these checks, so the contract rules NaN out; a
    softmax over queries (another concept's mistake, charged there) gives NaN for a key blocked to every query."""
    kept = weights.double() * mask
    rows = kept * weights.double().sum(-1, keepdim=True) / kept.sum(-1, keepdim=True)
    columns = kept * weights.double().sum(-2, keepdim=True) / kept.sum(-2, keepdim=True)
    return (rows, False), (columns, True)


@graded(3, "The mask says where a query may look (True = may attend): blocked keys get weight exactly 0, "
           "which filling their scores with -inf before the softmax achieves; a (seq_q, seq_k) mask applies to "
           "every batch element.", topic="sdpa-mask")
@needs(*NORMALISED)
def test_attention_mask(student):
    """Masked keys get zero weight and the mask broadcasts"""
    q, k, v = randn(2, 2, 4, 4, seed=10), randn(2, 2, 4, 4, seed=11), randn(2, 2, 4, 4, seed=12)  # d_v = d
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))  # (seq_q, seq_k), and a (batch, 1, 1, seq_k) padding
    padding = torch.tensor([[True, True, True, False], [True, True, False, False]]).reshape(2, 1, 1, 4)
    later = Calls(student)
    answers = [later(lambda mask=mask: student.scaled_dot_product_attention(q, k, v, mask=mask))
               for mask in (None, causal, padding)]  # every call before any read
    out, weights = pair(answers[0].get())
    follows_weights = is_close(out, weights.double() @ v.double())
    for mask, answer in zip((causal, padding), answers[1:]):
        masked_out, masked = pair(answer.get())
        full = mask.expand(2, 2, 4, 4)
        matched = [nan for expected, nan in renormalised(weights, full)
                   if is_close(masked, expected, atol=1e-6, equal_nan=nan)]
        assert matched, "masked weights are not the unmasked ones with the blocked keys removed"
        if follows_weights:  # the output follows the weights unmasked, so it must follow them masked
            assert is_close(masked_out, masked.double() @ v.double(), equal_nan=matched[0]), "output ignores the mask"


MASKED = (*NORMALISED, "attention mask")


@graded(2, "A query with every key blocked attends to nothing: its weights and its output are zeros (a row of "
           "-inf scores softmaxes to NaN, a row of -1e9 scores to equal weights: set such rows to 0), whatever "
           "the mask's rank: look for a key left along the key axis, the last one.", topic="sdpa-all-blocked")
@needs(*MASKED)
def test_attention_zeroes_queries_with_every_key_blocked(student):
    """A query with every key blocked gets zero weights and zero output, for masks of every rank"""
    q, k, v = randn(2, 2, 4, 3, seed=31), randn(2, 2, 5, 3, seed=32), randn(2, 2, 5, 2, seed=33)
    rows = torch.tensor([[True, False, True, False, False], [False] * 5, [True] * 5, [False] * 5])  # rows 1, 3
    # The same rule for a 3-D and a 4-D mask, whose fully blocked queries differ from head to head and from
    # sequence to sequence: a fix that looks for a key left along another axis than the last misses them.
    masks = (rows, torch.stack((rows, rows.roll(1, 0))), torch.stack((rows.roll(1, 0), rows))[:, None])
    later = Calls(student)
    answers = [later(lambda mask=mask: student.scaled_dot_product_attention(q, k, v, mask=mask)) for mask in masks]
    for mask, answer in zip(masks, answers):  # every call before any read
        out, weights = pair(answer.get())
        tensor(out, (2, 2, 4, 2))
        tensor(weights, (2, 2, 4, 5))
        assert bool(out.isfinite().all() and weights.isfinite().all()), (
            f"NaN or inf where every key is blocked, with a {mask.dim()}-D mask")
        blocked = ~mask.expand(2, 2, 4, 5).any(dim=-1)  # (batch, heads, seq_q): queries left with no key
        close(weights[blocked], torch.zeros(int(blocked.sum()), 5), atol=0)
        close(out[blocked], torch.zeros(int(blocked.sum()), 2), atol=0)


@graded(1, "A mask must be a boolean tensor (True = may attend): a float or integer mask is ambiguous, so "
           "attention and the module refuse it with TypeError.", topic="validation")
def test_attention_rejects_a_non_boolean_mask(student):
    """A mask that is not boolean raises TypeError"""
    q, later = randn(1, 2, 3, 4, seed=34), Calls(student)
    answers = [later(lambda mask=mask: student.scaled_dot_product_attention(q, q, q, mask=mask))
               for mask in (torch.ones(3, 3), torch.ones(3, 3, dtype=torch.long))]  # every call before any read
    planned = [_module_with_a_float_mask(student, later)]
    with first(student, *ATTEND):
        for answer in answers:
            with student_raises("TypeError"):
                answer.get()

    def module_refuses():  # the planned calls first; graded again (a stand-in for a broken part), calls anew
        module, forward = planned.pop() if planned else _module_with_a_float_mask(student, Calls(student))
        module.get()
        with student_raises("TypeError"):
            forward.get()

    graded_on_its_own(student, MODULE, ("MultiHeadAttention",), module_refuses)


def _module_with_a_float_mask(student, later):
    """A module and its forward given a float mask, as calls of ``later``."""
    module = later(lambda: student.MultiHeadAttention(8, 2))
    return module, later(lambda: module.get()(randn(2, 3, 8, seed=35), mask=torch.ones(3, 3)))


@graded(2, "Use a numerically stable softmax (torch.softmax subtracts each row's maximum): exponentiating "
           "raw large scores overflows to inf and nan, and subtracting one maximum for all rows underflows a row "
           "far below it to 0 / 0.", topic="sdpa-stability")
@needs(*NORMALISED)
def test_attention_is_stable_on_large_scores(student):
    """Large scores give finite, correct weights, in rows far apart too"""
    # An extra feature adds the same huge number to every score: a stable softmax gives the weights it gives
    # without it (whatever its scale or axis), an unstable one overflows.
    q, k, v = randn(1, 2, 3, 4, seed=13), randn(1, 2, 3, 4, seed=14), randn(1, 2, 3, 2, seed=15)
    big, small = torch.full((1, 2, 3, 1), 30.0), torch.zeros(1, 2, 3, 1)  # scores + 900 / sqrt(5): exp overflows
    # Then a huge number of its own for each query, far apart (+400, 0, -400): one row's shift changes no weight
    # of a row-wise softmax, and one maximum for all rows leaves the lowest row 0 / 0. Only finiteness is asked
    # of it, so a softmax over another axis (charged by its own check) keeps these points.
    apart = torch.tensor([30.0, 0.0, -30.0]).reshape(1, 1, 3, 1).expand(1, 2, 3, 1)
    later = Calls(student)
    plain, shifted, spread = (later(lambda a=a, b=b: student.scaled_dot_product_attention(
        torch.cat((q, a), -1), torch.cat((k, b), -1), v)) for a, b in ((small, small), (big, big), (apart, big)))
    out, weights = pair(plain.get())  # every call before any read
    big_out, big_weights = pair(shifted.get())
    assert bool(big_weights.isfinite().all() and big_out.isfinite().all()), "inf or nan"
    close(big_weights, weights, atol=1e-4)
    close(big_out, out, atol=1e-4)
    far_out, far_weights = pair(spread.get())
    assert bool(far_weights.isfinite().all() and far_out.isfinite().all()), (
        "inf or nan in a row whose scores are far below another row's (one maximum for all rows?)")


def _layers(student, bias, attributes=()):
    """Each projection fetched as tensors, then run alone by the worker and recomputed here; the module's
    ``attributes``, asked for with the rest, returned unread (each a :class:`Later`)."""
    module, x, later = student.MultiHeadAttention(12, 3), randn(2, 5, 12, seed=24), Calls(student)
    state = later(module.tensors)
    runs = {name: later(lambda name=name: module.child(name)(x)) for name in PROJECTIONS}  # before any is read
    values = [later(lambda name=name: module.attr(name)) for name in attributes]
    state = state.get()
    assert isinstance(state, dict) and isinstance(state.get("parameters"), dict), "no parameters"
    parameters = state["parameters"]
    for name in PROJECTIONS:
        weight = tensor(parameters.get(f"{name}.weight"), (12, 12))
        if bias:
            offset = tensor(parameters.get(f"{name}.bias"), (12,))
        else:
            offset = parameters.get(f"{name}.bias")
            offset = torch.zeros(12) if offset is None else tensor(offset, (12,))
        close(runs[name].get(), x @ weight.T + offset)
    return values


@graded(2, "MultiHeadAttention has four nn.Linear(d_model, d_model) layers named q_linear, k_linear, v_linear "
           "and out_proj, and attributes num_heads and head_dim = d_model // num_heads.", topic="mha-structure")
@needs("MultiHeadAttention")
def test_module_layers(student):
    """MultiHeadAttention has the four projections and the head sizes"""
    num_heads, head_dim = _layers(student, bias=False, attributes=("num_heads", "head_dim"))
    assert num_heads.get() == 3 and head_dim.get() == 4, "num_heads / head_dim"


@graded(1, "Each of the four projections has a bias (nn.Linear's default, bias=True), as torch.nn.MultiheadAttention "
           "has.", topic="mha-bias")
@needs("MultiHeadAttention")
def test_projections_have_biases(student):
    """The four projections have biases"""
    _layers(student, bias=True)


@graded(3, "Self-attention keeps the shape (batch, seq, d_model); with return_weights=True it also returns "
           "per-head weights (batch, num_heads, seq, seq). Any sizes work, including batch 1, sequence "
           "length 1, one head and head_dim 1.", topic="mha-shapes")
@each_case(batch=range(1, 4), seq=range(1, 6), heads=range(1, 5), head_dim=range(1, 4))
@needs(*MODULE_PARTS, own="MultiHeadAttention")
def test_module_shapes(student, batch, seq, heads, head_dim):
    """MultiHeadAttention returns the right shapes"""
    d_model = heads * head_dim
    module = student.MultiHeadAttention(d_model, heads)
    x = randn(batch, seq, d_model, seed=16)
    later = Calls(student)
    alone, both = later(lambda: module(x)), later(lambda: module(x, return_weights=True))
    tensor(alone.get(), (batch, seq, d_model))
    out, weights = pair(both.get())
    tensor(out, (batch, seq, d_model))
    tensor(weights, (batch, heads, seq, seq))


@graded(5, "With the same weights the module must agree with torch.nn.MultiheadAttention: project q, k and v "
           "with their own layers, split into contiguous heads, attend with scale 1/sqrt(head_dim) inside each "
           "head, concatenate the heads in order and apply out_proj.", topic="mha-math")
@needs(*MODULE)
def test_module_matches_torch_output(student):
    """The output agrees with torch.nn.MultiheadAttention given the same weights"""
    sizes = [(d_model, heads, randn(2, seq, d_model, seed=17)) for d_model, heads, seq in ((16, 4, 6), (12, 3, 1),
                                                                                          (8, 1, 5))]
    later = Calls(student)  # the three modules' calls, together
    started = [module_and_twin(student, d_model, heads, lambda module, x=x: module(x), later)
               for d_model, heads, x in sizes]
    for (d_model, heads, x), read in zip(sizes, started):
        _, weights, twin, answer = read()
        out = tensor(answer, x.shape)
        assert any(is_close(out, expected) for expected, _ in expected_attention(student, weights, twin, x, heads)), \
            "output differs"


@graded(4, "Each head's attention weights must agree with torch.nn.MultiheadAttention's per-head weights: "
           "scores between the head's own query and key chunks, scaled by sqrt(head_dim), softmax over keys.",
        topic="mha-math")
@needs(*MODULE)
def test_module_matches_torch_weights(student):
    """Per-head weights agree with torch.nn.MultiheadAttention"""
    x = randn(2, 5, 16, seed=18)
    _, weights, twin, answer = module_and_twin(student, 16, 4, lambda module: module(x, return_weights=True))()
    _, per_head = pair(answer)
    assert any(is_close(per_head, expected) for _, expected in expected_attention(student, weights, twin, x, 4)), \
        "per-head weights differ"


@graded(3, "The mask reaches every head: a (seq, seq) boolean mask (True = may attend) applies to all heads "
           "and batch elements, as torch.nn.MultiheadAttention applies its inverted attn_mask.",
        visibility="hidden", topic="mha-mask")
@needs(*MODULE, "attention mask", own="MultiHeadAttention")
def test_module_mask(student):
    """A causal mask reaches every head"""
    x = randn(2, 5, 8, seed=19)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    module, weights, twin, answer = module_and_twin(student, 8, 2,
                                                    lambda module: module(x, mask=causal, return_weights=True))()
    out, masked = pair(answer)
    # Per-head weights as torch's or the student's own parts' give them, or the module's own unmasked weights
    # with the blocked keys removed; or, for weights of another shape (their own check's concern), the output.
    # Every query keeps a key under a causal mask: NaN is never right here.
    for expected_out, expected in expected_attention(student, weights, twin, x, 2, mask=causal):
        if is_close(masked, expected) or is_close(out, expected_out):
            return
    _, unmasked = pair(module(x, return_weights=True))
    assert any(is_close(masked, expected, atol=1e-6, equal_nan=nan)
               for expected, nan in renormalised(unmasked, causal)), "masked weights differ"


@graded(2, "A (batch, 1, 1, seq) padding mask reaches every head and query of its own sequence: each sequence's "
           "blocked keys get no weight, as torch.nn.MultiheadAttention's key_padding_mask blocks them.",
        visibility="hidden", topic="mha-mask")
@needs(*MODULE, "attention mask", own="MultiHeadAttention")
def test_module_accepts_a_padding_mask(student):
    """A padding mask reaches every head"""
    x = randn(2, 5, 8, seed=39)
    padding = torch.tensor([[True] * 5, [True, True, True, False, False]]).reshape(2, 1, 1, 5)
    module, weights, twin, answer = module_and_twin(student, 8, 2,
                                                    lambda module: module(x, mask=padding, return_weights=True))()
    out, masked = pair(answer)
    # As the causal mask's check: torch's or the student's own parts' weights, or else the module's own unmasked
    # weights with the padded keys removed (its math is the other checks' concern).
    for expected_out, expected in expected_attention(student, weights, twin, x, 2, mask=padding):
        if is_close(masked, expected) or is_close(out, expected_out):
            return
    _, unmasked = pair(module(x, return_weights=True))
    full = padding.expand(2, 2, 5, 5)
    assert any(is_close(masked, expected, atol=1e-6, equal_nan=nan)
               for expected, nan in renormalised(unmasked, full)), "masked weights differ"


@graded(3, "Every projection is on the path from input to output (q, k and v through attention, out_proj "
           "after the heads are combined), so training updates all four.", topic="mha-gradients")
@needs(*MODULE)
def test_gradients_reach_every_projection(student):
    """Gradients reach all four projections"""
    x = randn(2, 4, 8, seed=20)
    module, weights, twin, reply = module_and_twin(student, 8, 2, lambda module: module.grads(x))()
    assert isinstance(reply, dict) and isinstance(reply.get("grads"), dict), "no gradients"
    out, grads = tensor(reply.get("output"), (2, 4, 8)), reply["grads"]
    for name in PROJECTIONS:
        assert isinstance(grads.get(f"{name}.weight"), torch.Tensor), f"no gradient for {name}"
    expected, _ = twin(x, x, x, need_weights=False)
    if is_close(out, expected):  # the forward is torch's: so must the gradients be, computed here
        expected.pow(2).sum().backward()
        in_proj = twin.in_proj_weight.grad.chunk(3)
        for name, grad in zip(PROJECTIONS, (*in_proj, twin.out_proj.weight.grad)):
            close(grads[f"{name}.weight"], grad, atol=1e-4, rtol=1e-3)
        return
    # A forward of its own (another check charges for that): its gradients must be the true ones of that
    # forward, measured here as the change of its output when one projection's weights move.
    for index, name in enumerate(PROJECTIONS):
        weight, direction = weights[name][0], randn(8, 8, seed=30 + index, dtype=torch.float64)
        losses = []
        for sign in (1, -1):
            moved = (weight.double() + sign * 1e-2 * direction).float()
            losses.append(tensor(module.call_with({f"{name}.weight": moved}, x), (2, 4, 8)).double().pow(2).sum())
        measured, loss = float(losses[0] - losses[1]) / 2e-2, float(losses[0] + losses[1]) / 2
        claimed = float((tensor(grads[f"{name}.weight"], (8, 8)).double() * direction).sum())
        assert gradient_reaches(measured, loss), f"no gradient reaches {name}"
        assert gradient_agrees(claimed, measured, loss), f"the gradient of {name} is not its own"


@graded(2, "Sequences in a batch do not see each other: each one's output is what it would be alone.",
        visibility="hidden", topic="mha-batch")
@needs(*MODULE)
def test_batch_elements_are_independent(student):
    """Each batch element's output is independent of the others"""
    module = student.MultiHeadAttention(8, 2)
    x = randn(3, 4, 8, seed=21)
    together = tensor(module(x), (3, 4, 8))
    close(together[1:2], module(x[1:2]))


@graded(2, "MultiHeadAttention raises ValueError when d_model is not divisible by num_heads: heads must split "
           "the width evenly (zero heads divide nothing).", topic="validation")
@needs("MultiHeadAttention")
def test_indivisible_width_raises_value_error(student):
    """An indivisible d_model, or no heads at all, raises ValueError"""
    later = Calls(student)
    answers = [later(lambda heads=heads: student.MultiHeadAttention(10, heads)) for heads in (4, 0)]
    for answer in answers:  # every call before any read
        with student_raises("ValueError"):
            answer.get()


@graded(1, "forward takes exactly 3-D input (batch, seq, d_model) and raises ValueError for any other rank "
           "(split_heads refuses it).", topic="validation")
@needs("split refuses ranks", "MultiHeadAttention")
def test_module_refuses_input_that_is_not_3d(student):
    """MultiHeadAttention refuses input that is not 3-D"""
    module = student.MultiHeadAttention(8, 2)
    later = Calls(student)
    answers = [later(lambda x=x: module(x)) for x in (randn(5, 8, seed=36), randn(1, 2, 5, 8, seed=37))]
    for answer in answers:
        with student_raises("ValueError"):
            answer.get()


@graded(1, "forward is a function of its input: the same input gives the same output, so no dropout or other "
           "randomness is left in it.", topic="mha-determinism")
def test_module_gives_the_same_output_twice(student):
    """MultiHeadAttention gives the same output for the same input"""

    def check():
        module, x = student.MultiHeadAttention(8, 2), randn(2, 5, 8, seed=38)
        once = tensor(module.call_seeded(1, x), (2, 5, 8))
        # The worker's random generators start from another seed for the second call: only a draw tells them apart.
        assert is_close(module.call_seeded(2, x), once, atol=0, rtol=0), "two calls with one input differ"

    graded_on_its_own(student, MODULE_PARTS, ("MultiHeadAttention",), check)
