"""The similarity report: a class in which one student copied another's code (variables renamed, comments
reworded) and the others wrote their own. The pair ranks first; the released stubs alone match nothing; nothing
a student wrote is imported; the report lands in the grade output folder, linked from report.md."""

import csv
import re

import matplotlib.figure
import pytest

from autograder import cli
from autograder.errors import KitError
from autograder.lesson.catalogue import build, copy_package, load_catalogue
from autograder.reports import class_report
from autograder.records.results import SubmissionResult, TestResult
from autograder.commands.similarity import compare, released_stubs, similarity
from lesson import CATALOGUE, LESSON, MODULES

# Each student's own style, from the catalogue's correct variants (several per student, one per part they touch).
OWN = {"ada": ["pe-float32-exp-log", "shift-matrix-block-diag", "heads-reshape-permute", "attention-einsum",
               "mha-inline-view-transpose"],
       "cy": ["pe-article-loops", "heads-einops-rearrange", "sdpa-baddbmm-batch-folded", "mha-fused-qkv-matmul"],
       "di": ["pe-float32-pow", "mha-transpose-qkv-folded-heads", "sdpa-mask-minus-1e9", "mha-modulelist-aliases"]}
RENAMES = {"position": "where", "scores": "logits", "weights": "probs", "angles": "theta", "blocks": "parts",
           "exps": "e", "batch": "nb"}


def _copied(text):
    """What a student who copies does: rename the variables, reword every comment."""
    for old, new in RENAMES.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return re.sub(r"  # .*$", "  # worked this out myself", text, flags=re.M)


@pytest.fixture(scope="module")
def class_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("similar") / "class"
    variants = {variant.id: variant for variant in load_catalogue(CATALOGUE / "variants.toml", "variant")}
    for student, ids in OWN.items():
        folder = root / student / "assignments" / LESSON.id  # a student repository's layout
        source = None
        for variant in ids:
            source = build(variants[variant], folder, LESSON, source=source)
    ada = root / "ada" / "assignments" / LESSON.id
    for module in MODULES:
        (root / "bo").mkdir(exist_ok=True)
        (root / "bo" / f"{module}.py").write_text(_copied((ada / f"{module}.py").read_text()))  # laid flat
    copy_package(LESSON.release, root / "stubs", MODULES)  # handed in as released
    # A submission that would say so if anything imported it: similarity reads text, never runs it.
    tripwire = copy_package(LESSON.release, root / "tripwire", MODULES)
    marker = root.parent / "imported"
    (tripwire / "heads.py").write_text(f"open({str(marker)!r}, 'w').close()\n" + (tripwire / "heads.py").read_text())
    return root


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("graded")
    result = SubmissionResult("ada", (TestResult("a", "heads", 1, 1, "passed", "", "visible", "test_a"),))
    class_report.write([result], out)  # a grade run's report.md
    return out


@pytest.fixture(scope="module")
def pairs(class_dir, out_dir):
    said = []
    found = similarity(out_dir, class_dir, emit=said.append)
    assert said[-1].startswith("most alike: ada and bo") and "not a verdict" in said[-1]
    return found


def test_the_copied_pair_ranks_first_and_well_above_the_rest(pairs):
    first, second = pairs[0], pairs[1]
    assert {first.a, first.b} == {"ada", "bo"}
    assert first.a_in_b > 0.95 and first.b_in_a > 0.95
    assert second.score < first.score - 0.2, "students who wrote their own code are far less alike"
    assert len(pairs) == 6 * 5 // 2


def test_the_stubs_alone_match_nothing(pairs):
    for pair in pairs:
        if "stubs" in (pair.a, pair.b) or "tripwire" in (pair.a, pair.b):
            assert pair.score == 0, pair
    # and the stubs are boilerplate to every other pair: two students handing in the stubs match nothing either
    stubs = released_stubs(LESSON)
    assert compare({"x": stubs, "y": dict(stubs)}, stubs)[0].score == 0


def test_no_submission_is_imported(class_dir, pairs):
    assert not (class_dir.parent / "imported").exists()


def test_the_report_is_written_into_the_output_folder_and_linked(out_dir, pairs):
    page = (out_dir / "similarity.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| 1 |")]
    assert rows and "| ada | bo | 100% |" in rows[0]
    assert "a place to look, not a verdict" in page and "(figures/similarity.png)" in page
    with open(out_dir / "similarity.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == len(pairs)
    assert (out_dir / "figures" / "similarity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[similarity.md](similarity.md)" in (out_dir / "report.md").read_text()
    # grade and final-gradebook write report.md again: the link stays, once
    class_report.write([SubmissionResult("ada")], out_dir)
    assert (out_dir / "report.md").read_text().count("[similarity.md](similarity.md)") == 1


def test_the_heatmap_has_a_colour_bar_and_named_axes(monkeypatch, class_dir, tmp_path):
    figures, save = [], matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda figure, *args, **kwargs: (figures.append(figure), save(figure, *args, **kwargs))[1])
    similarity(tmp_path, class_dir, emit=lambda line: None)
    axes = figures[0].get_axes()
    plot = next(ax for ax in axes if ax.get_label() != "<colorbar>")
    bar = next(ax for ax in axes if ax.get_label() == "<colorbar>")
    assert plot.get_xlabel() == plot.get_ylabel() == "student" and "share of own code" in bar.get_ylabel()
    assert [label.get_text() for label in plot.get_xticklabels()][:2] == ["ada", "bo"]


def test_the_command_line_takes_the_output_folder_and_the_class(class_dir, tmp_path, capsys):
    assert cli.main(["similarity", str(tmp_path), "--class", str(class_dir), "--top", "3"]) == 0
    assert "most alike: ada and bo" in capsys.readouterr().out
    assert "## The 3 most alike pairs" in (tmp_path / "similarity.md").read_text()
    assert cli.main(["similarity", str(tmp_path / "nowhere"), "--class", str(class_dir)]) == 2
    assert "no such output folder" in capsys.readouterr().err
    with pytest.raises(KitError, match="nothing to compare"):
        similarity(tmp_path, class_dir / "ada")
