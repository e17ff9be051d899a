"""The similarity report on small classes: one student copied another's code (variables renamed, functions
reordered, comments reworded) and the others wrote their own. The pair ranks first and is shown side by side; the
released stubs and named boilerplate match nothing; identical submissions are one row; nothing a student wrote is
imported, and a hostile submission is inert in every output; the report is linked from report.md."""

import csv
import re

import pytest
from PIL import Image

from autograder import cli
from autograder.commands.similarity import compare, released_stubs, similarity
from autograder.errors import KitError
from autograder.lesson.catalogue import build, copy_package, load_catalogue
from autograder.records.results import SubmissionResult, TestResult
from autograder.reports import class_report, similarity_chart, similarity_html, similarity_report
from autograder.reports.csv_cells import original
from lesson import CATALOGUE, LESSON, MODULES

# Each student's own style, from the catalogue's correct variants (several per student, one per part they touch).
OWN = {"ada": ["pe-float32-exp-log", "shift-matrix-block-diag", "heads-reshape-permute", "attention-einsum",
               "mha-inline-view-transpose"],
       "cy": ["pe-article-loops", "heads-einops-rearrange", "sdpa-baddbmm-batch-folded", "mha-fused-qkv-matmul"],
       "di": ["pe-float32-pow", "mha-transpose-qkv-folded-heads", "sdpa-mask-minus-1e9", "mha-modulelist-aliases"]}
RENAMES = {"position": "where", "scores": "logits", "weights": "probs", "angles": "theta", "blocks": "parts",
           "exps": "e", "batch": "nb"}
BLOCK = re.compile(r"\n(?=(?:def|class) \w)")


def _copied(text, comment="worked this out myself"):
    """What a student who copies does: rename the variables, put the functions in another order, reword every
    comment."""
    for old, new in RENAMES.items():
        text = re.sub(rf"\b{old}\b", new, text)
    header, *blocks = BLOCK.split(re.sub(r"  # .*$", f"  # {comment}", text, flags=re.M))
    return "\n".join([header, *reversed(blocks)])


def _styles(root):
    variants = {variant.id: variant for variant in load_catalogue(CATALOGUE / "variants.toml", "variant")}
    for student, ids in OWN.items():
        folder = root / student / "assignments" / LESSON.id  # a student repository's layout
        source = None
        for variant in ids:
            source = build(variants[variant], folder, LESSON, source=source)
    return root / "ada" / "assignments" / LESSON.id


@pytest.fixture(scope="module")
def class_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("similar") / "class"
    ada = _styles(root)
    (root / "bo").mkdir()
    for module in MODULES:
        (root / "bo" / f"{module}.py").write_text(_copied((ada / f"{module}.py").read_text()))  # laid flat
    copy_package(LESSON.release, root / "stubs", MODULES)  # handed in as released
    # A submission that would say so if anything imported it: similarity reads text, never runs it.
    tripwire = copy_package(LESSON.release, root / "tripwire", MODULES)
    marker = root.parent / "imported"
    first = tripwire / f"{MODULES[0]}.py"
    first.write_text(f"open({str(marker)!r}, 'w').close()\n" + first.read_text())
    return root


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("graded")
    result = SubmissionResult("ada", (TestResult("a", MODULES[0], 1, 1, "passed", "", "visible", "test_a"),))
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
    assert (first.a, first.b, first.identical) == ("ada", "bo", False)
    assert first.a_in_b > 0.9 and first.b_in_a > 0.9, "reordering the functions changes only where they meet"
    assert second.score < first.score / 2, "students who wrote their own code are far less alike"
    assert {student for pair in pairs for student in (pair.a, pair.b)} <= {"ada", "bo", "cy", "di", "tripwire"}


def test_the_stubs_alone_match_nothing(pairs):
    assert not [pair for pair in pairs if "stubs" in (pair.a, pair.b)]
    # and the stubs are boilerplate to every other pair: two students handing in the stubs match nothing either
    stubs = released_stubs(LESSON)
    assert compare({"x": stubs, "y": dict(stubs)}, stubs) == []


def test_named_boilerplate_matches_nothing(tmp_path):
    """Two students who both pasted the lesson's posted helper match on it, until the instructor names it."""
    posted = ("def posted_helper(tensor, scale):\n    total = 0\n    for row in tensor:\n"
              "        total = total + (row * scale).sum() / len(row)\n    return total, tensor.shape, scale ** 2\n")
    stubs = released_stubs(LESSON)
    module = MODULES[0]
    both = {student: {**stubs, module: stubs[module] + posted.encode()} for student in ("x", "y")}
    assert [(pair.a, pair.b, pair.smaller) for pair in compare(both, stubs)] == [("x", "y", 1.0)]
    (tmp_path / "posted.py").write_text(posted)
    assert compare(both, stubs, extra=[tmp_path / "posted.py"]) == []


def test_no_submission_is_imported(class_dir, pairs):
    assert not (class_dir.parent / "imported").exists()


