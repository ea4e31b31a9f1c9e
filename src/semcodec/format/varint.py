"""Unsigned LEB128 varints: the word counts of the entropy payloads, the sizes and lengths
of the container's version-5 header (which reads its own, stricter form: container.py) and the
OBU sizes of the AVIF residual's AV1 data."""

from __future__ import annotations

from semcodec.errors import CorruptData

__all__ = ["get_varint", "put_varint"]


def put_varint(v: int) -> bytes:
    """LEB128 unsigned varint in its shortest form."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def get_varint(data: bytes, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read a LEB128 varint of at most ``max_bytes`` bytes (5: a u32; AV1's OBU sizes may take
    8); CorruptData if truncated or overlong."""
    v = 0
    for i in range(max_bytes):
        if pos + i >= len(data):
            raise CorruptData("truncated varint")
        b = data[pos + i]
        v |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return v, pos + i + 1
    raise CorruptData("overlong varint")
