"""Write the conformance files: small .sem files of a shipped model + decoded hashes.

Run ``python tests/conformance/make_files.py [MODEL] [--add]`` only when a deliberate model change
alters decoding; the new model has a new name/hash, so old files then fail loudly, never
silently. Each release's files live in a folder named after it, '<model>-<hash8>', and stay
when a newer release replaces the model: files a release wrote must keep decoding. The default
model gets every case, other models fewer (their decoder path is the same; weights differ).
The inputs are synthetic (gradients, edges, noise), generated here: no data set is involved.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent

# name: (width, height, mode, quality, residual)
CASES = {
    "rgb-base": (96, 64, "RGB", 0, "avif"),
    "rgb-q50-avif": (77, 51, "RGB", 50, "avif"),  # odd size: padding and cropping
    "rgb-q60-native": (64, 48, "RGB", 60, "native"),
    "gray-q40": (72, 40, "L", 40, "avif"),
    "rgba-q70": (40, 32, "RGBA", 70, "avif"),
    "tiny-side": (9, 13, "RGB", 30, "avif"),  # grown to the networks' 32-pixel minimum
    "tiled-base": (1456, 1448, "RGB", 0, "avif"),  # above the tiling threshold: 4 tiles
    # format version 3: per-tile prediction (gating layer). 'mixed' has every mode with all
    # compact symbols; 'masked' base and none tiles with the symbols of base tiles only;
    # 'nocompact' no tile using the base (header + map + gating + residual)
    "rgb-q40-mixed": (192, 128, "RGB", 40, "avif"),
    "rgb-q40-masked": (192, 128, "RGB", 40, "avif"),
    "rgb-q50-nocompact": (96, 64, "RGB", 50, "avif"),
    # format version 4: the ENHANCE layer (gains, offsets, tile mask), and a map with UNKNOWN
    # positions (releases whose map alphabet has it), base layer and residual
    "rgb-q40-enhance": (160, 96, "RGB", 40, "avif"),
    "rgb-q30-enhance-native": (96, 80, "RGB", 30, "native"),
    "rgb-unknown-base": (96, 64, "RGB", 0, "avif"),
    "rgb-q20-unknown": (96, 64, "RGB", 20, "avif"),
    # format version 4: an ROI layer (the encoder favoured these classes; decoding ignores it)
    "rgb-q50-roi": (128, 96, "RGB", 50, "avif"),
    # ENHANCE layer version 2: an update of the enhancement network's class bias rows
    "rgb-q40-update": (128, 96, "RGB", 40, "avif"),
    # format version 5: the compact header; a file without prediction has neither COMPACT nor
    # GATING; the AVIF residual's version 3 (no mapping, av1C or temporal delimiter), 4:4:4
    # and 4:2:0; the base layer, gated tiles and alpha in the new header
    "v5-rgb-q40-enhance": (160, 96, "RGB", 40, "avif"),
    "v5-rgb-q50-420": (96, 64, "RGB", 50, "avif"),
    "v5-gray-q30": (72, 40, "L", 30, "avif"),
    "v5-rgba-q70": (40, 32, "RGBA", 70, "avif"),
    "v5-rgb-base": (96, 64, "RGB", 0, "avif"),
    "v5-rgb-q40-mixed": (192, 128, "RGB", 40, "avif"),
    # the AVIF residual's version 4 (2 bytes of the sequence header, the frame OBU's payload):
    # 4:4:4, 4:2:0 and a grey picture
    "avif4-rgb-q40": (160, 96, "RGB", 40, "avif"),
    "avif4-rgb-q50-420": (96, 64, "RGB", 50, "avif"),
    "avif4-gray-q30": (72, 40, "L", 30, "avif"),
}
#: cases only for releases with an enhancement network: the layer is set here (gains per
#: class, offsets, a tile mask), whatever the encoder would choose
ENHANCED = ("rgb-q40-enhance", "rgb-q30-enhance-native", "rgb-q40-update", "v5-rgb-q40-enhance")
#: enhanced cases whose layer also carries an update of the network's class bias rows, set
#: here (every third row unchanged) within the range that keeps the accumulators exact
UPDATED = ("rgb-q40-update",)
#: cases only for releases whose map has UNKNOWN: a block of the map is set to it
UNKNOWN_MAP = ("rgb-unknown-base", "rgb-q20-unknown")
#: cases encoded with regions of interest (roi.parse_roi's form)
ROI = {"rgb-q50-roi": "sky,building:2,road"}
#: cases encoded with a fixed gating configuration (the others with the codec's default)
GATING = {"rgb-q50-nocompact": {"modes": (2,)}}
#: cases drawn by ``structured`` (straight edges beside smooth areas) instead of ``synthetic``
STRUCTURED = ("rgb-q40-mixed", "rgb-q40-masked", "v5-rgb-q40-mixed")
#: cases whose AVIF residual is coded in another chroma layout than the default
CHROMA = {"v5-rgb-q50-420": "420", "avif4-rgb-q50-420": "420"}
#: cases whose tile modes are set here (the encoder's own choice would be one mode): modes
#: over the 3 x 2 tiles, and whether every compact symbol is coded
FORCED = {
    "rgb-q40-mixed": ([[0, 1, 2], [2, 0, 1]], True),
    "rgb-q40-masked": ([[1, 2, 1], [2, 1, 2]], False),
    "v5-rgb-q40-mixed": ([[2, 1, 0], [0, 2, 1]], True),
}


def forced_file(codec, picture: Image.Image, quality: int, modes, all_symbols: bool) -> bytes:
    """A valid file with given tile modes: the encoder's layers around that prediction."""
    from semcodec.encoder import prediction
    from semcodec.format import container
    from semcodec.format.container import Header, LayerKind
    from semcodec.format.residual import get_backend

    an = codec.analyse(picture)
    rgb = an.img.rgb
    h, w = rgb.shape[:2]
    an.reconstruction = codec.reconstruct(an.symbols, an.labels, (h, w))
    cfg = an.options.gating
    parts = codec.prediction_parts
    pred, gate = prediction.gated(an, parts, cfg, np.array(modes, np.int64), all_symbols)
    layers = {k: v for k, v in an.layers.items() if k != LayerKind.COMPACT}
    layers.update(prediction.side_layers(an, codec.bundle.compact_table, gate))
    backend = get_backend("avif")
    layers[LayerKind.RESIDUAL] = backend.encode(rgb.astype(np.int16) - pred, quality)
    header = Header(w, h, "RGB", codec.bundle.name, codec.bundle.hash, quality, backend.code,
                    8, codec.bundle.levels)  # fmt: skip
    return container.pack(header, layers)


