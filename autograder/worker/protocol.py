"""Messages between judge and worker: JSON plus raw tensor bytes, never pickles.

A frame is ``<u32 json length><u32 blob length><json><blob>``. Values are
JSON trees in which a few tagged objects stand for what JSON lacks::

    {"__tensor__": i, "dtype": "float32", "shape": [2, 3], "device": "cpu"}  bytes at blob slot i
    {"__tuple__": [...]}   {"__dict__": [[key, value], ...]}   {"__float__": "nan"}
    {"__handle__": 7, "type": "MultiHeadAttention"}   an object kept in the worker
    {"__unsupported__": "SomeClass"}                 anything else a student returned

Decoding accepts nothing else, maps dtype names through a fixed table and
builds tensors with ``torch.frombuffer``: a hostile worker can send wrong
numbers, but never code.
"""

import json
import math
import os
import select
import struct
import time

import torch

HEADER = struct.Struct("<II")
MAX_JSON = 16 << 20
MAX_BLOB = 1 << 30

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool, "complex64": torch.complex64, "complex128": torch.complex128,
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
DEVICES = {"cpu", "meta", "cuda"}


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
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {"__float__": repr(float(value))}
    if isinstance(value, torch.Tensor):
        return _encode_tensor(value, blobs)
    if isinstance(value, tuple):
        return {"__tuple__": [encode(item, blobs, handles) for item in value]}
    if isinstance(value, list):
        return [encode(item, blobs, handles) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {"__dict__": [[key, encode(item, blobs, handles)] for key, item in value.items()]}
    if isinstance(value, torch.dtype) and value in DTYPE_NAMES:
        return {"__dtype__": DTYPE_NAMES[value]}
    if handles is not None:
        return handles(value)
    return {"__unsupported__": type(value).__name__[:100]}


def _encode_tensor(tensor, blobs):
    # A subclass travels as plain data: its __torch_function__ gets no say in how it is read.
    with torch._C.DisableTorchFunctionSubclass():
        tensor = torch.Tensor.as_subclass(torch.Tensor.detach(tensor), torch.Tensor)
    name = DTYPE_NAMES.get(tensor.dtype)
    if name is None:
        return {"__unsupported__": f"tensor of dtype {tensor.dtype}"}
    device = tensor.device.type
    spec = {"__tensor__": len(blobs), "dtype": name, "shape": list(tensor.shape), "device": device}
    if device == "meta":
        spec["__tensor__"] = -1
        return spec
    flat = tensor.to("cpu").contiguous().reshape(-1)
    blobs.append(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return spec


def decode(node, blobs):
    """Inverse of :func:`encode`; raises ProtocolError for anything not made by it."""
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [decode(item, blobs) for item in node]
    if not isinstance(node, dict) or not node:
        raise ProtocolError(f"unexpected value {type(node).__name__}")
    if "__tensor__" in node:
        return _decode_tensor(node, blobs)
    if len(node) == 1:
        (tag, body), = node.items()
        if tag == "__tuple__" and isinstance(body, list):
            return tuple(decode(item, blobs) for item in body)
        if tag == "__dict__" and isinstance(body, list):
            return {str(key): decode(item, blobs) for key, item in body}
        if tag == "__float__" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "__dtype__" and body in DTYPES:
            return DTYPES[body]
        if tag == "__unsupported__":
            return Unsupported(str(body)[:100])
    if set(node) == {"__handle__", "type"}:
        return Handle(int(node["__handle__"]), str(node["type"])[:100])
    raise ProtocolError(f"unexpected object with keys {sorted(node)[:5]}")


def _decode_tensor(node, blobs):
    dtype = DTYPES.get(node.get("dtype"))
    shape = node.get("shape")
    device = node.get("device")
    if dtype is None or device not in DEVICES or not isinstance(shape, list):
        raise ProtocolError("malformed tensor description")
    if not all(isinstance(size, int) and 0 <= size < 1 << 40 for size in shape):
        raise ProtocolError("malformed tensor shape")
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    index = node["__tensor__"]
    if not isinstance(index, int) or not 0 <= index < len(blobs):
        raise ProtocolError("tensor refers to a missing blob")
    data = blobs[index]
    numel = math.prod(shape)
    if len(data) != numel * torch.empty((), dtype=dtype).element_size():
        raise ProtocolError("tensor bytes do not match its shape")
    if numel == 0:
        tensor = torch.empty(shape, dtype=dtype)
    else:
        tensor = torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
    if device != "cpu":
        tensor.source_device = device  # a CPU copy of a tensor that lived on the GPU
    return tensor


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

def send(fd, message, blobs=()):
    """Write one frame: the JSON ``message`` and the byte strings ``blobs``."""
    sizes = [len(blob) for blob in blobs]
    body = json.dumps(dict(message, blob_sizes=sizes), allow_nan=False, separators=(",", ":")).encode()
    data = HEADER.pack(len(body), sum(sizes)) + body + b"".join(blobs)
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd, size, deadline):
    chunks, remaining = [], size
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ChannelTimeout("no reply in time")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise ChannelClosed("the other side closed the channel")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(fd, deadline=None):
    """Read one frame; return ``(message dict, list of blobs)``. ``deadline`` is a monotonic time."""
    json_size, blob_size = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if json_size > MAX_JSON or blob_size > MAX_BLOB:
        raise ProtocolError("message too large")
    try:
        message = json.loads(_read_exactly(fd, json_size, deadline))
    except (ValueError, UnicodeDecodeError) as error:
        raise ProtocolError(f"malformed message: {error}") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    sizes = message.pop("blob_sizes", [])
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes) or sum(sizes) != blob_size:
        raise ProtocolError("blob sizes do not add up")
    data = _read_exactly(fd, blob_size, deadline) if blob_size else b""
    blobs, offset = [], 0
    for size in sizes:
        blobs.append(data[offset : offset + size])
        offset += size
    return message, blobs
