"""The ``.sem`` container: a checksummed header, a layer table and the layer payloads.

The byte layout is specified in ``docs/format.md``; this module is its only implementation.
Every byte of a file is covered by a CRC-32 (the header CRC or one per-layer CRC), and every
length is checked against the bytes actually present before anything is sliced or allocated.
"""

from __future__ import annotations

import contextlib
import re
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from semcodec.errors import CorruptData
from semcodec.format.varint import put_varint

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "MODES",
    "RESIDUAL_AVIF",
    "RESIDUAL_NATIVE",
    "RESIDUAL_NONE",
    "ResidualKind",
    "Header",
    "LayerKind",
    "ESTIMATED_ENTRY",
    "ESTIMATED_HEADER",
    "Limits",
    "header_size",
    "layer_sizes",
    "pack",
    "read_header",
    "sniff",
    "unpack",
    "unpack_layers",
]

MAGIC = b"\x89SEM\r\n\x1a\n"
FORMAT_VERSION = 5  # the newest this module reads, and the one it writes
# 2 adds the METADATA layer, 3 the GATING layer, 4 the ROI and ENHANCE layers; versions 1-4
# share the fixed header (written with the oldest of them that holds a file's layers, on
# request: pack's ``version``); 5 is the compact header (varint sizes and lengths, no flags)
# and lets a file without prediction leave out both COMPACT and GATING
SUPPORTED_VERSIONS = (1, 2, 3, 4, 5)
FIXED_LAYOUT_VERSIONS = (1, 2, 3, 4)


class ResidualKind(IntEnum):
    """The residual layer's coder: its code is part of the file format (never renumber)."""

    NONE = 0
    NATIVE = 1
    AVIF = 2

    @property
    def label(self) -> str:
        """The name users type and `info` prints: 'none', 'native', 'avif'."""
        return self.name.lower()

    @classmethod
    def label_of(cls, code: int) -> str:
        """The label of a code read from a file (the number itself if unknown)."""
        return cls(code).label if code in cls._value2member_map_ else str(code)


RESIDUAL_NONE = ResidualKind.NONE
RESIDUAL_NATIVE = ResidualKind.NATIVE
RESIDUAL_AVIF = ResidualKind.AVIF

# Mode code on disk = number of channels the decoder must give back.
MODES: dict[str, int] = {"L": 1, "RGB": 3, "RGBA": 4}
_MODE_BY_CODE = {code: mode for mode, code in MODES.items()}

MAX_MODEL_NAME = 64
_HASH_RE = re.compile(r"[0-9a-f]{16}")

# magic, version, mode, flags, width, height, quality, backend, map_scale, name_len,
# compact_levels, model_hash (see docs/format.md, "Fixed header").
_FIXED = struct.Struct("<8sBBHIIBBBBH8s")
FIXED_HEADER_SIZE = _FIXED.size  # 34
_ENTRY = struct.Struct("<BII")  # kind, length, crc32
_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_MAX_LAYERS = {1: 4, 2: 5, 3: 6, 4: 8, 5: 8}
_MAX_VARINT = 5  # LEB128 bytes of a value below 2**32
# version 5: magic, version, mode; width, height (varints); quality, backend, map_scale;
# compact_levels (varint, at most 3 bytes); model_hash; name_len; then name, layer_count, the
# table and the CRC
_V5_MAX_FIXED = len(MAGIC) + 2 + 2 * _MAX_VARINT + 3 + 3 + 8 + 1
_V5_MAX_ENTRY = 1 + _MAX_VARINT + _U32.size  # kind, length (varint), crc32
# the longest header any supported version can declare: a reader's prefix that holds any header
MAX_HEADER_SIZE = (
    max(
        FIXED_HEADER_SIZE
        + _U8.size
        + max(_MAX_LAYERS[v] for v in FIXED_LAYOUT_VERSIONS) * _ENTRY.size,
        _V5_MAX_FIXED + _U8.size + _MAX_LAYERS[5] * _V5_MAX_ENTRY,
    )
    + MAX_MODEL_NAME
    + _U32.size
)


