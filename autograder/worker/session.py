"""What the worker does for the judge: import the student's files one by one and run calls on them.

Every request is answered with data. Objects that must stay in this process
(module instances) are kept in a table and named by handle. A student's
exception becomes an ``error`` record (type names, message, file and line in
the student's code); it never reaches the judge as an object.

Submission code runs in this process and can rewrite anything here, so no
operation reports a conclusion about the submission (a module's layers, whether
it is fast): operations only run the student's code and send back what it
returned, tensors included (parameters, buffers, gradients), for the judge to
check against its own computations. One report is the worker's word, asked for
only where a forged answer buys nothing honest code cannot get for free: which
arguments a call changed in place (``report_changes``; not writing to an input
earns the same).
"""

import builtins
import contextlib
import functools
import importlib
import itertools
import os
import random
import sys
import traceback
import types

import torch

from .contract import Contract, copies, resolve_path
from .cpu_rerun import rerun_on_cpu
from .operator_watch import keep_compiled_attention_unfused, record_into, watch_operators
from .part_stand_ins import StandIns
from .protocol import DTYPES, MAX_DEPTH, MAX_NODES, decode, encode

MESSAGE_LIMIT = 400
MAX_BATCH = 64  # requests in one batch (a table of cases sends a few dozen at most)
BATCHED_OPS = ("new", "call", "method", "tensors", "grads", "attr", "child")
NOTEBOOK_OPS = ("cell", "names", "nbcall")
# Operations that run the student's code: each starts from the same random state, so weights drawn in an
# ``__init__`` (or any draw) are the same in every run, whatever ran before in this worker.
SEEDED_OPS = ("import", "new", "call", "method", "grads")
SEED = 0


def request_seed(message):
    """The seed a request runs under: ``SEED``, or the judge's ``seed`` (a small int: two calls under two seeds
    tell whether the code draws random numbers, such as a dropout left active)."""
    seed = message.get("seed", SEED)
    return seed if type(seed) is int and 0 <= seed < 2 ** 32 else SEED


