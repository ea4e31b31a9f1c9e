"""The metadata layer: the input's ICC profile, EXIF and XMP, kept through encode and decode.

A colour profile says how a viewer must show the pixels (semcodec codes the pixels as they
are, with no colour conversion); EXIF and XMP carry capture date, camera and location. cwebp
(``-metadata``), cjxl and avifenc keep them, and so does semcodec (``--metadata``).

Payload (docs/format.md §3): ``u8 version = 1`` then one zstandard frame whose header declares
its content size, at most ``MAX_METADATA`` bytes; the content is entries ``u8 kind, u32
length, bytes`` (kinds 1 ICC, 2 EXIF, 3 XMP, each at most once, in that order) that fill it
exactly. A declared size over the limit is refused before anything is allocated.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields

import zstandard

from semcodec.errors import CorruptData

VERSION = 1
MAX_METADATA = 16 << 20  # bytes of ICC + EXIF + XMP together (camera profiles are < 1 MB)
KINDS = {"icc": 1, "exif": 2, "xmp": 3}
_ENTRY = struct.Struct("<BI")
_ORIENTATION_TAG = 0x0112


@dataclass(frozen=True)
class Metadata:
    """Raw metadata blocks as Pillow reads and writes them (None: absent)."""

    icc: bytes | None = None
    exif: bytes | None = None  # starts with b"Exif\\0\\0" or the TIFF header, as Pillow gives it
    xmp: bytes | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def keep(self, which: frozenset[str]) -> Metadata:
        """Only the kinds the user asked to keep (``--metadata``)."""
        return Metadata(**{k: getattr(self, k) if k in which else None for k in KINDS})

    def sizes(self) -> dict[str, int]:
        """Bytes per present kind (for ``semcodec info``)."""
        return {k: len(getattr(self, k)) for k in KINDS if getattr(self, k)}


def parse_selection(text: str) -> frozenset[str]:
    """``all``, ``none`` or a comma list of icc, exif, xmp → the kinds to keep."""
    words = {w.strip().lower() for w in text.split(",") if w.strip()}
    if words == {"all"}:
        return frozenset(KINDS)
    if words == {"none"} or not words:
        return frozenset()
    unknown = words - set(KINDS)
    if unknown:
        raise ValueError(
            f"unknown metadata kind(s) {', '.join(sorted(unknown))}: use all, none, icc, exif, xmp"
        )
    return frozenset(words)


def encode_metadata(meta: Metadata) -> bytes:
    """The layer payload of the present kinds (empty metadata: no layer at all)."""
    body = b"".join(
        _ENTRY.pack(code, len(getattr(meta, k))) + getattr(meta, k)
        for k, code in KINDS.items()
        if getattr(meta, k)
    )
    if len(body) > MAX_METADATA:
        raise ValueError(f"metadata of {len(body)} bytes exceeds the limit of {MAX_METADATA}")
    frame = zstandard.ZstdCompressor(level=19, write_content_size=True).compress(body)
    return bytes([VERSION]) + frame


def decode_metadata(data: bytes) -> Metadata:
    """Parse and check a metadata payload; CorruptData on anything malformed."""
    if len(data) < 2 or data[0] != VERSION:
        raise CorruptData("metadata layer: unknown version or empty payload")
    frame = data[1:]
    try:
        params = zstandard.get_frame_parameters(frame)
    except zstandard.ZstdError as exc:
        raise CorruptData(f"metadata layer: {exc}") from None
    size = params.content_size
    if size in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR) or size > MAX_METADATA:
        raise CorruptData(f"metadata layer declares {size} bytes (limit {MAX_METADATA})")
    try:
        obj = zstandard.ZstdDecompressor().decompressobj()
        body = obj.decompress(frame)
        complete = obj.eof and not obj.unused_data
    except zstandard.ZstdError as exc:
        raise CorruptData(f"metadata layer: {exc}") from None
    if not complete or len(body) != size:
        raise CorruptData("metadata layer: truncated or trailing data")
    return _entries(body)


def _entries(body: bytes) -> Metadata:
    """Entries ``u8 kind, u32 length, bytes``, each kind once and in order, filling body."""
    names = {code: k for k, code in KINDS.items()}
    found: dict[str, bytes] = {}
    pos, last = 0, 0
    while pos < len(body):
        if pos + _ENTRY.size > len(body):
            raise CorruptData("metadata layer: truncated entry")
        code, length = _ENTRY.unpack_from(body, pos)
        pos += _ENTRY.size
        if code not in names or code <= last:
            raise CorruptData(f"metadata layer: unknown, repeated or unordered kind {code}")
        if length == 0 or pos + length > len(body):
            raise CorruptData("metadata layer: entry length out of range")
        found[names[code]] = body[pos : pos + length]
        pos, last = pos + length, code
    return Metadata(**found)


def upright_exif(exif: bytes | None) -> bytes | None:
    """EXIF with orientation 1: the pixels are stored already rotated (viewers must not rotate)."""
    if not exif:
        return exif
    from PIL import Image

    try:
        e = Image.Exif()
        e.load(exif)
        if e.get(_ORIENTATION_TAG, 1) == 1:
            return exif
        e[_ORIENTATION_TAG] = 1
        return e.tobytes()
    except Exception:  # noqa: BLE001 - unreadable EXIF is kept as it came
        return exif


def save_params(meta: Metadata, fmt: str) -> dict:
    """Pillow save() arguments that write the metadata into an output of format fmt."""
    fmt = fmt.upper()
    out: dict = {}
    if meta.icc and fmt in ("PNG", "JPEG", "WEBP", "TIFF"):
        out["icc_profile"] = meta.icc
    if meta.exif and fmt in ("PNG", "JPEG", "WEBP", "TIFF"):
        out["exif"] = meta.exif
    if meta.xmp:
        if fmt in ("JPEG", "WEBP"):
            out["xmp"] = meta.xmp
        elif fmt == "PNG":
            from PIL import PngImagePlugin

            info = PngImagePlugin.PngInfo()
            info.add_itxt("XML:com.adobe.xmp", meta.xmp.decode("utf-8", "replace"), zip=True)
            out["pnginfo"] = info
        elif fmt == "TIFF":  # tiffinfo would replace the EXIF tags: put XMP (tag 700) among them
            from PIL import Image

            tags = Image.Exif()
            if meta.exif:
                tags.load(meta.exif)
            tags[700] = meta.xmp
            out["exif"] = tags.tobytes()
    if fmt == "TIFF" and (meta.exif or meta.xmp):
        # Pillow's libtiff writer (any compression) fails on EXIF sub-IFDs such as GPS; its
        # own writer keeps them, uncompressed
        out["compression"] = "raw"
    return out


def metadata_of(im, upright: bool = False) -> Metadata:
    """The ICC profile, EXIF and XMP Pillow found in an opened image.

    upright: the pixels will be turned by their EXIF orientation, so the kept EXIF says 1.
    """
    info = im.info
    xmp = info.get("xmp") or info.get("XML:com.adobe.xmp")
    if isinstance(xmp, str):
        xmp = xmp.encode("utf-8")
    exif = info.get("exif")
    if not exif:
        try:
            e = im.getexif()
            exif = e.tobytes() if len(e) else None
        except Exception:  # noqa: BLE001 - unreadable EXIF is not kept
            exif = None
    if isinstance(exif, str):
        exif = exif.encode("latin-1")
    if upright:
        exif = upright_exif(exif)
    icc = info.get("icc_profile")
    return Metadata(
        icc=bytes(icc) if icc else None, exif=exif or None, xmp=bytes(xmp) if xmp else None
    )
