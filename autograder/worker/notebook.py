"""A student's notebook run in the worker: its code cells in order, in one fresh namespace.

The judge parses the notebook (trusted) and sends only cell sources, one
request per cell; the checks never run here (see ``autograder/notebook/stage.py``).
A cell gets IPython's input transformations (``%magic``, ``!cmd``, ``x?``),
a CPU time limit (``ITIMER_PROF``: a busy machine does not shorten it; the judge's limits back it up), and its
printed output and last expression's ``repr`` are captured with a cap, for the
instructor's view only. The judge then asks for names, which go back as data
(a module or a function as a handle, anything else not data as its type name),
and calls the notebook's functions with data.
"""

import ast
import io
import signal
import sys
import types

from .protocol import encode

OUTPUT_CAP = 16 << 10  # characters of output kept per cell
TEXT_CAP = 2000
VALUE_CAP = 48 << 20  # bytes of one name's value (JSON and tensors), checked before it is sent


class CellTimedOut(BaseException):
    """Raised in a cell that ran past its time limit (a BaseException, so ``except Exception`` cannot swallow it)."""


class _Capped(io.TextIOBase):
    """A text stream that keeps the first ``cap`` characters and counts the rest."""

    def __init__(self, cap=OUTPUT_CAP):
        self.parts, self.kept, self.dropped, self.cap = [], 0, 0, cap

    def writable(self):
        return True

    def write(self, text):
        text = str(text)
        room = self.cap - self.kept
        self.parts.append(text[:room])
        self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - room)
        return len(text)

    def text(self):
        return "".join(self.parts) + (f"\n[... {self.dropped} more characters not kept]" if self.dropped else "")


def _bounded(text, limit=TEXT_CAP):
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _safe_repr(value):
    try:
        return _bounded(repr(value))
    except BaseException:  # noqa: BLE001 - a student's __repr__ may raise anything
        return "<the value could not be shown>"


class NotebookRunner:
    """The namespace of one notebook and the three things the judge may ask of it."""

    def __init__(self):
        self.namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        self.namespace["get_ipython"] = self._ipython
        self.transformer = None
        self.shell = None
        self.handles = {}

    # ------------------------------------------------------------ IPython, as the notebook expects it

    def _transform(self, source):
        if self.transformer is None:
            from IPython.core.inputtransformer2 import TransformerManager  # imported by the zygote already

            self.transformer = TransformerManager()
        return self.transformer.transform_cell(source)

    def _ipython(self):
        """A real InteractiveShell over this namespace, made on first use (magics, ``!cmd``)."""
        if self.shell is None:
            from IPython.core.interactiveshell import InteractiveShell
            from traitlets.config import Config

            config = Config()
            config.HistoryManager.enabled = False
            self.shell = InteractiveShell.instance(config=config, user_ns=self.namespace)
        return self.shell

    # ------------------------------------------------------------ operations

    def run_cell(self, source, seconds):
        """Run one cell; return ``{"outputs": [...], "error": record or None}`` (outputs as nbformat's)."""
        stdout, stderr = _Capped(), _Capped()
        result, error = None, None
        saved = sys.stdout, sys.stderr
        previous = signal.signal(signal.SIGPROF, _time_up)
        sys.stdout, sys.stderr = stdout, stderr
        try:
            signal.setitimer(signal.ITIMER_PROF, max(float(seconds), 0.001))
            tree = ast.parse(self._transform(str(source)), "<cell>", "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr) and not str(source).rstrip().endswith(";"):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "<cell>", "exec"), self.namespace)
            if last is not None:
                value = eval(compile(last, "<cell>", "eval"), self.namespace)
                if value is not None:
                    result = _safe_repr(value)
        except BaseException as failure:  # noqa: BLE001 - the cell's error is its output, as in Jupyter
            error = _error_record(failure)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)
            sys.stdout, sys.stderr = saved
        outputs = [{"output_type": "stream", "name": name, "text": stream.text()}
                   for name, stream in (("stdout", stdout), ("stderr", stderr)) if stream.kept or stream.dropped]
        if result is not None:
            outputs.append({"output_type": "execute_result", "text": result})
        return {"outputs": outputs, "error": error}

    def names(self, wanted):
        """``{name: value}`` for the names defined in the notebook; each value as data, or a handle (a module by
        name, a function to call), or unsupported."""
        values = {}
        for name in list(wanted)[:200]:
            if isinstance(name, str) and name in self.namespace:
                values[name] = self._describe(self.namespace[name])
        return values

    def call(self, handle, args, kwargs):
        function = self.handles.get(handle)
        if function is None:
            raise LookupError(f"no function #{handle}")
        return function(*args, **kwargs)

    # ------------------------------------------------------------ values

    def _describe(self, value):
        if isinstance(value, types.ModuleType):
            return Described(("module " + str(getattr(value, "__name__", "?")))[:100])
        if callable(value) and not _is_data(value):
            self.handles[len(self.handles) + 1] = value
            return Described("function", len(self.handles))
        blobs = []
        try:
            node = encode(value, blobs)
        except BaseException:  # noqa: BLE001 - a hostile value's methods may raise anything
            return Described("unsupported", why="value that could not be read")
        if sum(map(len, blobs)) + len(str(node)) > VALUE_CAP:
            return Described("unsupported", why="value too large")
        return Described("data", node=node, blobs=blobs)


def _is_data(value):
    import torch

    return isinstance(value, (torch.Tensor, int, float, str, bytes, list, tuple, dict, type(None)))


class Described:
    """A name's value, already encoded: data (a JSON tree and its blobs), a handle, or unsupported."""

    def __init__(self, kind, handle=0, node=None, blobs=(), why=""):
        self.kind, self.handle, self.node, self.blobs, self.why = kind, handle, node, list(blobs), why

    def encode_into(self, blobs):
        """The JSON node of this value, its tensor bytes appended to ``blobs`` (blob numbers shifted to match)."""
        if self.kind == "data":
            node = _shift(self.node, len(blobs))
            blobs.extend(self.blobs)
            return node
        if self.kind == "unsupported":
            return {"__unsupported__": self.why}
        return {"__handle__": self.handle, "type": self.kind}


def _shift(node, offset):
    if isinstance(node, list):
        return [_shift(item, offset) for item in node]
    if isinstance(node, dict):
        if "__tensor__" in node and node["__tensor__"] >= 0:
            return dict(node, __tensor__=node["__tensor__"] + offset)
        return {key: _shift(item, offset) for key, item in node.items()}
    return node


def _time_up(signum, frame):
    raise CellTimedOut("the cell ran past its time limit")


def _error_record(error):
    """A cell's exception as nbformat's error output: names, message and the line in the cell (bounded)."""
    line = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<cell>":
            line = tb.tb_lineno
        tb = tb.tb_next
    if isinstance(error, SyntaxError) and error.filename == "<cell>":
        line = error.lineno
    try:
        message = _bounded(str(error))
    except BaseException:  # noqa: BLE001
        message = "<message could not be shown>"
    return {"ename": type(error).__name__[:100], "evalue": message, "line": line}