def seed_everything(seed=SEED):
    """Seed torch (CPU, and CUDA once it is initialised), ``random`` and numpy (when imported: never imported
    here). The CPU generator directly: ``torch.manual_seed`` costs ~75 us probing every backend."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


@functools.lru_cache(maxsize=1024)
def _real_path(filename):
    """``os.path.realpath``, once per file name (a traceback through torch names the same files again and
    again; this worker serves one submission)."""
    return os.path.realpath(filename)


def _safe_text(value, limit=MESSAGE_LIMIT):
    """``str(value)`` cut to ``limit`` characters; a student's broken ``__str__`` cannot stop the reply."""
    try:
        text = str(value)
    except BaseException:  # noqa: BLE001 - the student's __str__ may raise anything
        text = "<message could not be shown>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Session:
    """One submission, imported lazily from ``root`` (a folder holding the student's ``.py`` files), shaped as
    ``contract`` says."""

    def __init__(self, root, contract: Contract):
        self.root = os.path.realpath(root)
        self.contract = contract
        self.modules = {}  # module name -> module, or error record
        self.handles = {}
        self.next_handle = 1  # a stand-in block's child numbers its objects apart (worker/main.py): none is reused
        self.forbidden_hits = []
        package = types.ModuleType(contract.package)
        package.__path__ = [self.root]  # the student's __init__.py is not theirs to write: never run it
        package.__package__ = contract.package
        package.__getattr__ = self.lookup  # what the trusted __init__.py exports: ``from <package> import X``
        sys.modules[contract.package] = package
        self.notebook = None  # the notebook's runner, made by its first cell
        self.stand_ins = StandIns()  # the judge's stand-ins for broken parts, bound now

    # ------------------------------------------------------------ errors

    def _where(self, tb):
        """``file:line`` of the innermost frame of ``tb`` inside the submission."""
        where = None
        for frame, line in traceback.walk_tb(tb):  # no source lines read: only the place is wanted
            path = _real_path(frame.f_code.co_filename)
            if path.startswith(self.root + os.sep):
                where = f"{os.path.basename(path)}:{line}"
        return where

    def error_record(self, error):
        record = {
            "type": type(error).__name__[:100],
            "mro": [cls.__name__[:100] for cls in type(error).__mro__][:20],
            "message": _safe_text(error),
            "where": self._where(error.__traceback__),
        }
        if isinstance(error, ModuleNotFoundError) and isinstance(error.name, str):
            record["missing"] = error.name[:100]  # the module it could not find: the judge names it if it knows it
        if isinstance(error, SyntaxError) and error.filename:
            record["where"] = f"{os.path.basename(error.filename)}:{error.lineno}"
        return record

    def fake_record(self, failure: "FakeFailed") -> dict:
        """The error record of a call that failed on the fake device: the CPU run's error when it raised too
        (``on_cpu_too``: the student meets it on their own machine), else the fake run's, with the device rules'
        own refusal as the ``RuntimeError`` a GPU raises (``mixed_devices``)."""
        if failure.cpu_error is not None:
            return dict(self.error_record(failure.cpu_error), on_cpu_too=True)
        record = dict(self.error_record(failure.error), on_cpu_too=False)
        from .device_rules import DeviceMismatch  # imported already: the fake run used it

        if isinstance(failure.error, DeviceMismatch):
            record.update(type="RuntimeError", mro=[cls.__name__ for cls in RuntimeError.__mro__],
                          mixed_devices=True)
        return record

    # ------------------------------------------------------------ imports

    def import_module(self, name):
        """Import ``<package>.<name>`` once; remember a failure as an error record."""
        if name not in self.modules:
            if not os.path.isfile(os.path.join(self.root, name + ".py")):
                self.modules[name] = {"type": "MissingFile", "mro": ["MissingFile"], "message": f"{name}.py is missing",
                                      "where": None}
            else:
                try:
                    self.modules[name] = importlib.import_module(f"{self.contract.package}.{name}")
                except BaseException as error:  # noqa: BLE001 - SyntaxError, SystemExit, anything
                    sys.modules.pop(f"{self.contract.package}.{name}", None)
                    self.modules[name] = self.error_record(error)
        return self.modules[name]

    def lookup(self, name):
        owner = self.contract.names.get(name)
        if owner is None:
            raise AttributeError(f"{name} is not part of the assignment")
        module = self.import_module(owner)
        if isinstance(module, dict):
            raise ImportFailed(owner, module)
        if not hasattr(module, name):
            raise ImportFailed(owner, {"type": "MissingName", "mro": ["MissingName"],
                                                      "message": f"{name} is not defined", "where": None})
        return getattr(module, name)

    # ------------------------------------------------------------ values

    def _handle_for(self, value):
        handle = self.next_handle
        self.next_handle += 1
        self.handles[handle] = value
        return {"__handle__": handle, "type": type(value).__name__[:100]}

    def _object(self, handle):
        if handle not in self.handles:
            raise LookupError(f"no object #{handle}")
        return self.handles[handle]

    @staticmethod
    def _to_device(value, device):
        if device is None:
            return value
        if isinstance(value, torch.Tensor):
            return value.to(device)
        if isinstance(value, (list, tuple)):
            return type(value)(Session._to_device(item, device) for item in value)
        if isinstance(value, dict):
            return {key: Session._to_device(item, device) for key, item in value.items()}
        return value

    def _arguments(self, message, blobs):
        device = message.get("device")
        args = self._to_device(decode(message.get("args", []), blobs), device)
        kwargs = self._to_device(decode(message.get("kwargs", {"__dict__": []}), blobs), device)
        return args, kwargs

    # ------------------------------------------------------------ operations

    def op_import(self, message, blobs):
        name = message["module"]
        if name not in self.contract.modules:
            raise LookupError(f"{name} is not a module of the assignment")
        module = self.import_module(name)
        if isinstance(module, dict):
            raise ImportFailed(name, module)
        return None

    def op_new(self, message, blobs):
        cls = self.lookup(message["name"])
        args, kwargs = self._arguments(message, blobs)
        return Keep(cls(*args, **kwargs))

    def op_call(self, message, blobs):
        function = self.lookup(message["name"])
        args, kwargs = self._arguments(message, blobs)
        if message.get("fake"):
            return _fake_or_cpu(function, args, kwargs)
        return run_call(function, args, kwargs, message.get("report_changes") is True)

    def op_method(self, message, blobs):
        target = self._object(message["handle"])
        args, kwargs = self._arguments(message, blobs)
        name = message["method"]
        if name not in ("__call__", "forward"):
            raise LookupError(f"method {name} is not callable from the judge")
        if message.get("fake"):
            return _fake_or_cpu(_module(target), args, kwargs)
        if "override" in message:  # the module run with some parameters replaced (the judge's finite differences)
            override = decode(message["override"], blobs)
            return torch.func.functional_call(_module(target), override, tuple(args), kwargs, strict=False)
        return run_call(getattr(target, name), args, kwargs, message.get("report_changes") is True)

    def op_stand_in(self, message, blobs):
        """Bind the judge's stand-ins (``sources``: contract name -> source text) in place of the student's
        objects of those names, after putting back any bound before; an empty ``sources`` only puts them back."""
        sources = message.get("sources")
        if not isinstance(sources, dict) or not all(name in self.contract.names and isinstance(source, str)
                                                    for name, source in sources.items()):
            raise LookupError("stand-ins for names outside the assignment")
        self.stand_ins.install(self.modules, self.lookup, sources)
        return None

    def op_attr(self, message, blobs):
        return getattr(self._object(message["handle"]), message["name"])

    def op_child(self, message, blobs):
        """A submodule (``q_linear``) as a handle of its own, so the judge can run that layer alone."""
        child = getattr(_module(self._object(message["handle"])), str(message["name"]))
        return Keep(_module(child))

    def op_tensors(self, message, blobs):
        """Every parameter and buffer by every name it has (aliases included), as tensors."""
        module = _module(self._object(message["handle"]))
        return {"parameters": {name: p.detach() for name, p in module.named_parameters(remove_duplicate=False)},
                "buffers": {name: b.detach() for name, b in module.named_buffers(remove_duplicate=False)}}

    def op_to(self, message, blobs):
        target = self._object(message["handle"])
        if "dtype" in message:
            target.to(DTYPES[message["dtype"]])
        else:
            target.to(str(message["device"]))
        return None

    def op_grads(self, message, blobs):
        """Forward, then backward of ``sum(output ** 2)``: the output and every parameter's gradient (by every
        name it has), as tensors; the judge computes the gradients it expects itself. An error says which of the
        two raised (``phase``); a forward that returns no tensor gets ``grads: None`` (nothing to differentiate)."""
        module = _module(self._object(message["handle"]))
        args, kwargs = self._arguments(message, blobs)
        module.zero_grad(set_to_none=True)
        with _phase("forward"):
            out = module(*args, **kwargs)
        if isinstance(out, tuple) and out:
            out = out[0]
        if not isinstance(out, torch.Tensor):
            return {"output": out, "grads": None}
        with _phase("backward"):
            out.float().pow(2).sum().backward()  # squared: a plain sum can cancel a softmax's gradient
        grads = {name: None if p.grad is None else p.grad.detach()
                 for name, p in module.named_parameters(remove_duplicate=False)}
        return {"output": out.detach(), "grads": grads}

    # ------------------------------------------------------------ the notebook (see notebook.py)

    def _runner(self):
        if self.notebook is None:
            from .notebook import NotebookRunner

            seed_everything()  # once: the cells draw one sequence, the same in every run
            self.notebook = NotebookRunner()
        return self.notebook

    def op_cell(self, message, blobs):
        return self._runner().run_cell(str(message.get("source", "")), float(message.get("seconds", 10)))

    def op_names(self, message, blobs):
        names = message.get("names")
        return Encoded(self._runner().names(names if isinstance(names, list) else []))

    def op_nbcall(self, message, blobs):
        args, kwargs = self._arguments(message, blobs)
        return self._runner().call(message.get("handle"), args, kwargs)

    def handle_batch(self, message, blobs, reply_blobs):
        """Run a batch's requests in order, each as :meth:`handle` runs it alone; return ``{"batch": [replies],
        "blob_counts": [blobs of each reply]}``.

        The judge sends the calls a check makes before it reads an answer (a table of cases: every case's) ahead
        of its checks (``judge/ahead.py``): one turn between
        judge and worker instead of one a call. Each item comes with its own blobs (``blob_counts``, in order)
        and its reply gets its own, so an item reads and writes blobs as it would alone. An item may name the
        object an earlier item made (``"handle": {"__item__": index}``). Only calls (gradients included) and reads
        of a module's tensors, attributes and layers are batched; every reply is data the judge checks as it
        checks any reply."""
        items, counts = message.get("items"), message.get("blob_counts")
        if (not isinstance(items, list) or len(items) > MAX_BATCH or not isinstance(counts, list)
                or len(counts) != len(items) or not all(type(n) is int and n >= 0 for n in counts)
                or sum(counts) != len(blobs)):
            return {"error": {"type": "BadRequest", "mro": ["BadRequest"], "message": "malformed batch",
                              "where": None}}
        replies, sizes, offset = [], [], 0
        for item, count in zip(items, counts):
            own, offset = blobs[offset : offset + count], offset + count
            written = []
            if not isinstance(item, dict) or item.get("op") not in BATCHED_OPS:
                reply = {"error": {"type": "BadRequest", "mro": ["BadRequest"], "message": "not batched",
                                   "where": None}}
            else:
                handle = item.get("handle")
                if isinstance(handle, dict):  # an earlier item's object
                    index = handle.get("__item__")
                    made = replies[index].get("value") if type(index) is int and 0 <= index < len(replies) else None
                    item = dict(item, handle=made.get("__handle__") if isinstance(made, dict) else None)
                reply = self.handle(item, own, written)
            replies.append(reply)
            sizes.append(len(written))
            reply_blobs.extend(written)
        return {"batch": replies, "blob_counts": sizes}

    def handle(self, message, blobs, reply_blobs):
        """Run one request; return the reply message (values already encoded into ``reply_blobs``)."""
        if message.get("op") == "batch":
            return self.handle_batch(message, blobs, reply_blobs)
        self.forbidden_hits.clear()
        op = getattr(self, "op_" + str(message.get("op")), None)
        if op is None:
            return {"error": {"type": "BadRequest", "mro": ["BadRequest"], "message": "unknown operation",
                              "where": None}}
        try:
            if message.get("op") in SEEDED_OPS:
                seed_everything(request_seed(message))
            value = op(message, blobs)
            if isinstance(value, Keep):
                reply = {"value": self._handle_for(value.value)}
            elif isinstance(value, Encoded):
                reply = {"value": {"__dict__": [[name, described.encode_into(reply_blobs)]
                                                for name, described in value.values.items()]}}
            else:
                reply = {"value": encode(value, reply_blobs)}
        except ImportFailed as failure:
            reply = {"error": dict(failure.record, type="ImportFailed", cause=failure.record["type"],
                                   module=failure.module)}
        except InPhase as failure:
            reply = {"error": dict(self.error_record(failure.error), phase=failure.phase)}
        except FakeFailed as failure:
            reply = {"error": self.fake_record(failure)}
        except BaseException as error:  # noqa: BLE001 - a student's SystemExit is an answer too
            reply = {"error": self.error_record(error)}
        if self.forbidden_hits and message.get("op") not in NOTEBOOK_OPS:  # the notebook may use any library
            reply["forbidden"] = sorted(set(self.forbidden_hits))
        return reply


