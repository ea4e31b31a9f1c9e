"""AVIF residual backend through Pillow (design element A5).

Why: AV1 intra coding is a mature, strong transform coder, and Pillow ships it. The signed
residual is mapped to 8 bits as ``r8 = clip(round(residual * scale) + offset, 0, 255)``; the
mapping is stored in a 4-byte header in front of the AV1 data so the decoder can invert it:
``u8 version, u8 scale numerator, u8 scale denominator, u8 offset``.

Version 2 ("bare", written by default) stores only the 4-byte ``av1C`` configuration and the
AV1 bitstream: the 271 bytes of HEIF boxes around them (ftyp, meta, mdat header) follow from the
image size and the fixed settings, so the decoder rebuilds them (``wrap_av1``). The encoder
keeps this form only when the rebuilt file equals libavif's byte for byte, and otherwise writes
version 1, the whole AVIF file, so a libavif that lays out its boxes differently costs bytes,
never correctness. At 0.1–0.3 bpp on Kodak the boxes were 2–4 % of a file.

Version 3 leaves out the mapping (always 1/1 + 128), the av1C (it follows from the sequence
header) and the temporal delimiter; version 4 (written by default) also the OBU headers and
sizes, and keeps of the sequence header only the 2 bytes of ``SequenceFields``: the decoder
writes the header from them and the container's size (``sequence_payload``). Each is written
only where the decoder's rebuilt bytes equal libavif's, else the version before it: 9 and then
13-14 more bytes less a Kodak file.

Choices (measured on Kodak proxy residuals, image minus its 8x down/up-sampled bicubic version,
and image minus a Gaussian blur): scale 1 gave the best rate-PSNR trade-off (larger scales only
move along the same curve and add clipping of |residual| > 127/scale); 4:4:4 beat 4:2:0 by about
3% BD-rate on average (up to 11% on colourful images) and is needed to approach lossless at
quality 100. A file with no prediction anywhere codes the image itself, where 4:2:0 may cost
less in PSNR (on 12 held-out BSDS500 training photos 4:4:4 of the image cost 0.9 % more than
4:2:0, BD-rate over RGB PSNR) and more in MS-SSIM and SSIMULACRA 2, so no effort tries it.
``--chroma 420`` (EncodeOptions.chroma) codes every residual 4:2:0; docs/benchmarks.md has its
measurement. The thread count is fixed and the speed and libaom options a function of the
effort level (``SPEEDS``, 6 by default; ``AOM_OPTIONS``), so the payload is deterministic.
"""

from __future__ import annotations

import functools
import io
import os
import struct
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from PIL import Image, features

from semcodec.errors import CorruptData, SemcodecError
from semcodec.format.residual import (
    DEFAULT_EFFORT,
    EFFORTS,
    RESIDUAL_MAX,
    RESIDUAL_MIN,
    ResidualBackend,
    check_quality,
    check_residual,
    check_size,
    plus_prediction,
)
from semcodec.format.varint import get_varint, put_varint

__all__ = ["AvifBackend"]

_VERSION_FILE = 1  # header + a whole AVIF file
_VERSION_BARE = 2  # header + av1C configuration (4 bytes) + AV1 bitstream; boxes rebuilt
# the version byte alone + AV1 bitstream without its temporal delimiter; the mapping is
# (_SCALE_NUM, _SCALE_DEN, _OFFSET), the av1C follows from the sequence header, boxes rebuilt
_VERSION_COMPACT = 3
_TEMPORAL_DELIMITER = b"\x12\x00"  # OBU type 2 with a size field of 0: what libavif writes first
# the byte 4, the reduced still-picture sequence header as 2 bytes of its variable fields
# (SequenceFields), the frame OBU's payload: the OBU headers and sizes rebuilt
_VERSION_TERSE = 4
_SEQUENCE_OBU = 0x0A  # OBU type 1 (sequence header) with a size field, no extension
_FRAME_OBU = 0x32  # OBU type 6 (frame) with a size field, no extension
_NCLX = (1, 13, 6)  # libavif's colour description: BT.709 primaries, sRGB transfer, BT.601
_FIELDS = 2
_HEADER = 4
_AV1C = 4
_SCALE_NUM = 1
_SCALE_DEN = 1
_OFFSET = 128
_THREADS = 1  # fixed (not the machine's core count) for the same reason
_SUBSAMPLING = "4:4:4"
_LAYOUTS = ("4:4:4", "4:2:0")


