"""Tests for the .sem container: round trips, every rejection, mutation fuzzing, limits."""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import pytest

from semcodec.errors import CorruptData
from semcodec.format.container import (
    FIXED_HEADER_SIZE,
    MAGIC,
    Header,
    LayerKind,
    Limits,
    header_size,
    layer_sizes,
    pack,
    read_header,
    sniff,
    unpack,
)

HEADER = Header(
    width=7,
    height=13,
    mode="RGB",
    model_name="tiny-v1",
    model_hash="0123456789abcdef",
    quality=75,
    residual_backend=1,
    map_scale=8,
    compact_levels=5,
)
LAYERS = {
    LayerKind.SEMANTIC_MAP: b"map-bytes",
    LayerKind.COMPACT: bytes(range(256)),
    LayerKind.RESIDUAL: b"\x00" * 40 + b"residual",
}


def raw_file(
    *,
    magic: bytes = MAGIC,
    version: int = 1,
    mode: int = 3,
    flags: int = 0,
    width: int = 7,
    height: int = 13,
    quality: int = 75,
    backend: int = 1,
    map_scale: int = 8,
    name: bytes = b"tiny-v1",
    name_len: int | None = None,
    levels: int = 5,
    hash_bytes: bytes = bytes.fromhex("0123456789abcdef"),
    layers: list[tuple[int, bytes]] | None = None,
    count: int | None = None,
    fix_crc: bool = True,
    lengths: dict[int, int] | None = None,
) -> bytes:
    """Build a file by hand (independently of pack) so single fields can be made invalid."""
    if layers is None:
        layers = [(int(k), v) for k, v in LAYERS.items()]
    head = struct.pack(
        "<8sBBHIIBBBBH8s",
        magic,
        version,
        mode,
        flags,
        width,
        height,
        quality,
        backend,
        map_scale,
        len(name) if name_len is None else name_len,
        levels,
        hash_bytes,
    )
    head += name + bytes([len(layers) if count is None else count])
    for kind, payload in layers:
        length = (lengths or {}).get(kind, len(payload))
        head += struct.pack("<BII", kind, length, zlib.crc32(payload))
    crc = zlib.crc32(head) if fix_crc else zlib.crc32(head) ^ 1
    return head + struct.pack("<I", crc) + b"".join(p for _, p in layers)


def leb128(value: int) -> bytes:
    """Unsigned LEB128 in its shortest form, written out from docs/format.md §14."""
    out = b""
    while value >= 0x80:
        out += bytes([value & 0x7F | 0x80])
        value >>= 7
    return out + bytes([value])


