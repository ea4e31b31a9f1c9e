"""Fuzzing harness for the .sem container and the entropy decoders (atheris, else seeded mutation).

    python fuzz/fuzz_decoders.py --seconds 600                 # atheris (libFuzzer) if installed
    python fuzz/fuzz_decoders.py --seconds 600 --mode random   # seeded random mutation, no deps

The first input byte selects the target, the next bytes the sizes the decoder is asked for:

    0 container.unpack          3 native residual decode   5 Codec.decode of a whole file whose
    1 semantic_map.decode_map   4 avif residual decode       CRCs are recomputed first, so hostile
    2 compact.decode_compact                                  payloads reach the payload decoders
    6 metadata  7 gating  8 the map of a whole file  9 the ENHANCE layer  10 roi.decode_roi (ROI)
    11 the ENHANCE layer with a network update (first-layer width 1 + byte 3 % 16)

The contract checked on every input: the decoder returns a result of exactly the requested shape,
dtype and value range, or raises ``SemcodecError`` with a one-line message. Anything else (another
exception type, a wrong shape, more than --case-timeout seconds, a case raising the peak RSS by
over 1 GiB, or overall growth over 1 GiB in random mode; oneDNN's kernel cache is capped at 64
shapes so that its growth is not mistaken for a leak) is a crash: atheris stops and writes the input under out/fuzz/; the random mode records it and goes on.
Statistics go to out/fuzz/stats-<mode>.json. The helpers (``fix_crcs``, ``mutate``,
``seed_files``) are also used by tests/test_robustness.py, so this module imports no fuzzing
library at import time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

OUT = Path("out/fuzz")
TARGETS = (
    "container",
    "map",
    "compact",
    "native",
    "avif",
    "codec",
    "metadata",
    "gating",
    "mapfile",
    "enhance",
    "roi",
    "update",
)
_ENTRY = 9  # bytes per layer-table entry
_FIXED = 34  # fixed header bytes


# ----- .sem structure helpers (no semcodec import needed) -------------------------------------
def header_layout(data: bytes) -> tuple[int, int, list[tuple[int, int]]] | None:
    """(offset of layer_count, header size, [(offset of the entry's CRC, declared length)]),
    if parsable; versions 1-4's fixed header or version 5's varint one."""
    if len(data) > 8 and data[8] == 5:
        return _compact_layout(data)
    if len(data) < _FIXED + 1:
        return None
    count_at = _FIXED + data[23]
    if len(data) <= count_at:
        return None
    count = data[count_at]
    header_size = count_at + 1 + _ENTRY * count + 4
    if count > 4 or len(data) < header_size:
        return None
    entries = []
    for i in range(count):
        at = count_at + 1 + _ENTRY * i
        entries.append((at + 5, struct.unpack_from("<I", data, at + 1)[0]))
    return count_at, header_size, entries


def _varint(data: bytes, pos: int) -> tuple[int, int] | None:
    """A LEB128 value and the position after it, None past the end or beyond 5 bytes."""
    from semcodec.errors import CorruptData
    from semcodec.format.varint import get_varint

    try:
        return get_varint(data, pos)
    except CorruptData:
        return None


def _compact_layout(data: bytes) -> tuple[int, int, list[tuple[int, int]]] | None:
    """header_layout of version 5 (docs/format.md §14), without checking any value."""
    pos = 10
    for _field in range(2):  # width, height
        got = _varint(data, pos)
        if got is None:
            return None
        pos = got[1]
    got = _varint(data, pos + 3)  # after quality, backend, map_scale: compact levels
    if got is None or got[1] + 9 > len(data):
        return None
    count_at = got[1] + 9 + data[got[1] + 8]
    if count_at >= len(data) or data[count_at] > 8:
        return None
    pos, entries = count_at + 1, []
    for _entry in range(data[count_at]):
        got = _varint(data, pos + 1)
        if got is None or got[1] + 4 > len(data):
            return None
        entries.append((got[1], got[0]))
        pos = got[1] + 4
    return (count_at, pos + 4, entries) if pos + 4 <= len(data) else None


def layer_boundaries(data: bytes) -> list[int]:
    """Offsets where the header ends and each payload ends (truncation points of interest)."""
    layout = header_layout(data)
    if layout is None:
        return []
    _, offset, entries = layout
    points = [_FIXED, offset - 4, offset]
    for _, length in entries:
        offset += length
        points.append(offset)
    return points


def fix_crcs(data: bytes) -> bytes:
    """Recompute every layer CRC (where the payload is present) and the header CRC."""
    layout = header_layout(data)
    if layout is None:
        return data
    out = bytearray(data)
    _, offset, entries = layout
    for crc_at, length in entries:
        if offset + length <= len(out):
            struct.pack_into("<I", out, crc_at, zlib.crc32(out[offset : offset + length]))
        offset += length
    crc_at = layout[1] - 4
    struct.pack_into("<I", out, crc_at, zlib.crc32(out[:crc_at]))
    return bytes(out)


def split_file(data: bytes) -> tuple[object, list[tuple[int, int, int]], list[bytes]]:
    """(header, table entries, payloads) of a valid file of any format version (the
    container's own parser: version 5's varint layout has no fixed offsets)."""
    from semcodec.format import container

    header, entries, offset = container._parse_header(data)
    payloads = []
    for _kind, length, _crc in entries:
        payloads.append(data[offset : offset + length])
        offset += length
    return header, entries, payloads


def reheader(
    data: bytes,
    lengths: dict[int, int] | None = None,
    payloads: dict[int, bytes] | None = None,
    **fields,
) -> bytes:
    """A valid file with header fields replaced, table entries' declared lengths set (by
    index) and payloads replaced (by index, their lengths and CRCs made to match), the header
    CRC recomputed, in the file's own format version."""
    from dataclasses import replace

    from semcodec.format import container

    header, entries, parts = split_file(data)
    for i, payload in (payloads or {}).items():
        parts[i] = payload
        entries[i] = (entries[i][0], len(payload), zlib.crc32(payload))
    entries = [(k, (lengths or {}).get(i, n), c) for i, (k, n, c) in enumerate(entries)]
    head = container._head(replace(header, **fields), entries, data[len(container.MAGIC)])
    return head + b"".join(parts)


def _edit_payload(
    rng: random.Random, op: str, payload: bytearray, others: list[bytes]
) -> bytearray:
    """A payload operator on one layer's bytes (``others``: every layer's, for a swap)."""
    if op == "payload_swap":
        payload = bytearray(rng.choice(others))
    elif op == "payload_bitflip" and payload:
        for _ in range(rng.choice((1, 1, 3))):
            payload[rng.randrange(len(payload))] ^= 1 << rng.randrange(8)
    elif op == "payload_overwrite" and payload:
        for _ in range(rng.choice((1, 2, 8))):
            payload[rng.randrange(len(payload))] = rng.choice((0, 255, rng.randrange(256)))
    elif op == "payload_insert":
        pos = rng.randrange(len(payload) + 1)
        payload[pos:pos] = rng.randbytes(rng.choice((1, 4, 64)))
    elif op == "payload_delete" and payload:
        pos = rng.randrange(len(payload))
        del payload[pos : pos + rng.choice((1, 4, 64))]
    return payload


def _mutate_compact(rng: random.Random, op: str, data: bytes) -> bytes:
    """Version 5's structured operators: the same mutations, made through its varint layout."""
    header, entries, parts = split_file(data)
    if op == "huge_length":
        i = rng.randrange(len(entries))
        return reheader(data, lengths={i: rng.choice(_HUGE + (len(data), len(data) + 1))})
    if op == "huge_dims":
        w = rng.choice(_HUGE[:-1] + (rng.randrange(1, 1 << 32),))
        h = rng.choice(_HUGE[:-1] + (rng.randrange(1, 256),))
        return reheader(data, width=w, height=h)
    if op == "header_field":  # any header byte, the header CRC recomputed where it was
        b = bytearray(data)
        crc_at = len(data) - sum(map(len, parts)) - 4
        b[rng.randrange(8, crc_at)] = rng.randrange(256)
        struct.pack_into("<I", b, crc_at, zlib.crc32(b[:crc_at]))
        return bytes(b)
    i = rng.randrange(len(parts))
    payload = _edit_payload(rng, op, bytearray(parts[i]), parts)
    return reheader(data, payloads={i: bytes(payload)})


_HUGE = (0xFFFFFFFF, 0x7FFFFFFF, 0x10000000, 0x01000000, 65536, 65535, 16384, 4096, 0)


def mutate(rng: random.Random, data: bytes) -> tuple[bytes, str, bool]:
    """One seeded hostile variant of a valid file: (bytes, operator name, CRCs were fixed)."""
    op = rng.choice(
        (
            "bitflip", "overwrite", "truncate", "truncate_boundary", "insert", "delete",
            "huge_length", "huge_dims", "header_field", "payload_bitflip", "payload_overwrite",
            "payload_insert", "payload_delete", "payload_swap",
        )
    )  # fmt: skip
    b = bytearray(data)
    fixed = op.startswith("payload") or op in ("huge_length", "huge_dims", "header_field")
    if fixed and data[8] == 5:
        return _mutate_compact(rng, op, data), op, fixed
    layout = header_layout(data)
    assert layout is not None, "mutate() needs a valid file"
    count_at, header_size, entries = layout
    if op == "bitflip":
        for _ in range(rng.choice((1, 1, 2, 8))):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif op == "overwrite":
        for _ in range(rng.choice((1, 1, 4))):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif op == "truncate":
        del b[rng.randrange(len(b)) :]
    elif op == "truncate_boundary":
        cut = rng.choice(layer_boundaries(data)) + rng.choice((-1, 0, 1))
        del b[max(0, min(cut, len(b) - 1)) :]
    elif op == "insert":
        pos = rng.randrange(len(b) + 1)
        b[pos:pos] = rng.randbytes(rng.choice((1, 1, 4, 64)))
    elif op == "delete":
        pos = rng.randrange(len(b))
        del b[pos : pos + rng.choice((1, 1, 4, 64))]
    elif op == "huge_length":
        crc_at, _ = rng.choice(entries)
        struct.pack_into("<I", b, crc_at - 4, rng.choice(_HUGE + (len(data), len(data) + 1)))
    elif op == "huge_dims":
        w = rng.choice(_HUGE + (rng.randrange(1, 1 << 32),))
        h = rng.choice(_HUGE + (rng.randrange(1, 256),))
        struct.pack_into("<II", b, 12, w, h)
    elif op == "header_field":
        pos = rng.choice((8, 9, 10, 11, 20, 21, 22, 23, 24, 25, rng.randrange(26, count_at + 1)))
        b[pos] = rng.randrange(256)
    else:  # a payload mutation that keeps the structure consistent (lengths and CRCs fixed)
        spans, offset = [], header_size
        for crc_at, length in entries:
            spans.append((crc_at - 4, offset, length))  # where the length is, the payload
            offset += length
        at, start, length = rng.choice(spans)
        others = [data[other[1] : other[1] + other[2]] for other in spans]
        payload = _edit_payload(rng, op, bytearray(b[start : start + length]), others)
        b[start : start + length] = payload
        struct.pack_into("<I", b, at, len(payload))
    out = bytes(b)
    return (fix_crcs(out) if fixed else out), op, fixed


def register_test_bundles() -> None:
    """The random test bundles (tiny, tiny-enh) the seeds are made with: the tests' own
    (tests/testbundles.py, loaded by its path), not the product's registry."""
    import importlib.util

    if "testbundles" not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "tests" / "testbundles.py"
        spec = importlib.util.spec_from_file_location("testbundles", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["testbundles"] = module
    sys.modules["testbundles"].register_test_bundles()


def seed_files() -> dict[str, bytes]:
    """Small valid files with the tiny model: every mode, both residual backends, no residual,
    and one with a metadata layer."""
    import numpy as np

    from semcodec.encoder.codec import Codec
    from semcodec.encoder.gating import GatingConfig

    register_test_bundles()
    codec = Codec("tiny")
    ungated = GatingConfig(enabled=False)  # the ungated layouts

    def encode(image, quality: int, residual: str, **more) -> bytes:
        return codec.encode(image, quality=quality, residual=residual, gating=ungated, **more)

    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:24, 0:40]
    rgb = np.stack([x * 6, y * 9, (x + y) * 3], -1) + rng.integers(-20, 21, (24, 40, 3))
    rgb = np.clip(rgb, 0, 255).astype(np.uint8)
    from PIL import Image

    rgba = Image.fromarray(rgb[:16, :24]).convert("RGBA")
    alpha = np.full((16, 24), 255, np.uint8)
    alpha[4:12, 6:18] = 0
    rgba.putalpha(Image.fromarray(alpha))
    tagged = Image.fromarray(rgb[:16, :24])
    exif = Image.Exif()
    exif[0x010F] = "ACME"
    tagged.info.update(icc_profile=b"icc-profile-bytes", exif=exif.tobytes(), xmp=b"<x:xmpmeta/>")
    seeds = {
        "rgb-metadata": encode(tagged, 30, "native"),
        "rgb-native": encode(rgb, 60, "native"),
        "gray-avif": encode(Image.fromarray(rgb[:17, :33]).convert("L"), 40, "avif"),
        "rgba-native": encode(rgba, 80, "native"),
        "rgb-base": encode(rgb[:16, :16], 0, "native"),
        "rgb-gated": _gated_seed(rgb),
        "rgb-enhance": _enhance_seed(rgb),
        "rgb-enhance-update": _enhance_seed(rgb, update=True),
        "rgb-roi": encode(rgb, 50, "avif", roi=_roi_seed()),
    }
    # the fixed header of versions 1-4, as earlier releases wrote these files, and version 5's
    # compact one: a file without prediction (no COMPACT or GATING), gated, enhanced, RGBA

    old = {k: as_fixed_header(v) for k, v in seeds.items()}
    new = {
        "rgb-avif-v5": codec.encode(rgb, quality=60),
        "rgb-gated-v5": seeds["rgb-gated"],
        "rgb-enhance-v5": seeds["rgb-enhance"],
        "rgba-native-v5": seeds["rgba-native"],
    }
    return {**old, **new}


def as_fixed_header(data: bytes) -> bytes:
    """The file in the oldest fixed-header version (1-4) that holds its layers, as a release
    before version 5 wrote it: a file without prediction gets its GATING layer back."""
    from semcodec.decoder.maplayer import map_shape
    from semcodec.format import container
    from semcodec.format.container import LayerKind
    from semcodec.format.gating import encode_gating, no_prediction

    header, layers = container.unpack(data)
    if LayerKind.COMPACT not in layers and LayerKind.GATING not in layers:
        layers[LayerKind.GATING] = encode_gating(no_prediction(*map_shape(header)))
    return container.pack(header, layers, version=0)


def _enhance_seed(rgb, update: bool = False) -> bytes:
    """A file with an ENHANCE layer (gains, offsets, tile mask; with ``update`` also a change
    of the network's class bias rows) of the tiny-enh model."""
    import numpy as np

    from semcodec.encoder.codec import Codec
    from semcodec.format import container
    from semcodec.format.container import LayerKind
    from semcodec.format.enhance import encode_adjust
    from semcodec.intgrid.enhancer import Adjust, Update

    header, layers = container.unpack(Codec("tiny-enh").encode(rgb, quality=40, residual="native"))
    rows = (np.arange(12 * 8).reshape(12, 8) % 7 - 3) * (np.arange(12) % 3 == 0)[:, None]
    adjust = Adjust(
        np.arange(12) % 16,
        np.arange(36).reshape(12, 3) - 18,
        np.eye(1, 2, dtype=bool),
        32,
        Update(rows, 2) if update else None,
    )
    layers[LayerKind.ENHANCE] = encode_adjust(adjust)
    return container.pack(header, layers)


def _roi_seed():
    """An ROI of two classes with weights and a strength (a file with an ROI layer)."""
    from semcodec.encoder.roi_spec import parse_roi

    return parse_roi("car:2,pedestrian", strength=1.5)


def _gated_seed(rgb) -> bytes:
    """A file with a gating layer: 32-pixel tiles, 'base' and 'none' (the tiny model)."""
    import numpy as np

    from semcodec.encoder.codec import Codec
    from semcodec.encoder.gating import GatingConfig

    big = np.tile(rgb, (3, 3, 1))[:64, :96].copy()
    big[:, 48:] = (np.arange(48)[None, :, None] % 2) * 255  # stripes: 'none' wins there
    gating = GatingConfig(modes=(1, 2), tile_blocks=4)
    return Codec("tiny").encode(big, quality=50, residual="native", gating=gating)


# ----- targets ---------------------------------------------------------------------------------
class Harness:
    """Runs one input against its target and checks the decoder's contract."""

    def __init__(self) -> None:
        import numpy as np

        from semcodec.decoder.maplayer import read_map
        from semcodec.encoder.codec import get_codec
        from semcodec.errors import SemcodecError
        from semcodec.format import compact, container, gating
        from semcodec.format import map as semantic_map
        from semcodec.format.metadata import decode_metadata
        from semcodec.format.residual import get_backend
        from semcodec.format.roi import decode_roi, encode_roi

        self.np, self.container = np, container
        self.semantic_map, self.compact, self.gating = semantic_map, compact, gating
        self.read_map = read_map
        self.native, self.avif = get_backend("native"), get_backend("avif")
        register_test_bundles()
        self.codec = get_codec("tiny")
        self.enh_codec = get_codec("tiny-enh")
        from semcodec.format.enhance import decode_adjust, encode_adjust

        self.decode_adjust, self.encode_adjust = decode_adjust, encode_adjust
        self.error = SemcodecError
        self.decode_metadata = decode_metadata
        self.decode_roi, self.encode_roi = decode_roi, encode_roi
        tiny = self.codec.bundle.compact_table
        skewed = np.ones_like(tiny)
        skewed[..., 0] = 1 << 20  # a very peaky table: long runs cost almost nothing
        self.tables = (tiny, skewed)
        self.counts: Counter[str] = Counter()

    def run(self, data: bytes) -> None:
        """Decode ``data`` with the target its first byte names; raise on a contract violation."""
        if len(data) < 6:
            return
        target = TARGETS[data[0] % len(TARGETS)]
        h, w = 1 + data[1] % 64, 1 + data[2] % 64
        self.counts[target] += 1
        payload = data[6:]
        np = self.np
        try:
            if target == "container":
                self.container.unpack(data[1:])
            elif target == "map":
                nc = 1 + data[3]
                out = self.semantic_map.decode_map(payload, h, w, nc)
                assert out.shape == (h, w) and out.dtype == np.uint8 and int(out.max()) < nc
            elif target == "compact":
                table = self.tables[data[3] % 2]
                c, levels = table.shape[0], table.shape[-1]
                out = self.compact.decode_compact(payload, (c, h, w), table)
                assert out.shape == (c, h, w) and out.min() >= 0 and out.max() < levels
            elif target in ("native", "avif"):
                h, w = h + 64 * (data[3] % 4), w + 64 * (data[4] % 4)
                backend = self.native if target == "native" else self.avif
                out = backend.decode(payload, h, w)
                assert out.shape == (h, w, 3) and out.dtype == np.int16
                assert -255 <= int(out.min()) and int(out.max()) <= 255
            elif target == "metadata":
                meta = self.decode_metadata(payload)
                assert sum(meta.sizes().values()) <= 16 << 20
            elif target == "gating":
                plan = self.gating.decode_gating(payload, h, w)
                th, tw = -(-h // plan.tile_blocks), -(-w // plan.tile_blocks)
                modes = plan.modes
                assert modes.shape == (th, tw) and modes.min() >= 0 and modes.max() <= 2
                if data[3] % 2:  # and the compact layer under the tiles' mask
                    from semcodec.decoder.prediction import used_blocks

                    used = used_blocks(modes, h, w, plan.tile_blocks)
                    table = self.tables[0]
                    out = self.compact.decode_compact(payload, (table.shape[0], h, w), table, used)
                    assert out.shape == (table.shape[0], h, w)
            elif target == "roi":  # what it accepts, it writes back byte for byte
                assert self.encode_roi(self.decode_roi(payload)) == payload
            elif target == "mapfile":  # decode --layer map: header and map layer only
                sem = fix_crcs(data[1:])
                hdr, labels = self.read_map(sem)
                s = hdr.map_scale  # any 1..255 (docs/format.md §1): the map is the image over it
                assert labels.shape == (-(-hdr.height // s), -(-hdr.width // s))
            elif target == "enhance":
                adj = self.decode_adjust(payload, 11, h, w)
                assert adj.gains.shape == (12,) and 0 <= adj.gains.min() and adj.gains.max() <= 15
                assert adj.tiles is None or adj.tiles.shape == (
                    -(-h // adj.tile),
                    -(-w // adj.tile),
                )
            elif target == "update":  # what it accepts, it writes back to the same content
                adj = self.decode_adjust(payload, 11, h, w, 1 + data[3] % 16)
                if adj.update is not None:
                    again = self.decode_adjust(self.encode_adjust(adj), 11, h, w, 1 + data[3] % 16)
                    assert adj.update.rows.shape == (12, 1 + data[3] % 16)
                    assert np.array_equal(again.update.rows, adj.update.rows)
            else:
                sem = fix_crcs(data[1:])
                hdr = self.container.read_header(sem)
                codec = self.enh_codec if hdr.model_name == "tiny-enh" else self.codec
                res = codec.decode(sem)
                assert res.image.size == (hdr.width, hdr.height) and res.image.mode == hdr.mode
        except self.error as exc:
            message = str(exc)
            assert message and "\n" not in message, f"not a one-line error: {message!r}"
            self.counts[target + ":rejected"] += 1


def seed_inputs() -> list[bytes]:
    """Valid inputs for every target, taken from real files (the fuzzers' starting corpus)."""
    from semcodec.format import container
    from semcodec.format.container import LayerKind

    seeds = []
    for sem in seed_files().values():
        header, layers = container.unpack(sem)
        mh, mw = -(-header.height // 8), -(-header.width // 8)
        sizes = bytes([mh - 1, mw - 1])
        seeds.append(bytes([0]) + sem)  # container and codec targets: data[1:] is the file
        seeds.append(bytes([5]) + sem)
        seeds.append(bytes([1]) + sizes + bytes([10, 0, 0]) + layers[LayerKind.SEMANTIC_MAP])
        if LayerKind.COMPACT in layers:
            seeds.append(bytes([2]) + sizes + bytes([0, 0, 0]) + layers[LayerKind.COMPACT])
        if LayerKind.GATING in layers:
            seeds.append(bytes([7]) + sizes + bytes([0, 0, 0]) + layers[LayerKind.GATING])
        seeds.append(bytes([8]) + sem)
        if LayerKind.RESIDUAL in layers:
            target = 3 if header.residual_backend == 1 else 4
            dims = bytes([(header.height - 1) % 64, (header.width - 1) % 64])
            dims += bytes([(header.height - 1) // 64, (header.width - 1) // 64, 0])
            seeds.append(bytes([target]) + dims + layers[LayerKind.RESIDUAL])
        if LayerKind.METADATA in layers:
            seeds.append(bytes([6, 0, 0, 0, 0, 0]) + layers[LayerKind.METADATA])
        if LayerKind.ENHANCE in layers:
            dims = bytes([header.height - 1, header.width - 1, 0, 0, 0])
            seeds.append(bytes([9]) + dims + layers[LayerKind.ENHANCE])
            dims = bytes([header.height - 1, header.width - 1, 7, 0, 0])  # width 8: tiny-enh's
            seeds.append(bytes([11]) + dims + layers[LayerKind.ENHANCE])
        if LayerKind.ROI in layers:
            seeds.append(bytes([10, 0, 0, 0, 0, 0]) + layers[LayerKind.ROI])
    return seeds


# ----- drivers -----------------------------------------------------------------------------------
def _rss_mb() -> float:
    """Current resident set size in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _write_stats(mode: str, stats: dict) -> None:
    """Save the statistics the documentation quotes."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"stats-{mode}.json").write_text(json.dumps(stats, indent=2, sort_keys=True))


def run_random(seconds: float, seed: int, case_timeout: float) -> int:
    """Seeded mutation of the seed inputs (file-level mutations for targets 0 and 5)."""
    harness = Harness()
    seeds = seed_inputs()
    rng = random.Random(seed)
    start, base_rss = time.monotonic(), _rss_mb()
    failures: list[dict] = []
    ops: Counter[str] = Counter()
    slowest = 0.0
    signal.signal(signal.SIGALRM, _timeout)
    n = 0
    while time.monotonic() - start < seconds:
        s = rng.choice(seeds)
        body = s[1:] if s[0] in (0, 5) else s[6:]
        if s[0] in (0, 5):
            mutated, op, _ = mutate(rng, body)
            data = bytes([s[0]]) + mutated
        else:
            mutated, op = _mutate_bytes(rng, body), "bytes"
            head = bytearray(s[:6])
            if rng.random() < 0.2:
                head[1 + rng.randrange(4)] = rng.randrange(256)
            data = bytes(head) + mutated
        ops[op] += 1
        t = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, case_timeout)
        try:
            harness.run(data)
        except BaseException as exc:  # noqa: BLE001 - every escape is a finding
            if isinstance(exc, KeyboardInterrupt):
                raise
            name = f"crash-{len(failures)}"
            OUT.mkdir(parents=True, exist_ok=True)
            (OUT / name).write_bytes(data)
            failures.append({"file": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        slowest = max(slowest, time.monotonic() - t)
        n += 1
        growth = _rss_mb() - base_rss
        if growth > 1024:
            failures.append({"file": None, "error": f"RSS grew by {growth:.0f} MiB"})
            break
        if n % 2000 == 0:
            _write_stats("random", _stats(n, start, harness, ops, failures, slowest, base_rss))
    stats = _stats(n, start, harness, ops, failures, slowest, base_rss)
    _write_stats("random", stats)
    print(json.dumps(stats, indent=2, sort_keys=True))
    return 1 if failures else 0


def _stats(n, start, harness, ops, failures, slowest, base_rss) -> dict:
    """The run's figures as one JSON-able dict."""
    return {
        "cases": n,
        "seconds": round(time.monotonic() - start, 1),
        "per_target": dict(harness.counts),
        "operators": dict(ops),
        "failures": failures,
        "slowest_case_s": round(slowest, 3),
        "rss_growth_mib": round(_rss_mb() - base_rss, 1),
    }


def _timeout(_signum, _frame) -> None:
    """SIGALRM handler: a case ran too long."""
    raise TimeoutError("case exceeded the time limit")


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """Generic byte-level mutation for the payload targets."""
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4))):
        op = rng.randrange(5)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2:
            pos = rng.randrange(len(b) + 1)
            b[pos:pos] = rng.randbytes(rng.choice((1, 4, 16)))
        elif op == 3 and b:
            pos = rng.randrange(len(b))
            del b[pos : pos + rng.choice((1, 4, 16))]
        elif b:
            del b[rng.randrange(len(b)) :]
    return bytes(b)


def run_atheris(seconds: float, case_timeout: float, extra: list[str]) -> int:
    """libFuzzer via atheris, with coverage instrumentation of the semcodec package only."""
    import atheris
    import constriction  # noqa: F401 - imported uninstrumented, before semcodec
    import numpy  # noqa: F401
    import PIL.Image  # noqa: F401
    import torch  # noqa: F401

    with atheris.instrument_imports(include=["semcodec"]):
        import semcodec.encoder.codec  # noqa: F401
        import semcodec.format.compact  # noqa: F401
        import semcodec.format.container  # noqa: F401
        import semcodec.format.map  # noqa: F401
        import semcodec.format.residual_avif  # noqa: F401
        import semcodec.format.residual_native  # noqa: F401
    harness = Harness()
    corpus = OUT / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(seed_inputs()):
        (corpus / f"seed-{i:02d}").write_bytes(s)
    start, executed = time.monotonic(), [0]

    def one(data: bytes) -> None:
        """atheris entry point; a case that raises the peak RSS by over 1 GiB is a crash."""
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        harness.run(data)
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
        if grown > 1024:
            raise MemoryError(f"one input raised the peak RSS by {grown:.0f} MiB")
        executed[0] += 1
        if executed[0] % 1000 == 0:
            stats = {
                "cases": executed[0],
                "seconds": round(time.monotonic() - start, 1),
                "per_target": dict(harness.counts),
                "rss_mib": round(_rss_mb(), 1),
            }
            _write_stats("atheris", stats)

    # Under libFuzzer the process grows by about 30 KB per input (its own and atheris's state:
    # the same inputs replayed in a plain loop do not grow), so the per-input check in one()
    # enforces the 1 GiB bound and -rss_limit_mb is only a backstop.
    rss_limit = int(_rss_mb()) + 4096
    argv = [
        sys.argv[0],
        f"-max_total_time={int(seconds)}",
        f"-timeout={int(case_timeout)}",
        f"-rss_limit_mb={rss_limit}",
        "-max_len=4096",
        f"-artifact_prefix={OUT}/",
        "-print_final_stats=1",
        *extra,
        str(corpus),
    ]
    atheris.Setup(argv, one)
    atheris.Fuzz()
    return 0


def _artifacts() -> set[str]:
    """Inputs libFuzzer wrote under out/fuzz/ (crash-, oom-, timeout-, leak-, slow-unit-...)."""
    kinds = ("crash-", "oom-", "timeout-", "leak-", "slow-unit-")
    if not OUT.is_dir():
        return set()
    return {p.name for p in OUT.iterdir() if p.is_file() and p.name.startswith(kinds)}


def run_chunks(seconds: float, chunk: float, case_timeout: float, extra: list[str]) -> int:
    """A long atheris run as consecutive fresh processes sharing one corpus.

    libFuzzer's process grows by about 30 KB per input on its own (the inputs it stopped on
    replay in a plain process in 0.1 s with 2 MiB), so one process stops with an out-of-memory
    report after about 150,000 inputs; chunks keep every process far below that while the
    corpus carries the coverage over. Totals go to out/fuzz/stats-atheris-total.json.
    """
    total: dict = {"chunks": 0, "cases": 0, "seconds": 0.0, "per_target": {}, "max_rss_mib": 0.0,
                   "artifacts": []}  # fmt: skip
    deadline = time.monotonic() + seconds
    rc = 0
    while (left := deadline - time.monotonic()) > 5:
        before = _artifacts()
        cmd = [sys.executable, __file__, "--mode", "atheris", "--chunk-seconds", "0",
               "--seconds", str(int(min(chunk, left))), "--case-timeout", str(case_timeout),
               *extra]  # fmt: skip
        (OUT / "stats-atheris.json").unlink(missing_ok=True)
        child = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
        rc = child.returncode
        sys.stderr.write(child.stderr)
        # libFuzzer exits from C (no Python exit hooks): exact totals come from its final stats,
        # the per-target split from the harness's last write (every 1,000 inputs)
        final = dict(re.findall(r"stat::(\w+):\s+(\d+)", child.stderr))
        stats = json.loads((OUT / "stats-atheris.json").read_text())
        total["chunks"] += 1
        total["cases"] += int(final.get("number_of_executed_units", stats["cases"]))
        total["seconds"] = round(total["seconds"] + stats["seconds"], 1)
        total["max_rss_mib"] = max(total["max_rss_mib"], float(final.get("peak_rss_mb", 0)))
        for k, v in stats["per_target"].items():
            total["per_target"][k] = total["per_target"].get(k, 0) + v
        found = sorted(_artifacts() - before)
        total["artifacts"] += found
        _write_stats("atheris-total", total)
        if rc != 0:
            print(f"chunk {total['chunks']} ended with exit code {rc}; artifacts: {found}")
            break
    print(json.dumps(total, indent=2))
    return rc


def main(argv: list[str] | None = None) -> int:
    """Parse options and run the chosen driver."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--mode", choices=("auto", "atheris", "random"), default="auto")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--case-timeout", type=float, default=10)
    p.add_argument(
        "--chunk-seconds", type=float, default=120, help="atheris: seconds per fresh process"
    )
    args, extra = p.parse_known_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # oneDNN caches compiled kernels per input shape (1024 by default, a few hundred KB each);
    # fuzzed sizes fill that cache, whose growth would hide real leaks from -rss_limit_mb.
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
    import torch

    torch.set_num_threads(1)
    mode = args.mode
    if mode == "auto":
        try:
            import atheris  # noqa: F401

            mode = "atheris"
        except ImportError:
            mode = "random"
    if mode == "atheris" and 0 < args.chunk_seconds < args.seconds:
        return run_chunks(args.seconds, args.chunk_seconds, args.case_timeout, extra)
    if mode == "atheris":
        return run_atheris(args.seconds, args.case_timeout, extra)
    return run_random(args.seconds, args.seed, args.case_timeout)


if __name__ == "__main__":
    sys.exit(main())
