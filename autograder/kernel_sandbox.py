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

from .sandbox import NOBODY, Limits, Sandbox, kernel_command


def _limits_prefix(limits):
    """``prlimit`` arguments applying the worker's rlimits to the kernel (nothing when prlimit is missing)."""
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    if not os.path.exists(prlimit):
        return []
    return [prlimit, f"--as={limits.memory_bytes}", f"--nproc={limits.processes}", f"--fsize={limits.file_bytes}",
            f"--nofile={limits.open_files}", f"--cpu={limits.cpu_seconds}", "--core=0", "--"]


def main(argv):
    mode, connection_file = argv[1], os.path.abspath(argv[2])
    limits = Limits(**json.loads(os.environ.get("GRADER_KERNEL_LIMITS") or "{}"))
    command = _limits_prefix(limits) + [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file]
    if mode != "bwrap":
        os.execv(command[0], command)
    if os.geteuid() == 0:
        # The kernel runs as nobody: give it a copy of its connection file that only it (and root) can read.
        private = tempfile.mkdtemp(prefix="mha-pe-kernel-")
        copy = os.path.join(private, os.path.basename(connection_file))
        shutil.copyfile(connection_file, copy)
        for path in (private, copy):
            os.chown(path, NOBODY, NOBODY)
        os.chmod(copy, 0o600)
        command = command[:-1] + [copy]
        connection_file = copy
    argv = kernel_command(Sandbox("bwrap", limits=limits), os.getcwd(), connection_file, command)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv)