class Keep:
    """Marks a result that stays in the worker and goes back as a handle."""

    def __init__(self, value):
        self.value = value


class Encoded:
    """Marks ``{name: notebook.Described}``: values the notebook runner has encoded already."""

    def __init__(self, values):
        self.values = values


def run_call(function, args, kwargs, report_changes=False):
    """``function(*args, **kwargs)``; with ``report_changes``, ``{"value": its result, "changed": the names of the
    arguments it changed}`` (see :class:`ArgumentWatch`). Only when asked: the copies cost memory and time."""
    if not report_changes:
        return function(*args, **kwargs)
    watch = ArgumentWatch(args, kwargs)
    value = function(*args, **kwargs)
    return {"value": value, "changed": watch.changed()}


def argument_names(args, kwargs) -> list[str]:
    """How a call's arguments are named in a report of changes: ``arg0``, ``arg1``... by position, then each
    keyword by its name (the judge names them the same way)."""
    return [f"arg{index}" for index in range(len(args))] + list(kwargs)


class ArgumentWatch:
    """A copy of every tensor among a call's arguments (nested in the lists, tuples and dicts they arrived in),
    taken before the call, to tell afterwards which arguments the call changed in place.

    A change is any difference the caller could see in its own tensor: a value (NaN equal to NaN: a NaN sent is
    not a change), or the layout an in-place resize, transpose or restride leaves (shape, stride, offset, dtype,
    device); or a container argument whose tensors are no longer the same objects (one appended or replaced).
    """

    def __init__(self, args, kwargs):
        values = list(args) + list(kwargs.values())
        self.kept = [(name, value, [(tensor, tensor.detach().clone(), _layout(tensor)) for tensor in _tensors(value)])
                     for name, value in zip(argument_names(args, kwargs), values)]

    def changed(self) -> list[str]:
        """The names of the arguments that differ from their copies, in the call's order."""
        return [name for name, value, copies in self.kept if not _unchanged(value, copies)]


