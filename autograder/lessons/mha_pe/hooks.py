"""This lesson's own figures and speed goals, which the engine's ``figures``, ``demo`` and ``bench`` commands
call through the descriptor's ``hooks`` (each with the trusted reference package)."""

import math
import time
from pathlib import Path

import numpy as np
import torch

from autograder.reports.figures import attention_maps, heatmap

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