def raw_v5(
    *,
    width: bytes | None = None,
    levels: bytes | None = None,
    layers: list[tuple[int, bytes]] | None = None,
    lengths: dict[int, bytes] | None = None,
    name: bytes = b"tiny-v1",
) -> bytes:
    """A version-5 file built by hand from docs/format.md §14 (independently of pack); the
    varints of width, levels and layer lengths may be given as raw bytes (non-shortest forms)."""
    if layers is None:
        layers = [(int(k), v) for k, v in LAYERS.items()]
    head = MAGIC + bytes([5, 3]) + (leb128(7) if width is None else width) + leb128(13)
    head += bytes([75, 1, 8]) + (leb128(5) if levels is None else levels)
    head += bytes.fromhex("0123456789abcdef") + bytes([len(name)]) + name + bytes([len(layers)])
    for kind, payload in layers:
        length = (lengths or {}).get(kind, leb128(len(payload)))
        head += bytes([kind]) + length + struct.pack("<I", zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + b"".join(p for _, p in layers)


def rejects(data: bytes, fragment: str, limits: Limits = Limits()) -> str:
    """Assert that unpack raises CorruptData with a one-line message containing ``fragment``."""
    with pytest.raises(CorruptData) as info:
        unpack(data, limits)
    message = str(info.value)
    assert fragment in message, message
    assert "\n" not in message
    return message


def test_round_trip() -> None:
    data = pack(HEADER, LAYERS)
    header, layers = unpack(data)
    assert header == HEADER
    assert layers == LAYERS
    assert all(type(v) is bytes for v in layers.values())
    assert list(layers) == sorted(layers)
    assert read_header(data) == HEADER
    assert layer_sizes(data) == {k: len(v) for k, v in LAYERS.items()}
    assert sniff(data[:16]) and not sniff(b"\x89PNG\r\n\x1a\n")


def test_hand_built_file_matches_pack() -> None:
    """The spec in docs/format.md (mirrored by raw_file and raw_v5) and the implementation
    agree byte for byte, in the fixed layout (version 1) and the compact one (version 5)."""
    assert raw_file() == pack(HEADER, LAYERS, version=1)
    assert raw_v5() == pack(HEADER, LAYERS)
    assert unpack(raw_v5()) == (HEADER, LAYERS)


def test_header_size_formula() -> None:
    data = pack(HEADER, LAYERS, version=1)
    header_size = FIXED_HEADER_SIZE + len("tiny-v1") + 1 + 9 * len(LAYERS) + 4
    assert len(data) == header_size + sum(len(v) for v in LAYERS.values())
    # version 5: magic, version, mode, 1-byte width and height, 3 bytes, 1-byte levels, hash,
    # name length and name, layer count, entries of kind + varint length + CRC, header CRC
    data = pack(HEADER, LAYERS)
    entries = (1 + 1 + 4) + (1 + 2 + 4) + (1 + 1 + 4)  # 9, 256 and 48 bytes of payload
    header_size = 8 + 2 + 1 + 1 + 3 + 1 + 8 + 1 + len("tiny-v1") + 1 + entries + 4
    assert len(data) == header_size + sum(len(v) for v in LAYERS.values())


def test_version_5_is_written_and_versions_1_to_4_on_request() -> None:
    assert pack(HEADER, LAYERS)[8] == 5
    assert pack(HEADER, LAYERS, version=0)[8] == 1  # the oldest that holds the layers
    with_enhance = {**LAYERS, LayerKind.ENHANCE: b"e"}
    assert pack(HEADER, with_enhance, version=0)[8] == 4
    for version in (1, 2, 3, 4, 5):
        assert unpack(pack(HEADER, LAYERS, version=version)) == (HEADER, LAYERS)
    with pytest.raises(ValueError, match="needs format version 4"):
        pack(HEADER, with_enhance, version=3)
    with pytest.raises(ValueError, match="format version 6"):
        pack(HEADER, LAYERS, version=6)


def test_version_5_file_without_prediction() -> None:
    """Version 5 lets a file with no prediction leave out COMPACT and GATING (a residual is
    then required); older versions still need one of them."""
    m, r = LayerKind.SEMANTIC_MAP, LayerKind.RESIDUAL
    plain = {m: b"map", r: b"residual"}
    assert unpack(pack(HEADER, plain)) == (HEADER, plain)
    for version in (1, 2, 3, 4):
        with pytest.raises(ValueError, match="missing required layer COMPACT"):
            pack(HEADER, plain, version=version)
    rejects(raw_v5(layers=[(m, b"map")]), "needs a RESIDUAL layer")
    rejects(raw_file(layers=[(m, b"a"), (r, b"")]), "missing required layer COMPACT")


def test_version_5_varints() -> None:
    """Sizes and lengths are LEB128 in their shortest form, below 2**32."""
    big = Header(**{**HEADER.__dict__, "width": 0xFFFFFFFF, "height": 300, "compact_levels": 65535})
    assert read_header(pack(big, LAYERS)) == big
    rejects(raw_v5(width=b"\x87\x00"), "width is not in its shortest varint form")
    rejects(raw_v5(width=b"\xff\xff\xff\xff\x7f"), "width 34359738367 exceeds 32 bits")
    rejects(raw_v5(width=b"\x80\x80\x80\x80\x80\x01"), "width varint longer than 5 bytes")
    rejects(raw_v5(levels=b"\x85\x00"), "compact levels is not in its shortest varint form")
    entry = {int(LayerKind.COMPACT): b"\x80\x82\x00"}
    rejects(raw_v5(lengths=entry), "length of layer table entry 1 is not in its shortest")
    huge = {int(LayerKind.RESIDUAL): leb128(0xFFFFFFFF)}
    rejects(raw_v5(lengths=huge), "truncated file: layer RESIDUAL declares 4294967295 bytes")


@pytest.mark.parametrize(
    ("mode", "backend", "layers"),
    [
        ("L", 0, {LayerKind.SEMANTIC_MAP: b"m", LayerKind.COMPACT: b"c"}),
        ("RGB", 2, {**LAYERS}),
        ("RGBA", 0, {LayerKind.SEMANTIC_MAP: b"", LayerKind.COMPACT: b"", LayerKind.ALPHA: b"a"}),
    ],
)
def test_round_trip_variants(mode: str, backend: int, layers: dict[LayerKind, bytes]) -> None:
    header = Header(
        width=65535,
        height=1,
        mode=mode,
        model_name="x" * 64,
        model_hash="ffffffffffffffff",
        quality=100,
        residual_backend=backend,
        map_scale=255,
        compact_levels=65535,
    )
    assert unpack(pack(header, layers)) == (header, layers)
    assert unpack(bytearray(pack(header, layers))) == (header, layers)


def test_empty_and_foreign_input() -> None:
    rejects(b"", "not a .sem file")
    rejects(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "not a .sem file")
    rejects(b"hello", "not a .sem file")
    rejects(MAGIC[:5], "truncated header")


def test_unknown_version() -> None:
    rejects(raw_file(version=6), "unsupported .sem format version 6")
    rejects(raw_file(version=0), "unsupported .sem format version 0")


def test_truncated_header() -> None:
    data = pack(HEADER, LAYERS, version=1)
    for cut in (8, 9, 20, FIXED_HEADER_SIZE, FIXED_HEADER_SIZE + 3, FIXED_HEADER_SIZE + 8, 70):
        rejects(data[:cut], "truncated header")
    data = pack(HEADER, LAYERS)
    for cut in range(8, len(data) - sum(map(len, LAYERS.values()))):
        rejects(data[:cut], "truncated header")


def test_header_crc_mismatch() -> None:
    rejects(raw_file(fix_crc=False), "header CRC mismatch")


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"mode": 2}, "invalid mode code 2"),
        ({"mode": 0}, "invalid mode code 0"),
        ({"quality": 101}, "quality 101 out of range"),
        ({"backend": 3}, "unknown residual backend code 3"),
        ({"flags": 1}, "reserved flags must be 0"),
        ({"map_scale": 0}, "map scale 0 out of range"),
        ({"levels": 1}, "compact levels 1 out of range"),
        ({"name": b""}, "model name length 0"),
        ({"name": b"caf\xe9"}, "model name is not ASCII"),
        ({"name": b"a\nb"}, "non-printable"),
        ({"name": b"x" * 65}, "model name length 65 exceeds 64"),
        ({"width": 0}, "zero or"),
        ({"height": 0}, "zero or"),
    ],
)
def test_bad_field_values(fields: dict, fragment: str) -> None:
    rejects(raw_file(**fields), fragment)