def _tensors(value):
    """Every tensor in ``value``, in order, and a final ``None`` where the walk stopped at the protocol's bounds
    (a list a call made contain itself, twice, would take forever): never a tensor, so that argument reads as
    changed. Arguments as decoded are within those bounds."""
    found, stack, steps = [], [iter((value,))], 0
    while stack:
        item = next(stack[-1], stack)  # the stack itself marks an exhausted level: it is in no argument
        if item is stack:
            stack.pop()
            continue
        steps += 1
        if steps > MAX_NODES or len(stack) > MAX_DEPTH + 1:
            found.append(None)
            break
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            stack.append(iter(item))
        elif isinstance(item, dict):
            stack.append(iter(item.values()))
    return found


def _layout(tensor):
    return tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset(), tensor.device


def _unchanged(value, copies):
    now = _tensors(value)
    if len(now) != len(copies) or any(tensor is not kept for tensor, (kept, _, _) in zip(now, copies)):
        return False
    return all(_layout(tensor) == layout and _same_values(copy, tensor) for tensor, copy, layout in copies)


def _same_values(before, after):
    """Exact equality with NaN equal to NaN (``torch.equal`` calls two NaNs different); a meta tensor has no
    values to compare."""
    if after.device.type == "meta":
        return True
    before, after = before.detach(), after.detach()
    return bool(torch.eq(before, after).logical_or_(before.isnan().logical_and_(after.isnan())).all())