class LayerKind(IntEnum):
    """Layer identifiers stored in the layer table; values are part of the file format."""

    SEMANTIC_MAP = 1
    COMPACT = 2
    RESIDUAL = 3
    ALPHA = 4
    METADATA = 5  # format version 2: ICC profile, EXIF, XMP (metadata.py)
    GATING = 6  # format version 3: each tile's prediction mode (gating.py)
    ROI = 7  # format version 4: the regions of interest the encoder favoured (roi.py)
    ENHANCE = 8  # format version 4: where and how the enhancement network applies (enhance.py)


_REQUIRED_LAYERS = (LayerKind.SEMANTIC_MAP,)  # COMPACT too, unless GATING says no tile uses it


@dataclass(frozen=True)
class Limits:
    """Size limits checked before any pixel buffer is allocated, so hostile headers are cheap."""

    max_width: int = 65535
    max_height: int = 65535
    max_pixels: int = 2**28

    def check(self, width: int, height: int) -> str | None:
        """Return why ``width`` x ``height`` is unacceptable, or None, so callers pick the error type."""
        if width <= 0 or height <= 0:
            return f"zero or negative image dimensions {width}x{height}"
        if width > self.max_width or height > self.max_height:
            return (
                f"image dimensions {width}x{height} exceed the limit of "
                f"{self.max_width}x{self.max_height}"
            )
        if width * height > self.max_pixels:
            return (
                f"image of {width}x{height} = {width * height} pixels exceeds the limit of "
                f"{self.max_pixels} pixels"
            )
        return None


# Pillow's own decompression-bomb threshold is process-global; this lock serialises the
# temporary raise of that threshold so concurrent loads restore it correctly.
_PIL_LIMIT_LOCK = threading.Lock()


@contextlib.contextmanager
def pil_pixel_limit(limits: Limits) -> Iterator[None]:
    """Let Pillow decode up to our own pixel limit (its process-global bomb check is lower)."""
    from PIL import Image  # only the layers Pillow decodes pay its import

    with _PIL_LIMIT_LOCK:
        previous = Image.MAX_IMAGE_PIXELS
        if previous is not None and previous < limits.max_pixels:
            Image.MAX_IMAGE_PIXELS = limits.max_pixels
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = previous


