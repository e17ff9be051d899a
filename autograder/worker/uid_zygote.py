"""The zygote's steps for ``--sandbox uid``, where no namespace can be made: what :mod:`.zygote` does instead of
its own PID namespace, :func:`~.zygote._isolate` and the judges' network lanes.

The zygote runs as root, started by the judge with a scrubbed environment (no seal key: the judge's own
variables never reach it) and a plan (``GRADER_CONFINE``). It runs only the kit's worker code, imports torch once,
then locks itself (:func:`lock`: Landlock reads only what a worker may, the kit's install left out, and writes only
its folder) before it forks any worker. Each fork, before it touches a student file, makes a folder of its own
(:func:`.confine.private_folder`), writes the files it received over its pipe there, lowers its rlimits, and
confines itself exactly as a worker started alone does (:func:`.confine.confine`: Landlock, ``no_new_privs``, the
user the judge named, seccomp). Its pid is a host pid: the judge reads its CPU from ``/proc`` as for any process.
Its end is :func:`.confine.end_user`: every process of its user killed, its folder removed.
"""

import os
import signal
import sys

from . import confine, linux

_TRIAL_UID_OFFSET = 0x0FFFFFFF  # the trial worker's user: past every uid the judge hands out


def prepare(plan):
    """Lay out the plan's reads beside the kit's install (once for every worker), list the import path while
    this process may (:func:`.confine.confine` does it too), and lock the zygote; return the plan to fork by."""
    confine._fill_import_caches()
    plan = dict(plan, beside=confine.beside(plan["read"], plan.get("hide", ())))
    try:
        plan["locked"] = confine.landlock([*plan["beside"]], plan["write"])
    except OSError:
        plan["locked"] = 0  # no Landlock here: the kit's instructor-only folders were locked instead
    return plan


def worker_plan(plan, uid, submission, home):
    """What a forked worker confines itself by: the zygote's reads and its own submission; writes: its home."""
    return {"uid": uid, "gid": uid, "beside": plan["beside"], "read": [submission], "write": [home],
            "require_landlock": bool(plan.get("locked"))}


def valid_uid(plan, uid):
    """Whether ``uid`` is one the judge may hand a worker (never root's, never a real account's)."""
    return isinstance(uid, int) and plan["uid_base"] <= uid < plan["uid_base"] + _TRIAL_UID_OFFSET


def enter(plan, uid, files, limits):
    """In the forked child, before any student file is read: its own folder with ``files`` (``{file name:
    bytes}``), its rlimits, its confinement. Returns the submission's folder. The parent-death signal is set again
    once it is another user (a change of user clears it), and a zygote already gone ends it here."""
    from .main import apply_limits

    zygote = os.getppid()
    submission, home = confine.private_folder(plan["root"], uid, files)
    os.environ.update(HOME=home, MPLCONFIGDIR=home, TMPDIR=home)
    if "tempfile" in sys.modules:  # the zygote's own folder, if it asked: not this worker's
        sys.modules["tempfile"].tempdir = None
    os.chdir(home)
    apply_limits(limits)
    confine.confine(worker_plan(plan, uid, submission, home))
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote:
        os._exit(1)
    return submission


def can_confine(plan, limits):
    """Whether a forked child can confine itself here (tried once, in a throw-away child, with a user no worker
    gets, whose folder is removed after)."""
    uid = plan["uid_base"] + _TRIAL_UID_OFFSET
    pid = os.fork()
    if pid == 0:
        try:
            enter(plan, uid, {}, limits)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - any failure means "no"
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    ended = confine.end_user(uid, folder=os.path.join(plan["root"], f"u{uid}"))
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and ended


class Ending:
    """How the zygote ends a confined worker ``uid`` (``folder``: its own): after its first process is reaped, every
    other process of its user is killed and its folder removed; only then is it ended."""

    def __init__(self, uid, folder):
        self.uid, self.folder, self.done = uid, folder, False

    def finish(self):
        if not self.done:
            self.done = confine.end_user(self.uid, folder=self.folder)
        return self.done