def _module(value):
    if not isinstance(value, torch.nn.Module):
        raise TypeError(f"{type(value).__name__[:100]} is not an nn.Module")
    return value


class InPhase(Exception):
    """A student's error raised in one ``phase`` of a gradient request ("forward" or "backward")."""

    def __init__(self, phase, error):
        super().__init__(phase)
        self.phase, self.error = phase, error


@contextlib.contextmanager
def _phase(phase):
    """Tag what the block raises with ``phase`` (an import failure stays what it is: the judge names the file)."""
    try:
        yield
    except ImportFailed:
        raise
    except BaseException as error:  # noqa: BLE001 - a student's SystemExit is an answer too
        raise InPhase(phase, error) from None


class FakeFailed(Exception):
    """A call that raised ``error`` on the fake device; ``cpu_error`` is what the same call raised on the CPU (None:
    it ran there)."""

    def __init__(self, error, cpu_error):
        super().__init__("failed on the fake device")
        self.error, self.cpu_error = error, cpu_error


def _fake_or_cpu(function, args, kwargs):
    """:func:`on_fake_device`; when it raises, the same call again on the CPU (:mod:`.cpu_rerun`), from the same
    random state, so the reply can say whether the device or the code is at fault (:class:`FakeFailed`)."""
    try:
        return on_fake_device(function, args, kwargs)
    except ImportFailed:
        raise
    except BaseException as error:  # noqa: BLE001 - a student's SystemExit is an answer too
        failed = error
    seed_everything()
    on_cpu = rerun_on_cpu(function, args, kwargs)
    if isinstance(on_cpu, ImportFailed):  # a file imported only now: the judge names it, as for any call
        raise on_cpu
    raise FakeFailed(failed, on_cpu)


