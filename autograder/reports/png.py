"""An RGB picture written as a PNG file without per-row filters: the charts' last step, after the last student.

Pillow's PNG encoder tries every filter on every row of a true-colour picture and keeps the best. For the pass-rate
chart (tall, mostly white) that search was most of the time a run waited for its charts after its last student,
and saved a few percent of the file. Unfiltered rows compressed by zlib give the same pixels in a fraction of it
(docs/performance.md; the bench measures the run's end).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from ..records.results import write_atomic

if TYPE_CHECKING:
    from PIL.Image import Image

SIGNATURE = b"\x89PNG\r\n\x1a\n"
LEVEL = 3  # zlib's: most of level 6's size in half its time


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(image: "Image") -> bytes:
    """``image`` (RGB) as the bytes of a PNG file: 8 bits a channel, no interlacing, each row unfiltered."""
    if image.mode != "RGB":
        raise ValueError(f"an RGB picture is needed, not {image.mode}")
    width, height = image.size
    pixels, stride = memoryview(image.tobytes()), width * 3
    packer = zlib.compressobj(LEVEL)
    body = [packer.compress(b"\0" + pixels[row:row + stride]) for row in range(0, height * stride, stride)]
    body.append(packer.flush())
    # 8 bits a channel, true colour, deflate, PNG's one filter method, no interlacing
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", b"".join(body)) + _chunk(b"IEND", b"")


def save_png(image: "Image", path: str | Path) -> Path:
    """Write ``image`` to ``path`` as :func:`png_bytes`, atomically (a reader never sees half a picture); return the
    path."""
    write_atomic(path, png_bytes(image))
    return Path(path)
