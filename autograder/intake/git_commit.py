"""The commit at the deadline: read a student's clone with git, as data only, and write the files of one
commit to a folder of the grader's own, which intake then reads as any student folder.

A clone's ``.git`` is untrusted as the rest of the folder. git runs here with no configuration but its own
(``GIT_CONFIG_NOSYSTEM``, an empty global file, no hooks, no replace refs, no grafts), only plumbing that
never touches a work tree nor runs a filter (``log``, ``ls-tree``, ``cat-file``), under a timeout; a ``.git``
that is a link or a file (a work tree pointing elsewhere) or borrows objects from another repository
(``objects/info/alternates``) is refused. Paths from the commit are checked one component at a time and
written only below a fresh folder; only the files intake could use (Python files, notebooks) are written,
with intake's size caps. Commit times are the committer's word: a history whose times run backwards is
flagged for a human (GitHub's own push log is the evidence of when a push arrived).
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .submission import MAX_DEPTH, MAX_ENTRIES, MAX_FILE_BYTES, MAX_NOTEBOOK_BYTES, Refused

MAX_COMMITS = 20000  # commits walked back from HEAD
MAX_SNAPSHOT_BYTES = 64 << 20
GIT_SECONDS = 60
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


def _git_dir(folder: Path) -> Path:
    git = Path(folder) / ".git"
    info = os.lstat(git)
    if stat.S_ISLNK(info.st_mode):
        raise Refused(".git is a symbolic link (links are not followed)")
    if not stat.S_ISDIR(info.st_mode):
        raise Refused(".git is not a folder (a work tree of a repository elsewhere)")
    if os.path.lexists(git / "objects" / "info" / "alternates"):
        raise Refused(".git borrows objects from another repository (objects/info/alternates)")
    return git


def _environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_NO_REPLACE_OBJECTS="1",
               GIT_GRAFT_FILE=os.devnull, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    return env


def git(git_dir: Path, *args: str, data: bytes | None = None) -> bytes:
    """git's output for ``args`` on ``git_dir``; Refused (one line) when git fails or runs too long."""
    command = ["git", f"--git-dir={git_dir}", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
               "-c", "safe.directory=*", "--no-pager", *args]
    try:
        done = subprocess.run(command, input=data, capture_output=True, env=_environment(), timeout=GIT_SECONDS,
                              cwd=git_dir)
    except subprocess.TimeoutExpired:
        raise Refused(f"git took more than {GIT_SECONDS} s to read the repository") from None
    except OSError as error:
        raise Refused(f"git could not run ({error.strerror})") from None
    if done.returncode != 0:
        first = done.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        raise Refused(f"git could not read the repository ({first[0][:160] if first else 'no message'})")
    return done.stdout


def commit_at(folder: Path, last: datetime) -> Graded | None:
    """The last commit on the checked-out branch (first parents from HEAD) committed at or before ``last``;
    None when every commit is later (or the branch has none)."""
    git_dir = _git_dir(folder)
    lines = git(git_dir, "log", "--first-parent", f"--max-count={MAX_COMMITS}", "--format=%H %ct", "HEAD",
                "--").decode("ascii", "replace").split()
    chain = [(lines[index], int(lines[index + 1])) for index in range(0, len(lines) - 1, 2)]
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
    git_dir = _git_dir(folder)
    listing = git(git_dir, "ls-tree", "-r", "-z", "--full-tree", "-l", sha).split(b"\0")
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
    contents = _blobs(git_dir, [blob for _, blob, size, cap in wanted if size <= cap])
    when = int(git(git_dir, "log", "-1", "--format=%ct", sha, "--").strip() or 0)
    for parts, blob, size, cap in wanted:
        target = destination.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            if size > cap:
                os.ftruncate(fd, cap + 1)
            else:
                os.write(fd, contents[blob])
        finally:
            os.close(fd)
        os.utime(target, (when, when))
    _date_module_files(git_dir, sha, destination, [parts for parts, *_ in wanted])


def _date_module_files(git_dir: Path, sha: str, destination: Path, paths: list[list[str]]) -> None:
    """Give each file whose name another path also carries (a second copy of a student file) the time of its
    last change, so which copy is newer can be told (one git call per such file, a handful at most)."""
    names = [parts[-1] for parts in paths]
    for parts in paths:
        if names.count(parts[-1]) > 1:
            stamp = git(git_dir, "log", "-1", "--format=%ct", sha, "--", "/".join(parts)).strip()
            if stamp.isdigit():
                os.utime(destination.joinpath(*parts), (int(stamp), int(stamp)))


def _blobs(git_dir: Path, shas: list[str]) -> dict[str, bytes]:
    """``{sha: bytes}`` of the blobs named, read in one ``cat-file --batch``."""
    if not shas:
        return {}
    out = git(git_dir, "cat-file", "--batch", data="".join(f"{sha}\n" for sha in dict.fromkeys(shas)).encode())
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