def test_the_report_is_written_into_the_output_folder_and_linked(out_dir, pairs):
    page = (out_dir / "similarity.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| 1 |")]
    assert rows and rows[0].startswith("| 1 | ada | bo | ")
    assert rows[0].endswith(f"| [view]({similarity_html.page_name(1)}) |")
    assert "a place to look, not a verdict" in page and "(figures/similarity.png)" in page
    with open(out_dir / "similarity.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == len(pairs)
    assert len(list((out_dir / similarity_html.FOLDER).glob("pair-*.html"))) == min(30, len(pairs))
    view = (out_dir / similarity_html.page_name(1)).read_text()
    assert "<h1>Row 1: ada and bo</h1>" in view and 'http-equiv="Content-Security-Policy"' in view
    assert "script-src 'none'" in view and view.count('class="r">[ 1]') >= 2, "region 1 marked on both sides"
    assert "[similarity.md](similarity.md)" in (out_dir / "report.md").read_text()
    # grade and final-gradebook write report.md again: the link stays, once
    class_report.write([SubmissionResult("ada")], out_dir)
    assert (out_dir / "report.md").read_text().count("[similarity.md](similarity.md)") == 1


def test_the_picture_is_each_students_closest_match(out_dir, pairs):
    scores = similarity_report.best_scores(pairs, ["ada", "bo", "stubs"])
    assert scores == [pairs[0].score, pairs[0].score, 0.0]
    with Image.open(out_dir / "figures" / "similarity.png") as image:
        assert image.size == similarity_chart.SIZE


def test_identical_submissions_are_one_row(tmp_path):
    root = tmp_path / "class"
    ada = _styles(root)
    for student in ("ann", "ben", "cat"):  # the same code, each with their own comments
        (root / student).mkdir()
        for module in MODULES:
            (root / student / f"{module}.py").write_text(
                re.sub(r"  # .*$", f"  # {student} wrote this", (ada / f"{module}.py").read_text(), flags=re.M))
    rows = similarity(tmp_path, root, emit=lambda line: None)
    identical = [row for row in rows if row.identical]
    assert [(row.a, row.b, row.same_as_a) for row in identical] == [("ada", "ann", ("ben", "cat"))]
    assert rows[0] == identical[0], "a group of identical submissions ranks above a pair that shares less"
    assert not [row for row in rows if {row.a, row.b} & {"ann", "ben", "cat"} and not row.identical]
    page = (tmp_path / "similarity.md").read_text()
    assert "| 1 | ada | ann, ben, cat | 100% | identical (4 submissions) |" in page
    with open(tmp_path / "similarity.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    groups = [row for row in table if row["identical"] == "yes"]
    assert [(row["student_a"], row["student_b"], row["same_as_a"]) for row in groups] == [
        ("ada", "ann", '["ben", "cat"]')]


HOSTILE_CODE = ("# </pre><script>alert('code')</script> [click](javascript:alert(1)) \x1b]0;owned\x07 \u202eevil\n"
                "BANNER = \"<img src=x onerror=alert(1)>\"  # =HYPERLINK(\"http://x\",\"y\")\n")
HOSTILE_IDS = ('=HYPERLINK("http:x","y")', "<script>alert(1)", "[x](javascript:alert(1))")  # no "/" in a name


def test_a_hostile_submission_is_inert_in_every_output(class_dir, tmp_path):
    root = tmp_path / "class"
    ada = class_dir / "ada" / "assignments" / LESSON.id
    for number, student in enumerate(HOSTILE_IDS):
        (root / student).mkdir(parents=True)
        for module in MODULES:
            text = (ada / f"{module}.py").read_text()
            copied = _copied(text, f"=1+{number}") if number else text
            (root / student / f"{module}.py").write_text(HOSTILE_CODE + copied)
    out = tmp_path / "out"
    out.mkdir()
    rows = similarity(out, root, emit=lambda line: None)
    assert {rows[0].a, rows[0].b} <= set(HOSTILE_IDS) and rows[0].view
    pages = sorted((out / similarity_html.FOLDER).glob("pair-*.html"))
    assert len(pages) == len(rows) == 2  # the two copies are identical once normalised: a group, and ada's pair
    for path in [*pages, out / "similarity.md"]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"<script|<img|href=.?javascript", text, re.I), path.name
        assert path.suffix == ".html" or "](javascript" not in text, "Markdown: no link"
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), path.name
    view = pages[0].read_text(encoding="utf-8")
    assert "&lt;/pre&gt;&lt;script&gt;alert(&#x27;code&#x27;)&lt;/script&gt;" in view, "shown as written"
    assert "\\x1b]0;owned\\x07 \\u202eevil" in view
    assert view.count("<meta http-equiv=\"Content-Security-Policy\"") == 1 and "<script" not in view
    with open(out / "similarity.csv", newline="", encoding="utf-8") as handle:
        cells = [cell for row in list(csv.reader(handle))[1:] for cell in row[:2]]
    assert {original(cell) for cell in cells} == set(HOSTILE_IDS)
    assert all(cell.startswith("'") for cell in cells if original(cell).startswith("="))


def test_the_command_line_takes_the_output_folder_and_the_class(class_dir, tmp_path, capsys):
    assert cli.main(["similarity", str(tmp_path), "--class", str(class_dir), "--top", "3"]) == 0
    assert "most alike: ada and bo" in capsys.readouterr().out
    assert "## The 3 most alike" in (tmp_path / "similarity.md").read_text()
    assert len(list((tmp_path / similarity_html.FOLDER).glob("pair-*.html"))) == 3
    assert cli.main(["similarity", str(tmp_path / "nowhere"), "--class", str(class_dir)]) == 2
    assert "no such output folder" in capsys.readouterr().err
    assert cli.main(["similarity", str(tmp_path), "--class", str(class_dir), "--max-share", "0"]) == 2
    assert "--max-share must be a fraction" in capsys.readouterr().err
    assert cli.main(["similarity", str(tmp_path), "--class", str(class_dir), "--shard", "3/2"]) == 2
    assert "--shard 3/2" in capsys.readouterr().err
    assert cli.main(["similarity", str(tmp_path), "--class", str(class_dir), "--merge", str(tmp_path)]) == 2
    assert "no similarity shard file there" in capsys.readouterr().err
    with pytest.raises(KitError, match="nothing to compare"):
        similarity(tmp_path, class_dir / "ada")
