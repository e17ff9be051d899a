"""The git side of ``return-feedback``: a student's remote read as data, and their feedback pushed from a
repository of the grader's own.

A student's clone is untrusted as the rest of their folder: its ``.git`` can hold hooks, configuration that runs
commands (``core.fsmonitor``, ``core.sshCommand``, ``credential.helper``, includes) or links to elsewhere. So no
git command ever runs in it: its ``.git/config`` is read as bytes (a regular file, no link followed, size-bounded)
and handed to ``git config --file -`` with includes off, for one value, ``remote.origin.url``; that URL is used
only if it has one of a few known forms (:func:`check_url`). The commit is built with plumbing in a scratch
repository of the grader's (``hash-object``, ``mktree``, ``commit-tree``: no work tree, no hooks) and pushed from
there, with hooks off, the ``ext``/``fd`` transports off, no terminal prompt and a timeout. The instructor's own
git configuration (credential helpers, SSH keys, ``insteadOf``) stays in force for the push: it is theirs.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import KitError

CONFIG_BYTES = 256 << 10  # a clone's .git/config is a few hundred bytes; more is not read
GIT_SECONDS = 120  # one network git command (ls-remote, fetch, push)
# Marks the kit's own feedback commits: a branch whose tip lacks it was written by someone else (GitHub
# Classroom's feedback pull request uses a branch called ``feedback``) and is never overwritten.
TRAILER = "Autograder-Feedback: returned by the course's grader"
IDENTITY = ("-c", "user.name=Course staff", "-c", "user.email=course-staff@localhost")
# Every git this module runs: no hooks (the grader's own config may name some), no transport that runs a command.
SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never", "-c", "protocol.fd.allow=never",
        "-c", "core.fsmonitor=false", "-c", "commit.gpgSign=false")
# Environment variables that would point git at another repository than the one named.
_REPOSITORY_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
                   "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_QUARANTINE_PATH")

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # a user or host name: never starting with "-" (an option to ssh)
_HOST = re.compile(rf"^(?:{_NAME}@)?{_NAME}(?::[0-9]{{1,5}})?$")
_HTTPS_HOST = re.compile(rf"^(?:{_NAME}(?::[^@/\s]*)?@)?{_NAME}(?::[0-9]{{1,5}})?$")
_PATH = re.compile(r"^[A-Za-z0-9._~%/+-]+$")
_SCP = re.compile(rf"^{_NAME}@{_NAME}:(?!-)[A-Za-z0-9._~/+-]+$")


class NotReturned(Exception):
    """Why one student's feedback cannot be returned: one line, for the instructor."""


def _environment(own_config: bool) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _REPOSITORY_ENV}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    if not own_config:  # reading a student's file: nothing of the grader's configuration is needed
        env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return env


def run_git(cwd: Path, *args: str, data: bytes | None = None, own_config: bool = True
            ) -> subprocess.CompletedProcess:
    """git ``args`` in ``cwd`` (the grader's scratch repository), as :data:`SAFE`; NotReturned on a timeout."""
    try:
        return subprocess.run(["git", *SAFE, *args], cwd=cwd, input=data, capture_output=True,
                              stdin=None if data is not None else subprocess.DEVNULL, timeout=GIT_SECONDS,
                              env=_environment(own_config))
    except subprocess.TimeoutExpired:
        raise NotReturned(f"git took more than {GIT_SECONDS} s (the remote did not answer)") from None


def git_error(done: subprocess.CompletedProcess) -> str:
    """git's last line of error (where it says what failed), escaped, bounded."""
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return ascii(lines[-1][:160])[1:-1] if lines else f"exit status {done.returncode}"


