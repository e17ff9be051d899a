"""Data crossing from the worker is parsed as data: JSON plus raw tensor bytes, nothing executable."""

import json
import os
import struct
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.worker import protocol
from autograder.worker.protocol import ProtocolError, decode, encode
from autograder.worker.text import valid_tree


def roundtrip(value):
    blobs = []
    node = json.loads(json.dumps(encode(value, blobs), allow_nan=False))
    return decode(node, blobs)


def test_values_survive_the_trip():
    value = {"t": torch.arange(6.0).reshape(2, 3), "pair": (1, 2.5, None, True, "s"), "nan": float("nan"),
             "ints": torch.tensor([1, 2], dtype=torch.int64), "empty": torch.zeros(0, 3), "dtype": torch.float64}
    back = roundtrip(value)
    assert torch.equal(back["t"], value["t"]) and back["pair"] == value["pair"]
    assert back["nan"] != back["nan"] and back["ints"].dtype == torch.int64 and back["empty"].shape == (0, 3)
    assert back["dtype"] is torch.float64


def test_meta_tensors_travel_as_shape_only():
    back = roundtrip(torch.empty(2, 5, device="meta"))
    assert back.device.type == "meta" and back.shape == (2, 5) and protocol.device_of(back) == "meta"


def test_objects_that_are_not_data_arrive_as_their_type_name():
    back = roundtrip({"module": torch.nn.Linear(2, 2)})
    assert isinstance(back["module"], protocol.Unsupported) and back["module"].type == "Linear"


