"""The pipeline (A1–A6): image → map → compact → base → enhanced reconstruction → residual → file.

Floating-point networks only produce what is then stored losslessly (the map, the compact
symbols) or what both ends recompute identically from decoded integers (the enhanced
reconstruction, in fp32 on both sides). Entropy coders see integers only.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from . import container
from .container import Header, LayerKind, Limits
from .entropy.compact import decode_compact, encode_compact
from .entropy.residual import backend_by_code, get_backend
from .entropy.semantic_map import decode_map, encode_map
from .errors import CorruptData, ModelError, UnsupportedInput
from .imageio import LoadedImage, load_image
from .models.compnet import dequantize, quantize
from .zoo import ModelBundle, load_bundle

DEFAULT_RESIDUAL = "avif"
DEFAULT_QUALITY = 50
MULTIPLE = 8  # the networks' common size multiple (CompNet stride 8, segmentation output stride 8)


@dataclass
class DecodeResult:
    """A decoded file: the image plus the layers a caller may want to look at."""

    image: Image.Image
    header: Header
    semantic_map: np.ndarray  # labels at 1/map_scale resolution
    layer_bytes: dict[str, int] = field(default_factory=dict)


@dataclass
class EncodeStats:
    """What an encode produced, for reporting (bytes per layer)."""

    layer_bytes: dict[str, int]
    total_bytes: int


def _to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """(H,W,3) uint8 → (1,3,H,W) float in [0,1]."""
    # A copy: image arrays are often read-only views, which torch.from_numpy warns about.
    return torch.from_numpy(np.array(rgb, dtype=np.uint8)).permute(2, 0, 1).float().div(255.0)[None]


def _pad(x: torch.Tensor) -> torch.Tensor:
    """Replicate-pad to the networks' size multiple (cropped back after decoding)."""
    h, w = x.shape[-2:]
    ph, pw = (-h) % MULTIPLE, (-w) % MULTIPLE
    return F.pad(x, (0, pw, 0, ph), mode="replicate") if ph or pw else x


