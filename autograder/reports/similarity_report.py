"""The similarity report in a grade output folder: ``similarity.md`` (the most alike rows, ranked, each with its
side-by-side page under ``similarity/``), ``similarity.csv`` (every row that shares something) and
``figures/similarity.png`` (each submission's score with its closest match, as a histogram), linked from
``report.md``. Unlike the other reports it is no view of the result records: ``similarity`` computes it from the
class folder (``autograder/commands/similarity.py``), and ``report.md`` links it whenever it is there."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..records.results import write_atomic
from .csv_cells import table
from .escape import file_text, markdown, visible
from .similarity_chart import histogram

NAME = "similarity.md"
COLUMNS = ["student_a", "student_b", "score", "smaller_share", "a_in_b", "b_in_a", "shared", "length",
           "identical", "same_as_a", "same_as_b"]
LIMITS = ("Small functions written to one contract are naturally alike, and the lesson's own formulas leave "
          "little room for style: a high share is a place to look, not a verdict. Read the two submissions side "
          "by side before concluding anything.")


@dataclass(frozen=True)
class Summary:
    """What was compared, for the report's opening lines."""

    students: int
    units: int  # distinct submissions with code of their own
    limit: int  # a passage more submissions than this hold is common
    common: int  # fingerprints ignored as common
    empty: int  # submissions with no code of their own
    max_share: float
    floor: int  # ...and never fewer than this many
    boilerplate: tuple[str, ...] = ()  # the --boilerplate files' names


def link(out_dir: str | Path) -> str:
    """The line ``report.md`` ends with when ``out_dir`` holds a similarity report ("" when it does not)."""
    if not (Path(out_dir) / NAME).is_file():
        return ""
    return f"\n## Similarity\n\nWhich submissions are alike, ranked, the closest side by side: [{NAME}]({NAME}).\n"


def _name(student: str, same: tuple[str, ...]) -> str:
    shown = markdown(visible(student))
    return f"{shown} (identical: {', '.join(markdown(visible(other)) for other in same)})" if same else shown


def _opening(pairs: list, summary: Summary | None) -> list[str]:
    if summary is None:
        return [f"{len(pairs)} rows."]
    given = "the released stubs" + "".join(f", {markdown(visible(name))}" for name in summary.boilerplate)
    groups = sum(1 for pair in pairs if pair.identical)
    return [f"{summary.students} submissions ({summary.units} distinct with code of their own, {groups} groups of "
            f"identical ones; {summary.empty} with no code of their own: the stubs, boilerplate or nothing), "
            "compared through an index of fingerprints of normalised code (names, strings and comments do not "
            f"count; {given} left out). Only submissions that share a fingerprint are scored: {len(pairs)} rows.",
            "", f"A passage held by more than {summary.limit} submissions ({summary.max_share:g} of the class, at "
            f"least {summary.floor}) is common and ignored ({summary.common} fingerprints). A row's *smaller "
            "share* is, of each student's own code, the share found in the other's, the smaller way; rows are ranked "
            "by it times the shared length (so a short partial submission cannot top the list), then by the shared "
            "count. The length weighs each shared fingerprint by its rarity: one that *d* submissions hold counts "
            "1/(*d* - 1), so what only two students wrote counts fully and a style many share hardly counts. "
            "Identical submissions are one row."]


def render(pairs: list, students: list[str], figure: str, top: int, summary: Summary | None = None) -> str:
    """``similarity.md``: what was compared, its limits, and the ``top`` most alike rows."""
    lines = ["# Similarity", "", *_opening(pairs, summary), "", LIMITS, "",
             f"![each submission's score with its closest match]({figure})", "",
             f"## The {min(top, len(pairs))} most alike", "",
             "| rank | student | student | smaller share | each way | shared (rare-weighted) | score | by file | "
             "side by side |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rank, pair in enumerate(pairs[:top], 1):
        files = ", ".join(f"{markdown(module)} {share:.0%}" for module, share in pair.by_file) or "-"
        view = f"[view]({pair.view})" if pair.view else "-"
        if pair.identical:
            others = ", ".join(markdown(visible(student)) for student in (pair.b, *pair.same_as_a))
            lines.append(f"| {rank} | {markdown(visible(pair.a))} | {others} | 100% | identical "
                         f"({2 + len(pair.same_as_a)} submissions) | {pair.shared} ({pair.length:.1f}) | "
                         f"{pair.score:.1f} | {files} | {view} |")
        else:
            lines.append(f"| {rank} | {_name(pair.a, pair.same_as_a)} | {_name(pair.b, pair.same_as_b)} | "
                         f"{pair.smaller:.0%} | {pair.a_in_b:.0%} / {pair.b_in_a:.0%} | {pair.shared} "
                         f"({pair.length:.1f}) | {pair.score:.1f} | {files} | {view} |")
    lines += ["", "Every row: [similarity.csv](similarity.csv) (a group's other members as a JSON list)."]
    return "\n".join(lines) + "\n"


def _csv(pairs: list) -> str:
    # The shares are the kit's own numbers, written to 3 places; the ids, and the lists of them, go through the rule.
    def others(same: tuple[str, ...]) -> str:
        return json.dumps(list(same), ensure_ascii=False) if same else ""

    return table(COLUMNS, ([pair.a, pair.b, f"{pair.score:.3f}", f"{pair.smaller:.3f}", f"{pair.a_in_b:.3f}",
                            f"{pair.b_in_a:.3f}", str(pair.shared), f"{pair.length:.3f}",
                            "yes" if pair.identical else "no", others(pair.same_as_a), others(pair.same_as_b)]
                           for pair in pairs))


def best_scores(pairs: list, students: list[str]) -> list[float]:
    """Each student's highest score in any row that names them (0 when nobody shares anything with them)."""
    best = dict.fromkeys(students, 0.0)
    for pair in pairs:
        for student in (pair.a, pair.b, *pair.same_as_a, *pair.same_as_b):
            best[student] = max(best.get(student, 0.0), pair.score)
    return [best[student] for student in students]


def write(pairs: list, students: list[str], out_dir: str | Path, top: int = 30, summary: Summary | None = None
          ) -> list[Path]:
    """Write the report, its table of every row and its histogram into ``out_dir``; add the link to an existing
    ``report.md`` (which ``grade`` and ``final-gradebook`` write again with it, from :func:`link`)."""
    out_dir = Path(out_dir)
    figure = histogram(best_scores(pairs, students), out_dir / "figures" / "similarity.png")
    page, rows = out_dir / NAME, out_dir / "similarity.csv"
    write_atomic(rows, _csv(pairs))
    write_atomic(page, file_text(render(pairs, students, figure.relative_to(out_dir).as_posix(), top, summary)))
    report = out_dir / "report.md"
    if report.is_file():  # UTF-8, as written (the locale's encoding could not read a non-ASCII id in it)
        text = report.read_text(encoding="utf-8")
        if f"]({NAME})" not in text:
            write_atomic(report, text + link(out_dir))
    return [page, rows, figure]
