"""Messages between judge and worker: JSON plus raw tensor bytes, never pickles.

A frame is ``<u32 json length><u32 blob length><json><blob>``. Values are
JSON trees in which a few tagged objects stand for what JSON lacks::

    {"__tensor__": i, "dtype": "float32", "shape": [2, 3], "device": "cpu"}  bytes at blob slot i
    {"__tuple__": [...]}   {"__dict__": [[key, value], ...]}   {"__float__": "nan"}
    {"__handle__": 7, "type": "SomeModule"}          an object kept in the worker
    {"__unsupported__": "SomeClass"}                 anything else a student returned

Decoding accepts nothing else, maps dtype names through a fixed table and
builds tensors from a copy of their bytes (through numpy, or
``torch.frombuffer``): a hostile worker can send wrong numbers, but never code. It is bounded before anything is built: the frame's
sizes are checked against the reader's caps before its bytes are read, the
tree's depth and size are capped, and each blob backs at most one tensor (so
a reply cannot make the judge hold more tensor bytes than it sent).
"""

import functools
import json
import math
import os
import re
import select
import struct
import sys
import time

# orjson writes a frame's JSON ten times faster than json and reads it twice as fast. Pinned, and required: both
# sides write alike on every machine, so a frame's size against MAX_JSON is the same everywhere.
import orjson

from .text import valid_tree

HEADER = struct.Struct("<II")
# Set by :func:`receive` on a message whose text it had to make valid (never the sender's: one it sent is dropped).
REPLACED_TEXT = "__replaced_text__"
MAX_JSON = 16 << 20
MAX_BLOB = 1 << 30
MAX_DEPTH = 32  # nesting of a decoded value (the contract's values are a few levels deep)
MAX_NODES = 100_000  # items in one decoded value

DTYPE_LIST = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
              "complex64", "complex128")
DEVICES = {"cpu", "meta", "cuda"}


def __getattr__(name):
    """``DTYPES`` (name -> torch dtype) and ``DTYPE_NAMES`` (the reverse), built at first use: torch is imported
    only once a tensor or a dtype is met, so whoever only passes messages (the judge starting its sandboxes, the
    zygote's control channel) starts without it."""
    if name == "DTYPES":
        return _dtypes()
    if name == "DTYPE_NAMES":
        return _names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


class ChannelClosed(ProtocolError):
    """The other side closed its end (for the judge: the worker died)."""


class ChannelTimeout(ProtocolError):
    """No complete message arrived before the deadline."""


# ---------------------------------------------------------------- values

