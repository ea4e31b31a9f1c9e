"""The metadata layer (metadata.py, container format version 2): ICC, EXIF and XMP kept."""

from __future__ import annotations

import struct

import pytest
import zstandard

from semcodec import container, metadata
from semcodec.container import Header, LayerKind, pack, unpack
from semcodec.errors import CorruptData
from semcodec.metadata import MAX_METADATA, Metadata, decode_metadata, encode_metadata

META = Metadata(icc=b"\x00\x00\x02\x0cICCPROFILE" * 20, exif=b"Exif\x00\x00MM\x00*" + b"\x01" * 50,
                xmp=b"<x:xmpmeta>hello</x:xmpmeta>")  # fmt: skip
HEADER = Header(8, 8, "RGB", "tiny", "0123456789abcdef", 50, 0, 8, 8)
LAYERS = {LayerKind.SEMANTIC_MAP: b"\x00\x01", LayerKind.COMPACT: b"\x02" * 9}


@pytest.mark.parametrize(
    "meta", [META, Metadata(icc=b"icc"), Metadata(exif=b"e", xmp=b"x"), Metadata(xmp=b"only")]
)
def test_round_trip(meta):
    assert decode_metadata(encode_metadata(meta)) == meta


def test_selection():
    assert metadata.parse_selection("all") == {"icc", "exif", "xmp"}
    assert metadata.parse_selection("none") == frozenset()
    assert metadata.parse_selection("icc, XMP") == {"icc", "xmp"}
    with pytest.raises(ValueError, match="unknown metadata kind"):
        metadata.parse_selection("icc,gps")
    assert META.keep(frozenset({"exif"})) == Metadata(exif=META.exif)
    assert not Metadata() and META


def _frame(body: bytes, content_size: bool = True) -> bytes:
    return bytes([1]) + zstandard.ZstdCompressor(write_content_size=content_size).compress(body)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "unknown version"),
        (b"\x02" + encode_metadata(META)[1:], "unknown version"),
        (b"\x01garbage-not-zstd", "metadata layer"),
        (encode_metadata(META)[:-4], "truncated"),
        (encode_metadata(META) + b"\x00", "trailing"),
        (_frame(struct.pack("<BI", 9, 1) + b"x"), "unknown, repeated or unordered kind 9"),
        (_frame(struct.pack("<BI", 2, 1) + b"x" + struct.pack("<BI", 1, 1) + b"y"), "unordered"),
        (_frame(struct.pack("<BI", 1, 5) + b"x"), "entry length out of range"),
        (_frame(struct.pack("<BI", 1, 0)), "entry length out of range"),
        (_frame(b"\x01\x02"), "truncated entry"),
        (_frame(b"abc", content_size=False), "declares"),
    ],
)
def test_damaged_payloads_are_refused_in_one_line(payload, message):
    with pytest.raises(CorruptData, match=message) as info:
        decode_metadata(payload)
    assert "\n" not in str(info.value)


def test_oversized_declared_size_is_refused_before_allocating(monkeypatch):
    """A frame declaring more than MAX_METADATA is refused from its header alone."""
    calls = []
    real = zstandard.ZstdDecompressor

    class Spy(real):  # the decompressor must never be asked
        def decompressobj(self, *a, **k):
            calls.append(1)
            return super().decompressobj(*a, **k)

    monkeypatch.setattr(zstandard, "ZstdDecompressor", Spy)
    big = zstandard.ZstdCompressor(write_content_size=True).compress(b"\x00" * (MAX_METADATA + 1))
    with pytest.raises(CorruptData, match="declares"):
        decode_metadata(b"\x01" + big)
    params = zstandard.get_frame_parameters(big)
    assert params.content_size == MAX_METADATA + 1 and calls == []


def test_too_much_metadata_is_refused_at_encode():
    with pytest.raises(ValueError, match="exceeds the limit"):
        encode_metadata(Metadata(icc=b"\x00" * (MAX_METADATA + 1)))


def test_container_writes_version_2_only_with_metadata():
    plain = pack(HEADER, LAYERS)
    with_meta = pack(HEADER, {**LAYERS, LayerKind.METADATA: encode_metadata(META)})
    assert plain[8] == 1 and with_meta[8] == 2
    _, layers = unpack(with_meta)
    assert decode_metadata(layers[LayerKind.METADATA]) == META
    assert unpack(plain)[1].keys() == LAYERS.keys()


def test_version_1_files_cannot_carry_metadata():
    data = bytearray(pack(HEADER, {**LAYERS, LayerKind.METADATA: encode_metadata(META)}))
    data[8] = 1
    import zlib

    n = data[23]
    crc_at = 34 + n + 1 + 9 * data[34 + n]
    data[crc_at : crc_at + 4] = struct.pack("<I", zlib.crc32(bytes(data[:crc_at])))
    with pytest.raises(CorruptData, match="needs format version 2"):
        unpack(bytes(data))
    assert container.SUPPORTED_VERSIONS == (1, 2)
