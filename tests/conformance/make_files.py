"""Write the conformance files: small .sem files of a shipped model + decoded hashes.

Run ``python tests/conformance/make_files.py [MODEL]`` only when a deliberate model change
alters decoding; the new model has a new name/hash, so old files then fail loudly, never
silently. The default model's files live in this folder, every other model's in a subfolder
named after it, with fewer cases (its decoder path is the same; its weights are what differ).
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
}


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


def pixel_hash(img: Image.Image) -> str:
    """SHA-256 of mode, size and the raw pixels of a decoded image."""
    a = np.asarray(img)
    head = f"{img.mode} {img.width}x{img.height}\n".encode()
    return hashlib.sha256(head + np.ascontiguousarray(a).tobytes()).hexdigest()


#: the cases written for models other than the default
OTHER_MODEL_CASES = ("rgb-base", "rgb-q50-avif", "rgb-q60-native")


def folder(model: str) -> Path:
    """Where a model's conformance files and record live."""
    return HERE if model == "default" else HERE / model


def main(model: str = "default") -> None:
    from semcodec.codec import Codec

    codec = Codec(model)
    out = folder(model)
    out.mkdir(exist_ok=True)
    record = {"model": codec.bundle.name, "model_hash": codec.bundle.hash, "files": {}}
    for i, (name, (w, h, mode, q, residual)) in enumerate(CASES.items()):
        if model != "default" and name not in OTHER_MODEL_CASES:
            continue
        data = codec.encode(synthetic(w, h, mode, i), quality=q, residual=residual)
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


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:2])
