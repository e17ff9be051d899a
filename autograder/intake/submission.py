"""Take in a student's folder: read their files safely, and name their outputs safely.

A student folder is untrusted input laid out by the student. It is read
without following anything: every path component is opened with
``O_NOFOLLOW`` relative to the folder's own descriptor, so a symbolic link
(to the solutions, to a classmate's repository), a device or a FIFO is
refused with a note, never read; files and notebooks over a size cap are
refused, and so is a folder holding more entries than a student repository
plausibly does, or a file nested past the parser's limits (the judge's scans
could not read it, yet it may compile in the worker). Reading never raises:
whatever goes wrong becomes a note in that student's result.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..worker.contract import Contract
from . import source_tree
from .stubs import is_stub

MAX_FILE_BYTES = 1 << 20
MAX_NOTEBOOK_BYTES = 8 << 20
MAX_ENTRIES = 5000  # folders and files looked at in one student's folder (version control's own folders aside)
MAX_DEPTH = 8
TOO_DEEP = "nested too deeply for the grader to read (an expression thousands of levels deep)"
SKIPPED_FOLDERS = {".git", ".hg", ".svn", "__pycache__", ".ipynb_checkpoints", ".venv", "node_modules"}

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Refused(Exception):
    """A path that may not be read; the message is one line for the student's result."""


@dataclass(frozen=True)
class Copy:
    """A student file found outside the folder that was graded: where (relative, ``/``-joined), and how it
    compares with the graded file of the same name (the same bytes, the released stub, modified later)."""

    path: str
    same: bool
    stub: bool
    newer: bool


@dataclass(frozen=True)
class Intake:
    """What was read from one student folder: the module files, the notebook, and why anything was left out.

    ``problems`` maps a module (or ``"folder"``, ``"notebook"``) to a one-line reason; ``"missing"`` means the
    file is simply not there.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    notebook: bytes | None = None
    problems: dict[str, str] = field(default_factory=dict)
    notebook_name: str = "the notebook"
    layout: str = "."  # the folder the module files were read from, relative to the student's folder
    elsewhere: tuple[Copy, ...] = ()  # the student files found anywhere else in the folder (not graded)

    def notes(self) -> list[str]:
        """The problems worth telling the student and the instructor about (a missing file says so itself)."""
        notes = []
        for what, problem in sorted(self.problems.items()):
            if problem == "missing":
                continue
            label = {"folder": "the submission folder", "notebook": self.notebook_name}.get(what, f"{what}.py")
            notes.append(f"{label} was not used: {problem}")
        return notes


def _open_folder(path: Path) -> int:
    """A descriptor of the student folder itself; Refused when it is a link or not a folder."""
    try:
        if os.path.islink(path):  # O_DIRECTORY | O_NOFOLLOW says ENOTDIR for a link: name it for what it is
            raise Refused("it is a symbolic link (links are not followed)")
        return os.open(path, _DIRECTORY)
    except OSError as error:
        raise Refused(_why(error, "folder")) from None


def _why(error: OSError, kind: str) -> str:
    if error.errno in (errno.ELOOP, errno.EMLINK):
        return "it is a symbolic link (links are not followed)"
    if error.errno == errno.ENOTDIR:
        return f"not a {kind}"
    if error.errno == errno.ENOENT:
        return "missing"
    return f"it could not be read ({os.strerror(error.errno or 0) or 'error'})"


def _open_child_folder(parent: int, name: str) -> int | None:
    """A descriptor of the folder ``name`` inside ``parent``; None when it is absent, a link or not a folder."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError:
        return None


def read_regular(parent: int, name: str, cap: int) -> bytes:
    """The bytes of the regular file ``name`` in the folder ``parent`` (a descriptor); Refused otherwise.

    Checked before opening (so a device or FIFO is never opened) and again on the open descriptor (so a file
    swapped for a link in between is refused too); at most ``cap`` bytes are ever read.
    """
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        raise Refused("missing") from None
    except OSError as error:
        raise Refused(_why(error, "file")) from None
    if stat.S_ISLNK(info.st_mode):
        raise Refused("it is a symbolic link (links are not followed)")
    if not stat.S_ISREG(info.st_mode):
        raise Refused("not a regular file (a folder, device or pipe)")
    if info.st_size > cap:
        raise Refused(f"larger than {cap // 1024} KiB")
    try:
        fd = os.open(name, _FILE, dir_fd=parent)
    except OSError as error:
        raise Refused(_why(error, "file")) from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise Refused("it changed while being read")
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > cap:
        raise Refused(f"larger than {cap // 1024} KiB")
    return b"".join(chunks)


