"""A worker sees the runtime and the installed packages, never the kit's instructor-only data, even where the kit is
installed as a plain (non-editable) package whose lessons lie in site-packages beside torch.

One wheel is built per session and installed ``--no-deps`` into a throwaway environment that reuses this one's
packages (a ``.pth`` file). A hostile submission, imported by a real worker of that install, tries to read the
installed hidden tests, catalogue and descriptor and the reference (open, listdir, importlib) and reports what it
found; forked, in a sandbox of its own and confined (``uid``) it finds nothing, and without a sandbox (the
control) it finds them all.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from autograder.errors import KitError
from autograder.sandbox.isolation import choose_sandbox
from wheels import build_wheel
from lesson import LESSON, RELEASE, SOLUTIONS

# The hostile submission's first lines (``TARGETS``: name -> path, and ``SITE`` are put above them).
PROBE = r'''
import importlib, os, sys

found = []
for name, path in TARGETS.items():
    try:
        if os.path.isdir(path):
            if os.listdir(path):
                found.append(name + ": listed")
        elif open(path, "rb").read():
            found.append(name + ": read")
    except OSError:
        pass
for name in MODULES:  # importlib: a module counts when its code could be read
    try:
        module = importlib.import_module(name)
        origin = getattr(module.__spec__, "origin", None)
        if origin and os.path.isfile(origin) and open(origin, "rb").read(1):
            found.append(name + ": imported")
    except Exception:
        pass
try:  # the kit's metadata would list every lesson file
    for entry in os.listdir(SITE):
        record = os.path.join(SITE, entry, "RECORD")
        if entry.endswith(".dist-info") and os.path.isfile(record) and "hidden_tests" in open(record).read():
            found.append("metadata: " + entry)
except OSError:
    pass
import torch  # the runtime still works
print("PROBE ran; torch", torch.ones(2).sum().item(), "FOUND", sorted(found), flush=True)
'''

# Run by the installed environment's Python: a worker of the installed kit imports the probe's ``heads``.
DRIVER = r'''
import json, os, sys, tempfile, time
from pathlib import Path
from autograder.lesson import assignment
from autograder.sandbox import isolation as sandbox
from autograder.sandbox.launch import WorkerFactory

files, modes = json.loads(Path(sys.argv[1]).read_text()), sys.argv[2:]
lesson = assignment.default()
assert "site-packages" in str(lesson.descriptor), lesson.descriptor  # the installed lesson, not the checkout's
for mode in modes:
    kind, fork = mode.split("-")
    scratch = Path(tempfile.mkdtemp(prefix="visibility-"))
    os.chmod(scratch, 0o711)
    factory = WorkerFactory(sandbox.choose_sandbox(kind, fork=fork == "forked"), scratch, lesson)
    factory.start()
    worker = factory.launcher({name: text.encode() for name, text in files.items()}, scratch)()
    deadline = time.monotonic() + 120
    worker.ready(deadline)
    reply, _ = worker.request({"op": "import", "module": "heads"}, [], deadline)
    worker.close()
    factory.close()
    print("MODE", mode, json.dumps(worker.output.text()), flush=True)
'''


def _unshare_prelude(tmp_path):
    """The hostile suite's private mount namespace (bwrap refused, the runtime under /root made passable)."""
    from test_hostile import _without_bubblewrap

    return _without_bubblewrap(tmp_path)


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """``(python, site-packages)`` of a throwaway environment holding the kit as a plain install, torch reused."""
    wheel, _ = build_wheel(tmp_path_factory.mktemp("wheel"))
    # Outside pytest's folders (mode 0700): a confined worker's user must reach the runtime.
    root = Path(tempfile.mkdtemp(prefix="mha-pe-installed-"))
    os.chmod(root, 0o755)
    env = root / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "reuse.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-index", "-q", str(wheel)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (site / "autograder" / "lessons").is_dir()
    yield python, site
    shutil.rmtree(root, ignore_errors=True)