def on_fake_device(function, args, kwargs):
    """Run ``function`` (or a module's forward, with its parameters and buffers moved) on the simulated GPU.

    Every tensor the judge sends for the call goes onto the simulated GPU (:mod:`.simulated_gpu`: real values on
    the CPU, said to live on the ``meta`` device, under the GPU's device rules); a meta tensor without values
    arrives as zeros (a mask: all True). A module is called with GPU copies of its registered parameters and
    buffers, as ``module.to(device)`` would move them; plain tensor attributes stay on the CPU, as they would on a
    GPU. The submission's value-dependent code (``if mask.any()``, ``.item()``) runs as it would on a GPU.

    Returns ``{"value": the result with each tensor as a plain meta tensor, "devices": each tensor's device
    type, in order}`` (``meta`` for the simulated GPU's).
    """
    from .cpu_rerun import real_twin
    from .simulated_gpu import on_gpu, simulated_gpu

    args, kwargs = on_gpu(real_twin(args)), on_gpu(real_twin(kwargs))
    if isinstance(function, torch.nn.Module):
        state = {name: on_gpu(tensor)
                 for name, tensor in itertools.chain(function.named_parameters(), function.named_buffers())}
    with simulated_gpu():
        if isinstance(function, torch.nn.Module):
            out = torch.func.functional_call(function, state, tuple(args), kwargs, strict=False)
        else:
            out = function(*args, **kwargs)
    devices = []
    return {"value": _as_meta(out, devices), "devices": devices}


def _as_meta(value, devices):
    """``value`` with every tensor replaced by a plain meta tensor of its shape and dtype (its device noted)."""
    if isinstance(value, torch.Tensor):
        devices.append(value.device.type)
        return torch.empty(tuple(value.shape), dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        items = [_as_meta(item, devices) for item in value]
        if hasattr(value, "_fields"):  # a named tuple: its fields by position
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        return {key: _as_meta(item, devices) for key, item in value.items()}
    return value


class ImportFailed(Exception):
    def __init__(self, module, record):
        super().__init__(record.get("message"))
        self.module, self.record = module, record


def install_tripwires(session):
    """Record every call to the library code the assignment asks students to write themselves (the contract's
    ``forbidden`` paths: a function is wrapped where it lives, a class at construction and at ``forward``, and a
    function that is a dispatcher operator at the dispatcher, whatever name it is called by)."""
    watch_operators(session.contract.forbidden)  # done once by the zygote, whose workers inherit it
    record_into(session.forbidden_hits.append)
    keep_compiled_attention_unfused()

    def wrap(owner, name, label):
        original = getattr(owner, name, None)
        if original is None:
            return

        def tripwire(*args, **kwargs):
            session.forbidden_hits.append(label)
            return original(*args, **kwargs)

        setattr(owner, name, tripwire)

    for path in session.contract.forbidden:
        owner, target = resolve_path(path)
        if target is None:
            continue  # not in this library version: nothing to call
        if isinstance(target, type):
            wrap(target, "__init__", path)
            wrap(target, "forward", path)
        else:
            for module, attribute in copies(path):  # the same function kept elsewhere (torch._C._nn): watched too
                wrap(module, attribute, path)
            wrap(owner, path.rsplit(".", 1)[-1], path)


def install_import_guard(contract: Contract) -> None:
    """Refuse a student file's import of a top-level module that is not the standard library, the student's own
    package or one of the assignment's ``packages``: the grader promises those alone, so a package this machine
    happens to have fails here as it fails wherever it is missing (the judge's static scan names it in the
    feedback). A contract that lists no packages declares nothing, and nothing is refused."""
    if not contract.packages:
        return
    allowed = set(sys.stdlib_module_names) | set(contract.packages) | {contract.package}
    prefix, original = contract.package + ".", builtins.__import__

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and isinstance(globals, dict) and str(globals.get("__name__", "")).startswith(prefix):
            top = str(name).partition(".")[0]
            if top not in allowed:
                raise ModuleNotFoundError(f"No module named {top!r}: the grader installs only "
                                          f"{', '.join(contract.packages)}", name=top)
        return original(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded
