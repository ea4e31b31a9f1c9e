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
    """The spec in docs/format.md (mirrored by raw_file) and the implementation agree byte for byte."""
    assert raw_file() == pack(HEADER, LAYERS)


def test_header_size_formula() -> None:
    data = pack(HEADER, LAYERS)
    header_size = FIXED_HEADER_SIZE + len("tiny-v1") + 1 + 9 * len(LAYERS) + 4
    assert len(data) == header_size + sum(len(v) for v in LAYERS.values())


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
    rejects(raw_file(version=5), "unsupported .sem format version 5")
    rejects(raw_file(version=0), "unsupported .sem format version 0")


def test_truncated_header() -> None:
    data = pack(HEADER, LAYERS)
    for cut in (8, 9, 20, FIXED_HEADER_SIZE, FIXED_HEADER_SIZE + 3, FIXED_HEADER_SIZE + 8, 70):
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
    with pytest.raises(ValueError, match="missing required layer"):
        pack(HEADER, {LayerKind.SEMANTIC_MAP: b""})
    with pytest.raises(ValueError, match="unknown layer kind"):
        pack(HEADER, {**LAYERS, 9: b""})  # type: ignore[dict-item]


@pytest.mark.slow
def test_mutation_fuzz() -> None:
    """Every single-byte change (all 255 other values at every position) and every truncation
    of a small RGBA file is caught: CRCs cover every byte of the file."""
    rgba = Header(**{**HEADER.__dict__, "mode": "RGBA"})
    data = pack(rgba, {**LAYERS, LayerKind.ALPHA: b"\xff" * 17})
    assert len(data) < 500  # about 100,000 cases, well under a second
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
        size = len(pack(header, every)) - sum(len(v) for v in every.values())
        assert header_size(name, every) == size