def _box(kind: bytes, body: bytes) -> bytes:
    """An ISOBMFF box: u32 size, 4-char type, body."""
    return struct.pack(">I4s", 8 + len(body), kind) + body


def _full_box(kind: bytes, body: bytes) -> bytes:
    """An ISOBMFF full box with version 0 and flags 0."""
    return _box(kind, b"\0\0\0\0" + body)


def _meta(width: int, height: int, av1c: bytes, data_offset: int, data_len: int) -> bytes:
    """The meta box of a one-item AVIF image, laid out as libavif 1.x writes it."""
    hdlr = _full_box(b"hdlr", b"\0" * 4 + b"pict" + b"\0" * 13)
    pitm = _full_box(b"pitm", struct.pack(">H", 1))
    # offset_size 4, length_size 4, base_offset_size 0; one item, one extent
    iloc = _full_box(b"iloc", struct.pack(">BBHHHHII", 0x44, 0, 1, 1, 0, 1, data_offset, data_len))
    infe = _box(b"infe", bytes([2, 0, 0, 0]) + struct.pack(">HH", 1, 0) + b"av01Color\0")
    iinf = _full_box(b"iinf", struct.pack(">H", 1) + infe)
    ipco = _box(
        b"ipco",
        _full_box(b"ispe", struct.pack(">II", width, height))
        + _full_box(b"pixi", bytes([3, 8, 8, 8]))
        + _box(b"av1C", av1c)
        # nclx: BT.709 primaries, sRGB transfer, BT.601 matrix, full range
        + _box(b"colr", b"nclx" + struct.pack(">HHHB", 1, 13, 6, 0x80)),
    )
    ipma = _full_box(b"ipma", struct.pack(">IHB", 1, 1, 4) + bytes([0x01, 0x02, 0x83, 0x04]))
    return _full_box(b"meta", hdlr + pitm + iloc + iinf + _box(b"iprp", ipco + ipma))


def _ftyp(av1c: bytes) -> bytes:
    """The file type box: libavif names the AV1 image profile by the av1C's seq_profile
    (0, 4:2:0: baseline MA1B; otherwise advanced MA1A, as every 4:4:4 residual)."""
    brand = b"MA1B" if len(av1c) > 1 and av1c[1] >> 5 == 0 else b"MA1A"
    return _box(b"ftyp", b"avif" + b"\0\0\0\0" + b"avifmif1miaf" + brand)


def wrap_av1(width: int, height: int, av1c: bytes, av1: bytes) -> bytes:
    """Rebuild the AVIF file around an AV1 still image (the inverse of ``split_avif``)."""
    ftyp = _ftyp(av1c)
    meta_len = len(_meta(width, height, av1c, 0, 0))
    offset = len(ftyp) + meta_len + 8
    meta = _meta(width, height, av1c, offset, len(av1))
    return ftyp + meta + struct.pack(">I4s", 8 + len(av1), b"mdat") + av1


_LEB128_BYTES = 8  # the longest leb128 AV1 allows (spec 4.10.5)


def _obu_size(data: bytes, pos: int) -> tuple[int, int]:
    """An OBU's size field at ``pos`` and the position after it; CorruptData past the end."""
    return get_varint(data, pos, _LEB128_BYTES)


class _Bits:
    """An MSB-first bit reader over a sequence header's payload (AV1 spec 4.10.2 f(n))."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def f(self, n: int) -> int:
        """The next n bits as an unsigned integer; ValueError past the end."""
        value = 0
        for _ in range(n):
            byte = self.pos >> 3
            if byte >= len(self.data):
                raise ValueError("truncated sequence header")
            value = value << 1 | (self.data[byte] >> (7 - (self.pos & 7)) & 1)
            self.pos += 1
        return value


def _sequence_header(av1: bytes) -> bytes | None:
    """The sequence header OBU's payload of an AV1 still image (after at most a temporal
    delimiter), None for any other stream or one that ends inside an OBU's size."""
    pos = 0
    try:
        while pos < len(av1):
            obu_header = av1[pos]
            obu_type = (obu_header >> 3) & 0xF
            pos += 2 if obu_header & 0x04 else 1  # extension byte
            if not obu_header & 0x02:  # no size field: not what libavif writes
                return None
            size, pos = _obu_size(av1, pos)
            if obu_type == 1:
                return av1[pos : pos + size]
            if obu_type != 2:  # only a temporal delimiter may come first
                return None
            pos += size
    except CorruptData:
        return None
    return None