def enhanced_file(data: bytes, seed: int) -> bytes:
    """The file with an ENHANCE layer of varied gains and offsets and a checkered tile mask."""
    from semcodec.format import container
    from semcodec.format.container import LayerKind
    from semcodec.format.enhance import encode_adjust, tile_grid
    from semcodec.intgrid.enhancer import Adjust

    header, layers = container.unpack(data)
    rng = np.random.default_rng(seed)
    th, tw = tile_grid(header.height, header.width, 32)
    tiles = np.add.outer(np.arange(th), np.arange(tw)) % 2 == 0
    adjust = Adjust(rng.integers(0, 16, 12), rng.integers(-20, 21, (12, 3)), tiles, 32)
    layers[LayerKind.ENHANCE] = encode_adjust(adjust)
    return container.pack(header, layers)


def update_for(enh, seed: int, exponent: int = 2):
    """A varied update the release's table can take: small steps inside ``update_range``."""
    from semcodec.intgrid.enhancer import UPDATE_LIMIT, Update

    rng = np.random.default_rng(seed)
    lo, hi = (np.asarray(v) / 2.0**exponent for v in enh.update_range())
    rows = rng.integers(-6, 7, lo.shape)
    rows = np.clip(rows, np.ceil(lo), np.floor(hi)).clip(-UPDATE_LIMIT, UPDATE_LIMIT)
    rows[::3] = 0
    update = Update(rows.astype(np.int64), exponent)
    enh.check_update(update)
    return update


def updated_file(data: bytes, seed: int, enh) -> bytes:
    """``enhanced_file`` whose layer (version 2) also carries an update of the bias rows."""
    from dataclasses import replace

    from semcodec.format import container
    from semcodec.format.container import LayerKind
    from semcodec.format.enhance import decode_adjust, encode_adjust

    header, layers = container.unpack(enhanced_file(data, seed))
    adjust = decode_adjust(layers[LayerKind.ENHANCE], enh.classes, header.height, header.width)
    layers[LayerKind.ENHANCE] = encode_adjust(replace(adjust, update=update_for(enh, seed)))
    return container.pack(header, layers)


def unknown_file(codec, picture: Image.Image, quality: int, residual: str) -> bytes:
    """A file whose map says UNKNOWN in a block: the networks see no class there."""
    from semcodec.format.classes import UNKNOWN
    from semcodec.format.container import LayerKind
    from semcodec.format.map import encode_map

    an = codec.analyse(picture)
    an.labels[1:5, 2:7] = UNKNOWN  # in place: CompNet's deferred run reads the same array
    an.layers[LayerKind.SEMANTIC_MAP] = encode_map(an.labels, codec.bundle.map_symbols)
    return codec.finish(an, quality=quality, residual=residual)[0]