@dataclass(frozen=True)
class Header:
    """Everything the decoder needs besides the layer payloads; mirrors the on-disk header."""

    width: int
    height: int
    mode: str
    model_name: str
    model_hash: str
    quality: int
    residual_backend: int
    map_scale: int
    compact_levels: int
    flags: int = 0

    def problem(self) -> str | None:
        """Return the first invalid field as a one-line message, or None; shared by pack and unpack."""
        if self.mode not in MODES:
            return f"invalid mode {self.mode!r} (expected one of L, RGB, RGBA)"
        if not 0 <= self.flags <= 0xFFFF:
            return f"flags {self.flags} out of range 0..65535"
        if self.flags != 0:
            return f"reserved flags must be 0, got {self.flags:#06x}"
        if not (1 <= self.width <= 0xFFFFFFFF and 1 <= self.height <= 0xFFFFFFFF):
            return f"zero or out-of-range image dimensions {self.width}x{self.height}"
        if not 0 <= self.quality <= 100:
            return f"quality {self.quality} out of range 0..100"
        if self.residual_backend not in ResidualKind._value2member_map_:
            return f"unknown residual backend code {self.residual_backend}"
        if not 1 <= self.map_scale <= 255:
            return f"map scale {self.map_scale} out of range 1..255"
        if not 2 <= self.compact_levels <= 0xFFFF:
            return f"compact levels {self.compact_levels} out of range 2..65535"
        if not isinstance(self.model_name, str):
            return "model name is not a string"
        try:
            name = self.model_name.encode("ascii")
        except UnicodeEncodeError:
            return f"model name {self.model_name!r} is not ASCII"
        if not 1 <= len(name) <= MAX_MODEL_NAME:
            return f"model name length {len(name)} out of range 1..{MAX_MODEL_NAME}"
        if any(b < 0x20 or b > 0x7E for b in name):
            return f"model name {self.model_name!r} contains non-printable characters"
        if not isinstance(self.model_hash, str) or not _HASH_RE.fullmatch(self.model_hash):
            return f"model hash {self.model_hash!r} is not 16 lowercase hex digits"
        return None

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field, for writers (pack) and callers."""
        problem = self.problem()
        if problem is not None:
            raise ValueError(problem)


def _version_for(kinds: list[int]) -> int:
    """The oldest fixed-header version (1-4) that can hold these layers."""
    if LayerKind.ROI in kinds or LayerKind.ENHANCE in kinds:
        return 4
    if LayerKind.GATING in kinds:
        return 3
    return 2 if LayerKind.METADATA in kinds else 1


def _layer_set_problem(
    header: Header, kinds: list[int], version: int = FORMAT_VERSION
) -> str | None:
    """Check layer kinds against each other and the header, so a decodable file is guaranteed."""
    seen: set[int] = set()
    for kind in kinds:
        if kind not in LayerKind._value2member_map_:
            return f"unknown layer kind {kind}"
        if kind == LayerKind.METADATA and version < 2:
            return f"layer kind {kind} (METADATA) needs format version 2, file says {version}"
        if kind == LayerKind.GATING and version < 3:
            return f"layer kind {kind} (GATING) needs format version 3, file says {version}"
        if kind == LayerKind.ROI and version < 4:
            return f"layer kind {kind} (ROI) needs format version 4, file says {version}"
        if kind == LayerKind.ENHANCE and version < 4:
            return f"layer kind {kind} (ENHANCE) needs format version 4, file says {version}"
        if kind in seen:
            return f"duplicate layer kind {LayerKind(kind).name}"
        seen.add(kind)
    if kinds != sorted(kinds):
        return "layer table not in ascending kind order"
    for kind in _REQUIRED_LAYERS:
        if kind not in seen:
            return f"missing required layer {kind.name}"
    if LayerKind.COMPACT not in seen and LayerKind.GATING not in seen:
        if version < 5:
            return "missing required layer COMPACT"
        if LayerKind.RESIDUAL not in seen:  # no prediction and no residual: nothing coded
            return "a file without COMPACT and GATING layers needs a RESIDUAL layer"
    if LayerKind.GATING in seen and LayerKind.RESIDUAL not in seen:
        return "GATING layer present without a RESIDUAL layer"
    if LayerKind.ROI in seen and LayerKind.RESIDUAL not in seen:
        return "ROI layer present without a RESIDUAL layer"
    has_alpha = LayerKind.ALPHA in seen
    if has_alpha != (header.mode == "RGBA"):
        return (
            "ALPHA layer present but mode is " + header.mode
            if has_alpha
            else "mode RGBA requires an ALPHA layer"
        )
    has_residual = LayerKind.RESIDUAL in seen
    if has_residual != (header.residual_backend != RESIDUAL_NONE):
        return (
            "RESIDUAL layer present but residual backend is 0 (none)"
            if has_residual
            else f"residual backend {header.residual_backend} requires a RESIDUAL layer"
        )
    return None


# The encoder's size estimates, kept at the values it has always used because its choices (and
# so files' bytes) depend on them: exact sizes (header_size) change 5 of 504 ENHANCE decisions
# on the conformance pictures. ESTIMATED_HEADER stands for the header and layer table (exactly
# header_size: 73..100 bytes for the default model), ESTIMATED_ENTRY for one more layer's
# table entry (exactly _ENTRY.size, 9).
ESTIMATED_HEADER = 80
ESTIMATED_ENTRY = 8


def header_size(
    header: Header, lengths: Mapping[LayerKind, int], version: int = FORMAT_VERSION
) -> int:
    """Exact bytes ``pack`` writes besides the payloads (header, model name, layer table,
    header CRC) for this header and layers of these lengths, in this format version."""
    return len(_head(header, [(int(k), n, 0) for k, n in sorted(lengths.items())], version))


def _get_varint(view: memoryview, pos: int, what: str) -> tuple[int, int]:
    """A version-5 varint at ``pos`` and the position after it; CorruptData if the file ends
    inside it, or it is longer than a u32 needs or than its value needs (one form per value)."""
    value = 0
    for i in range(_MAX_VARINT):
        if pos + i >= len(view):
            raise CorruptData(f"truncated header: file ends inside the {what}")
        byte = view[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if i and not byte:
                raise CorruptData(f"{what} is not in its shortest varint form")
            if value > 0xFFFFFFFF:
                raise CorruptData(f"{what} {value} exceeds 32 bits")
            return value, pos + i + 1
    raise CorruptData(f"{what} varint longer than {_MAX_VARINT} bytes")


def _head(header: Header, entries: list[tuple[int, int, int]], version: int) -> bytes:
    """The header bytes of a file (fields, name, layer table of (kind, length, crc), CRC)."""
    name = header.model_name.encode("ascii")
    if version in FIXED_LAYOUT_VERSIONS:
        fixed = _FIXED.pack(
            MAGIC,
            version,
            MODES[header.mode],
            header.flags,
            header.width,
            header.height,
            header.quality,
            header.residual_backend,
            header.map_scale,
            len(name),
            header.compact_levels,
            bytes.fromhex(header.model_hash),
        )
        table = b"".join(_ENTRY.pack(kind, length, crc) for kind, length, crc in entries)
    else:
        fixed = b"".join(
            [
                MAGIC,
                bytes([version, MODES[header.mode]]),
                put_varint(header.width),
                put_varint(header.height),
                bytes([header.quality, header.residual_backend, header.map_scale]),
                put_varint(header.compact_levels),
                bytes.fromhex(header.model_hash),
                bytes([len(name)]),
            ]
        )
        table = b"".join(
            bytes([kind]) + put_varint(length) + _U32.pack(crc) for kind, length, crc in entries
        )
    head = fixed + name + bytes([len(entries)]) + table
    return head + _U32.pack(zlib.crc32(head))


def sniff(prefix: bytes) -> bool:
    """Tell whether ``prefix`` starts like a .sem file, cheaply, for Pillow's format detection."""
    return bytes(prefix[: len(MAGIC)]) == MAGIC