def encode(value, blobs, handles=None):
    """JSON-ready form of ``value``; tensor bytes are appended to ``blobs``.

    ``handles`` (worker side) turns objects that are not data into handles; without it they
    become ``{"__unsupported__": type name}``.
    """
    kind = type(value)  # the exact types of most values first: each isinstance below costs every value it skips
    if kind is str or kind is bool or value is None:
        return value
    if kind is list:
        return [encode(item, blobs, handles) for item in value]
    torch = sys.modules.get("torch")  # without torch imported, nothing here is a tensor or a dtype
    if torch is not None and kind is torch.Tensor:
        return _encode_tensor(value, blobs)
    if isinstance(value, str):
        return str.__str__(value)  # a subclass's text as plain str: a message holds builtins only (ahead.key_of)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {"__float__": repr(float(value))}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(item, blobs, handles) for item in value]}
    if isinstance(value, list):
        return [encode(item, blobs, handles) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {"__dict__": [[key, encode(item, blobs, handles)] for key, item in value.items()]}
    if torch is not None and isinstance(value, torch.Tensor):
        return _encode_tensor(value, blobs)
    if torch is not None and isinstance(value, torch.dtype) and value in _names():
        return {"__dtype__": _names()[value]}
    if handles is not None:
        return handles(value)
    return {"__unsupported__": type(value).__name__[:100]}


@functools.cache
def _torch():
    """torch, imported at its first use here (an import statement per tensor costs a call through any import hook)."""
    import torch

    return torch


@functools.cache
def _dtypes():
    import torch

    return {name: getattr(torch, name) for name in DTYPE_LIST}


@functools.cache
def _names():
    return {dtype: name for name, dtype in _dtypes().items()}


def _numpy_array(data, dtype):
    """``data`` (a bytearray) as a flat numpy array of the torch ``dtype`` (one of :func:`_numpy_dtypes`)."""
    return _numpy_of()[0].frombuffer(data, dtype=_numpy_of()[1][dtype])


@functools.cache
def _numpy_of():
    """``(numpy, {torch dtype: numpy dtype})`` for :func:`_numpy_dtypes`, imported at first use."""
    import numpy

    return numpy, {dtype: numpy.dtype(name) for dtype, name in _numpy_dtypes().items()}


@functools.cache
def _numpy_dtypes():
    """The dtypes whose bytes numpy reads as torch holds them, by name (not bfloat16, which numpy lacks, nor
    complex, whose conjugate views keep a flag numpy refuses)."""
    torch = _torch()
    return {dtype: name for dtype, name in _names().items() if not (dtype.is_complex or dtype == torch.bfloat16)}


def _encode_tensor(tensor, blobs):
    torch = _torch()
    if type(tensor) is torch.Tensor and tensor.is_cpu and tensor.layout is torch.strided and not tensor.is_neg():
        # The common case in a third of the time: numpy copies a plain CPU tensor's values in C order whatever its
        # strides, the bytes the general path below sends.
        name = _numpy_dtypes().get(tensor.dtype)
        if name is not None:
            spec = {"__tensor__": len(blobs), "dtype": name, "shape": list(tensor.shape), "device": "cpu"}
            blobs.append(tensor.detach().numpy().tobytes())
            return spec
    # A subclass travels as plain data: its __torch_function__ gets no say in how it is read.
    with torch._C.DisableTorchFunctionSubclass():
        tensor = torch.Tensor.as_subclass(torch.Tensor.detach(tensor), torch.Tensor)
    name = _names().get(tensor.dtype)
    if name is None:
        return {"__unsupported__": f"tensor of dtype {tensor.dtype}"}
    device = tensor.device.type
    spec = {"__tensor__": len(blobs), "dtype": name, "shape": list(tensor.shape), "device": device}
    if device == "meta":
        spec["__tensor__"] = -1
        return spec
    flat = tensor.to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1)  # a view's lazy sign, applied
    blobs.append(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return spec


def decode(node, blobs):
    """Inverse of :func:`encode`; raises ProtocolError for anything not made by it (or too deep, too big, or
    using a blob twice)."""
    return _Decoder(blobs).decode(node, 0)


class _Decoder:
    def __init__(self, blobs):
        self.blobs, self.used, self.nodes = blobs, set(), 0

    def decode(self, node, depth):
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES:
            raise ProtocolError("a value nested too deeply or too large")
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(item, depth + 1) for item in node]
        if not isinstance(node, dict) or not node:
            raise ProtocolError("unexpected value")
        if "__tensor__" in node:
            return self.tensor(node)
        if len(node) == 1:
            (tag, body), = node.items()
            if tag == "__tuple__" and isinstance(body, list):
                return tuple(self.decode(item, depth + 1) for item in body)
            if tag == "__dict__" and isinstance(body, list):
                if not all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in body):
                    raise ProtocolError("malformed dict")
                return {key: self.decode(item, depth + 1) for key, item in body}
            if tag == "__float__" and body in ("nan", "inf", "-inf"):
                return float(body)
            if tag == "__dtype__" and body in DTYPE_LIST:
                return _dtypes()[body]
            if tag == "__unsupported__" and isinstance(body, str):
                return Unsupported(body[:100])
        if set(node) == {"__handle__", "type"} and _is_int(node["__handle__"]) and isinstance(node["type"], str):
            return Handle(node["__handle__"], node["type"][:100])
        raise ProtocolError("unexpected object")

    def tensor(self, node):
        torch = _torch()
        dtype = _dtypes().get(node.get("dtype")) if isinstance(node.get("dtype"), str) else None
        shape = node.get("shape")
        device = node.get("device")
        if dtype is None or device not in DEVICES or not isinstance(shape, list) or len(shape) > 16:
            raise ProtocolError("malformed tensor description")
        if not all(_is_int(size) and 0 <= size < 1 << 40 for size in shape):
            raise ProtocolError("malformed tensor shape")
        if device == "meta":
            if math.prod(shape) > 1 << 40:
                raise ProtocolError("malformed tensor shape")
            return torch.empty(shape, dtype=dtype, device="meta")
        index = node["__tensor__"]
        if not _is_int(index) or not 0 <= index < len(self.blobs):
            raise ProtocolError("tensor refers to a missing blob")
        if index in self.used:
            raise ProtocolError("a blob used twice")
        self.used.add(index)
        data = self.blobs[index]
        numel = math.prod(shape)
        if len(data) != numel * dtype.itemsize:
            raise ProtocolError("tensor bytes do not match its shape")
        if numel == 0:
            tensor = torch.empty(shape, dtype=dtype)
        elif dtype in _numpy_dtypes():  # numpy's reshape costs a tenth of torch's
            tensor = torch.from_numpy(_numpy_array(bytearray(data), dtype).reshape(shape))
        else:
            tensor = torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
        if device != "cpu":
            tensor.source_device = device  # a CPU copy of a tensor that lived on the GPU
        return tensor


def _is_int(value):
    """A JSON integer (``True`` is an int to Python, not to the protocol)."""
    return isinstance(value, int) and not isinstance(value, bool)


def device_of(tensor):
    """Where a decoded tensor lived in the worker: ``"cpu"``, ``"cuda"`` or ``"meta"``."""
    return getattr(tensor, "source_device", tensor.device.type)


class Handle:
    """An object that lives in the worker, known to the judge only by number."""

    __slots__ = ("id", "type")

    def __init__(self, id, type):
        self.id, self.type = id, type

    def __repr__(self):
        return f"<remote {self.type} #{self.id}>"


