"""This lesson's own figures and speed goals, which the engine's ``figures``, ``demo`` and ``bench`` commands
call through the descriptor's ``hooks`` (each with the trusted reference package)."""

import math
import time
from pathlib import Path

import numpy as np
import torch

from autograder.lesson_api import attention_maps, heatmap

from autograder.lessons.mha_pe.public_checks import load_public_checks


def figures(reference, folder: Path) -> list[Path]:
    """The guides' figures, drawn with the reference: the encoding heatmap and per-head attention maps."""
    folder = Path(folder)
    table = heatmap(reference.get_positional_encoding(50, 128).numpy(), folder / "positional_encoding.png",
                    title="Positional encoding of 50 positions, d_model = 128",
                    xlabel="feature (embedding dimension; even: sin, odd: cos)", ylabel="position",
                    value="encoding value")
    torch.manual_seed(0)
    tokens = ["the", "charge", "exceeded", "the", "refund"]
    d_model = 16
    embeddings = torch.randn(len(tokens), d_model)
    x = reference.PositionalEncoding(d_model, max_seq_len=16)(embeddings[None])
    with torch.no_grad():
        _, weights = reference.MultiHeadAttention(d_model, 4)(x, return_weights=True)
    maps = attention_maps(weights[0].numpy(), tokens, folder / "attention_heads.png",
                          title="Four heads of an untrained MultiHeadAttention(16, 4), with positional encoding")
    return [table, maps]