def av1_still_size(av1: bytes) -> tuple[int, int] | None:
    """(width, height) from a reduced still-picture sequence header, None for any other stream.

    Why: the rebuilt boxes carry the container's size, but the pixels come from the AV1 data;
    the two must be checked to agree (libavif does not), and in a reduced still-picture header
    the frame size is exactly the sequence header's maximum.
    """
    seq = _sequence_header(av1)
    try:
        return None if seq is None else _reduced_header_size(seq)
    except ValueError:
        return None


def _reduced_header_size(seq: bytes) -> tuple[int, int] | None:
    """Frame size of a reduced still-picture sequence header OBU payload (AV1 spec 5.5.1)."""
    b = _Bits(seq)
    b.f(3)  # seq_profile
    if b.f(1) != 1 or b.f(1) != 1:  # still_picture, reduced_still_picture_header
        return None
    b.f(5)  # seq_level_idx
    wbits, hbits = b.f(4) + 1, b.f(4) + 1
    return b.f(wbits) + 1, b.f(hbits) + 1


@dataclass(frozen=True)
class _ColorConfig:
    """A reduced still-picture sequence header's fields from its level to its colour config."""

    profile: int
    level: int
    tools: int  # 6 flags: 128x128 superblock, filter intra, edge filter, superres, cdef, lr
    high: int
    twelve: int
    mono: int
    colors: tuple[int, int, int]  # primaries, transfer, matrix ((2, 2, 2): not described)
    described: int  # color_description_present_flag
    color_range: int
    sub_x: int
    sub_y: int
    position: int
    separate_uv_delta_q: int


def _color_config(seq: bytes) -> _ColorConfig | None:
    """The fields of a reduced still-picture sequence header OBU payload (AV1 spec 5.5.1 and
    5.5.2) up to its colour config, None for any other header; ValueError if it ends early."""
    b = _Bits(seq)
    profile = b.f(3)
    if b.f(1) != 1 or b.f(1) != 1 or profile > 2:  # still_picture, reduced_still_picture_header
        return None
    level = b.f(5)
    wbits, hbits = b.f(4) + 1, b.f(4) + 1
    b.f(wbits), b.f(hbits)  # max frame size
    tools = b.f(6)
    high = b.f(1)
    twelve = b.f(1) if profile == 2 and high else 0
    mono = 0 if profile == 1 else b.f(1)
    described = b.f(1)
    colors = (b.f(8), b.f(8), b.f(8)) if described else (2, 2, 2)
    position = 0
    if mono:
        color_range, sub_x, sub_y = b.f(1), 1, 1
    elif colors == (1, 13, 0):  # sRGB in identity matrix: 4:4:4
        color_range, sub_x, sub_y = 1, 0, 0
    else:
        color_range = b.f(1)
        if profile == 0:
            sub_x = sub_y = 1
        elif profile == 1:
            sub_x = sub_y = 0
        elif twelve:
            sub_x = b.f(1)
            sub_y = b.f(1) if sub_x else 0
        else:
            sub_x, sub_y = 1, 0
        if sub_x and sub_y:
            position = b.f(2)
    separate = 0 if mono else b.f(1)
    return _ColorConfig(
        profile, level, tools, high, twelve, mono, colors, described, color_range, sub_x,
        sub_y, position, separate,
    )  # fmt: skip


def _sequence_av1c(seq: bytes) -> bytes | None:
    """The 4-byte av1C that a reduced still-picture sequence header OBU payload implies (the
    av1C layout of the AV1-ISOBMFF binding), None for any other."""
    c = _color_config(seq)
    if c is None:
        return None
    flags = c.high << 6 | c.twelve << 5 | c.mono << 4 | c.sub_x << 3 | c.sub_y << 2 | c.position
    return bytes([0x81, c.profile << 5 | c.level, flags, 0])


def av1c_of(av1: bytes) -> bytes | None:
    """The av1C of an AV1 still image (its temporal delimiter left out or not) from its
    sequence header, None if it has no reduced still-picture header first."""
    seq = _sequence_header(av1)
    try:
        return None if seq is None else _sequence_av1c(seq)
    except ValueError:
        return None