class Unsupported:
    """A value the worker could not send as data (its type name only)."""

    __slots__ = ("type",)

    def __init__(self, type):
        self.type = type

    def __repr__(self):
        return f"<unsupported {self.type}>"


# ---------------------------------------------------------------- frames

def send(fd, message, blobs=(), deadline=None):
    """Write one frame: the JSON ``message`` and the byte strings ``blobs``.

    With a ``deadline`` (monotonic time) ``fd`` must be non-blocking: a reader that stops reading cannot hold
    the writer past it (ChannelTimeout).
    """
    sizes = [len(blob) for blob in blobs]
    body = _dumps(dict(message, blob_sizes=sizes))
    data = HEADER.pack(len(body), sum(sizes)) + body + b"".join(blobs)
    view = memoryview(data)
    while view:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise ChannelTimeout("the other side stopped reading")
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        except BrokenPipeError:
            raise ChannelClosed("the other side closed the channel") from None
        view = view[written:]


def _dumps(message):
    """``message`` as compact JSON bytes: orjson's, or json's where orjson refuses (a key that is not text, text
    with a lone surrogate, an integer beyond 64 bits), so a frame holds the values json would write. The bytes
    differ (orjson writes text as UTF-8, not escaped), so :data:`MAX_JSON` counts what this writes. (orjson writes a
    NaN as null where json refuses it; no frame holds one: :func:`encode` tags every non-finite float, and the
    other fields are integers, text and flags.)"""
    try:
        return orjson.dumps(message)
    except TypeError:
        return json.dumps(message, allow_nan=False, separators=(",", ":")).encode()


# A run of 19 digits: an integer orjson might read as a float (beyond 64 bits), or a number json reads alike anyway.
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def _loads(data):
    """``(value, replaced)``: the value of the JSON bytes ``data``, as json reads it, with its text made valid
    (:func:`~.text.valid_tree`: a lone surrogate, escaped or as raw bytes, becomes U+FFFD; ``replaced`` says one
    did). orjson where it reads the same (twice as fast; it refuses lone surrogates, so what it reads is valid
    text already), json where it might not (a long run of digits) or refuses (NaN, lone surrogates, a byte-order
    mark, nesting over 1023 deep). One difference: json's own limit on nesting is Python's recursion limit less
    the stack in use (about 990 here), orjson's a fixed 1023, so a frame nested 990-1023 deep is read (one that
    also holds a lone surrogate is too deep to walk: malformed); every field is checked for its type where it is
    used, and :func:`decode` refuses values nested over :data:`MAX_DEPTH`."""
    if not _LONG_NUMBER.search(data):
        try:
            return orjson.loads(data), False
        except orjson.JSONDecodeError:
            pass
    return valid_tree(json.loads(data))


def _read_exactly(fd, size, deadline, eager=False):
    """``size`` bytes from ``fd``, read in place (a table of megabytes is copied once, not twice). With a
    ``deadline``, each read waits for data until then; ``eager`` (``fd`` is non-blocking) reads first and waits
    only when nothing is there yet: a frame written at once is read without a wait per part."""
    data = bytearray(size)
    view, done = memoryview(data), 0
    while done < size:
        if deadline is not None and not eager:
            _wait_readable(fd, deadline)
        try:
            count = os.readv(fd, [view[done:]])
        except BlockingIOError:
            _wait_readable(fd, deadline)
            continue
        if not count:
            raise ChannelClosed("the other side closed the channel")
        done += count
    return data


def _wait_readable(fd, deadline):
    left = None if deadline is None else deadline - time.monotonic()
    if (left is not None and left <= 0) or not select.select([fd], [], [], left)[0]:
        raise ChannelTimeout("no reply in time")


def receive(fd, deadline=None, max_json=MAX_JSON, max_blob=MAX_BLOB):
    """Read one frame; return ``(message dict, list of blobs)``. ``deadline`` is a monotonic time; a frame whose
    header announces more than ``max_json`` bytes of JSON or ``max_blob`` bytes of blobs is refused before any of
    it is read. Every text in the message is valid (``message[REPLACED_TEXT]`` is True where some was not)."""
    eager = deadline is not None and not os.get_blocking(fd)
    json_size, blob_size = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline, eager))
    if json_size > max_json or blob_size > max_blob:
        raise ProtocolError("message too large")
    try:
        message, replaced = _loads(_read_exactly(fd, json_size, deadline, eager))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ProtocolError("malformed message") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    message.pop(REPLACED_TEXT, None)
    if replaced:  # the reader's to say (the judge notes it in the student's record)
        message[REPLACED_TEXT] = True
    sizes = message.pop("blob_sizes", [])
    if (not isinstance(sizes, list) or len(sizes) > MAX_NODES
            or not all(_is_int(n) and n >= 0 for n in sizes) or sum(sizes) != blob_size):
        raise ProtocolError("blob sizes do not add up")
    data = memoryview(_read_exactly(fd, blob_size, deadline, eager) if blob_size else b"")
    blobs, offset = [], 0
    for size in sizes:
        blobs.append(data[offset : offset + size])  # a view: each tensor copies its own bytes once, on decoding
        offset += size
    return message, blobs
