"""What a .sem file holds, read from its container alone (no model, no torch): dimensions,
model, quality, bytes and bits per pixel per layer, kept metadata."""

from __future__ import annotations

from typing import Any

from semcodec.format import container

__all__ = ["bpp", "file_info", "format_info", "holds_text"]


def bpp(nbytes: int, width: int, height: int) -> float:
    """Bits per pixel of a byte count."""
    return 8.0 * nbytes / max(1, width * height)


def file_info(data: bytes) -> dict[str, Any]:
    """Everything ``semcodec info`` reports, after validating the whole file."""
    from semcodec.decoder.maplayer import class_shares, full_size_map, map_shape, read_map
    from semcodec.decoder.parts import release_meta
    from semcodec.format.metadata import decode_metadata

    header, layers = container.unpack(data)
    _, labels = read_map(data)
    labels = full_size_map(labels, header)  # shares of pixels, edge blocks counted as cropped
    release = release_meta(header.model_hash)
    compact = container.LayerKind.COMPACT in layers
    gate = _gating_info(layers.get(container.LayerKind.GATING), compact, map_shape(header))
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
        "release": (
            {"name": f"{release['name']}-{release['hash'][:8]}", "date": release["released"]}
            if release
            else None
        ),
        "quality": header.quality,
        "residual": container.ResidualKind.label_of(header.residual_backend),
        "residual_chroma": _residual_chroma(header, layers.get(container.LayerKind.RESIDUAL)),
        "map_scale": header.map_scale,
        "compact_levels": header.compact_levels,
        "header_bytes": len(data) - payload,
        "layers": {
            kind.name.lower(): {"bytes": len(v), "bpp": bpp(len(v), w, h)}
            for kind, v in layers.items()
        },
        "bpp": bpp(len(data), w, h),
        "classes": class_shares(labels),
        "prediction": gate,
        "learned_base": _learned_base(gate, container.LayerKind.COMPACT in layers),
        "roi": _roi_info(layers.get(container.LayerKind.ROI), labels, header),
        "enhancement": _enhance_info(layers.get(container.LayerKind.ENHANCE), header),
    }


def _learned_base(gate: dict[str, Any] | None, compact: bool) -> float:
    """The share of tiles predicted from the compact layer (the generator's reconstruction or
    its bilinear base): 0 when the file is the map and a residual that codes the image itself."""
    if gate is None:
        return 1.0 if compact else 0.0
    return 1.0 - gate["shares"].get("none", 0.0)


def holds_text(d: dict[str, Any]) -> str:
    """What the file holds, in words: whether the learned base is used, and what
    ``decode --layer base`` gives."""
    share = d.get("learned_base", 1.0)
    residual = "residual" in d["layers"]
    if not residual:
        return "the base layer alone (map, compact layer, generator); no residual"
    if share == 0:
        return (
            "the map and a residual that codes the image itself; no tile uses the learned base "
            "(decode --layer base gives a flat grey picture)"
        )
    return (
        f"the map, the learned base on {100 * share:.0f} % of the tiles and a residual "
        "(decode --layer base gives the prediction the residual was coded against)"
    )


def _residual_chroma(header: container.Header, payload: bytes | None) -> str | None:
    """The AVIF residual's chroma layout (4:4:4; 4:2:0 where it codes the image itself or
    the encoder was asked for --chroma 420)."""
    if payload is None or header.residual_backend != container.ResidualKind.AVIF:
        return None
    from semcodec.format.residual_avif import chroma_layout

    return chroma_layout(payload)


