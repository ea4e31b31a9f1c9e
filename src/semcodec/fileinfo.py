"""What a .sem file holds, read from its container alone (no model, no torch): dimensions,
model, quality, bytes and bits per pixel per layer, kept metadata."""

from __future__ import annotations

from typing import Any

from . import container

__all__ = ["bpp", "file_info", "format_info"]


def bpp(nbytes: int, width: int, height: int) -> float:
    """Bits per pixel of a byte count."""
    return 8.0 * nbytes / max(1, width * height)


def file_info(data: bytes) -> dict[str, Any]:
    """Everything ``semcodec info`` reports, after validating the whole file."""
    from .metadata import decode_metadata

    header, layers = container.unpack(data)
    w, h = header.width, header.height
    payload = sum(len(v) for v in layers.values())
    meta = layers.get(container.LayerKind.METADATA)
    return {
        "metadata": decode_metadata(meta).sizes() if meta is not None else {},
        "bytes": len(data),
        "format_version": data[len(container.MAGIC)],
        "width": w,
        "height": h,
        "mode": header.mode,
        "model": header.model_name,
        "model_hash": header.model_hash,
        "quality": header.quality,
        "residual": container.ResidualKind.label_of(header.residual_backend),
        "map_scale": header.map_scale,
        "compact_levels": header.compact_levels,
        "header_bytes": len(data) - payload,
        "layers": {
            kind.name.lower(): {"bytes": len(v), "bpp": bpp(len(v), w, h)}
            for kind, v in layers.items()
        },
        "bpp": bpp(len(data), w, h),
    }


def format_info(name: str, d: dict[str, Any]) -> str:
    """The human-readable form of file_info."""
    lines = [
        f"{name}: {d['bytes']} bytes, {d['width']}x{d['height']} {d['mode']}, {d['bpp']:.4f} bpp",
        f"  model      {d['model']} (hash {d['model_hash']})",
        f"  quality    {d['quality']}, residual {d['residual']}",
        f"  {'header':<12}{d['header_bytes']:>10} bytes  "
        f"{bpp(d['header_bytes'], d['width'], d['height']):.4f} bpp",
    ]
    for kind, v in d["layers"].items():
        lines.append(f"  {kind:<12}{v['bytes']:>10} bytes  {v['bpp']:.4f} bpp")
    lines.append(f"  {'total':<12}{d['bytes']:>10} bytes  {d['bpp']:.4f} bpp")
    if d.get("metadata"):
        kept = ", ".join(f"{k.upper()} {n} bytes" for k, n in d["metadata"].items())
        lines.append(f"  metadata   {kept} (before compression)")
    return "\n".join(lines)
