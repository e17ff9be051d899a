"""The similarity report in a grade output folder: ``similarity.md`` (the most alike pairs, ranked),
``similarity.csv`` (every pair) and ``figures/similarity.png`` (a heatmap of every pair), linked from
``report.md``. Unlike the other reports it is no view of the result records: ``similarity`` computes it from
the class folder (``autograder/commands/similarity.py``), and ``report.md`` links it whenever it is there."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .figures import similarity_heatmap
from ..records.results import write_atomic
from .csv_cells import table
from .escape import file_text, markdown, visible

NAME = "similarity.md"
LIMITS = ("Small functions written to one contract are naturally alike, and the lesson's own formulas leave "
          "little room for style: a high share is a place to look, not a verdict. Read the two submissions side "
          "by side before concluding anything.")


def link(out_dir: str | Path) -> str:
    """The line ``report.md`` ends with when ``out_dir`` holds a similarity report ("" when it does not)."""
    if not (Path(out_dir) / NAME).is_file():
        return ""
    return f"\n## Similarity\n\nWhich submissions are alike, every pair compared: [{NAME}]({NAME}).\n"


def render(pairs: list, students: list[str], figure: str, top: int) -> str:
    """``similarity.md``: what was compared, its limits, and the ``top`` most alike pairs."""
    lines = ["# Similarity", "",
             f"{len(students)} submissions, {len(pairs)} pairs, compared with copydetect (code normalised: names, "
             "strings and comments do not count; the released stubs are left out, so only what students wrote "
             "is compared). A pair's share is how much of one student's own code is also in the other's.", "",
             LIMITS, "", f"![similarity of every pair]({figure})", "",
             f"## The {min(top, len(pairs))} most alike pairs", "",
             "| rank | student | student | larger share | each way | by file |", "| --- | --- | --- | --- | --- | --- |"]
    for rank, pair in enumerate(pairs[:top], 1):
        files = ", ".join(f"{module} {share:.0%}" for module, share in pair.by_file) or "none"
        lines.append(f"| {rank} | {markdown(visible(pair.a))} | {markdown(visible(pair.b))} | {pair.score:.0%} | "
                     f"{pair.a_in_b:.0%} / {pair.b_in_a:.0%} | {files} |")
    lines += ["", "Every pair: [similarity.csv](similarity.csv)."]
    return "\n".join(lines) + "\n"


def _csv(pairs: list) -> str:
    # The shares are the kit's own numbers, written to 3 places (never negative); the ids go through the rule.
    return table(["student_a", "student_b", "score", "a_in_b", "b_in_a"],
                 ([pair.a, pair.b, f"{pair.score:.3f}", f"{pair.a_in_b:.3f}", f"{pair.b_in_a:.3f}"] for pair in pairs))


def matrix(pairs: list, students: list[str]) -> np.ndarray:
    """The pairs' scores as a symmetric ``students x students`` table (a student with itself: 0, not compared)."""
    index = {student: position for position, student in enumerate(students)}
    table = np.zeros((len(students), len(students)))
    for pair in pairs:
        table[index[pair.a], index[pair.b]] = table[index[pair.b], index[pair.a]] = pair.score
    return table


def write(pairs: list, students: list[str], out_dir: str | Path, top: int = 30) -> list[Path]:
    """Write the report, its table of every pair and its heatmap into ``out_dir``; add the link to an existing
    ``report.md`` (which ``grade`` and ``final-gradebook`` write again with it, from :func:`link`)."""
    out_dir = Path(out_dir)
    figure = similarity_heatmap(matrix(pairs, students), students, out_dir / "figures" / "similarity.png")
    page, table = out_dir / NAME, out_dir / "similarity.csv"
    write_atomic(table, _csv(pairs))
    write_atomic(page, file_text(render(pairs, students, figure.relative_to(out_dir).as_posix(), top)))
    report = out_dir / "report.md"
    if report.is_file():  # UTF-8, as written (the locale's encoding could not read a non-ASCII id in it)
        text = report.read_text(encoding="utf-8")
        if f"]({NAME})" not in text:
            write_atomic(report, text + link(out_dir))
    return [page, table, figure]