def format_info(name: str, d: dict[str, Any]) -> str:
    """The human-readable form of file_info."""
    lines = [
        f"{name}: {d['bytes']} bytes, {d['width']}x{d['height']} {d['mode']}, {d['bpp']:.4f} bpp",
        f"  model      {d['model']} (hash {d['model_hash']}; {_release_text(d['release'])})",
        f"  quality    {d['quality']}, residual {d['residual']}"
        + (f" {d['residual_chroma']}" if d.get("residual_chroma") else ""),
        f"  {'header':<12}{d['header_bytes']:>10} bytes  "
        f"{bpp(d['header_bytes'], d['width'], d['height']):.4f} bpp",
    ]
    for kind, v in d["layers"].items():
        lines.append(f"  {kind:<12}{v['bytes']:>10} bytes  {v['bpp']:.4f} bpp")
    lines.append(f"  {'total':<12}{d['bytes']:>10} bytes  {d['bpp']:.4f} bpp")
    lines.append(f"  holds      {holds_text(d)}")
    p = d.get("prediction")
    if p is not None:
        shares = ", ".join(f"{k} {100 * v:.0f} %" for k, v in p["shares"].items())
        lines.append(
            f"  prediction {shares} of {p['tiles']} tiles of {p['tile_px']} px"
            + ("; no compact layer (no tile uses the base)" if not p["compact"] else "")
        )
    e = d.get("enhancement")
    if e is not None:
        gains = ", ".join(f"{k} {v:g}" for k, v in e["gains"].items() if v != 1.0) or "1 everywhere"
        lines.append(
            f"  enhance    {100 * e['tiles_on']:.0f} % of {e['tiles']} tiles of {e['tile_px']} px; "
            f"gain {gains}" + ("; per-class offsets" if e["offsets"] else "")
        )
    r = d.get("roi")
    if r is not None:
        names = ", ".join(f"{k}" + (f":{w:g}" if w != 1 else "") for k, w in r["classes"].items())
        lines.append(
            f"  roi        {names}; strength {r['strength']:g} (background blur "
            f"{r['background_blur_px']:g} px, AV1 delta-q rate guide), margin {r['margin_px']} px, "
            f"{100 * r['coverage']:.1f} % of the map"
        )
    if d.get("classes"):
        shares = ", ".join(f"{k} {100 * v:.1f} %" for k, v in d["classes"].items())
        lines.append(f"  classes    {shares}")
    if d.get("metadata"):
        kept = ", ".join(f"{k.upper()} {n} bytes" for k, n in d["metadata"].items())
        lines.append(f"  metadata   {kept} (before compression)")
    return "\n".join(lines)


def _roi_info(data: bytes | None, labels: Any, header: container.Header) -> dict[str, Any] | None:
    """The ROI classes, weights, strength and margin a file records, and the share it covers."""
    if data is None:
        return None
    from semcodec.format.roi import SIGMA_PER_STRENGTH, coverage, decode_roi

    cfg = decode_roi(data)
    stored = labels[:: header.map_scale, :: header.map_scale]
    return {
        "classes": cfg.names,
        "strength": cfg.strength,
        "margin_px": cfg.margin * header.map_scale,
        "background_blur_px": SIGMA_PER_STRENGTH * cfg.strength,
        "coverage": coverage(stored, cfg),
    }


def _release_text(release: dict | None) -> str:
    """'release default-04618992 of 2026-12-01', or why there is none."""
    if release is None:
        return "no installed release has this hash"
    return f"release {release['name']} of {release['date']}" if release["date"] else release["name"]


def _gating_info(
    data: bytes | None, compact: bool, map_shape: tuple[int, int]
) -> dict[str, Any] | None:
    """Tile count, size and mode shares of a gated file or one without prediction (None: the
    generator everywhere)."""
    from semcodec.format.gating import NONE, mode_shares, read_plan
    from semcodec.format.tiling import MAP_SCALE

    plan = read_plan(data, compact, *map_shape)
    if plan is None:
        return None
    return {
        "tiles": int(plan.modes.size),
        "tile_px": plan.tile_blocks * MAP_SCALE,
        "blend_radius": plan.radius,
        "shares": mode_shares(plan.modes),
        "compact": bool((plan.modes != NONE).any()),
    }


def _enhance_info(data: bytes | None, header: container.Header) -> dict[str, Any] | None:
    """Where the enhancement network applies and with what per-class gains (None: nowhere)."""
    if data is None:
        return None
    from semcodec.format.classes import MAP_NAMES, NUM_CLASSES
    from semcodec.format.enhance import GAIN_ONE, decode_adjust, tile_grid

    adj = decode_adjust(data, NUM_CLASSES, header.height, header.width)
    th, tw = tile_grid(header.height, header.width, adj.tile)
    on = th * tw if adj.tiles is None else int(adj.tiles.sum())
    return {
        "tiles": th * tw,
        "tile_px": adj.tile,
        "tiles_on": on / max(1, th * tw),
        "gains": {MAP_NAMES[i]: int(g) / GAIN_ONE for i, g in enumerate(adj.gains)},
        "offsets": bool(adj.offsets.any()),
        "update_rows": 0 if adj.update is None else int(adj.update.rows.any(axis=1).sum()),
    }
