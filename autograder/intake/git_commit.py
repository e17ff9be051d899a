"""The commit at the deadline: read a student's clone with git, as data only, and write the files of one
commit to a folder of the grader's own, which intake then reads as any student folder.

A clone's ``.git`` is untrusted as the rest of the folder, so git never opens it as a repository: its
configuration could run a command (``log.showSignature`` with ``gpg.program``, a promisor remote's
``uploadpack`` fetching a missing object) and its ``commondir`` or links could name another student's
repository. git runs on an empty repository of the grader's own (its configuration only: no system or global
file, no hooks, no replace refs, no grafts) whose objects are the clone's ``objects`` folder, checked first to
hold only folders and regular files, none a link and no ``alternates``; the branch checked out is resolved
here, reading ``HEAD`` and its ref without following a link. Only plumbing that never touches a work tree nor
runs a filter runs (``log``, ``ls-tree``, ``cat-file``), under a timeout and a cap on what it prints; a ``.git``
that is a link or a file (a work tree pointing elsewhere) is refused. Paths from the commit are checked one
component at a time and written only below a fresh folder; only the files intake could use (Python files,
notebooks) are written, with intake's size caps. Commit times are the committer's word: a history whose times
run backwards is flagged for a human (GitHub's own push log is the evidence of when a push arrived); one git
cannot read, or beyond the year 9999, is refused or left undated, never a crash.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .submission import (MAX_DEPTH, MAX_ENTRIES, MAX_FILE_BYTES, MAX_NOTEBOOK_BYTES, Refused, _open_child_folder,
                         read_regular)

MAX_COMMITS = 20000  # commits walked back from HEAD
MAX_SNAPSHOT_BYTES = 64 << 20
GIT_SECONDS = 60
MAX_OUTPUT_BYTES = MAX_SNAPSHOT_BYTES + (16 << 20)  # what one git call may print (a tree of shared subtrees is huge)
MAX_OBJECT_ENTRIES = 200_000  # files and folders of a clone's objects folder checked before git reads it
MAX_REF_BYTES = 4 << 20  # HEAD, a ref file, packed-refs
MAX_STAMP = 253402300799  # 9999-12-31T23:59:59Z: the last time a datetime holds
MAX_DATED = 20  # files dated by their own last change (one git call each)
KEPT = (".py", ".ipynb")


@dataclass(frozen=True)
class Graded:
    """The commit chosen: hash, committer time, later commits on the branch, whether times ran backwards."""

    sha: str
    time: datetime
    later: int
    reordered: bool


def is_clone(folder: Path) -> bool:
    """Whether ``folder`` holds a ``.git`` entry of any kind (a refused one included)."""
    return os.path.lexists(Path(folder) / ".git")


@dataclass(frozen=True)
class Store:
    """A clone's objects folder (checked: no link, no alternates) and the commit its ``HEAD`` names."""

    objects: Path
    head: str


def _git_dir(folder: Path) -> Path:
    git = Path(folder) / ".git"
    info = os.lstat(git)
    if stat.S_ISLNK(info.st_mode):
        raise Refused(".git is a symbolic link (links are not followed)")
    if not stat.S_ISDIR(info.st_mode):
        raise Refused(".git is not a folder (a work tree of a repository elsewhere)")
    return git


def _check_objects(objects: Path) -> None:
    """Refused unless ``objects`` and everything below it are folders and regular files (git follows links
    there, to another student's objects or anywhere) and it borrows from no other repository."""
    if not os.path.isdir(objects) or os.path.islink(objects):
        raise Refused(".git/objects is not a folder (links are not followed)")
    if os.path.lexists(objects / "info" / "alternates"):
        raise Refused(".git borrows objects from another repository (objects/info/alternates)")
    pending, seen = [objects], 0
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_OBJECT_ENTRIES:
                    raise Refused(f".git/objects holds more than {MAX_OBJECT_ENTRIES} files and folders")
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif not entry.is_file(follow_symlinks=False):
                    raise Refused(".git/objects holds a link or a special file (links are not followed)")


