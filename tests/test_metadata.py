"""The metadata layer (metadata.py, container format version 2): ICC, EXIF and XMP kept."""

from __future__ import annotations

import functools
import struct

import pytest
import zstandard

from semcodec.errors import CorruptData
from semcodec.format import container, metadata
from semcodec.format.container import Header, LayerKind, pack, unpack
from semcodec.format.metadata import MAX_METADATA, Metadata, decode_metadata, encode_metadata

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
    plain = pack(HEADER, LAYERS, version=0)  # the oldest fixed-header version that holds them
    with_meta = pack(HEADER, {**LAYERS, LayerKind.METADATA: encode_metadata(META)}, version=0)
    assert plain[8] == 1 and with_meta[8] == 2
    _, layers = unpack(with_meta)
    assert decode_metadata(layers[LayerKind.METADATA]) == META
    assert unpack(plain)[1].keys() == LAYERS.keys()


def test_version_1_files_cannot_carry_metadata():
    data = bytearray(pack(HEADER, {**LAYERS, LayerKind.METADATA: encode_metadata(META)}, 2))
    data[8] = 1
    import zlib

    n = data[23]
    crc_at = 34 + n + 1 + 9 * data[34 + n]
    data[crc_at : crc_at + 4] = struct.pack("<I", zlib.crc32(bytes(data[:crc_at])))
    with pytest.raises(CorruptData, match="needs format version 2"):
        unpack(bytes(data))
    assert container.SUPPORTED_VERSIONS == (1, 2, 3, 4, 5)


# ----- through the CLI, the Python API and the Pillow plugin ------------------------------------
@functools.cache
def _profile() -> bytes:
    """An ICC profile (its header holds the creation time: made once)."""
    from PIL import ImageCms

    return ImageCms.ImageCmsProfile(ImageCms.createProfile("LAB")).tobytes()


XMP = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF/></x:xmpmeta>'


def _exif(orientation: int) -> bytes:
    from PIL import Image

    e = Image.Exif()
    e[0x0112] = orientation
    e[0x010F] = "ACME"
    e.get_ifd(0x8825)[2] = (51.0, 30.0, 12.5)  # GPS latitude
    return e.tobytes()


def _photo(path, fmt: str, orientation: int = 1):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:40, 0:56]
    rgb = np.stack([x * 4, y * 5, (x + y) * 2], -1) + rng.integers(0, 20, (40, 56, 3))
    img = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
    kw = {"icc_profile": _profile(), "exif": _exif(orientation)}
    if fmt == "PNG":
        from PIL import PngImagePlugin

        info = PngImagePlugin.PngInfo()
        info.add_itxt("XML:com.adobe.xmp", XMP.decode())
        kw["pnginfo"] = info
    else:
        kw["xmp"] = XMP
    img.save(path, fmt, **kw)
    return img


def _cli(*args):
    from click.testing import CliRunner

    from semcodec.cli import cli

    return CliRunner().invoke(cli, list(args))


def _xmp_of(im) -> bytes | None:
    x = im.info.get("xmp") or im.info.get("XML:com.adobe.xmp")
    return x.encode() if isinstance(x, str) else x


@pytest.mark.slow
@pytest.mark.parametrize(("src_fmt", "suffix"), [("PNG", ".png"), ("JPEG", ".jpg")])
@pytest.mark.parametrize("out_fmt", ["png", "jpeg", "webp", "tiff"])
def test_cli_keeps_icc_exif_and_xmp_byte_for_byte(tmp_path, src_fmt, suffix, out_fmt):
    from PIL import Image

    src = tmp_path / f"in{suffix}"
    _photo(src, src_fmt)
    with Image.open(src) as im:
        want_exif = im.getexif().tobytes()
    r = _cli("encode", str(src), "-o", str(tmp_path / "a.sem"), "--model", "tiny", "-q", "40")
    assert r.exit_code == 0, r.output
    out = tmp_path / f"out.{out_fmt}"
    r = _cli("decode", str(tmp_path / "a.sem"), "-o", str(out), "--format", out_fmt)
    assert r.exit_code == 0, r.output
    with Image.open(out) as im:
        assert im.info.get("icc_profile") == _profile()
        if out_fmt != "tiff":  # a TIFF holds EXIF as tags of its own IFD: values, not bytes
            assert im.getexif().tobytes() == want_exif
        assert im.getexif()[0x010F] == "ACME" and im.getexif().get_ifd(0x8825)[2] == (
            51.0,
            30.0,
            12.5,
        )
        if out_fmt != "tiff":  # Pillow reads a TIFF's XMP tag back only through getxmp()
            assert _xmp_of(im) == XMP


