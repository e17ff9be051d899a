"""Worker entry point, run inside the sandbox: ``python -m worker.main IN_FD OUT_FD SUBMISSION``.

Talks to the judge over two inherited pipe descriptors; stdin is closed and
stdout/stderr belong to the student's prints (the judge keeps a capped copy).
The same ``serve`` loop runs in workers forked by :mod:`.zygote`.
"""

import json
import os
import resource
import sys


def apply_limits(limits):
    """Lower this process's rlimits before any student code runs (children inherit them)."""
    for name, key in (("RLIMIT_AS", "memory_bytes"), ("RLIMIT_NPROC", "processes"), ("RLIMIT_FSIZE", "file_bytes"),
                      ("RLIMIT_NOFILE", "open_files"), ("RLIMIT_CPU", "cpu_seconds")):
        value = int(limits[key])
        soft, hard = resource.getrlimit(getattr(resource, name))
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(getattr(resource, name), (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


WARM_UP_ENV = "GRADER_WARM_UP"  # the lesson's own warm-up (trusted source text from the judge), if it has one


def warm_up(torch):
    """Pay the one-time costs of the first calls (kernel lookups, lazily built tables) before any student code
    runs, so they are not charged to the student's time limits. The lesson's warm-up then runs the operations its
    checks meet most, on the simulated GPU too."""
    from .session import on_fake_device, seed_everything

    seed_everything()  # as before every request: numpy's random module, when numpy is there, imported once here
    x = torch.ones(3, 5, 6, requires_grad=True)  # shapes no lesson's checks are likely to use (they are public)
    layer = torch.nn.Linear(6, 6)
    (torch.softmax(layer(x) @ x.transpose(-2, -1), dim=-1).sum() + x.sin().sum()).backward()
    torch.func.functional_call(layer, {"weight": torch.zeros(6, 6)}, (x,), strict=False)
    on_fake_device(layer, (torch.ones(3, 9, 6),), {})
    source = os.environ.pop(WARM_UP_ENV, "")
    if source:
        namespace = {}
        exec(compile(source, "<lesson warm-up>", "exec"), namespace)  # noqa: S102 - the instructor's own code
        namespace["warm_up"](torch, on_fake_device)


def prepare_torch(threads, keep=()):
    """Import torch configured for grading; return ``(torch, cuda available)``. ``keep``: paths (the contract's
    forbidden ones) whose packages torch's import must load as it does (:func:`.stand_ins.defer`)."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # asking must not initialise CUDA (forks follow)
    from . import stand_ins

    deferred = stand_ins.defer(keep=keep)
    with stand_ins.inspect_shortcuts():
        import torch
    stand_ins.bind(deferred)

    # Before any Python kernel runs: their first calls would import the compiler and symbolic shapes.
    stand_ins.install(torch)
    torch.set_num_threads(threads)
    # Full float32 matmuls everywhere, so GPU results are comparable with the CPU's.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch, torch.cuda.is_available()


def serve(root, in_fd, out_fd, contract):
    """Answer the judge's requests about the submission in ``root`` (shaped as ``contract`` says) until the judge
    closes the channel."""
    from . import protocol
    from .session import Session, install_import_guard, install_tripwires

    session = Session(root, contract)
    install_tripwires(session)
    install_import_guard(contract)
    block = None  # in a stand-in block's child: the pipe that tells the waiting parent the block ended as asked
    while True:
        try:
            message, blobs = protocol.receive(in_fd)
        except protocol.ChannelClosed:
            return 0
        if message.get("op") == "stand_in":
            if message.get("sources") and block is None:
                block = _stand_in_block()  # returns in the child; the parent returns only when the block ended
                if block is None:
                    continue  # the parent: the child answered every request of the block, this one too
                session.next_handle += BLOCK_HANDLES  # the child's objects: numbers the parent never gives
            elif not message.get("sources") and block is not None:
                _reply(out_fd, message, {"value": None})
                os.write(block, b"ended")
                os._exit(0)
        reply_blobs = []
        reply = session.handle(message, blobs, reply_blobs)
        _reply(out_fd, message, reply, reply_blobs)


BLOCK_HANDLES = 1_000_000


def _reply(out_fd, message, reply, reply_blobs=()):
    from . import protocol

    reply["nonce"] = message.get("nonce")  # lets the judge notice replies it did not ask for
    sys.stdout.flush()
    protocol.send(out_fd, reply, list(reply_blobs))


def _stand_in_block():
    """Serve a stand-in block (the judge's stand-ins for broken parts, from its first request to the one that ends
    it) in a child process, so that nothing the submission's code keeps of a stand-in outlives the block: the
    parent, which never met one, waits and then serves on. Returns the write end of the child's "ended" pipe in
    the child, None in the parent once the block ended as asked; a child that ended otherwise (it crashed, or its
    code exited) ends the parent the same way, as a crash of any call ends the worker."""
    ended, tell = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(ended)
        return tell
    os.close(tell)
    _, status = os.waitpid(child, 0)
    os.set_blocking(ended, False)  # a process the child left behind may hold the pipe open: never wait for it
    try:
        said = os.read(ended, 16)
    except BlockingIOError:
        said = b""
    os.close(ended)
    if said == b"ended" and os.waitstatus_to_exitcode(status) == 0:
        return None
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: the parent ends by the same one
        os.kill(os.getpid(), -code)
    os._exit(code or 1)


def main(argv):
    in_fd, out_fd, root = int(argv[1]), int(argv[2]), argv[3]
    from .contract import Contract

    contract = Contract.from_env(os.environ)
    torch, cuda = prepare_torch(int(os.environ.get("GRADER_THREADS", "1")), contract.forbidden)

    from . import protocol

    limits = json.loads(os.environ.get("GRADER_LIMITS") or "{}")
    if limits:
        apply_limits(limits)
    from .preload import PRELOAD_ENV, preload_notebook

    if os.environ.pop(PRELOAD_ENV, "") == "1":  # as a zygote does before its first fork: every mode starts alike
        preload_notebook()
    plan = os.environ.pop("GRADER_CONFINE", None)
    if plan:  # --sandbox uid: confine before any student code (a failure here is a failed start, never a pass)
        from .confine import confine

        confine(json.loads(plan))
    # Warmed up before the hello (the worker starts while the judge grades the previous student): the judge
    # reads the worker's CPU at the hello, and what follows is the submission's.
    warm_up(torch)
    protocol.send(out_fd, {"ready": True, "cuda": cuda, "torch": torch.__version__})
    return serve(root, in_fd, out_fd, contract)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