def test_a_tensor_subclass_arrives_as_a_plain_tensor():
    class Liar(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return True

    liar = torch.Tensor._make_subclass(Liar, torch.zeros(3))
    back = roundtrip(liar)
    assert type(back) is torch.Tensor and torch.equal(back, torch.zeros(3))


@pytest.mark.parametrize("node", [
    {"__tensor__": 0, "dtype": "object", "shape": [1], "device": "cpu"},
    {"__tensor__": 0, "dtype": "float32", "shape": [2], "device": "cpu"},  # 4 bytes for 2 floats
    {"__tensor__": 5, "dtype": "float32", "shape": [1], "device": "cpu"},
    {"__tensor__": 0, "dtype": "float32", "shape": [-1], "device": "cpu"},
    {"__tensor__": 0, "dtype": "float32", "shape": [1], "device": "evil"},
    {"__reduce__": ["os.system", ["echo pwned"]]},
    {"__float__": "os.system"},
])
def test_malformed_values_are_rejected(node):
    with pytest.raises(ProtocolError):
        decode(node, [b"\0\0\0\0"])


def _layouts(dtype):
    """One tensor of ``dtype`` in every layout a call's answer takes: contiguous, transposed, expanded (stride 0),
    a slice at an offset, zero-dim, empty, needing gradients, and a negative or conjugate view."""
    base = (torch.arange(24.0).reshape(2, 3, 4) * 7 - 50).to(dtype)
    yield base
    yield base.transpose(0, 2)
    yield base[:1, :1].expand(3, 2, 4)
    yield base[1, 1:, ::2]
    yield base[0, 0, 0]
    yield base[:0]
    if dtype.is_floating_point:
        yield base.clone().requires_grad_()
    if dtype.is_floating_point or dtype.is_complex:
        yield torch._neg_view(base)
    if dtype.is_complex:
        yield base.conj()


@pytest.mark.parametrize("name", protocol.DTYPE_LIST)
def test_every_layout_of_every_dtype_travels_as_its_values_in_order(name):
    dtype = protocol.DTYPES[name]
    for tensor in _layouts(dtype):
        blobs = []
        node = encode(tensor, blobs)
        values = tensor.detach().resolve_conj().resolve_neg().clone(memory_format=torch.contiguous_format)
        assert node["dtype"] == name and node["shape"] == list(tensor.shape)
        assert blobs == [values.reshape(-1).view(torch.uint8).numpy().tobytes()]
        sent = bytes(blobs[0])
        back = decode(json.loads(json.dumps(node)), [memoryview(blob) for blob in blobs])
        assert type(back) is torch.Tensor and back.dtype == dtype and back.is_contiguous()
        assert torch.equal(back, values) and not back.requires_grad
        back.zero_()  # the reader's own copy: writable, and the bytes read are left as they came
        assert blobs[0] == sent
        assert torch.equal(tensor.detach().resolve_conj().resolve_neg(), values)


def test_frames_round_trip_and_bad_frames_are_refused():
    read_fd, write_fd = os.pipe()
    try:
        protocol.send(write_fd, {"value": 1}, [b"abc"])
        message, blobs = protocol.receive(read_fd)
        assert message == {"value": 1} and blobs == [b"abc"]
        os.write(write_fd, struct.pack("<II", protocol.MAX_JSON + 1, 0))
        with pytest.raises(ProtocolError, match="too large"):
            protocol.receive(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_a_silent_peer_times_out_and_a_closed_one_is_noticed():
    import time

    read_fd, write_fd = os.pipe()
    with pytest.raises(protocol.ChannelTimeout):
        protocol.receive(read_fd, deadline=time.monotonic() + 0.05)
    threading.Thread(target=os.close, args=(write_fd,)).start()
    with pytest.raises(protocol.ChannelClosed):
        protocol.receive(read_fd, deadline=time.monotonic() + 5)
    os.close(read_fd)


@pytest.mark.parametrize("blocking", [True, False])
def test_a_frame_cut_short_times_out_on_either_kind_of_pipe_and_a_whole_one_is_read(blocking):
    """The judge's reply pipe is non-blocking (a reply already there is read without a wait per part): a worker
    that writes half a frame and stops still meets the deadline, never holds the judge; a whole frame, written
    at once, is read whole."""
    import time

    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, blocking)
    try:
        frame = struct.pack("<II", 20, 0) + b'{"blob_sizes": [],'  # its header promises more than follows
        os.write(write_fd, frame)
        with pytest.raises(protocol.ChannelTimeout):
            protocol.receive(read_fd, deadline=time.monotonic() + 0.05)  # it read the cut frame's bytes
        protocol.send(write_fd, {"value": 2}, [b"xyz"])
        assert protocol.receive(read_fd, deadline=time.monotonic() + 5) == ({"value": 2}, [b"xyz"])
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_the_protocol_module_never_unpickles():
    source = open(protocol.__file__).read()
    assert "import pickle" not in source and "pickle." not in source and "eval(" not in source
    assert "torch.load" not in source and "dill" not in source


def test_a_reply_is_bounded_before_it_is_read_and_decoded_within_bounds():
    """What the judge's caps stand on: a frame over the reader's cap is refused from its header; a blob backs one
    tensor at most (1 MiB sent cannot become 1 GiB held); nesting is capped; a bool is no size."""
    read_fd, write_fd = os.pipe()
    try:
        protocol.send(write_fd, {"value": 1}, [b"x" * 100])
        with pytest.raises(ProtocolError, match="too large"):
            protocol.receive(read_fd, max_json=1 << 20, max_blob=10)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    spec = {"__tensor__": 0, "dtype": "float32", "shape": [1], "device": "cpu"}
    with pytest.raises(ProtocolError, match="twice"):
        protocol.decode([spec, spec], [bytes(4)])
    deep = 1
    for _ in range(protocol.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(ProtocolError, match="deeply"):
        protocol.decode(deep, [])
    with pytest.raises(ProtocolError, match="shape"):
        protocol.decode(dict(spec, shape=[True]), [bytes(4)])


def test_a_place_outside_the_contracts_files_is_never_kept():
    """A worker's error record may name only a student file of the contract, at a line that exists: anything else
    (another file, a hidden test's path, an invented line) is dropped before any student sees it."""
    from autograder.judge.failures import clean_record

    record = {"type": "ValueError", "mro": ["ValueError"], "message": "m", "where": "heads.py:3"}
    assert clean_record(record, {"heads": 10}, ("heads",))["where"] == "heads.py:3"
    assert clean_record(record, {"heads": 2}, ("heads",))["where"] is None, "no such line"
    assert clean_record(record, None, ("attention",))["where"] is None, "not one of the contract's files"
    assert clean_record(dict(record, where="check_heads.py:12"), None, ("heads",))["where"] is None
    assert clean_record(dict(record, where="../heads.py:3"), None, ("heads",))["where"] is None


def test_a_gradient_requests_phase_is_kept_only_as_one_of_two_words():
    """A gradient request's ``phase`` is ``forward`` or ``backward``: anything else a worker sends (a long string, a
    phase of its own, a list) is dropped, never shown."""
    from autograder.judge.failures import clean_record

    record = {"type": "ValueError", "mro": ["ValueError"], "message": "m", "where": None}
    assert clean_record(dict(record, phase="forward"), None, ("heads",))["phase"] == "forward"
    assert clean_record(dict(record, phase="backward"), None, ("heads",))["phase"] == "backward"
    for forged in ("x" * 10_000, "forward; your score is 100", ["forward"], 1):
        assert clean_record(dict(record, phase=forged), None, ("heads",))["phase"] == ""


def test_the_fake_devices_flags_are_booleans_and_speak_only_for_a_fake_call():
    """``on_cpu_too`` and ``mixed_devices`` are kept only when they are ``True`` itself (a truthy string or list is
    dropped), and they change a summary only for a call the judge itself sent to the fake device."""
    from autograder.judge.failures import StudentError, clean_record

    record = {"type": "ValueError", "mro": ["ValueError"], "message": "m", "where": None}
    for forged in ("yes", 1, [True], {"x": 1}):
        kept = clean_record(dict(record, on_cpu_too=forged, mixed_devices=forged), None, ("heads",))
        assert kept["on_cpu_too"] is False and kept["mixed_devices"] is False
    flagged = clean_record(dict(record, on_cpu_too=True, mixed_devices=True), None, ("heads",))
    assert StudentError("f", flagged).summary == "f raised ValueError"
    assert not StudentError("f", flagged).on_cpu_too
    assert StudentError("f", flagged, fake=True).summary == "f raised ValueError on the CPU too (not a device problem)"


_JSON_TREES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**80, max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(tree=_JSON_TREES, keys=st.dictionaries(st.integers(), st.integers(), max_size=2))
def test_a_frame_holds_the_values_json_would_write(tree, keys):
    message = {"value": tree, "numbered": keys}  # keys that are numbers, text with lone surrogates, huge integers
    expected = json.dumps(json.loads(json.dumps(message)), sort_keys=True)  # -0.0 and 1.0 as written
    read_fd, write_fd = os.pipe()
    try:
        protocol.send(write_fd, message, [b"x"])
        received, blobs = protocol.receive(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert json.dumps(received, sort_keys=True) == expected
    assert blobs == [b"x"]


def _as_json_reads(body: bytes):
    """What json reads of ``body``, its text made valid (a lone surrogate becomes U+FFFD), marked where it was not:
    what :func:`protocol.receive` must give."""
    value, replaced = valid_tree(json.loads(body))
    return dict(value, **{protocol.REPLACED_TEXT: True}) if replaced else value


def _received(body: bytes):
    """What :func:`protocol.receive` makes of a frame whose JSON is ``body`` (no blobs)."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, struct.pack("<II", len(body), 0) + body)
        return protocol.receive(read_fd)[0]
    finally:
        os.close(read_fd)
        os.close(write_fd)


_ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=8)  # lone surrogates too
_TREES_AS_WRITTEN = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**90, max_value=2**90) | st.floats() | _ANY_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_ANY_TEXT, children, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(tree=_TREES_AS_WRITTEN)
def test_a_frame_is_read_as_json_reads_it(tree):
    body = json.dumps({"value": tree}).encode()  # NaN and Infinity as json writes them, huge integers, surrogates
    assert json.dumps(_received(body), sort_keys=True) == json.dumps(_as_json_reads(body), sort_keys=True)


@pytest.mark.parametrize("body", [
    b'{"x":12345678901234567890123}', b'{"x":-9223372036854775809}', b'{"x":18446744073709551616}',
    b'{"x":1e400}', b'{"x":NaN,"y":-Infinity}', b'\xef\xbb\xbf{"x":1}', b'{"x":"\\ud800"}', b'{"x":1,"x":2}',
])
def test_numbers_text_and_marks_only_json_reads_are_read_as_json_reads_them(body):
    assert json.dumps(_received(body), sort_keys=True) == json.dumps(_as_json_reads(body), sort_keys=True)


def test_json_nested_past_its_depth_is_refused_as_malformed():
    with pytest.raises(ProtocolError, match="malformed"):
        _received(b'{"x":' + b"[" * 5000 + b"]" * 5000 + b"}")


def test_text_of_a_str_subclass_travels_as_plain_text_and_keys_by_its_content():
    from autograder.judge import ahead

    class Shown(str):
        def __repr__(self):
            return "'mode'"

        def __str__(self):
            return "mode"

    blobs = []
    assert type(encode(Shown("fast"), blobs)) is str and encode(Shown("fast"), blobs) == "fast"
    keys = {ahead.key_of(*ahead.encoded(ahead.call_message("f", (text,), {}))) for text in (Shown("fast"), "mode")}
    assert len(keys) == 2  # a message holds builtins only, so its repr is its content