def test_bad_layer_tables() -> None:
    m, c, r = LayerKind.SEMANTIC_MAP, LayerKind.COMPACT, LayerKind.RESIDUAL
    rejects(raw_file(layers=[(m, b"a"), (m, b"b"), (c, b"c"), (r, b"")]), "duplicate layer kind")
    rejects(raw_file(layers=[(m, b"a"), (c, b"c"), (9, b"")]), "unknown layer kind 9")
    rejects(raw_file(layers=[(m, b"a"), (c, b"c"), (0, b"")]), "unknown layer kind 0")
    rejects(raw_file(layers=[(c, b"c"), (m, b"a"), (r, b"")]), "ascending")
    rejects(raw_file(layers=[(m, b"a"), (r, b"")]), "missing required layer COMPACT")
    rejects(raw_file(layers=[(m, b"a"), (c, b"c")]), "requires a RESIDUAL layer")
    rejects(raw_file(backend=0), "RESIDUAL layer present but residual backend is 0")
    rejects(raw_file(mode=4), "mode RGBA requires an ALPHA layer")
    alpha = [(m, b"a"), (c, b"c"), (r, b""), (LayerKind.ALPHA, b"x")]
    rejects(raw_file(layers=alpha), "ALPHA layer present but mode is RGB")
    rejects(raw_file(layers=[*alpha, (4, b"")], count=5), "layer count 5 exceeds 4")


def test_layer_lengths_checked_before_slicing() -> None:
    huge = raw_file(lengths={int(LayerKind.RESIDUAL): 0xFFFFFFFF})
    message = rejects(huge, "truncated file: layer RESIDUAL declares 4294967295 bytes")
    assert "remain" in message


def test_truncation_and_trailing_garbage() -> None:
    data = pack(HEADER, LAYERS)
    rejects(data[:-1], "truncated file: layer RESIDUAL")
    rejects(data[: len(data) - sum(map(len, LAYERS.values()))], "truncated file")
    rejects(data + b"\x00", "trailing garbage: 1 bytes")
    rejects(data + b"garbage!", "trailing garbage: 8 bytes")


def test_layer_crc_mismatch() -> None:
    data = bytearray(pack(HEADER, LAYERS))
    data[-1] ^= 0x40
    rejects(bytes(data), "layer RESIDUAL CRC mismatch")
    data = bytearray(pack(HEADER, LAYERS))
    header_size = len(data) - sum(map(len, LAYERS.values()))
    data[header_size] ^= 0x01
    rejects(bytes(data), "layer SEMANTIC_MAP CRC mismatch")