def synthetic(width: int, height: int, mode: str, seed: int) -> Image.Image:
    """A deterministic test picture: smooth gradients, a few edges, mild noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 128 + 100 * np.sin(x / max(width, 1) * 3.1 + seed)
    g = 128 + 100 * np.cos(y / max(height, 1) * 2.3)
    b = 255 * ((x // 16 + y // 16) % 2) * 0.6 + 40
    disc = (x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 3) ** 2
    b = np.where(disc, 230, b)
    rgb = np.stack([r, g, b], -1) + rng.normal(0, 6, (height, width, 3))
    img = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
    if mode == "L":
        return img.convert("L")
    if mode == "RGBA":
        img = img.convert("RGBA")
        alpha = np.full((height, width), 255, np.uint8)
        alpha[height // 4 : 3 * height // 4, width // 4 : 3 * width // 4] = 90
        img.putalpha(Image.fromarray(alpha, "L"))
    return img


def structured(width: int, height: int, seed: int) -> Image.Image:
    """Smooth shading on the left, a fine window-grid façade on the right: the generator
    predicts the one and not the other, so an encoder picks different modes per tile."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    smooth = np.stack([90 + 0.6 * x, 110 + 0.5 * y, 160 - 0.3 * x], -1)
    grid = np.where(((x // 6) % 3 == 0) | ((y // 6) % 3 == 0), 230.0, 40.0)[..., None]
    rgb = np.where((x < width // 2)[..., None], smooth, grid.repeat(3, -1))
    rgb = rgb + rng.normal(0, 3, (height, width, 3))
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")


def pixel_hash(img: Image.Image) -> str:
    """SHA-256 of mode, size and the raw pixels of a decoded image."""
    a = np.asarray(img)
    head = f"{img.mode} {img.width}x{img.height}\n".encode()
    return hashlib.sha256(head + np.ascontiguousarray(a).tobytes()).hexdigest()


#: the cases written for models other than the default
OTHER_MODEL_CASES = ("rgb-base", "rgb-q50-avif", "rgb-q60-native")


def folder(release: str, root: Path = HERE) -> Path:
    """Where a release's conformance files and record live."""
    return root / release


def main(model: str = "default", add: bool = False, root: Path = HERE) -> Path:
    """Write a model's files into its folder under ``root`` (this folder unless a release is
    tried elsewhere, tools/release.py); with ``add``, only the cases its folder lacks (a
    release's existing files are never rewritten: they are what that release wrote)."""
    from semcodec.encoder.codec import Codec
    from semcodec.encoder.gating import GatingConfig
    from semcodec.encoder.options import EncodeOptions
    from semcodec.intgrid.enhancer import IntEnhancer

    codec = Codec(model)
    out = folder(f"{codec.bundle.name}-{codec.bundle.hash[:8]}", root)
    out.mkdir(exist_ok=True)
    record = {"model": codec.bundle.name, "model_hash": codec.bundle.hash, "files": {}}
    if add and (out / "hashes.json").exists():
        record = json.loads((out / "hashes.json").read_text())
    for i, (name, (w, h, mode, q, residual)) in enumerate(CASES.items()):
        if model != "default" and name not in OTHER_MODEL_CASES:
            continue
        if name in ENHANCED and codec.bundle.enh_table is None:
            continue
        if name in UNKNOWN_MAP and codec.bundle.map_symbols <= codec.bundle.num_classes:
            continue
        if f"{name}.sem" in record["files"]:
            continue
        gated = {"gating": GatingConfig(**GATING[name])} if name in GATING else {}
        chroma = {"chroma": CHROMA[name]} if name in CHROMA else {}
        options = EncodeOptions(quality=q, residual=residual, **gated, **chroma)
        picture = structured(w, h, i) if name in STRUCTURED else synthetic(w, h, mode, i)
        if name in FORCED:
            data = forced_file(codec, picture, q, *FORCED[name])
        elif name in UNKNOWN_MAP:
            data = unknown_file(codec, picture, q, residual)
        elif name in UPDATED:
            enh = IntEnhancer(codec.bundle.enh_table)
            data = updated_file(codec.encode(picture, options), i, enh)
        elif name in ENHANCED:
            data = enhanced_file(codec.encode(picture, options), i)
        elif name in ROI:
            from semcodec.encoder.roi_spec import parse_roi

            data = codec.encode(picture, options, roi=parse_roi(ROI[name], 1.5))
        else:
            data = codec.encode(picture, options)
        (out / f"{name}.sem").write_bytes(data)
        full = codec.decode(data)
        base = codec.decode(data, layer="base")
        record["files"][f"{name}.sem"] = {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "full": pixel_hash(full.image),
            "base": pixel_hash(base.image),
        }
        print(f"{name}: {len(data)} bytes")
    (out / "hashes.json").write_text(json.dumps(record, indent=1) + "\n")
    return out


if __name__ == "__main__":
    import sys

    args = [a for a in sys.argv[1:] if a != "--add"]
    main(*args[:1], add="--add" in sys.argv[1:])
