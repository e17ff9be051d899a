"""Find a student's files in their folder and stage a clean copy of them for the worker.

Only the three module files are staged, as regular files of bounded size:
a symlink (to the solutions, say) or an oversized file is left out and
reported, never followed.
"""

import hashlib
import os
import shutil
import stat
import urllib.parse
from pathlib import Path

from . import paths
from .worker import contract

MAX_FILE_BYTES = 1 << 20
# Where the three files may sit inside a student's folder, most specific first.
LAYOUTS = (Path("assignments") / contract.PACKAGE, Path(contract.PACKAGE), Path("."))


def locate(folder):
    """The folder inside ``folder`` that holds the student's module files (the first layout with any of them)."""
    folder = Path(folder)
    for layout in LAYOUTS:
        candidate = folder / layout
        if candidate.is_dir() and not candidate.is_symlink():
            if any((candidate / f"{module}.py").exists() or (candidate / f"{module}.py").is_symlink()
                   for module in contract.MODULES):
                return candidate
    return folder


def _regular_file(path):
    """The file's bytes when it is a regular file (not a link) of bounded size; else a reason."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None, "missing"
    if not stat.S_ISREG(info.st_mode):
        return None, "not a regular file (links are not followed)"
    if info.st_size > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES // 1024} KiB"
    return Path(path).read_bytes(), None


def read_files(folder):
    """``({module: bytes}, {module: reason it is unusable})`` for the student's three files."""
    source = locate(folder)
    files, problems = {}, {}
    for module in contract.MODULES:
        data, problem = _regular_file(source / f"{module}.py")
        if data is None:
            problems[module] = problem
        else:
            files[module] = data
    return files, problems


def stage(files, destination):
    """Write the student's files, world-readable, into a fresh ``destination`` folder; return it."""
    destination = Path(destination)
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    destination.chmod(0o755)
    for module, data in files.items():
        target = destination / f"{module}.py"
        target.write_bytes(data)
        target.chmod(0o644)
    return destination


def grader_fingerprint():
    """Hash of everything that decides a grade: the engine, the hidden tests and the reference."""
    digest = hashlib.sha256()
    for root in (paths.REPO_ROOT / "autograder", paths.SOLUTIONS_DIR / paths.ASSIGNMENT_ID):
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(paths.REPO_ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint(files, grader):
    """Identifies a (submission, grader) pair, so ``--resume`` can skip work already done."""
    digest = hashlib.sha256(grader.encode())
    for module in sorted(files):
        digest.update(module.encode() + b"\0" + files[module] + b"\0")
    return digest.hexdigest()[:16]


def safe_name(student):
    """A file name for a student id: reversible, no path tricks (``..``, leading dot or dash), any unicode safe."""
    name = urllib.parse.quote(student, safe=" ")
    if name.startswith((".", "-")) or not name:
        name = "%" + format(ord(student[0]), "02X") + name[1:] if student else "%00"
    return name
