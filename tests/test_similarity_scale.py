"""The similarity report on classes the size of real ones: one planted copy among 300 honest submissions, written
in the catalogue's styles with their own names, order and comments, some with catalogued bugs, some only partly
done, ranks first; 2,000 students give exactly the planted rows on top; shards give the same CSV as one run.

The classes are synthetic and seeded: every outcome below is exact."""

import random
import re

import pytest

from autograder.commands.similarity import similarity
from autograder.errors import KitError
from autograder.lesson.catalogue import load_catalogue
from autograder.reports import similarity_report
from lesson import CATALOGUE, MODULES, RELEASE, SOLUTIONS

pytestmark = pytest.mark.slow  # grades a class, builds a venv or runs the demo

VARIANTS = [entry for entry in load_catalogue(CATALOGUE / "variants.toml", "variant") if entry.base == "reference"]
BUGS = [entry for entry in load_catalogue(CATALOGUE / "bugs.toml", "bug") if entry.base == "reference"]
REFERENCE = {module: (SOLUTIONS / f"{module}.py").read_text() for module in MODULES}
STUBS = {module: (RELEASE / f"{module}.py").read_text() for module in MODULES}
# Local names students choose differently (all normalised away, as a copier's renaming is).
LOCALS = ("scores", "weights", "position", "angles", "d_model", "num_heads", "head_dim", "batch", "out", "mask")
WORDS = ("shape check", "see lecture 4", "works now", "from the notes", "TODO tidy", "careful with dims",
         "this was hard", "per head", "reshape here", "sum over keys")
# Touches an honest student adds here and there: each shared by a few of the class, as habits are.
TOUCHES = tuple(f"tolerance = {index} * 1e-{index % 7 + 1}  # habit" for index in range(40))
# What one student (the author) wrote of their own, in every part: what a copier takes with the rest.
OWN = tuple(f"assert torch.isfinite(torch.tensor({index}.5)).all(), 'sanity {index}'; steps = [{index}, {index + 1}]"
            for index in range(8))
BLOCK = re.compile(r"\n(?=(?:def|class) \w)")
MARKER = re.compile(r"^( *)### BEGIN SOLUTION\n", re.M)


def apply(texts, mutant):
    """``texts`` with ``mutant``'s edits, or unchanged when one no longer applies (an earlier edit took its text)."""
    new = dict(texts)
    for edit in mutant.edits:
        module = edit.file.removesuffix(".py")
        if edit.old:
            if new[module].count(edit.old) != 1:
                return texts
            new[module] = new[module].replace(edit.old, edit.new)
        new[module] = edit.prepend + new[module]
    return new


def blocks(text):
    """``(header, {name: top-level def or class block})``."""
    header, *rest = BLOCK.split(text)
    return header, {re.match(r"(?:def|class) (\w+)", block).group(1): block for block in rest}


def touch(texts, lines, rng):
    """Each of ``lines`` put at the start of a random part's solution."""
    texts = dict(texts)
    for line in lines:
        module = rng.choice([module for module in MODULES if MARKER.search(texts[module])])
        places = list(MARKER.finditer(texts[module]))
        place = rng.choice(places)
        texts[module] = (texts[module][:place.end()] + f"{place.group(1)}{line}\n" + texts[module][place.end():])
    return texts


def disguise(texts, rng, tag):
    """What a student does to code, their own or copied: their names, their order of functions, their comments."""
    new = {}
    for module, text in texts.items():
        for name in LOCALS:
            text = re.sub(rf"\b{name}\b", f"{name}_{tag}", text)
        text = re.sub(r"(?m)  # .*$", lambda _: f"  # {rng.choice(WORDS)}", text)
        header, parts = blocks(text)
        order = list(parts.values())
        rng.shuffle(order)
        new[module] = "\n".join([header, *order])
    return new


def honest(rng, tag):
    texts = REFERENCE
    for variant in rng.sample(VARIANTS, rng.randint(0, 5)):
        texts = apply(texts, variant)
    if rng.random() < 0.3:
        texts = apply(texts, rng.choice(BUGS))
    texts = touch(texts, rng.sample(TOUCHES, rng.randint(0, 2)), rng)
    return disguise(texts, rng, tag)


def partial(rng, tag):
    """The stubs with one function filled in (the reference's, or a variant's)."""
    source = apply(REFERENCE, rng.choice(VARIANTS)) if rng.random() < 0.5 else REFERENCE
    module = rng.choice(MODULES)
    header, parts = blocks(STUBS[module])
    name = rng.choice(sorted(parts))
    parts[name] = blocks(source[module])[1][name]
    return disguise({**STUBS, module: "\n".join([header, *parts.values()])}, rng, tag)


def write(root, student, texts):
    folder = root / student
    folder.mkdir(parents=True)
    for module, text in texts.items():
        (folder / f"{module}.py").write_text(text)


def make_class(root, size, seed, copies=1, trio=False):
    """``size`` students: one in ten partial, the rest honest; ``copies`` authors (``author-N``, their own code
    in every part) each copied by ``copier-N``; ``trio``: three more hand in one author's code with comments
    reworded only (identical once normalised)."""
    rng = random.Random(seed)
    planted = 2 * copies + 3 * trio
    for number in range(size - planted):
        student = f"s{number:04d}"
        write(root, student, partial(rng, number) if number % 10 == 9 else honest(rng, number))
    for copy in range(copies):
        own = [line.replace("sanity", f"sanity {copy}") for line in OWN]
        author = disguise(touch(honest(rng, f"a{copy}"), own, rng), rng, f"a{copy}")
        write(root, f"author-{copy}", author)
        write(root, f"copier-{copy}", disguise(author, rng, f"c{copy}"))
    if trio:
        own = [line.replace("sanity", "trio") for line in OWN]
        code = touch(honest(rng, "t"), own, rng)
        for member in ("trio-a", "trio-b", "trio-c"):
            write(root, member, {module: re.sub(r"(?m)  # .*$", f"  # {member}", text)
                                 for module, text in code.items()})
    return root


@pytest.fixture(scope="module")
def class_300(tmp_path_factory):
    return make_class(tmp_path_factory.mktemp("class300") / "class", 300, seed=300)


@pytest.fixture(scope="module")
def report_300(class_300, tmp_path_factory):
    out = tmp_path_factory.mktemp("out300")
    said = []
    return similarity(out, class_300, emit=said.append), out, said


def test_the_planted_copy_ranks_first_among_300(report_300):
    rows, out, said = report_300
    first = rows[0]
    assert (first.a, first.b, first.identical) == ("author-0", "copier-0", False)
    assert said[-1].startswith("most alike: author-0 and copier-0")
    page = (out / "similarity.md").read_text()
    assert re.search(r"^\| 1 \| author-0 \| copier-0 \| 1?\d\d% \|", page, re.M)
    assert (out / first.view).read_text().count('class="r">') > 8, "the matched lines are marked"


def test_shards_give_the_same_csv_as_one_run(class_300, report_300, tmp_path):
    _, out, _ = report_300
    folders = [tmp_path / f"shard{index}" for index in (1, 2, 3)]
    for index, folder in enumerate(folders, 1):
        assert similarity(folder, class_300, shard=f"{index}/3", emit=lambda line: None) == []
    merged = tmp_path / "merged"
    merged.mkdir()
    with pytest.raises(KitError, match="do not make one whole class"):
        similarity(merged, class_300, merge=folders[:2], emit=lambda line: None)
    similarity(merged, class_300, merge=folders, emit=lambda line: None)
    assert (merged / "similarity.csv").read_bytes() == (out / "similarity.csv").read_bytes()
    assert (merged / "similarity.md").read_bytes() == (out / "similarity.md").read_bytes()
    assert [path.name for path in sorted((merged / "similarity").iterdir())] == [
        path.name for path in sorted((out / "similarity").iterdir())]
    changed = next((class_300 / "copier-0").iterdir())  # a file the side-by-side pages show, edited since
    text = changed.read_text()
    changed.write_text(text + "\n# edited\n")
    try:
        with pytest.raises(KitError, match="copier-0's files changed since the shards read them"):
            similarity(merged, class_300, merge=folders, emit=lambda line: None)
    finally:
        changed.write_text(text)
    posted = tmp_path / "posted.py"
    posted.write_text("def helper(x, scale):\n    return (x * scale).sum(dim=-1, keepdim=True) / x.shape[-1]\n")
    other = tmp_path / "other"
    similarity(other, class_300, shard="1/1", extra=[posted], emit=lambda line: None)
    with pytest.raises(KitError, match="other --boilerplate"):
        similarity(merged, class_300, merge=[other], emit=lambda line: None)


def test_2000_students_give_exactly_the_planted_rows_on_top(tmp_path):
    root = make_class(tmp_path / "class", 2000, seed=2000, copies=3, trio=True)
    out = tmp_path / "out"
    out.mkdir()
    rows = similarity(out, root, emit=lambda line: None)
    top = {(row.a, row.b, row.same_as_a, row.identical) for row in rows[:4]}
    assert top == {("author-0", "copier-0", (), False), ("author-1", "copier-1", (), False),
                   ("author-2", "copier-2", (), False), ("trio-a", "trio-b", ("trio-c",), True)}
    assert len(list((out / "similarity").glob("pair-*.html"))) == 30
    page = (out / "similarity.md").read_text()
    assert "## The 30 most alike" in page and "| trio-a | trio-b, trio-c | 100% | identical (3 submissions) |" in page
    assert "2000 submissions" in page and "held by more than 200 submissions" in page
    header = (out / "similarity.csv").read_text().splitlines()[0]
    assert header.split(",") == similarity_report.COLUMNS