def test_limits_enforced_before_allocation() -> None:
    big = raw_file(width=10**9, height=10**9)
    tracemalloc.start()
    try:
        rejects(big, "exceed the limit of 65535x65535")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    rejects(raw_file(width=60000, height=60000), "exceeds the limit of 268435456 pixels")
    small = Limits(max_width=6, max_height=100, max_pixels=10**6)
    rejects(raw_file(), "exceed the limit of 6x100", limits=small)
    rejects(raw_file(), "pixels", limits=Limits(max_pixels=90))
    assert unpack(raw_file(), Limits(max_width=7, max_height=13, max_pixels=91))[0] == HEADER
    # read_header reports the header for `semcodec info`; limits only when asked.
    assert read_header(big).width == 10**9
    with pytest.raises(CorruptData, match="exceed the limit"):
        read_header(big, Limits())


def test_read_header_needs_only_the_header() -> None:
    data = pack(HEADER, LAYERS)
    header_size = len(data) - sum(map(len, LAYERS.values()))
    assert read_header(data[:header_size]) == HEADER
    with pytest.raises(CorruptData, match="truncated header"):
        read_header(data[: header_size - 1])
    with pytest.raises(CorruptData, match="header CRC mismatch"):
        read_header(raw_file(fix_crc=False))


def test_pack_rejects_invalid_input() -> None:
    bad = [
        {"mode": "CMYK"},
        {"quality": -1},
        {"residual_backend": 7},
        {"model_name": "é"},
        {"model_name": "x" * 65},
        {"model_hash": "0123456789ABCDEF"},
        {"model_hash": "0123"},
        {"width": 0},
        {"flags": 2},
        {"compact_levels": 65536},
    ]
    for change in bad:
        fields = {**HEADER.__dict__, **change}
        with pytest.raises(ValueError):
            pack(Header(**fields), LAYERS)
    with pytest.raises(ValueError, match="needs a RESIDUAL layer"):
        pack(HEADER, {LayerKind.SEMANTIC_MAP: b""})
    with pytest.raises(ValueError, match="missing required layer"):
        pack(HEADER, {LayerKind.SEMANTIC_MAP: b""}, version=4)
    with pytest.raises(ValueError, match="unknown layer kind"):
        pack(HEADER, {**LAYERS, 9: b""})  # type: ignore[dict-item]


@pytest.mark.slow
def test_mutation_fuzz() -> None:
    """Every single-byte change (all 255 other values at every position) and every truncation
    of a small RGBA file is caught: CRCs cover every byte of the file."""
    rgba = Header(**{**HEADER.__dict__, "mode": "RGBA"})
    for version in (4, 5):
        data = pack(rgba, {**LAYERS, LayerKind.ALPHA: b"\xff" * 17}, version=version)
        assert len(data) < 500  # about 100,000 cases, well under a second
        _every_change_caught(data)


def _every_change_caught(data: bytes) -> None:
    """Assert that unpack refuses every single-byte change and every truncation of data."""
    missed = []
    for pos in range(len(data)):
        for value in range(256):
            if value == data[pos]:
                continue
            mutated = bytearray(data)
            mutated[pos] = value
            try:
                unpack(bytes(mutated))
            except CorruptData:
                continue
            missed.append((pos, value))
    assert not missed, f"{len(missed)} single-byte changes accepted, first {missed[:5]}"
    for cut in range(len(data)):
        with pytest.raises(CorruptData):
            unpack(data[:cut])


@pytest.mark.parametrize("name", ["tiny", "default", "m" * 64])
def test_header_size_is_what_pack_writes_besides_the_payloads(name: str) -> None:
    header = Header(77, 51, "RGBA", name, "0" * 16, 40, 2, 8, 16)
    layers = {
        LayerKind.SEMANTIC_MAP: b"m" * 5,
        LayerKind.COMPACT: b"c" * 300,
        LayerKind.RESIDUAL: b"r" * 17,
        LayerKind.ALPHA: b"a" * 2,
    }
    for extra in ({}, {LayerKind.GATING: b"g" * 3, LayerKind.ENHANCE: b"e"}):
        every = {**layers, **extra}
        lengths = {k: len(v) for k, v in every.items()}
        for version in (4, 5):
            size = len(pack(header, every, version=version)) - sum(lengths.values())
            assert header_size(header, lengths, version) == size