class _BitWriter:
    """An MSB-first bit writer closed by AV1's trailing bits (spec 5.3.4: a 1, then zeros)."""

    def __init__(self) -> None:
        self.value, self.count = 0, 0

    def put(self, value: int, n: int) -> None:
        """Append value as n bits."""
        self.value, self.count = self.value << n | value, self.count + n

    def trailing(self) -> bytes:
        """The bits, a 1 and zeros up to a whole byte."""
        pad = -(self.count + 1) % 8
        return ((self.value << 1 | 1) << pad).to_bytes((self.count + 1 + pad) // 8, "big")


@dataclass(frozen=True)
class SequenceFields:
    """What a reduced still-picture sequence header of libavif's 8-bit RGB residuals says
    beyond the frame size: the rest is fixed (8 bits, not monochrome, libavif's colour
    description, no film grain) and the size bits are the fewest that hold the size."""

    profile: int  # seq_profile: 0 (4:2:0) or 1 (4:4:4)
    level: int  # seq_level_idx[0], 5 bits
    tools: int  # 128x128 superblock, filter intra, intra edge, superres, cdef, restoration
    color_range: int
    position: int  # chroma_sample_position, 2 bits, 4:2:0 only
    separate_uv_delta_q: int

    def pack(self) -> bytes:
        """The two bytes version 4 stores."""
        return bytes(
            [
                self.profile << 7
                | self.level << 2
                | self.color_range << 1
                | self.separate_uv_delta_q,
                self.tools << 2 | self.position,
            ]
        )

    @classmethod
    def unpack(cls, data: bytes) -> SequenceFields:
        """The inverse of ``pack``; CorruptData for a 4:4:4 header with a sample position."""
        a, b = data[0], data[1]
        fields = cls(a >> 7, a >> 2 & 31, b >> 2, a >> 1 & 1, b & 3, a & 1)
        if fields.profile and fields.position:
            raise CorruptData("avif residual: a 4:4:4 sequence header has no sample position")
        return fields


def _size_bits(n: int) -> int:
    """The fewest bits that hold n - 1 (at least 1): frame_width_bits_minus_1 + 1."""
    return max(1, (n - 1).bit_length())


def sequence_payload(fields: SequenceFields, width: int, height: int) -> bytes:
    """The sequence header OBU's payload that ``fields`` and the frame size stand for (AV1
    5.5.1 and 5.5.2 with reduced_still_picture_header = 1)."""
    wbits, hbits = _size_bits(width), _size_bits(height)
    if max(wbits, hbits) > 16:
        raise CorruptData(f"avif residual: {width}x{height} is too large for an AV1 frame")
    b = _BitWriter()
    b.put(fields.profile, 3)
    b.put(0b11, 2)  # still_picture, reduced_still_picture_header
    b.put(fields.level, 5)
    b.put(wbits - 1, 4)
    b.put(hbits - 1, 4)
    b.put(width - 1, wbits)
    b.put(height - 1, hbits)
    b.put(fields.tools, 6)
    b.put(0, 1)  # high_bitdepth
    if fields.profile != 1:
        b.put(0, 1)  # mono_chrome
    b.put(1, 1)  # color_description_present_flag
    for value in _NCLX:
        b.put(value, 8)
    b.put(fields.color_range, 1)
    if fields.profile == 0:
        b.put(fields.position, 2)
    b.put(fields.separate_uv_delta_q, 1)
    b.put(0, 1)  # film_grain_params_present
    return b.trailing()


def _fields_of(seq: bytes) -> SequenceFields | None:
    """The variable fields of a sequence header payload of the fixed form, None for another
    (whether it is that form exactly, ``terse_payload`` checks by rebuilding it)."""
    c = _color_config(seq)
    if c is None or c.profile > 1 or c.high or c.mono or not c.described or c.colors != _NCLX:
        return None
    return SequenceFields(
        c.profile, c.level, c.tools, c.color_range, c.position, c.separate_uv_delta_q
    )


def _obu(header: int, payload: bytes) -> bytes:
    """An OBU with its size field (AV1's leb128, in its shortest form)."""
    return bytes([header]) + put_varint(len(payload)) + payload


def terse_payload(av1c: bytes, av1: bytes, width: int, height: int) -> bytes | None:
    """Version 4's payload of the bare parts when the decoder rebuilds them exactly (version
    3's conditions, a sequence header of the fixed form, one frame OBU), else None."""
    compact = compact_payload(av1c, av1)
    return None if compact is None else _tersed(compact, width, height)


def _tersed(compact: bytes, width: int, height: int) -> bytes | None:
    """A version-3 payload as version 4, None where ``_untersed`` would not give it back."""
    seq = _sequence_header(compact[1:])
    try:
        fields = None if seq is None else _fields_of(seq)
    except ValueError:
        return None
    if fields is None:
        return None
    try:
        head = _obu(_SEQUENCE_OBU, sequence_payload(fields, width, height))
        frame = compact[1 + len(head) :]
        if compact[1 : 1 + len(head)] != head or len(frame) < 2:
            return None
        start = _obu_size(frame, 1)[1]
    except CorruptData:  # a size beyond AV1's frame, or a frame OBU cut inside its size
        return None
    payload = frame[start:]
    if _obu(_FRAME_OBU, payload) != frame:  # the header, and a size that is the rest's
        return None
    return bytes([_VERSION_TERSE]) + fields.pack() + payload


def _terse_fields(payload: bytes) -> SequenceFields:
    """The sequence header's fields of a version-4 payload; CorruptData if it has no frame
    after them or they contradict each other."""
    if len(payload) <= 1 + _FIELDS:
        raise CorruptData("avif residual: payload too short")
    return SequenceFields.unpack(payload[1 : 1 + _FIELDS])


def _untersed(payload: bytes, width: int, height: int) -> bytes:
    """A version-4 payload as the version-3 payload it stands for."""
    fields = _terse_fields(payload)
    seq = _obu(_SEQUENCE_OBU, sequence_payload(fields, width, height))
    return bytes([_VERSION_COMPACT]) + seq + _obu(_FRAME_OBU, payload[1 + _FIELDS :])


def compact_payload(av1c: bytes, av1: bytes) -> bytes | None:
    """Version 3's payload of the bare parts when the decoder rebuilds them exactly (the
    temporal delimiter libavif writes, an av1C that follows from the sequence header), else None."""
    if not av1.startswith(_TEMPORAL_DELIMITER) or av1c_of(av1) != av1c:
        return None
    return bytes([_VERSION_COMPACT]) + av1[len(_TEMPORAL_DELIMITER) :]


def as_bare(payload: bytes, width: int, height: int) -> bytes:
    """A version-3 or -4 payload of a width x height residual as the version-2 payload it
    stands for (mapping, av1C, temporal delimiter, sequence header and OBU sizes put back);
    other payloads as they are."""
    if payload[:1] == bytes([_VERSION_TERSE]):
        payload = _untersed(payload, width, height)
    return _uncompacted(payload)


def _uncompacted(payload: bytes) -> bytes:
    """A version-3 payload as the version-2 payload it stands for; others as they are."""
    if payload[:1] != bytes([_VERSION_COMPACT]):
        return payload
    av1 = _TEMPORAL_DELIMITER + payload[1:]
    av1c = av1c_of(av1)
    if av1c is None:
        raise CorruptData("avif residual: no reduced still-picture sequence header")
    return bytes([_VERSION_BARE, _SCALE_NUM, _SCALE_DEN, _OFFSET]) + av1c + av1


def split_avif(avif: bytes, width: int, height: int) -> tuple[bytes, bytes] | None:
    """(av1C, AV1 data) when ``wrap_av1`` rebuilds exactly this file, else None."""
    mdat = avif.find(b"mdat")
    cfg = avif.find(b"av1C")
    if mdat < 4 or cfg < 4 or cfg + 4 + _AV1C > len(avif):
        return None
    av1c = avif[cfg + 4 : cfg + 4 + _AV1C]
    av1 = avif[mdat + 4 :]
    if av1_still_size(av1) != (width, height) or wrap_av1(width, height, av1c, av1) != avif:
        return None
    return av1c, av1


def chroma_layout(payload: bytes) -> str | None:
    """The chroma subsampling an AVIF residual payload records ('4:4:4', '4:2:0', ...), read
    from its av1C bytes without decoding; None if the payload has no readable av1C."""
    if payload[:1] == bytes([_VERSION_TERSE]):
        try:
            return "4:4:4" if _terse_fields(payload).profile else "4:2:0"
        except CorruptData:
            return None
    try:
        data = _uncompacted(bytes(payload))
    except CorruptData:
        return None
    if len(data) < _HEADER + _AV1C or data[0] not in (_VERSION_FILE, _VERSION_BARE):
        return None
    if data[0] == _VERSION_BARE:
        av1c = data[_HEADER : _HEADER + _AV1C]
    else:
        at = data.find(b"av1C", _HEADER)
        if at < 0 or at + 4 + _AV1C > len(data):
            return None
        av1c = data[at + 4 : at + 4 + _AV1C]
    flags = av1c[2]  # tier, high_bitdepth, twelve_bit, monochrome, subsampling_x, _y, position
    if flags >> 4 & 1:
        return "4:0:0"
    return {(0, 0): "4:4:4", (1, 0): "4:2:2", (1, 1): "4:2:0"}.get((flags >> 3 & 1, flags >> 2 & 1))


def _require_avif() -> None:
    """Fail clearly when this Pillow build lacks AVIF support."""
    if not features.check("avif"):
        raise SemcodecError("the avif residual backend needs Pillow built with AVIF support")


def to_uint8(residual: np.ndarray, num: int, den: int, offset: int) -> np.ndarray:
    """Map a signed residual to uint8: clip(round(r * num / den) + offset, 0, 255), in integers
    (one lookup where every value is a residual of two pictures, as the encoder's are)."""
    r = np.asarray(residual)
    if r.size and RESIDUAL_MIN <= int(r.min()) and int(r.max()) <= RESIDUAL_MAX:
        return to_uint8_table(num, den, offset)[r.astype(np.int32) - RESIDUAL_MIN]
    return _scaled_bytes(r, num, den, offset)


def _scaled_bytes(r: np.ndarray, num: int, den: int, offset: int) -> np.ndarray:
    """``to_uint8``'s rule computed per value (any integer residual)."""
    scaled = np.floor_divide(2 * np.asarray(r, np.int64) * num + den, 2 * den)
    return np.clip(scaled + offset, 0, 255).astype(np.uint8)


@functools.cache
def to_uint8_table(num: int, den: int, offset: int) -> np.ndarray:
    """uint8 (RESIDUAL_MAX - RESIDUAL_MIN + 1,): ``to_uint8`` of every residual from
    RESIDUAL_MIN up."""
    table = _scaled_bytes(np.arange(RESIDUAL_MIN, RESIDUAL_MAX + 1), num, den, offset)
    table.flags.writeable = False
    return table


def from_uint8(r8: np.ndarray, num: int, den: int, offset: int) -> np.ndarray:
    """Invert ``to_uint8``: round((r8 - offset) * den / num), clipped to [-255, 255], int16."""
    return uint8_table(num, den, offset)[r8]


@functools.cache
def uint8_table(num: int, den: int, offset: int) -> np.ndarray:
    """int16 (256,): ``from_uint8`` of every byte, so a picture is one lookup (its arithmetic
    per pixel cost a tenth of a Kodak decode)."""
    d = np.arange(256, dtype=np.int64) - offset
    r = np.floor_divide(2 * d * den + num, 2 * num)
    table = np.clip(r, RESIDUAL_MIN, RESIDUAL_MAX).astype(np.int16)
    table.flags.writeable = False
    return table


#: libaom speed of each effort (1..9): each effort is one AV1 encode at its speed. The map and
#: the enhancement cost about 0.25 CPU-s of a Kodak image at every effort, so a speed above 6
#: saves little of an effort's CPU for many bytes (speed 8 against 6: +18 % at equal PSNR for
#: 0.2 s): efforts 3-5 share speed 6 (from 4 the real coder checks the tile choice where there
#: is one; efforts 1-6 fit the enhancement on a sample, encoder/enhance.FIT_STRIDES), 6-9 spend
#: more on AV1.
#: Speeds 4, 3, 1 and 0 for efforts 6-9 were chosen on held-out photos and street frames
#: against AVIF's speed-size front, as were the prediction search, the 4:2:0 trial and the
#: network's adaptation they replaced at efforts 8 and 9 (docs/benchmarks.md, the effort
#: table).
SPEEDS = {1: 8, 2: 7, 3: 6, 4: 6, 5: 6, 6: 4, 7: 3, 8: 1, 9: 0}

#: libaom options of an effort's residual encodes beyond libavif's defaults (tune iq), by
#: effort (none where not listed). No 4x4 partitions (``min-partition-size`` 8) at speeds 4
#: and 3: on 4 BSDS500 val photos and 4 CamVid val frames (docs/benchmarks.md, the effort
#: table) AVIF 4:4:4 at speed 3 took 28 % less CPU for 0.7 / 0.4 / 0.1 % more bytes (PSNR /
#: MS-SSIM dB / SSIMULACRA 2), beyond AVIF's own speed-size front; at speed 6 it saved 6 %
#: for nothing measurable in an effort's CPU, at speeds 1 and 0 it lay on the front. Options
#: that trade one metric for another are not used: ``disable-trellis-quant`` 1 at effort 5
#: gained 2.0 points of BD-rate in PSNR and lost 1.4 in MS-SSIM dB and 1.1 in SSIMULACRA 2;
#: earlier, ``deltaq-mode`` 0, chroma delta-q off and ``sharpness`` 1 gained about 1 point in
#: PSNR and lost 8-9 in MS-SSIM dB and 13 in SSIMULACRA 2 (CHANGELOG.md).
AOM_OPTIONS: dict[int, dict[str, str]] = {
    6: {"min-partition-size": "8"},
    7: {"min-partition-size": "8"},
}


def _checked(effort: int) -> int:
    """The effort level as an int, ValueError outside 1..9."""
    if effort not in EFFORTS:
        raise ValueError(f"effort must be 1..9, got {effort}")
    return int(effort)


def speed_for(effort: int) -> int:
    """libaom speed of an effort level (SPEEDS: 1 → 8 .. 5 → 6, the default .. 9 → 0)."""
    return SPEEDS[_checked(effort)]


def aom_options(effort: int) -> dict[str, str]:
    """libaom options of an effort's residual encodes (AOM_OPTIONS), none where Pillow's
    libavif encodes with another AV1 encoder, whose option names differ."""
    options = AOM_OPTIONS.get(_checked(effort), {})
    return dict(options) if options and _aom_encodes() else {}


@contextmanager
def guide_file(guide: np.ndarray) -> Iterator[str]:
    """A temporary text file of the guide's rows (libaom reads the rates from a path)."""
    fd, path = tempfile.mkstemp(prefix="semcodec-roi-", suffix=".txt")
    try:
        with os.fdopen(fd, "w") as f:
            for row in guide:
                f.write(" ".join(f"{v:.1f}" for v in row) + "\n")
        yield path
    finally:
        os.unlink(path)


@functools.cache
def _aom_encodes() -> bool:
    """Whether Pillow's libavif encodes with libaom (AOM_OPTIONS are libaom's names)."""
    try:
        from PIL import _avif

        return "aom" in str(_avif.codec_versions())
    except Exception:  # noqa: BLE001 - no version string: leave the options out
        return False


def _save_avif(
    im: Image.Image, quality: int, effort: int, subsampling: str, guide: np.ndarray | None
) -> bytes:
    """One AVIF file from Pillow at the effort's fixed settings, with libaom's ROI rate guide
    if given."""
    options = dict(
        quality=quality,
        speed=speed_for(effort),
        subsampling=subsampling,
        max_threads=_THREADS,
        range="full",
        codec="auto",
    )
    buf = io.BytesIO()
    advanced = aom_options(effort)
    if guide is None:
        extra = {"advanced": advanced} if advanced else {}
        im.save(buf, "AVIF", **options, **extra)
        return buf.getvalue()
    with guide_file(guide) as path:
        advanced |= {
            "deltaq-mode": "3",
            "enable-rate-guide-deltaq": "1",
            "rate-distribution-info": path,
        }
        im.save(buf, "AVIF", advanced=advanced, **options)
    return buf.getvalue()


class AvifBackend(ResidualBackend):
    """Residual as an 8-bit AVIF image (libaom via Pillow), 4:4:4 unless told otherwise."""

    name = "avif"
    code = 2

    def encode(
        self,
        residual: np.ndarray,
        quality: int,
        effort: int = DEFAULT_EFFORT,
        layout: str | None = None,
        guide: np.ndarray | None = None,
    ) -> bytes:
        """Map to 8 bits and encode; ``quality`` is passed to AVIF unchanged (0..100), effort
        to libaom's speed and options (``SPEEDS``, ``AOM_OPTIONS``; effort 5: speed 6),
        ``layout`` the chroma subsampling (4:4:4 by default; the AV1 data records it, so
        decoding needs no flag). ``guide`` (roi.rate_guide) steers libaom's delta-q per
        superblock; the AV1 data carries the quantisers, so the decoder is unchanged."""
        check_residual(residual)
        q = check_quality(quality)
        subsampling = _SUBSAMPLING if layout is None else layout
        if subsampling not in _LAYOUTS:
            raise ValueError(f"avif residual: unknown layout {layout!r}")
        _require_avif()
        r8 = to_uint8(residual, _SCALE_NUM, _SCALE_DEN, _OFFSET)
        avif = _save_avif(Image.fromarray(r8, "RGB"), q, effort, subsampling, guide)
        height, width = residual.shape[:2]
        parts = split_avif(avif, width, height)
        if parts is None:
            return bytes([_VERSION_FILE, _SCALE_NUM, _SCALE_DEN, _OFFSET]) + avif
        compact = compact_payload(*parts)
        if compact is None:
            return bytes([_VERSION_BARE, _SCALE_NUM, _SCALE_DEN, _OFFSET]) + b"".join(parts)
        return _tersed(compact, width, height) or compact

    def decode(self, data: bytes, height: int, width: int) -> np.ndarray:
        """Decode and invert the 8-bit mapping; CorruptData if the AVIF is not what we expect."""
        r8, (num, den, offset) = self._decode_bytes(data, height, width)
        return from_uint8(r8, num, den, offset)

    def picture(
        self, data: bytes, height: int, width: int, prediction: np.ndarray | int
    ) -> np.ndarray:
        """ResidualBackend.picture; where the prediction is the mapping's offset everywhere at
        scale 1 (a file that codes the image itself) that sum is the AVIF's own pixels, so
        they are returned as decoded (a tenth of a Kodak decode's work outside the
        enhancement saved)."""
        r8, (num, den, offset) = self._decode_bytes(data, height, width)
        if np.isscalar(prediction) and int(prediction) == offset and num == den:
            return r8 if r8.flags.writeable else r8.copy()
        return plus_prediction(from_uint8(r8, num, den, offset), prediction)

    def _decode_bytes(
        self, data: bytes, height: int, width: int
    ) -> tuple[np.ndarray, tuple[int, int, int]]:
        """The AVIF's uint8 (H, W, 3) pixels and the 8-bit mapping (num, den, offset) of its
        header; CorruptData if the AVIF is not what we expect."""
        check_size(height, width)
        if data[:1] and data[0] > _VERSION_TERSE:
            raise CorruptData(
                f"avif residual: payload version {data[0]} is newer than this release reads "
                f"(1 to {_VERSION_TERSE})"
            )
        data = as_bare(bytes(data), width, height)
        if len(data) <= _HEADER:
            raise CorruptData("avif residual: payload too short")
        version, num, den, offset = data[:_HEADER]
        if version not in (_VERSION_FILE, _VERSION_BARE) or num == 0 or den == 0:
            raise CorruptData(f"avif residual: bad header {data[:_HEADER].hex()}")
        avif = data[_HEADER:]
        if version == _VERSION_BARE:
            if len(avif) <= _AV1C:
                raise CorruptData("avif residual: payload too short")
            av1c, av1 = avif[:_AV1C], avif[_AV1C:]
            if av1_still_size(av1) != (width, height):
                raise CorruptData("avif residual: AV1 frame size differs from the image size")
            avif = wrap_av1(width, height, av1c, av1)
        _require_avif()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                im = Image.open(io.BytesIO(avif), formats=["AVIF"])
                # check the declared size before decoding any pixels (bomb guard)
                if im.size != (width, height):
                    raise CorruptData(
                        f"avif residual: image is {im.size[0]}x{im.size[1]}, "
                        f"expected {width}x{height}"
                    )
                if im.mode != "RGB" or getattr(im, "n_frames", 1) != 1:
                    raise CorruptData(f"avif residual: unexpected mode {im.mode}")
                im.load()
                r8 = np.asarray(im)
        except CorruptData:
            raise
        except Exception as exc:  # PIL raises many types on damaged files
            raise CorruptData(f"avif residual: cannot decode: {exc}") from exc
        if r8.shape != (height, width, 3) or r8.dtype != np.uint8:
            raise CorruptData("avif residual: decoded array has the wrong shape")
        return r8, (num, den, offset)