def test_orientation_is_applied_and_stored_as_1(tmp_path):
    from PIL import Image

    src = tmp_path / "rot.jpg"
    _photo(src, "JPEG", orientation=6)
    _cli("encode", str(src), "-o", str(tmp_path / "r.sem"), "--model", "tiny", "-q", "30")
    r = _cli("decode", str(tmp_path / "r.sem"), "-o", str(tmp_path / "r.png"))
    assert r.exit_code == 0, r.output
    with Image.open(tmp_path / "r.png") as im:
        assert im.size == (40, 56)  # turned upright once, by the encoder
        exif = im.getexif()
        assert exif[0x0112] == 1 and exif.get_ifd(0x8825)[2] == (51.0, 30.0, 12.5)


@pytest.mark.parametrize(
    ("kinds", "kept"), [("none", set()), ("icc", {"icc"}), ("exif,xmp", {"exif", "xmp"})]
)
def test_metadata_selection(tmp_path, kinds, kept):
    from PIL import Image

    from semcodec.format import container

    src = tmp_path / "in.png"
    _photo(src, "PNG")
    sem = tmp_path / "a.sem"
    r = _cli(
        "encode",
        str(src),
        "-o",
        str(sem),
        "--model",
        "tiny",
        "-q",
        "20",
        "--metadata",
        kinds,
        "--no-gating",  # the gating layer would make any file version 3
    )
    assert r.exit_code == 0, r.output
    data = sem.read_bytes()
    layers = container.unpack(data)[1]
    assert (LayerKind.METADATA in layers) == bool(kept) and data[8] == 5
    _cli("decode", str(sem), "-o", str(tmp_path / "a.png"))
    with Image.open(tmp_path / "a.png") as im:
        assert ("icc_profile" in im.info) == ("icc" in kept)
        assert (len(im.getexif()) > 0) == ("exif" in kept)
        assert (_xmp_of(im) is not None) == ("xmp" in kept)
    info = _cli("info", str(sem))
    assert ("  metadata   " in info.output) == bool(kept)
    for k in kept:
        assert k.upper() in info.output


def test_bad_metadata_selection_is_a_usage_error(tmp_path):
    src = tmp_path / "in.png"
    _photo(src, "PNG")
    r = _cli("encode", str(src), "--model", "tiny", "--metadata", "icc,gps")
    assert r.exit_code == 2 and "unknown metadata kind" in r.output
    assert not (tmp_path / "in.sem").exists()


def _with_layer(data: bytes, payload: bytes) -> bytes:
    """The same file with its metadata payload replaced (CRCs recomputed: only the payload is bad)."""
    header, layers = unpack(data)
    layers[LayerKind.METADATA] = payload
    return pack(header, layers)


@pytest.mark.parametrize(
    "payload",
    [b"\x01\x28\xb5\x2f\xfd", b"\x07abc", encode_metadata(META)[:-3]],
    ids=["cut", "version", "trunc"],
)
def test_damaged_metadata_layer_is_one_line_and_no_output(tmp_path, payload):
    src = tmp_path / "in.png"
    _photo(src, "PNG")
    sem = tmp_path / "a.sem"
    _cli("encode", str(src), "-o", str(sem), "--model", "tiny", "-q", "20")
    bad = tmp_path / "bad.sem"
    bad.write_bytes(_with_layer(sem.read_bytes(), payload))
    from click.testing import CliRunner

    from semcodec.cli import cli

    r = CliRunner().invoke(cli, ["decode", str(bad), "-o", str(tmp_path / "bad.png")])
    assert r.exit_code == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "metadata layer" in lines[0]
    assert not (tmp_path / "bad.png").exists()


def test_python_api_and_pillow_plugin_expose_the_metadata(tmp_path):
    from PIL import Image

    import semcodec
    from semcodec.encoder.codec import Codec

    src = tmp_path / "in.jpg"
    _photo(src, "JPEG")
    with Image.open(src) as im:
        data = Codec("tiny").encode(im, quality=30)  # a PIL image keeps its info too
    result = Codec("tiny").decode(data)
    assert result.metadata.icc == _profile() and result.metadata.xmp == XMP
    (tmp_path / "p.sem").write_bytes(data)
    assert semcodec  # the plugin is registered on import
    with Image.open(tmp_path / "p.sem") as im:
        assert im.info["icc_profile"] == _profile() and im.info["xmp"] == XMP
        assert im.getexif()[0x010F] == "ACME"
        im.load()
    # and Pillow's save keeps what the image carries, or what save() is given
    with Image.open(src) as im:
        im.save(tmp_path / "s.sem", model="tiny", quality=10, icc_profile=b"other-profile")
    with Image.open(tmp_path / "s.sem") as im:
        assert im.info["icc_profile"] == b"other-profile" and im.info["xmp"] == XMP