def loop_encoding(max_seq_len: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The lesson's baseline: NumPy scalar sin/cos, one Python iteration per (position, feature pair)."""
    table = np.zeros((max_seq_len, d_model))
    for pos in range(max_seq_len):
        for even in range(0, d_model, 2):
            angle = pos / base ** (even / d_model)
            table[pos, even] = np.sin(angle)
            table[pos, even + 1] = np.cos(angle)
    return table


def best_times(contenders, repeats: int) -> list[float]:
    """Run each zero-argument callable ``repeats`` times, interleaved; return each one's best seconds."""
    best = [math.inf] * len(contenders)
    for _ in range(repeats):
        for index, call in enumerate(contenders):
            start = time.perf_counter()
            call()
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def encoding_speedup(reference, repeats: int) -> tuple[float, float, float]:
    """Seconds for the loop and the reference on a (2048, 512) table, and their ratio."""
    fast = lambda: reference.get_positional_encoding(2048, 512)  # noqa: E731
    slow = lambda: loop_encoding(2048, 512)  # noqa: E731
    fast()  # warm up kernels
    t_slow, t_fast = best_times([slow, fast], max(1, min(repeats, 2)))
    t_fast = min(t_fast, *best_times([fast], repeats * 4))
    return t_slow, t_fast, t_slow / t_fast


def attention_ratio(reference, repeats: int, need_weights: bool) -> tuple[float, float, float]:
    """Seconds for the reference module and torch's with the same weights, and their ratio."""
    batch, seq, d_model, heads = 8, 256, 512, 8
    torch.manual_seed(0)
    ours = reference.MultiHeadAttention(d_model, heads).eval()
    checks = load_public_checks()
    theirs = checks.torch_twin(checks.projection_weights(ours), d_model, heads)
    x = torch.randn(batch, seq, d_model)

    def run_ours():
        with torch.no_grad():
            ours(x, return_weights=need_weights)

    def run_theirs():
        with torch.no_grad():
            theirs(x, x, x, need_weights=need_weights, average_attn_weights=False)

    best_times([run_ours, run_theirs], 2)  # warm up
    t_ours, t_theirs = best_times([run_ours, run_theirs], repeats)
    return t_ours, t_theirs, t_ours / t_theirs


def speed_goals(reference, repeats: int, emit) -> dict[str, float]:
    """The lesson's speed goals, each printed with its verdict: the encoding against the lesson's loop (>= 50x),
    the attention module against ``nn.MultiheadAttention`` (<= 1.5x its time)."""
    t_slow, t_fast, speedup = encoding_speedup(reference, repeats)
    emit(f"positional encoding (2048, 512): loop {t_slow * 1e3:.1f} ms, reference {t_fast * 1e3:.2f} ms "
         f"-> {speedup:.0f}x faster (goal >= 50x: {'met' if speedup >= 50 else 'MISSED'})")
    results = {"encoding_speedup": speedup}
    for need_weights in (False, True):
        t_ours, t_theirs, ratio = attention_ratio(reference, repeats, need_weights)
        label = "weights returned" if need_weights else "output only"
        emit(f"multi-head attention (8, 256, 512, 8 heads, {label}): reference {t_ours * 1e3:.1f} ms, "
             f"nn.MultiheadAttention {t_theirs * 1e3:.1f} ms -> {ratio:.2f}x its time "
             f"(goal <= 1.5x: {'met' if ratio <= 1.5 else 'MISSED'})")
        results[f"attention_ratio_{label.replace(' ', '_')}"] = ratio
    return results


def mutant_probes(package) -> list:
    """What ``validate`` compares to tell an automatic mutant from the reference: every public name called on a
    battery of contract inputs (sizes, ranks, masks, bases, dtypes, every documented error), each answer a tensor,
    a shape, an exception's type or whether an input was changed. Trusted code, run on the reference's mutants."""
    answers = []

    def ask(call):
        try:
            answers.append(call())
        except Exception as error:  # noqa: BLE001 - the type is the answer
            answers.append(type(error).__name__)

    def rand(*shape, seed=0, dtype=torch.float32):
        return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)

    for size in ((1, 2), (7, 6), (60, 16), (20, 8, 100.0), (3, 4, 10.0), (0, 4), (3, 5), (3, 0), (3, -4)):
        ask(lambda size=size: package.get_positional_encoding(*size))
    for size in ((3, 8), (-3, 8), (0, 4), (5, 2), (4, 8, 100.0), (1, 5), (1, 0), (1, -4)):
        ask(lambda size=size: package.shift_matrix(*size))
    for base in (10000.0, 100.0):
        encoding = package.PositionalEncoding(8, max_seq_len=20, base=base)
        ask(lambda: sorted(name for name, _ in encoding.named_parameters()))
        ask(lambda: dict(encoding.named_buffers()).get("pe"))
        for x in (rand(2, 6, 8, seed=1), rand(1, 20, 8, seed=2), rand(1, 21, 8), rand(1, 3, 6), rand(6, 8)):
            kept = x.clone()
            ask(lambda x=x: encoding(x))
            answers.append(torch.equal(x, kept))
    for shape, heads in (((2, 5, 12), 3), ((1, 1, 4), 4), ((3, 2, 6), 1), ((2, 5, 10), 4), ((2, 5, 12), 0),
                         ((2, 3, 4, 6), 2), ((5, 12), 3)):
        x = rand(*shape, seed=3)
        ask(lambda x=x, heads=heads: package.split_heads(x, heads))
        ask(lambda x=x, heads=heads: package.split_heads(x.double(), heads).dtype)
    for shape in ((2, 3, 5, 4), (1, 1, 1, 1), (2, 3, 4)):
        ask(lambda shape=shape: package.combine_heads(rand(*shape, seed=4)))
    causal = torch.tril(torch.ones(4, 5, dtype=torch.bool))
    blocked = torch.tensor([[True] * 5, [False] * 5, [True, False] * 2 + [True], [False] * 4 + [True]])
    padding = torch.tensor([[True, True, True, False, False], [True] * 5]).reshape(2, 1, 1, 5)
    for lead in ((), (2,), (2, 3)):
        q, k, v = rand(*lead, 4, 3, seed=5), rand(*lead, 5, 3, seed=6), rand(*lead, 5, 2, seed=7)
        for mask in (None, causal, blocked, blocked.expand(*lead, 4, 5), torch.ones(4, 5),
                     torch.ones(4, 5, dtype=torch.long), padding if lead == (2, 3) else None):
            kept = q.clone()
            ask(lambda q=q, k=k, v=v, mask=mask: package.scaled_dot_product_attention(q, k, v, mask))
            answers.append(torch.equal(q, kept))
        ask(lambda q=q, k=k, v=v: package.scaled_dot_product_attention(q * 300, k * 300, v))
        ask(lambda q=q, k=k, v=v: package.scaled_dot_product_attention(q.double(), k.double(), v.double()))
    spread = torch.tensor([[400.0, 399.0], [0.0, 1.0], [-400.0, -401.0]])
    ask(lambda: package.scaled_dot_product_attention(spread, torch.eye(2), torch.eye(2)))
    for d_model, heads in ((8, 2), (12, 3), (10, 4), (10, 0), (4, 4), (6, 1)):
        torch.manual_seed(0)
        try:
            module = package.MultiHeadAttention(d_model, heads)
        except Exception as error:  # noqa: BLE001
            answers.append(type(error).__name__)
            continue
        ask(lambda module=module: sorted(name for name, _ in module.named_parameters()))
        x = rand(2, 5, d_model, seed=8)
        for mask in (None, torch.tril(torch.ones(5, 5, dtype=torch.bool)),
                     torch.tensor([[True] * 5, [True, True, False, False, False]]).reshape(2, 1, 1, 5),
                     torch.ones(5, 5)):
            kept = x.clone()
            ask(lambda module=module, x=x, mask=mask: module(x, mask=mask, return_weights=True))
            ask(lambda module=module, x=x, mask=mask: module(x, mask=mask))
            answers.append(torch.equal(x, kept))
        ask(lambda module=module, x=x: module(x[0]))
        ask(lambda module=module, x=x: module(x[None]))
        ask(lambda module=module: module(torch.cat((rand(1, 5, d_model, seed=9), rand(1, 5, d_model, seed=10))))[1])
        module.zero_grad()
        ask(lambda module=module, x=x: module(x).pow(2).sum().backward())
        answers.append(sorted((name, None if p.grad is None else float(p.grad.norm()))
                              for name, p in module.named_parameters()))
    return answers