def _read_in(git: Path, path: str) -> bytes | None:
    """The bytes of the regular file at ``path`` (``/``-joined) below ``git``, no link followed; None if absent."""
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise Refused(f"a ref of .git names an odd path: {path[:80]!r}")
    fds, current = [], os.open(git, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    fds.append(current)
    try:
        for name in parts[:-1]:
            current = _open_child_folder(current, name)
            if current is None:
                return None
            fds.append(current)
        try:
            return read_regular(current, parts[-1], MAX_REF_BYTES)
        except Refused as refused:
            if str(refused) == "missing":
                return None
            raise Refused(f".git/{path[:80]}: {refused}") from None
    finally:
        for fd in fds:
            os.close(fd)


def _head(git: Path) -> str:
    """The commit ``HEAD`` names (detached, or through its branch's ref or ``packed-refs``), read here."""
    text, name = _read_in(git, "HEAD"), "HEAD"
    for _ in range(5):  # a symbolic ref may name another
        value = (text or b"").decode("ascii", "replace").strip()
        if not value.startswith("ref:"):
            break
        name = value[4:].strip()
        if not name.startswith("refs/"):
            raise Refused(f"a symbolic ref of .git names no branch: {name[:80]!r}")
        text = _read_in(git, name)
        if text is None:
            packed = (_read_in(git, "packed-refs") or b"").decode("ascii", "replace").splitlines()
            text = next((line.split()[0].encode() for line in packed if line.split()[1:2] == [name]), None)
        if text is None:
            raise Refused(f"the branch checked out has no commits ({name[:80]})")
    value = (text or b"").decode("ascii", "replace").strip()
    if len(value) not in (40, 64) or any(char not in "0123456789abcdef" for char in value):
        raise Refused(f".git/{name[:80]} holds no commit hash")
    return value


def _objects(folder: Path) -> Path:
    """The checked objects folder of ``folder``'s clone; Refused (one line) otherwise."""
    objects = _git_dir(folder) / "objects"
    _check_objects(objects)
    return objects.absolute()


def store(folder: Path) -> Store:
    """The checked objects folder and HEAD's commit of ``folder``'s clone; Refused (one line) otherwise."""
    return Store(_objects(folder), _head(_git_dir(folder)))


def _environment(objects: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_NO_REPLACE_OBJECTS="1",
               GIT_GRAFT_FILE=os.devnull, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_NO_LAZY_FETCH="1",
               GIT_LITERAL_PATHSPECS="1", GIT_OBJECT_DIRECTORY=str(objects), LC_ALL="C")
    return env


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except OSError:  # git stopped reading: its exit status says why
        pass


def git(objects: Path, *args: str, data: bytes | None = None) -> bytes:
    """git's output for ``args`` on an empty repository of the grader's own whose objects are ``objects``;
    Refused (one line) when git fails, runs too long or prints more than ``MAX_OUTPUT_BYTES``."""
    with tempfile.TemporaryDirectory(prefix="grader-git-") as bare, tempfile.TemporaryFile() as errors:
        for folder in ("objects", "refs"):
            os.mkdir(os.path.join(bare, folder))
        Path(bare, "HEAD").write_text("ref: refs/heads/main\n")
        Path(bare, "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
        try:
            process = subprocess.Popen(["git", f"--git-dir={bare}", "--no-pager", *args], cwd=bare,
                                       stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=errors, env=_environment(objects))
        except OSError as error:
            raise Refused(f"git could not run ({error.strerror})") from None
        killed: list[str] = []
        timer = threading.Timer(GIT_SECONDS, lambda: (killed.append("time"), process.kill()))
        timer.start()
        if data is not None:
            threading.Thread(target=_feed, args=(process.stdin, data), daemon=True).start()
        chunks, size = [], 0
        try:
            while chunk := process.stdout.read(1 << 20):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_OUTPUT_BYTES:
                    killed.append("size")
                    process.kill()
                    break
        finally:
            process.stdout.close()
            process.wait()
            timer.cancel()
        if killed:
            raise Refused(f"git took more than {GIT_SECONDS} s to read the repository" if killed[0] == "time" else
                          f"git printed more than {MAX_OUTPUT_BYTES >> 20} MiB reading the repository")
        if process.returncode != 0:
            errors.seek(0)
            first = errors.read(4096).decode("utf-8", "replace").strip().splitlines()[:1]
            raise Refused(f"git could not read the repository ({first[0][:160] if first else 'no message'})")
        return b"".join(chunks)


def _stamp(text: bytes | str) -> int | None:
    """A committer time git printed, in seconds; None when it printed none or one past ``MAX_STAMP``."""
    text = text.strip()
    return int(text) if text.isdigit() and int(text) <= MAX_STAMP else None


def commit_at(folder: Path, last: datetime) -> Graded | None:
    """The last commit on the checked-out branch (first parents from HEAD) committed at or before ``last``;
    None when every commit is later (or the branch has none)."""
    clone = store(folder)
    lines = git(clone.objects, "log", "--first-parent", f"--max-count={MAX_COMMITS}", "--format=%H %ct", clone.head,
                "--").decode("ascii", "replace").splitlines()
    chain = []
    for line in lines:
        sha, _, seconds = line.partition(" ")
        if not seconds.strip().isdigit():  # a hand-made commit whose time git cannot read
            raise Refused(f"commit {sha[:12]} has no time git can read")
        chain.append((sha, int(seconds)))  # a time past MAX_STAMP is later than any deadline
    reordered = any(newer < older for (_, newer), (_, older) in zip(chain, chain[1:]))
    limit = last.timestamp()
    for later, (sha, seconds) in enumerate(chain):
        if seconds <= limit:
            return Graded(sha, datetime.fromtimestamp(seconds, timezone.utc), later, reordered)
    return None


def _safe_parts(path: bytes) -> list[str] | None:
    try:
        text = path.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = text.split("/")
    if len(parts) > MAX_DEPTH + 3 or any(part in ("", ".", "..") or part.casefold() == ".git" for part in parts):
        return None
    return parts


def write_commit(folder: Path, sha: str, destination: Path) -> None:
    """Write the Python files and notebooks of commit ``sha`` of ``folder``'s clone below ``destination`` (a
    new folder); each module-named file gets the time of the last commit that changed it, so intake can tell
    which copy is newer. Files over intake's caps are written as sparse files of that size, which intake
    refuses as it would the originals."""
    objects = _objects(folder)
    listing = git(objects, "ls-tree", "-r", "-z", "--full-tree", "-l", sha).split(b"\0")
    destination.mkdir(parents=True)
    wanted, total = [], 0
    for entry in listing[:MAX_ENTRIES + 1]:
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, blob, size = meta.split()[:4]
        parts = _safe_parts(path)
        if kind != b"blob" or mode not in (b"100644", b"100755") or parts is None or not parts[-1].endswith(KEPT):
            continue
        cap = MAX_NOTEBOOK_BYTES if parts[-1].endswith(".ipynb") else MAX_FILE_BYTES
        size_value = int(size) if size.isdigit() else cap + 1
        if size_value <= cap:
            total += size_value
        if total > MAX_SNAPSHOT_BYTES:
            raise Refused(f"the commit's Python files and notebooks are larger than {MAX_SNAPSHOT_BYTES >> 20} MiB")
        wanted.append((parts, blob.decode("ascii"), size_value, cap))
    contents = _blobs(objects, [blob for _, blob, size, cap in wanted if size <= cap])
    when = _stamp(git(objects, "log", "-1", "--format=%ct", sha, "--")) or 0
    for parts, blob, size, cap in wanted:
        target = destination.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            if size > cap or blob not in contents:  # too large, or missing from the clone's objects
                os.ftruncate(fd, cap + 1)
            else:
                os.write(fd, contents[blob])
        finally:
            os.close(fd)
        os.utime(target, (when, when))
    _date_module_files(objects, sha, destination, [parts for parts, *_ in wanted])


def _date_module_files(objects: Path, sha: str, destination: Path, paths: list[list[str]]) -> None:
    """Give each file whose name another path also carries (a second copy of a student file) the time of its
    last change, so which copy is newer can be told (one git call per such file: the first ``MAX_DATED`` of
    them, since a clone of thousands of same-named files must not cost thousands of history walks)."""
    names = Counter(parts[-1] for parts in paths)
    for parts in [parts for parts in paths if names[parts[-1]] > 1][:MAX_DATED]:
        stamp = _stamp(git(objects, "log", "-1", "--format=%ct", sha, "--", "/".join(parts)))
        if stamp is not None:
            os.utime(destination.joinpath(*parts), (stamp, stamp))


def _blobs(objects: Path, shas: list[str]) -> dict[str, bytes]:
    """``{sha: bytes}`` of the blobs named, read in one ``cat-file --batch`` (a missing one left out)."""
    if not shas:
        return {}
    out = git(objects, "cat-file", "--batch", data="".join(f"{sha}\n" for sha in dict.fromkeys(shas)).encode())
    found, at = {}, 0
    while at < len(out):
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        found[header[0].decode("ascii")] = out[at:at + size]
        at += size + 1
    return found
