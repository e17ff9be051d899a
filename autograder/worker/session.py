"""What the worker does for the judge: import the student's files one by one and run calls on them.

Every request is answered with data. Objects that must stay in this process
(module instances) are kept in a table and named by handle. A student's
exception becomes an ``error`` record (type names, message, file and line in
the student's code); it never reaches the judge as an object.
"""

import importlib
import os
import sys
import time
import traceback
import types

import torch

from . import contract
from .protocol import DTYPES, decode, encode

MESSAGE_LIMIT = 400
NOTEBOOK_OPS = ("cell", "names", "nbcall")


def _safe_text(value, limit=MESSAGE_LIMIT):
    """``str(value)`` cut to ``limit`` characters; a student's broken ``__str__`` cannot stop the reply."""
    try:
        text = str(value)
    except BaseException:  # noqa: BLE001 - the student's __str__ may raise anything
        text = "<message could not be shown>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Session:
    """One submission, imported lazily from ``root`` (a folder holding the student's ``.py`` files)."""

    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.modules = {}  # module name -> module, or error record
        self.handles = {}
        self.forbidden_hits = []
        package = types.ModuleType(contract.PACKAGE)
        package.__path__ = [self.root]  # the student's __init__.py is not theirs to write: never run it
        package.__package__ = contract.PACKAGE
        package.__getattr__ = self.lookup  # what the trusted __init__.py exports: ``from mha_pe import X``
        sys.modules[contract.PACKAGE] = package
        self.notebook = None  # the notebook's runner, made by its first cell

    # ------------------------------------------------------------ errors

    def _where(self, tb):
        """``file:line`` of the innermost frame of ``tb`` inside the submission."""
        where = None
        for frame in traceback.extract_tb(tb):
            path = os.path.realpath(frame.filename)
            if path.startswith(self.root + os.sep):
                where = f"{os.path.basename(path)}:{frame.lineno}"
        return where

    def error_record(self, error):
        record = {
            "type": type(error).__name__[:100],
            "mro": [cls.__name__[:100] for cls in type(error).__mro__][:20],
            "message": _safe_text(error),
            "where": self._where(error.__traceback__),
        }
        if isinstance(error, SyntaxError) and error.filename:
            record["where"] = f"{os.path.basename(error.filename)}:{error.lineno}"
        return record

    # ------------------------------------------------------------ imports

    def import_module(self, name):
        """Import ``mha_pe.<name>`` once; remember a failure as an error record."""
        if name not in self.modules:
            if not os.path.isfile(os.path.join(self.root, name + ".py")):
                self.modules[name] = {"type": "MissingFile", "mro": ["MissingFile"], "message": f"{name}.py is missing",
                                      "where": None}
            else:
                try:
                    self.modules[name] = importlib.import_module(f"{contract.PACKAGE}.{name}")
                except BaseException as error:  # noqa: BLE001 - SyntaxError, SystemExit, anything
                    sys.modules.pop(f"{contract.PACKAGE}.{name}", None)
                    self.modules[name] = self.error_record(error)
        return self.modules[name]

    def lookup(self, name):
        if name not in contract.NAMES:
            raise AttributeError(f"{name} is not part of the assignment")
        module = self.import_module(contract.NAMES[name])
        if isinstance(module, dict):
            raise ImportFailed(contract.NAMES[name], module)
        if not hasattr(module, name):
            raise ImportFailed(contract.NAMES[name], {"type": "MissingName", "mro": ["MissingName"],
                                                      "message": f"{name} is not defined", "where": None})
        return getattr(module, name)

    # ------------------------------------------------------------ values

    def _handle_for(self, value):
        handle = len(self.handles) + 1
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
        if name not in contract.MODULES:
            raise LookupError(f"{name} is not a module of the assignment")
        module = self.import_module(name)
        if isinstance(module, dict):
            raise ImportFailed(name, module)
        return None

    def op_call(self, message, blobs):
        function = self.lookup(message["name"])
        args, kwargs = self._arguments(message, blobs)
        return function(*args, **kwargs)

    def op_new(self, message, blobs):
        cls = self.lookup(message["name"])
        args, kwargs = self._arguments(message, blobs)
        return Keep(cls(*args, **kwargs))

    def op_method(self, message, blobs):
        target = self._object(message["handle"])
        args, kwargs = self._arguments(message, blobs)
        name = message["method"]
        if name not in ("__call__", "forward"):
            raise LookupError(f"method {name} is not callable from the judge")
        return getattr(target, name)(*args, **kwargs)

    def op_attr(self, message, blobs):
        return getattr(self._object(message["handle"]), message["name"])

    def op_describe(self, message, blobs):
        module = self._object(message["handle"])
        if not isinstance(module, torch.nn.Module):
            return {"is_module": False}
        children = {}
        for name, child in module.named_children():
            children[name] = {
                "type": type(child).__name__,
                "linear": isinstance(child, torch.nn.Linear),
                "in_features": getattr(child, "in_features", None),
                "out_features": getattr(child, "out_features", None),
                "bias": getattr(child, "bias", None) is not None,
            }
        return {
            "is_module": True,
            "parameters": [[name, list(p.shape), bool(p.requires_grad)] for name, p in module.named_parameters()],
            "buffers": [[name, list(b.shape), str(b.dtype).replace("torch.", ""), b.device.type]
                        for name, b in module.named_buffers()],
            "state_keys": list(module.state_dict().keys()),
            "children": children,
        }

    def op_state_dict(self, message, blobs):
        return dict(self._object(message["handle"]).state_dict())

    def op_load_state_dict(self, message, blobs):
        state = decode(message["state"], blobs)
        self._object(message["handle"]).load_state_dict(state, strict=True)
        return None

    def op_to(self, message, blobs):
        target = self._object(message["handle"])
        if "dtype" in message:
            target.to(DTYPES[message["dtype"]])
        else:
            target.to(str(message["device"]))
        return None

    def op_grads(self, message, blobs):
        module = self._object(message["handle"])
        args, kwargs = self._arguments(message, blobs)
        module.zero_grad(set_to_none=True)
        out = module(*args, **kwargs)
        if isinstance(out, tuple):
            out = out[0]
        out.float().pow(2).sum().backward()  # squared: a plain sum can cancel a softmax's gradient
        return {name: None if p.grad is None else float(p.grad.abs().sum()) for name, p in module.named_parameters()}

    def op_time(self, message, blobs):
        """Best-of timings of a call and of a same-sized elementwise sin/cos (the machine's yardstick)."""
        function = self.lookup(message["name"])
        args, kwargs = self._arguments(message, blobs)
        numel = int(message["numel"])
        budget = float(message.get("budget", 2.0))
        probe = torch.rand(numel)
        best_call = best_probe = float("inf")
        started = time.perf_counter()
        for _ in range(int(message.get("repeats", 3))):
            t0 = time.perf_counter()
            function(*args, **kwargs)
            best_call = min(best_call, time.perf_counter() - t0)
            for _ in range(5):
                t1 = time.perf_counter()
                torch.stack((probe.sin(), probe.cos()), dim=-1)
                best_probe = min(best_probe, time.perf_counter() - t1)
            if time.perf_counter() - started > budget:
                break
        return {"call": best_call, "probe": best_probe}

    # ------------------------------------------------------------ the notebook (see notebook.py)

    def _runner(self):
        if self.notebook is None:
            from .notebook import NotebookRunner

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

    def handle(self, message, blobs, reply_blobs):
        """Run one request; return the reply message (values already encoded into ``reply_blobs``)."""
        self.forbidden_hits.clear()
        op = getattr(self, "op_" + str(message.get("op")), None)
        if op is None:
            return {"error": {"type": "BadRequest", "mro": ["BadRequest"], "message": "unknown operation",
                              "where": None}}
        try:
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


class ImportFailed(Exception):
    def __init__(self, module, record):
        super().__init__(record.get("message"))
        self.module, self.record = module, record


def install_tripwires(session):
    """Record every call to the library code the assignment asks students to write themselves."""

    def wrap(owner, name, label):
        original = getattr(owner, name, None)
        if original is None:
            return

        def tripwire(*args, **kwargs):
            session.forbidden_hits.append(label)
            return original(*args, **kwargs)

        setattr(owner, name, tripwire)

    functional = torch.nn.functional
    wrap(functional, "scaled_dot_product_attention", contract.FORBIDDEN["scaled_dot_product_attention"])
    wrap(functional, "multi_head_attention_forward", contract.FORBIDDEN["multi_head_attention_forward"])
    wrap(torch, "_native_multi_head_attention", contract.FORBIDDEN["_native_multi_head_attention"])
    wrap(torch.nn.MultiheadAttention, "__init__", contract.FORBIDDEN["MultiheadAttention"])
    wrap(torch.nn.MultiheadAttention, "forward", contract.FORBIDDEN["MultiheadAttention"])
