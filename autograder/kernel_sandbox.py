"""A notebook kernel's launcher: ``python -m autograder.kernel_sandbox MODE CONNECTION_FILE``.

The grading course's kernelspec points here. Started by jupyter_client in the
notebook's folder, it replaces itself with ``ipykernel`` under the given
sandbox (``bwrap``: the same read-only view, user, limits and scrubbed
environment as a code worker; ``none``: rlimits only).
"""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .sandbox import NOBODY, Limits, Sandbox, kernel_command


def _limits_prefix(limits):
    """``prlimit`` arguments applying the worker's rlimits to the kernel (nothing when prlimit is missing)."""
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    if not os.path.exists(prlimit):
        return []
    return [prlimit, f"--as={limits.memory_bytes}", f"--nproc={limits.processes}", f"--fsize={limits.file_bytes}",
            f"--nofile={limits.open_files}", f"--cpu={limits.cpu_seconds}", "--core=0", "--"]


CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def private_channels(connection_file, owner=None):
    """A folder only the kernel's user can use, holding a copy of the connection file; returns ``(folder, copy,
    transport)``.

    With the ``ipc`` transport the copy names sockets inside that folder, and the paths nbgrader will connect to
    become links to them: the kernel then needs no network at all.
    """
    info = json.loads(Path(connection_file).read_text())
    transport = info.get("transport", "tcp")
    if transport == "ipc" and not os.path.isabs(info["ip"]):
        raise SystemExit(f"kernel_sandbox: ipc channels need an absolute path, not {info['ip']!r}")
    # Next to the sockets nbgrader will look for (a folder the grader removes after the run), or the file.
    near = info["ip"] if transport == "ipc" else connection_file
    folder = tempfile.mkdtemp(prefix="k-", dir=os.path.dirname(near))
    copy = os.path.join(folder, "connection.json")
    if transport == "ipc":
        ours = os.path.join(folder, "ipc")
        for channel in CHANNELS:
            os.symlink(f"{ours}-{info[channel]}", f"{info['ip']}-{info[channel]}")
        info["ip"] = ours
    Path(copy).write_text(json.dumps(info))
    os.chmod(copy, 0o600)
    if owner is not None:
        for path in (folder, copy):
            os.chown(path, owner, owner)
    return folder, copy, transport


def main(argv):
    mode, connection_file = argv[1], os.path.abspath(argv[2])
    limits = Limits(**json.loads(os.environ.get("GRADER_KERNEL_LIMITS") or "{}"))
    command = _limits_prefix(limits) + [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file]
    if mode != "bwrap":
        os.execv(command[0], command)
    # As root the kernel runs as nobody, and the folder is nobody's; otherwise it is the caller's own.
    folder, copy, transport = private_channels(connection_file, NOBODY if os.geteuid() == 0 else None)
    argv = kernel_command(Sandbox("bwrap", limits=limits), os.getcwd(), folder, command[:-1] + [copy],
                          network=transport != "ipc")
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv)