def _walk(root: int, budget: list[int], depth: int = 0, where: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Relative paths of the regular files below ``root`` (a descriptor), links not followed; Refused when the
    folder holds more than ``MAX_ENTRIES`` entries (``budget`` counts them down)."""
    try:
        with os.scandir(root) as entries:
            names = []
            for entry in entries:
                budget[0] -= 1
                if budget[0] < 0:
                    raise Refused(f"it holds more than {MAX_ENTRIES} files and folders")
                names.append((entry.name, entry.is_dir(follow_symlinks=False), entry.is_file(follow_symlinks=False)))
    except OSError as error:
        raise Refused(_why(error, "folder")) from None
    for name, is_dir, is_file in sorted(names):
        if is_file:
            yield (*where, name)
        elif is_dir and name not in SKIPPED_FOLDERS and depth < MAX_DEPTH:
            child = _open_child_folder(root, name)
            if child is not None:
                try:
                    yield from _walk(child, budget, depth + 1, (*where, name))
                finally:
                    os.close(child)


def layouts(package: str) -> tuple[tuple[str, ...], ...]:
    """Where the student files may sit inside a student's folder, most specific first: the repository's
    ``assignments/<package>/``, ``<package>/``, or laid flat."""
    return (("assignments", package), (package,), ())


def _module_folder(root: int, contract: Contract, stubs: dict[str, bytes] | None = None
                   ) -> tuple[int, tuple[str, ...], list[str]]:
    """The descriptor of the layout folder to grade (the root itself at worst), its layout, and notes about
    layout folders that were links. The first layout holding any module file wins, unless its files are all the
    released ``stubs`` and a later layout holds files that are not (a Classroom clone with the starter package
    left as it was and the student's work elsewhere: their work is what they handed in)."""
    notes, candidates = [], []
    for layout in layouts(contract.package):
        fds, current = [], root
        for name in layout:
            try:
                info = os.stat(name, dir_fd=current, follow_symlinks=False)
            except OSError:
                current = None
                break
            if stat.S_ISLNK(info.st_mode):
                notes.append(f"{'/'.join(layout[:layout.index(name) + 1])} is a symbolic link (links are not followed)")
            current = _open_child_folder(current, name)
            if current is None:
                break
            fds.append(current)
        found = current is not None and any(
            _exists(current, f"{module}.py") for module in contract.modules)
        for fd in fds[:-1] if found else fds:
            os.close(fd)
        if found:
            candidates.append((current, layout))
            if not stubs or not _all_stubs(current, contract, stubs):
                break  # the last candidate is the student's work: the one graded
    if not candidates:
        return root, (), notes
    # Every candidate before the last holds only stubs; the last does too unless the loop broke on it.
    last = candidates[-1]
    chosen = last if len(candidates) == 1 or not _all_stubs(last[0], contract, stubs) else candidates[0]
    for fd, layout in candidates:
        if fd != chosen[0] and layout:
            os.close(fd)
    return chosen[0], chosen[1], notes


def _all_stubs(folder: int, contract: Contract, stubs: dict[str, bytes]) -> bool:
    """Whether every module file in ``folder`` is its released stub (no file there: False)."""
    seen = False
    for module in contract.modules:
        try:
            data = read_regular(folder, f"{module}.py", MAX_FILE_BYTES)
        except Refused:
            continue
        if source_tree.beyond_limits(data) or not is_stub(data, stubs.get(module)):
            return False
        seen = True
    return seen


def _exists(parent: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
        return True
    except OSError:
        return False


def read_submission(folder: str | os.PathLike, contract: Contract, notebook: str | None = None,
                    stubs: dict[str, bytes] | None = None) -> Intake:
    """Read a student folder (the repository layout or the files laid flat) for the files ``contract`` names,
    and the notebook called ``notebook`` when one is asked for; never raises.

    The module files come from the first layout that holds any of them (one whose files are all the released
    ``stubs`` gives way to a later one that holds the student's work); the notebook is the one beside them, or
    else the first found below the folder. Student files found anywhere else are listed, not graded.
    """
    label = notebook or "the notebook"
    try:
        root = _open_folder(Path(folder))
    except Refused as refused:
        return Intake(problems={"folder": str(refused)}, notebook_name=label)
    try:
        return _read(root, contract, notebook, stubs)
    except Refused as refused:
        return Intake(problems={"folder": str(refused)}, notebook_name=label)
    except OSError as error:  # anything else the file system says: this student's problem only
        return Intake(problems={"folder": f"it could not be read ({os.strerror(error.errno or 0)})"},
                      notebook_name=label)
    finally:
        os.close(root)


def _read(root: int, contract: Contract, notebook_name: str | None, stubs: dict[str, bytes] | None) -> Intake:
    budget = [MAX_ENTRIES]
    found = list(_walk(root, budget))  # bounds the whole folder before anything in it is read
    source, layout, layout_notes = _module_folder(root, contract, stubs)
    files, problems = {}, {}
    try:
        for module in contract.modules:
            try:
                data = read_regular(source, f"{module}.py", MAX_FILE_BYTES)
            except Refused as refused:
                problems[module] = str(refused)
                continue
            if source_tree.beyond_limits(data):  # never staged: the judge's scans could not read it
                problems[module] = TOO_DEEP
                continue
            files[module] = data
        notebook = None
        if notebook_name:
            notebook = _read_notebook(root, source, found, problems, notebook_name)
        elsewhere = _elsewhere(root, source, layout, found, contract, files, stubs or {})
    finally:
        if source != root:
            os.close(source)
    if layout_notes:
        problems["folder"] = "; ".join(layout_notes)
    return Intake(files, notebook, problems, notebook_name or "the notebook", "/".join(layout) or ".", elsewhere)


MAX_COPIES = 20  # student files listed from elsewhere in a folder: enough to tell the story


def _elsewhere(root: int, source: int, layout: tuple[str, ...], found: list[tuple[str, ...]], contract: Contract,
               files: dict[str, bytes], stubs: dict[str, bytes]) -> tuple[Copy, ...]:
    """The module files below ``root`` outside the graded ``layout`` folder, each compared with the graded one."""
    names = {f"{module}.py": module for module in contract.modules}
    copies = []
    for path in found:
        if path[-1] not in names or tuple(path[:-1]) == layout or len(copies) >= MAX_COPIES:
            continue
        module = names[path[-1]]
        data, mtime = _read_at(root, path)
        graded = files.get(module)
        try:
            graded_mtime = os.stat(path[-1], dir_fd=source, follow_symlinks=False).st_mtime
        except OSError:
            graded_mtime = None
        copies.append(Copy("/".join(path), data is not None and data == graded,
                           data is not None and is_stub(data, stubs.get(module)),
                           mtime is not None and (graded_mtime is None or mtime > graded_mtime)))
    return tuple(copies)


def _read_at(root: int, path: tuple[str, ...]) -> tuple[bytes | None, float | None]:
    """The bytes and modification time of the regular file at ``path`` below ``root``; Nones when unreadable."""
    fds, current = [], root
    try:
        for name in path[:-1]:
            current = _open_child_folder(current, name)
            if current is None:
                return None, None
            fds.append(current)
        mtime = os.stat(path[-1], dir_fd=current, follow_symlinks=False).st_mtime
        data = read_regular(current, path[-1], MAX_FILE_BYTES)
        return (None if source_tree.beyond_limits(data) else data), mtime
    except (Refused, OSError):
        return None, None
    finally:
        for fd in fds:
            os.close(fd)


def _read_notebook(root: int, source: int, found: list[tuple[str, ...]], problems: dict, name: str) -> bytes | None:
    candidates = [path for path in found if path[-1] == name]
    if _exists(source, name):
        try:
            return read_regular(source, name, MAX_NOTEBOOK_BYTES)
        except Refused as refused:
            problems["notebook"] = str(refused)
            return None
    for path in candidates:
        fds, current = [], root
        try:
            for name in path[:-1]:
                current = _open_child_folder(current, name)
                if current is None:
                    break
                fds.append(current)
            if current is not None:
                return read_regular(current, path[-1], MAX_NOTEBOOK_BYTES)
        except Refused as refused:
            problems["notebook"] = str(refused)
            return None
        finally:
            for fd in fds:
                os.close(fd)
    return None


def read_files(folder: str | os.PathLike, contract: Contract) -> tuple[dict[str, bytes], dict[str, str]]:
    """``({module: bytes}, {module: reason it is unusable})`` for the student's files."""
    intake = read_submission(folder, contract)
    return intake.files, intake.problems


def stage(files: dict[str, bytes], destination: str | os.PathLike, modules: tuple[str, ...]) -> Path:
    """Write the student's files (those of ``modules``), world-readable, into a fresh ``destination`` folder;
    return it."""
    destination = Path(destination)
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    destination.chmod(0o755)
    for module, data in files.items():
        if module in modules:
            target = destination / f"{module}.py"
            target.write_bytes(data)
            target.chmod(0o644)
    return destination