def pack(header: Header, layers: dict[LayerKind, bytes], version: int | None = None) -> bytes:
    """Serialise a header and its layers into a complete .sem file; raises ValueError on bad
    input. ``version``: FORMAT_VERSION unless given; 0 writes the oldest fixed-header version
    (1-4) that holds the layers, which older releases read (tests, conformance of old files)."""
    header.validate()
    kinds = sorted(int(k) for k in layers)
    if version == 0:
        version = _version_for(kinds)
    version = FORMAT_VERSION if version is None else version
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"format version {version} is not one this module writes")
    problem = _layer_set_problem(header, kinds, version)
    if problem is not None:
        raise ValueError(problem)
    payloads = [bytes(layers[LayerKind(k)]) for k in kinds]
    for kind, payload in zip(kinds, payloads, strict=True):
        if len(payload) > 0xFFFFFFFF:
            raise ValueError(f"layer {LayerKind(kind).name} is larger than 4 GiB - 1 bytes")
    entries = [(k, len(p), zlib.crc32(p)) for k, p in zip(kinds, payloads, strict=True)]
    return b"".join([_head(header, entries, version), *payloads])


class _Fields(NamedTuple):
    """A header's fields as read, before their values are checked."""

    mode_code: int
    flags: int
    width: int
    height: int
    quality: int
    backend: int
    map_scale: int
    compact_levels: int
    hash_bytes: bytes
    name_at: int  # where the model name starts
    name_len: int