def _probe_files(site):
    installed_lesson = site / "autograder" / "lessons" / LESSON.folder.name
    targets = {"hidden tests": installed_lesson / LESSON.hidden_tests.name,
               "hidden test": next((installed_lesson / LESSON.hidden_tests.name).glob("check_*.py")),
               "catalogue": installed_lesson / LESSON.catalogue.name,
               "bugs": installed_lesson / LESSON.catalogue.name / "bugs.toml",
               "descriptor": installed_lesson / LESSON.descriptor.name,
               "lessons": site / "autograder" / "lessons",
               "reference": SOLUTIONS, "reference file": SOLUTIONS / "heads.py"}
    for path in targets.values():
        assert path.exists(), path  # each is there to be found
    hidden = f"autograder.lessons.{LESSON.folder.name}.{LESSON.hidden_tests.name}"
    modules = [f"{hidden}.{targets['hidden test'].stem}", hidden, "autograder.lessons", "autograder.judge.grade"]
    header = (f"TARGETS = {json.dumps({name: str(path) for name, path in targets.items()})}\n"
              f"MODULES = {modules!r}\nSITE = {str(site)!r}\n")
    files = {module: (RELEASE / f"{module}.py").read_text() for module in LESSON.contract.modules}
    files["heads"] = header + PROBE + "\n" + files["heads"]
    return files, set(targets)


def _found(output, mode):
    line = next(line for line in output.splitlines() if line.startswith(f"MODE {mode} "))
    text = json.loads(line.split(" ", 2)[2])
    assert "PROBE ran; torch 2.0" in text, text[-2000:]  # the submission really ran, with torch
    return eval(text.split("FOUND ", 1)[1].splitlines()[0])  # noqa: S307 - a list of strings printed above


def _drive(python, files, modes, tmp_path, prefix=()):
    spec = tmp_path / "files.json"
    spec.write_text(json.dumps(files))
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    done = subprocess.run([*prefix, str(python), str(script), str(spec), *modes], cwd=tmp_path,
                          env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_a_worker_of_a_plain_install_finds_no_instructor_data(installed, tmp_path):
    try:
        choose_sandbox("bwrap")
    except KitError as error:
        pytest.skip(f"needs the sandbox: {error}")
    python, site = installed
    files, targets = _probe_files(site)
    output = _drive(python, files, ["none-own", "bwrap-forked", "bwrap-own"], tmp_path)
    control = _found(output, "none-own")
    assert {entry.split(":")[0] for entry in control} >= targets, control  # unsandboxed it finds them all
    assert _found(output, "bwrap-forked") == []
    assert _found(output, "bwrap-own") == []


@pytest.mark.slow
def test_a_confined_worker_of_a_plain_install_finds_no_instructor_data(installed, tmp_path):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("confined workers need root (and unshare, for the runtime under /root)")
    python, site = installed
    files, _ = _probe_files(site)
    prelude = _unshare_prelude(tmp_path)
    output = _drive(python, files, ["uid-own"], tmp_path, ["unshare", "-m", "bash", "-c", prelude, "confined"])
    assert _found(output, "uid-own") == []


def _shapes(source):
    """Every shape written in ``source``: int tuples, and the int arguments of a call that takes two or more."""
    import ast

    def ints(nodes):
        values = [node.value for node in nodes if isinstance(node, ast.Constant) and type(node.value) is int]
        return tuple(values) if len(values) == len(nodes) >= 2 else None

    found = set()
    for node in ast.walk(ast.parse(source)):
        shape = ints(node.elts) if isinstance(node, ast.Tuple) else ints(node.args) if isinstance(node, ast.Call) else None
        if shape:
            found.add(shape)
    return found


@pytest.mark.check
def test_the_warm_up_holds_no_shape_a_hidden_test_uses():
    """The warm-up's text reaches the zygote, whose memory every worker inherits (and a confined worker's
    environment): it may show which operations the checks run, never the inputs they run them on."""
    import inspect

    from autograder.worker import main

    hidden = set().union(*(_shapes(path.read_text()) for path in LESSON.hidden_tests.rglob("*.py")))
    assert {(2, 5, 8), (2, 3, 4)} <= hidden  # the device checks' inputs are among them
    warm = _shapes(LESSON.warm_up.read_text()) | _shapes(inspect.getsource(main.warm_up))
    assert len(warm) >= 5
    assert warm & hidden == set()


def test_landlock_rules_never_name_a_folder_that_holds_the_kit(tmp_path):
    from autograder.worker.confine import beside

    site = tmp_path / "env" / "lib" / "site-packages"
    for name in ("torch", "numpy", "autograder/lessons", "kit.dist-info"):
        (site / name).mkdir(parents=True)
    (site / "other.py").write_text("")
    (tmp_path / "env" / "lib64").symlink_to("lib")  # a link to a parent of the kit would allow all of it
    (tmp_path / "env" / "pyvenv.cfg").write_text("")
    hidden = [site / "autograder", site / "kit.dist-info"]
    allowed = {Path(path) for path in beside([tmp_path / "env", "/usr"], hidden)}
    assert allowed == {site / "torch", site / "numpy", site / "other.py", tmp_path / "env" / "pyvenv.cfg", Path("/usr")}
    assert beside([tmp_path / "elsewhere"], hidden) == [str(tmp_path / "elsewhere")]


def test_without_landlock_the_installed_lessons_are_locked(tmp_path, monkeypatch):
    from autograder.sandbox import isolation as sandbox

    package = tmp_path / "site-packages" / "autograder"
    (package / "lessons" / "one").mkdir(parents=True)
    monkeypatch.setattr(sandbox, "kit_install", lambda: (package, tmp_path / "site-packages" / "kit.pth"))
    sandbox.lock_instructor_folders([])
    assert (package / "lessons").stat().st_mode & 0o777 == 0o700
    assert package.stat().st_mode & 0o077 != 0  # the rest of the engine (public code) is left as it was


def test_the_kit_install_is_found_per_distribution_as_packages_distributions_finds_it(tmp_path, monkeypatch):
    """What a worker may not see of the kit's install: the distributions providing its package, decided per
    distribution (declared in ``top_level.txt``, else implied by its files) as ``packages_distributions`` decides,
    without parsing every distribution's metadata and files (a quarter of a second at each run's start). A
    distribution that declares nothing but puts files in the package is found even beside one that declares it."""
    import importlib.metadata

    from autograder.sandbox import isolation as sandbox

    slow = importlib.metadata.packages_distributions

    def distribution(site, name, top_level, files):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "RECORD").write_text("".join(f"{file},,\n" for file in files))
        if top_level is not None:
            (info / "top_level.txt").write_text(top_level)
        for file in files:
            (site / file).parent.mkdir(parents=True, exist_ok=True)
            (site / file).write_text("")

    site = tmp_path / "site"
    distribution(site, "declares", "kitpkg\n", ["kitpkg/__init__.py"])
    distribution(site, "undeclared", None, ["kitpkg/lessons/extra.py"])  # a second source of the same package
    distribution(site, "unrelated", None, ["other/__init__.py"])
    distribution(site, "module", None, ["kitpkg.py"])  # a single-file module of that name counts too
    monkeypatch.syspath_prepend(str(site))
    expected = {name: set(names) for name, names in slow().items()}
    assert expected["kitpkg"] == {"declares", "undeclared", "module"}

    def refused():
        raise AssertionError("every distribution's metadata and files were parsed")

    monkeypatch.setattr(importlib.metadata, "packages_distributions", refused)
    for package in ("kitpkg", "autograder", "other"):
        assert {dist.metadata["Name"] for dist in sandbox._distributions_of(package)} == expected[package]