def _read_config(folder: Path) -> bytes:
    """The bytes of ``folder/.git/config``, each step checked: no link followed, a folder, a regular file."""
    try:
        if stat.S_ISLNK(os.lstat(folder).st_mode):
            raise NotReturned("the student's folder is a symbolic link (links are not followed)")
        git = folder / ".git"
        if not os.path.lexists(git):
            raise NotReturned("not a git clone (no .git)")
        mode = os.lstat(git).st_mode
        if stat.S_ISLNK(mode):
            raise NotReturned(".git is a symbolic link (links are not followed)")
        if not stat.S_ISDIR(mode):
            raise NotReturned(".git is not a folder (a work tree of a repository elsewhere)")
        if not stat.S_ISREG(os.lstat(git / "config").st_mode):  # a link, a pipe, a device: never opened
            raise NotReturned(".git/config is not a regular file (links are not followed)")
        fd = os.open(git / "config", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotReturned("the clone has no .git/config") from None
    except OSError as error:  # ELOOP: a link where .git/config should be
        raise NotReturned(f".git/config cannot be opened ({os.strerror(error.errno or 0)}; links are not "
                          f"followed)") from None
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise NotReturned(".git/config is not a regular file")
        data = handle.read(CONFIG_BYTES + 1)
    if len(data) > CONFIG_BYTES:
        raise NotReturned(f".git/config is larger than {CONFIG_BYTES >> 10} KiB")
    return data


def origin_url(folder: Path, scratch: Path) -> str:
    """The clone's ``remote.origin.url``, read as data (its config's bytes given to ``git config --file -``,
    includes off, in the grader's ``scratch`` folder with no other configuration); NotReturned saying why not."""
    done = run_git(scratch, "config", "--file", "-", "--no-includes", "--get-all", "remote.origin.url",
                   data=_read_config(Path(folder)), own_config=False)
    if done.returncode == 1:
        raise NotReturned("the clone has no remote 'origin'")
    if done.returncode != 0:
        raise NotReturned(f"its .git/config cannot be read ({git_error(done)})")
    urls = [line for line in done.stdout.decode("utf-8", "replace").splitlines() if line]
    if len(urls) != 1:
        raise NotReturned(f"remote 'origin' has {len(urls)} URLs (one expected)")
    return urls[0]


def shown(url: str) -> str:
    """``url`` for a message: its password or token left out, escapes for anything unprintable."""
    url = re.sub(r"^(https://[^@/]*?):[^@/]*@", r"\1:***@", url)
    return ascii(url[:200])[1:-1]


def check_url(url: str, untrusted: tuple[Path, ...] = ()) -> str:
    """``url`` if it is of a known safe form: ``https://``, ``ssh://``, scp-like ``user@host:path``, or a local
    bare repository (an absolute path or ``file://``) outside ``untrusted`` (the class folder, the output folder);
    NotReturned naming the form otherwise. Remote helpers (``ext::``, ``fd::``, any ``name::``) and anything
    starting with ``-`` (an option to git or ssh) are refused."""
    if url.startswith("-"):
        raise NotReturned(f"remote URL {shown(url)!r} starts with '-' (it would be read as an option)")
    if re.match(r"^[A-Za-z0-9+.-]*::", url):
        raise NotReturned(f"remote URL {shown(url)!r} names a remote helper ('<transport>::'): refused, it can "
                          f"run a command")
    if len(url) > 2000 or any(ord(char) < 0x21 or ord(char) == 0x7F for char in url):
        raise NotReturned(f"remote URL {shown(url)!r} holds a space or a control character")
    if url.startswith(("/", "file://")):
        return _local(url, untrusted)
    if _SCP.match(url):
        return url
    parts = urlsplit(url)
    hosts = {"https": _HTTPS_HOST, "ssh": _HOST}
    if (parts.scheme in hosts and hosts[parts.scheme].match(parts.netloc) and _PATH.match(parts.path)
            and parts.path.startswith("/") and not parts.query and not parts.fragment):
        return url
    raise NotReturned(f"remote URL {shown(url)!r} is not of a form the kit accepts (https://, ssh://, "
                      f"user@host:path, or a local bare repository)")


def _local(url: str, untrusted: tuple[Path, ...]) -> str:
    """A local remote: a bare repository of the instructor's, never one inside a student's reach."""
    path = urlsplit(url).path if url.startswith("file://") else url
    if url.startswith("file://") and urlsplit(url).netloc not in ("", "localhost"):
        raise NotReturned(f"remote URL {shown(url)!r} names another host in a file:// URL")
    real = Path(os.path.realpath(path))
    if any(real.is_relative_to(Path(os.path.realpath(place))) for place in untrusted):
        raise NotReturned(f"remote {shown(url)!r} is inside the class or output folder (a student's own files)")
    bare = run_git(Path("/"), "config", "--file", str(real / "config"),
                   "--no-includes", "--bool", "--get", "core.bare", own_config=False)
    if not ((real / "HEAD").is_file() and (real / "objects").is_dir() and bare.stdout.strip() == b"true"):
        raise NotReturned(f"remote {shown(url)!r} is no local bare repository")
    return str(real)


def init_scratch(scratch: Path) -> None:
    """A repository of the grader's own to build commits in: no template (so no sample hooks)."""
    done = run_git(scratch, "init", "--quiet", "--bare", "--template=", ".")
    if done.returncode != 0:
        raise KitError(f"git init failed in {scratch}: {git_error(done)}")


def _output(done: subprocess.CompletedProcess, what: str) -> str:
    if done.returncode != 0:
        raise NotReturned(f"git {what} failed in the grader's scratch repository ({git_error(done)})")
    return done.stdout.decode().strip()


def build_commit(scratch: Path, files: dict[str, bytes], message: str) -> str:
    """An orphan commit holding just ``files`` (``{name: bytes}``, top level), made with plumbing; its hash."""
    entries = []
    for name, data in sorted(files.items()):
        blob = _output(run_git(scratch, "hash-object", "-w", "--stdin", data=data), "hash-object")
        entries.append(f"100644 blob {blob}\t{name}\n")
    tree = _output(run_git(scratch, "mktree", data="".join(entries).encode()), "mktree")
    return _output(run_git(scratch, *IDENTITY, "commit-tree", tree, data=f"{message}\n\n{TRAILER}\n".encode()),
                   "commit-tree")


def same_remote(url: str) -> str:
    """A checked ``url`` in one spelling whatever its form (scheme, user, port and ``.git`` left out, case
    folded as GitHub folds it), to see two students name one repository."""
    if url.startswith("/"):
        return url
    if _SCP.match(url):
        host, _, path = url.partition("@")[2].partition(":")
    else:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    return f"{host.lower()}/{path.strip('/').removesuffix('.git').lower()}"


def _local_pack(url: str, program: str) -> tuple[str, ...]:
    """For a local remote, its receive-pack or upload-pack run with hooks off too (git runs those in the remote
    repository, with its configuration); a network remote's are the server's own."""
    return (f"--{program}=git -c core.hooksPath=/dev/null {program}",) if url.startswith("/") else ()


def remote_tip(scratch: Path, url: str, branch: str) -> str:
    """The hash ``branch`` has on the remote now, ``""`` when it has none; NotReturned when the remote is not
    reachable."""
    done = run_git(scratch, "ls-remote", *_local_pack(url, "upload-pack"), url, f"refs/heads/{branch}")
    if done.returncode != 0:
        raise NotReturned(f"the remote cannot be read ({git_error(done)})")
    for line in done.stdout.decode("utf-8", "replace").splitlines():  # a pattern matches ref names' tails too
        sha, _, ref = line.partition("\t")
        if ref == f"refs/heads/{branch}":
            return sha
    return ""


def is_kit_commit(scratch: Path, url: str, branch: str, tip: str) -> bool:
    """Whether the remote's ``branch`` at ``tip`` is a feedback commit of the kit (no parent, the trailer)."""
    fetched = run_git(scratch, "fetch", "--quiet", "--depth=1", "--no-tags", *_local_pack(url, "upload-pack"),
                      url, f"refs/heads/{branch}")
    if fetched.returncode != 0:
        raise NotReturned(f"the remote's branch {branch} cannot be fetched ({git_error(fetched)})")
    shown_commit = run_git(scratch, "cat-file", "commit", tip)
    if shown_commit.returncode != 0:
        return False
    header, _, body = shown_commit.stdout.decode("utf-8", "replace").partition("\n\n")
    return not any(line.startswith("parent ") for line in header.splitlines()) and TRAILER in body.splitlines()


def push(scratch: Path, url: str, commit: str, branch: str, expected: str) -> None:
    """Push ``commit`` to ``branch`` of ``url``, replacing it only if it is still ``expected`` (``""``: absent)."""
    done = run_git(scratch, "push", "--quiet", "--no-verify", f"--force-with-lease=refs/heads/{branch}:{expected}",
                   *_local_pack(url, "receive-pack"), url, f"{commit}:refs/heads/{branch}")
    if done.returncode != 0:
        raise NotReturned(f"the push failed ({git_error(done)})")