def _fixed_fields(view: memoryview) -> _Fields:
    """Versions 1-4: the 34-byte fixed header."""
    if len(view) < FIXED_HEADER_SIZE:
        raise CorruptData(
            f"truncated header: {len(view)} bytes, the fixed header alone is {FIXED_HEADER_SIZE}"
        )
    (_m, _v, mode, flags, width, height, quality, backend, scale, name_len, levels, hash_bytes) = (
        _FIXED.unpack_from(view, 0)
    )
    return _Fields(
        mode, flags, width, height, quality, backend, scale, levels, hash_bytes,
        FIXED_HEADER_SIZE, name_len,
    )  # fmt: skip


def _compact_fields(view: memoryview) -> _Fields:
    """Version 5: mode, varint sizes, three bytes, varint levels, the hash and the name length."""
    pos = len(MAGIC) + 1
    if len(view) < pos + 1:
        raise CorruptData("truncated header: file ends before the mode")
    mode = view[pos]
    width, pos = _get_varint(view, pos + 1, "width")
    height, pos = _get_varint(view, pos, "height")
    if len(view) < pos + 3:
        raise CorruptData("truncated header: file ends inside the quality, backend and map scale")
    quality, backend, scale = view[pos], view[pos + 1], view[pos + 2]
    levels, pos = _get_varint(view, pos + 3, "compact levels")
    if len(view) < pos + 9:
        raise CorruptData("truncated header: file ends inside the model hash or name length")
    hash_bytes, name_len = bytes(view[pos : pos + 8]), view[pos + 8]
    return _Fields(
        mode, 0, width, height, quality, backend, scale, levels, hash_bytes, pos + 9, name_len
    )


def _table(
    view: memoryview, at: int, count: int, version: int
) -> tuple[list[tuple[int, int, int]], int]:
    """The layer table of ``count`` entries from ``at`` and the position after it."""
    if version in FIXED_LAYOUT_VERSIONS:
        end = at + count * _ENTRY.size
        if len(view) < end + _U32.size:
            raise CorruptData(
                f"truncated header: {len(view)} bytes, the header declares {end + _U32.size} bytes"
            )
        return [_ENTRY.unpack_from(view, at + i * _ENTRY.size) for i in range(count)], end
    entries = []
    for i in range(count):
        if len(view) < at + 1:
            raise CorruptData(f"truncated header: file ends inside layer table entry {i}")
        length, pos = _get_varint(view, at + 1, f"length of layer table entry {i}")
        if len(view) < pos + _U32.size:
            raise CorruptData(f"truncated header: file ends inside layer table entry {i}")
        entries.append((view[at], length, _U32.unpack_from(view, pos)[0]))
        at = pos + _U32.size
    if len(view) < at + _U32.size:
        raise CorruptData("truncated header: file ends before the header CRC")
    return entries, at


def _parse_header(
    data: bytes | bytearray | memoryview,
) -> tuple[Header, list[tuple[int, int, int]], int]:
    """Parse and CRC-check the header and layer table; returns header, entries, header size."""
    view = memoryview(data).cast("B")
    size = len(view)
    if size == 0:
        raise CorruptData("not a .sem file (empty input)")
    if size < len(MAGIC):
        if MAGIC.startswith(bytes(view)):
            raise CorruptData(f"truncated header: {size} bytes, the magic alone is 8")
        raise CorruptData("not a .sem file (bad magic bytes)")
    if bytes(view[: len(MAGIC)]) != MAGIC:
        raise CorruptData("not a .sem file (bad magic bytes)")
    if size < len(MAGIC) + 1:
        raise CorruptData("truncated header: file ends before the format version")
    version = view[len(MAGIC)]
    if version not in SUPPORTED_VERSIONS:
        raise CorruptData(
            f"unsupported .sem format version {version} (this reader supports "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))})"
        )
    f = _fixed_fields(view) if version in FIXED_LAYOUT_VERSIONS else _compact_fields(view)
    if f.name_len > MAX_MODEL_NAME:
        raise CorruptData(f"model name length {f.name_len} exceeds {MAX_MODEL_NAME}")
    count_at = f.name_at + f.name_len
    if size < count_at + 1:
        raise CorruptData("truncated header: file ends inside the model name")
    count = view[count_at]
    if count > _MAX_LAYERS[version]:
        raise CorruptData(
            f"layer count {count} exceeds {_MAX_LAYERS[version]} (format version {version})"
        )
    entries, crc_at = _table(view, count_at + 1, count, version)
    header_size = crc_at + _U32.size
    (stored_crc,) = _U32.unpack_from(view, crc_at)
    actual_crc = zlib.crc32(view[:crc_at])
    if stored_crc != actual_crc:
        raise CorruptData(
            f"header CRC mismatch (stored {stored_crc:08x}, computed {actual_crc:08x})"
        )
    if f.mode_code not in _MODE_BY_CODE:
        raise CorruptData(f"invalid mode code {f.mode_code} (expected 1, 3 or 4)")
    try:
        model_name = bytes(view[f.name_at : count_at]).decode("ascii")
    except UnicodeDecodeError:
        raise CorruptData("model name is not ASCII") from None
    header = Header(
        width=f.width,
        height=f.height,
        mode=_MODE_BY_CODE[f.mode_code],
        model_name=model_name,
        model_hash=f.hash_bytes.hex(),
        quality=f.quality,
        residual_backend=f.backend,
        map_scale=f.map_scale,
        compact_levels=f.compact_levels,
        flags=f.flags,
    )
    problem = header.problem()
    if problem is not None:
        raise CorruptData(problem)
    problem = _layer_set_problem(header, [kind for kind, _, _ in entries], version)
    if problem is not None:
        raise CorruptData(problem)
    return header, entries, header_size


def read_header(data: bytes | bytearray | memoryview, limits: Limits | None = None) -> Header:
    """Parse and verify only the header (a prefix suffices), for ``semcodec info`` and sniffing."""
    header, _entries, _size = _parse_header(data)
    if limits is not None:
        problem = limits.check(header.width, header.height)
        if problem is not None:
            raise CorruptData(problem)
    return header


def layer_sizes(data: bytes | bytearray | memoryview) -> dict[LayerKind, int]:
    """Return each layer's declared payload size from the verified header, for reporting."""
    _header, entries, _size = _parse_header(data)
    return {LayerKind(kind): length for kind, length, _crc in entries}


def unpack(
    data: bytes | bytearray | memoryview, limits: Limits = Limits()
) -> tuple[Header, dict[LayerKind, bytes]]:
    """Verify a whole .sem file and split it into header and layers; raises CorruptData."""
    return unpack_layers(data, None, limits)


def unpack_layers(
    data: bytes | bytearray | memoryview,
    kinds: Iterable[LayerKind] | None,
    limits: Limits = Limits(),
) -> tuple[Header, dict[LayerKind, bytes]]:
    """The header and the layers named (None: all), with only those layers' CRCs checked.

    The header, the layer table and every declared length are always verified, so a reader of
    one layer (``decode --layer map``) still refuses truncated or padded files, but a damaged
    layer it does not read does not stop it.
    """
    header, entries, offset = _parse_header(data)
    problem = limits.check(header.width, header.height)
    if problem is not None:
        raise CorruptData(problem)
    view = memoryview(data).cast("B")
    size = len(view)
    for kind, length, _crc in entries:
        remaining = size - offset
        if length > remaining:
            raise CorruptData(
                f"truncated file: layer {LayerKind(kind).name} declares {length} bytes, "
                f"only {remaining} remain"
            )
        offset += length
    if offset != size:
        raise CorruptData(f"trailing garbage: {size - offset} bytes after the last layer")
    wanted = None if kinds is None else {int(k) for k in kinds}
    layers: dict[LayerKind, bytes] = {}
    offset = size - sum(length for _, length, _ in entries)
    for kind, length, crc in entries:
        if wanted is None or kind in wanted:
            chunk = view[offset : offset + length]
            actual = zlib.crc32(chunk)
            if actual != crc:
                raise CorruptData(
                    f"layer {LayerKind(kind).name} CRC mismatch "
                    f"(stored {crc:08x}, computed {actual:08x})"
                )
            layers[LayerKind(kind)] = bytes(chunk)
        offset += length
    return header, layers