def _bf16(enabled: bool):
    """bf16 autocast for the networks whose outputs are stored losslessly."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)


class Codec:
    """Encoder and decoder bound to one model bundle (loaded once, reused for every image)."""

    def __init__(self, model: str = "default", bf16: bool = True, limits: Limits | None = None):
        self.bundle: ModelBundle = load_bundle(model)
        self.bf16 = bf16
        self.limits = limits or Limits()

    # ----- encoder -------------------------------------------------------------------------
    @torch.no_grad()
    def semantic_map(self, x: torch.Tensor) -> np.ndarray:
        """A1: the 1/8-resolution label map of a padded image tensor."""
        with _bf16(self.bf16):
            logits = self.bundle.seg.logits_lowres(x)
        return logits.float()[0].argmax(0).numpy().astype(np.uint8)

    @torch.no_grad()
    def compact(self, x: torch.Tensor, labels: np.ndarray) -> np.ndarray:
        """A2/A3: integer compact symbols (C,h,w) of a padded image and its map."""
        lab = torch.from_numpy(labels.astype(np.int64))[None]
        with _bf16(self.bf16):
            t = self.bundle.comp(x, lab)
        return quantize(t.float(), self.bundle.levels)[0].numpy()

    @torch.no_grad()
    def reconstruct(
        self, symbols: np.ndarray, labels: np.ndarray, size: tuple[int, int], crop: tuple[int, int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """A4: (enhanced reconstruction, base) as uint8 (H,W,3), from decoded integers only (fp32)."""
        t = dequantize(torch.from_numpy(symbols.astype(np.int64))[None], self.bundle.levels)
        lab = torch.from_numpy(labels.astype(np.int64))[None]
        out, base = self.bundle.gen(t, lab, size)
        h, w = crop

        def to_u8(v: torch.Tensor) -> np.ndarray:
            v = ((v[0, :, :h, :w].clamp(-1, 1) + 1) * 127.5).round()
            return v.permute(1, 2, 0).numpy().astype(np.uint8)

        return to_u8(out), to_u8(base)

    def encode(
        self,
        image: Image.Image | np.ndarray | LoadedImage | str | bytes,
        quality: int = DEFAULT_QUALITY,
        residual: str = DEFAULT_RESIDUAL,
    ) -> bytes:
        """Encode an image into a complete .sem file."""
        return self.encode_with_stats(image, quality, residual)[0]

    def encode_with_stats(
        self, image, quality: int = DEFAULT_QUALITY, residual: str = DEFAULT_RESIDUAL
    ) -> tuple[bytes, EncodeStats]:
        """Encode and report bytes per layer."""
        if not 0 <= int(quality) <= 100:
            raise ValueError(f"quality must be 0..100, got {quality}")
        img = self._load(image)
        h, w = img.rgb.shape[:2]
        problem = self.limits.check(w, h)
        if problem:
            raise UnsupportedInput(problem)
        x = _pad(_to_tensor(img.rgb))
        labels = self.semantic_map(x)
        symbols = self.compact(x, labels)
        layers = {
            LayerKind.SEMANTIC_MAP: encode_map(labels, self.bundle.num_classes),
            LayerKind.COMPACT: encode_compact(symbols, self.bundle.compact_table),
        }
        backend_code = 0
        if quality > 0:
            backend = get_backend(residual)
            recon, _ = self.reconstruct(symbols, labels, tuple(x.shape[-2:]), (h, w))
            res = img.rgb.astype(np.int16) - recon.astype(np.int16)
            layers[LayerKind.RESIDUAL] = backend.encode(res, int(quality))
            backend_code = backend.code
        if img.alpha is not None:
            layers[LayerKind.ALPHA] = _encode_alpha(img.alpha)
        header = Header(
            width=w,
            height=h,
            mode=img.mode,
            model_name=self.bundle.name,
            model_hash=self.bundle.hash,
            quality=int(quality),
            residual_backend=backend_code,
            map_scale=MULTIPLE,
            compact_levels=self.bundle.levels,
        )
        data = container.pack(header, layers)
        stats = EncodeStats({k.name.lower(): len(v) for k, v in layers.items()}, len(data))
        return data, stats

    def _load(self, image) -> LoadedImage:
        """Accept a PIL image, an RGB array, a LoadedImage, a path or encoded bytes."""
        if isinstance(image, LoadedImage):
            return image
        if isinstance(image, np.ndarray):
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise UnsupportedInput("array input must be uint8 of shape (H, W, 3)")
            return LoadedImage(rgb=image, mode="RGB")
        if isinstance(image, Image.Image):
            buf = io.BytesIO()
            image.save(
                buf, "PNG" if image.mode not in ("CMYK", "YCbCr", "LAB", "I", "F") else "TIFF"
            )
            return load_image(buf.getvalue(), self.limits)
        return load_image(image, self.limits)

    # ----- decoder -------------------------------------------------------------------------
    def check_model(self, header: Header) -> None:
        """Refuse a file made with another model or other weights."""
        if header.model_name != self.bundle.name:
            raise ModelError(
                f"file was encoded with model {header.model_name!r}, decoder has {self.bundle.name!r}"
            )
        if header.model_hash != self.bundle.hash:
            raise ModelError(
                f"model {header.model_name!r} weights hash mismatch: file {header.model_hash}, "
                f"installed {self.bundle.hash}"
            )
        if header.compact_levels != self.bundle.levels or header.map_scale != MULTIPLE:
            raise CorruptData("header's compact levels or map scale do not match the model")

    def decode(self, data: bytes, layer: str = "full") -> DecodeResult:
        """Decode a .sem file; layer='base' skips the residual (the GAN reconstruction only)."""
        if layer not in ("full", "base"):
            raise ValueError(f"layer must be 'full' or 'base', got {layer!r}")
        header, layers = container.unpack(data, self.limits)
        self.check_model(header)
        h, w = header.height, header.width
        ph, pw = -(-h // MULTIPLE) * MULTIPLE, -(-w // MULTIPLE) * MULTIPLE
        mh, mw = ph // MULTIPLE, pw // MULTIPLE
        labels = decode_map(layers[LayerKind.SEMANTIC_MAP], mh, mw, self.bundle.num_classes)
        c = self.bundle.comp.cfg.out_channels
        symbols = decode_compact(layers[LayerKind.COMPACT], (c, mh, mw), self.bundle.compact_table)
        recon, _ = self.reconstruct(symbols, labels, (ph, pw), (h, w))
        out = recon
        if layer == "full" and header.residual_backend:
            backend = backend_by_code(header.residual_backend)
            res = backend.decode(layers[LayerKind.RESIDUAL], h, w)
            out = np.clip(recon.astype(np.int16) + res, 0, 255).astype(np.uint8)
        img = _assemble(out, header, layers.get(LayerKind.ALPHA))
        sizes = {k.name.lower(): len(v) for k, v in layers.items()}
        return DecodeResult(img, header, labels, sizes)


def _assemble(rgb: np.ndarray, header: Header, alpha_data: bytes | None) -> Image.Image:
    """Give back the input's mode: L from RGB, RGBA with the lossless alpha layer."""
    img = Image.fromarray(rgb, "RGB")
    if header.mode == "L":
        return img.convert("L")
    if header.mode == "RGBA":
        alpha = _decode_alpha(alpha_data or b"", header.width, header.height)
        img.putalpha(Image.fromarray(alpha, "L"))
    return img


def _encode_alpha(alpha: np.ndarray) -> bytes:
    """Alpha plane, losslessly, as a PNG (good on the flat masks alpha usually is)."""
    buf = io.BytesIO()
    Image.fromarray(alpha, "L").save(buf, "PNG", optimize=True)
    return buf.getvalue()


def _decode_alpha(data: bytes, width: int, height: int) -> np.ndarray:
    """Decode and check the alpha layer."""
    try:
        with Image.open(io.BytesIO(data), formats=["PNG"]) as im:
            if im.size != (width, height) or im.mode != "L":
                raise CorruptData("alpha layer has the wrong size or mode")
            return np.asarray(im.convert("L"))
    except CorruptData:
        raise
    except Exception as exc:  # noqa: BLE001 - any PIL failure on this payload is corruption
        raise CorruptData(f"alpha layer: {exc}") from None


_DEFAULT: dict[str, Codec] = {}


def get_codec(model: str = "default") -> Codec:
    """A process-wide Codec per model, so models load once."""
    if model not in _DEFAULT:
        _DEFAULT[model] = Codec(model)
    return _DEFAULT[model]


def encode(
    image, quality: int = DEFAULT_QUALITY, model: str = "default", residual: str = DEFAULT_RESIDUAL
) -> bytes:
    """Encode a PIL image (or array/path/bytes) into .sem bytes."""
    return get_codec(model).encode(image, quality=quality, residual=residual)


def decode(data: bytes, layer: str = "full", model: str | None = None) -> Image.Image:
    """Decode .sem bytes into a PIL image; the model is taken from the file unless given."""
    if model is None:
        model = container.read_header(data).model_name
    return get_codec(model).decode(data, layer=layer).image
