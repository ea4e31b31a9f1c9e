"""``bench roi``: does the map steer the bits? Rate against PSNR inside ground-truth regions.

On CamVid frames with their **ground-truth** labels defining the ROI (not the codec's own map),
three curves: semcodec with ``--roi`` at a strength, semcodec without (uniform), and the AVIF
anchor of ``bench rd`` (libavif/aom speed 6, 4:2:0). For each: bits per pixel of the whole
file against PSNR over the ROI's pixels, over the background's and over the whole image
(each pooled over frames: total squared error over total pixels, so frames without a class
add nothing to it), per ROI class too; BD-rates (bench/bdrate.py, PCHIP) against the anchor
and against uniform semcodec; the share of each class's ground-truth pixels that the codec's
own ROI (its map's blocks of the classes, grown by the margin) covers; and the encode seconds
with and without the ROI on this CPU.

JSON (``"schema": "semcodec-roi/1"``): ``config``, ``cpu``, ``frames``, ``curves`` (per codec:
``quality``, ``bpp``, ``psnr`` {roi, background, whole, per class}), ``bd_rate`` (per codec
pair and measure), ``recall`` (per class: with and without the margin), ``encode_s``.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from semcodec.bench.bdrate import bd_rate_result
from semcodec.bench.codecs import AvifAdapter
from semcodec.bench.rd.results import jsonable, utc_now
from semcodec.format.classes import CLASSES
from semcodec.format.tiling import MAP_SCALE

SCHEMA = "semcodec-roi/1"
ROI_CLASSES = ("pedestrian", "car", "bicyclist", "signsymbol")
SEM_QUALITIES = (15, 25, 35, 45, 55, 65, 75, 85)
ANCHOR_QUALITIES = (20, 30, 40, 50, 60, 70, 80, 88)
CODECS = ("semcodec-roi", "semcodec", "avif")
MEASURES = ("roi", "background", "whole")


@dataclass(frozen=True)
class RoiBenchConfig:
    """What to measure: the data, the frames, the ROI and the quality ladders."""

    data: Path
    split: str = "test"
    every: int = 8  # every n-th frame of the split's list
    limit: int | None = None
    classes: tuple[str, ...] = ROI_CLASSES
    strength: float | None = None  # None: the codec's default
    model: str = "default"
    sem_qualities: tuple[int, ...] = SEM_QUALITIES
    anchor_qualities: tuple[int, ...] = ANCHOR_QUALITIES


@dataclass
class _Sums:
    """Pooled squared errors and pixel counts per region, bytes and pixels, per quality."""

    err: dict[str, float] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)
    bits: float = 0.0
    pixels: int = 0

    def add(self, region: str, sq: np.ndarray, mask: np.ndarray | None) -> None:
        """Add one frame's squared error over a region (None: the whole frame)."""
        part = sq if mask is None else sq[mask]
        self.err[region] = self.err.get(region, 0.0) + float(part.sum())
        self.count[region] = self.count.get(region, 0) + int(part.size)

    def psnr(self, region: str) -> float | None:
        """PSNR of the pooled mean squared error (None: no pixel of the region)."""
        n = self.count.get(region, 0)
        if n == 0:
            return None
        mse = max(self.err[region] / n, 1e-10)
        return float(10.0 * np.log10(255.0**2 / mse))


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (the platform's string elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def frames(cfg: RoiBenchConfig) -> list[tuple[str, Path, Path]]:
    """(name, image, labels) of every ``every``-th frame of the split's list (CamVid layout)."""
    listing = (cfg.data / f"{cfg.split}.txt").read_text().split("\n")
    pairs = [ln.split() for ln in listing if ln.strip()][:: cfg.every]
    if cfg.limit is not None:
        pairs = pairs[: cfg.limit]
    return [(Path(a).stem, cfg.data / a, cfg.data / b) for a, b in pairs]


def _class_ids(names: Sequence[str]) -> list[int]:
    """Class ids of names (the same names --roi takes)."""
    return [CLASSES.index(n) for n in names]


def _measure(sums: _Sums, rgb: np.ndarray, out: np.ndarray, gt: np.ndarray, ids: list[int]) -> None:
    """Add one decoded frame's errors per region and per ROI class."""
    sq = ((rgb.astype(np.float64) - out.astype(np.float64)) ** 2).mean(axis=2)
    roi = np.isin(gt, ids)
    sums.add("roi", sq, roi)
    sums.add("background", sq, ~roi)
    sums.add("whole", sq, None)
    for cid in ids:
        sums.add(CLASSES[cid], sq, gt == cid)


def _recall(codec: Any, rgb: np.ndarray, gt: np.ndarray, roi_cfg: Any, acc: dict) -> None:
    """Add how much of each class's ground truth the codec's ROI covers (margin and none)."""
    from dataclasses import replace

    from semcodec.encoder.roi import block_weights
    from semcodec.format.tiling import pad_rgb

    labels = codec.semantic_map(pad_rgb(rgb))
    h, w = gt.shape
    for key, cfg in (("margin", roi_cfg), ("no_margin", replace(roi_cfg, margin=0))):
        blocks = block_weights(labels, cfg) > 0
        mask = np.repeat(np.repeat(blocks, 8, 0), 8, 1)[:h, :w]
        for cid in roi_cfg.weights:
            gt_c = gt == cid
            hit, total = acc.setdefault(key, {}).setdefault(CLASSES[cid], [0, 0])
            acc[key][CLASSES[cid]] = [hit + int((gt_c & mask).sum()), total + int(gt_c.sum())]


def _curve(sums: dict[int, _Sums], names: Sequence[str]) -> dict[str, Any]:
    """Qualities, bpp and PSNRs of one codec, quality ascending."""
    qs = sorted(sums)
    regions = (*MEASURES, *names)
    return {
        "quality": qs,
        "bpp": [sums[q].bits / sums[q].pixels for q in qs],
        "psnr": {r: [sums[q].psnr(r) for q in qs] for r in regions},
    }


def _bd(anchor: dict, test: dict, region: str) -> dict[str, Any]:
    """BD-rate of one region's PSNR, with the reason when it cannot be computed."""
    pts = [(r, d) for r, d in zip(anchor["bpp"], anchor["psnr"][region], strict=True) if d]
    tst = [(r, d) for r, d in zip(test["bpp"], test["psnr"][region], strict=True) if d]
    if len(pts) < 4 or len(tst) < 4:
        return {"value": None, "reason": "fewer than 4 points"}
    res = bd_rate_result(*zip(*pts, strict=True), *zip(*tst, strict=True))
    return {"value": res.value if res.ok else None, "reason": res.reason}


def bd_table(curves: dict[str, dict], names: Sequence[str]) -> dict[str, dict[str, dict]]:
    """BD-rates of every region: semcodec-roi and semcodec against avif, roi against uniform."""
    pairs = {
        "semcodec-roi vs avif": ("avif", "semcodec-roi"),
        "semcodec vs avif": ("avif", "semcodec"),
        "semcodec-roi vs semcodec": ("semcodec", "semcodec-roi"),
    }
    regions = (*MEASURES, *names)
    return {
        label: {r: _bd(curves[a], curves[t], r) for r in regions} for label, (a, t) in pairs.items()
    }


def run(cfg: RoiBenchConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Encode, decode and measure every frame with the three codecs; the result dict."""
    from semcodec.encoder.codec import Codec
    from semcodec.encoder.roi_spec import parse_roi

    codec = Codec(cfg.model)
    roi_cfg = parse_roi(list(cfg.classes), cfg.strength)
    ids = _class_ids(cfg.classes)
    anchor = AvifAdapter(speed=6)
    sums: dict[str, dict[int, _Sums]] = {c: {} for c in CODECS}
    seconds: dict[str, list[float]] = {"semcodec-roi": [], "semcodec": []}
    recall: dict[str, dict[str, list[int]]] = {}
    items = frames(cfg)
    for i, (name, img_path, lab_path) in enumerate(items):
        rgb = np.asarray(Image.open(img_path).convert("RGB"))
        gt = np.asarray(Image.open(lab_path))
        _recall(codec, rgb, gt, roi_cfg, recall)
        for q in cfg.sem_qualities:
            for label, rc in (("semcodec-roi", roi_cfg), ("semcodec", None)):
                t0 = time.perf_counter()
                data = codec.encode(rgb, quality=q, roi=rc)
                seconds[label].append(time.perf_counter() - t0)
                out = np.asarray(codec.decode(data).image.convert("RGB"))
                _add(sums[label], q, data, rgb, out, gt, ids)
        for q in cfg.anchor_qualities:
            data = anchor.encode(rgb, q)
            _add(sums["avif"], q, data, rgb, anchor.decode(data), gt, ids)
        if progress:
            progress(f"{i + 1}/{len(items)} {name}")
    names = [CLASSES[c] for c in ids]
    curves = {c: _curve(sums[c], names) for c in CODECS}
    return jsonable(
        {
            "schema": SCHEMA,
            "created": utc_now(),
            "cpu": cpu_name(),
            "config": {
                **asdict(cfg),
                "data": str(cfg.data),
                "roi": roi_cfg.names,
                "strength": roi_cfg.strength,
                "margin_px": MAP_SCALE * roi_cfg.margin,
            },  # fmt: skip
            "frames": [n for n, _, _ in items],
            "curves": curves,
            "bd_rate": bd_table(curves, names),
            "recall": {
                key: {c: hit / total if total else None for c, (hit, total) in per.items()}
                for key, per in recall.items()
            },
            "encode_s": {k: float(np.mean(v)) if v else None for k, v in seconds.items()},
        }
    )


def _add(
    by_q: dict[int, _Sums], q: int, data: bytes, rgb: np.ndarray, out: np.ndarray, gt, ids
) -> None:
    """Count one encode at quality q: its bits and its errors."""
    s = by_q.setdefault(q, _Sums())
    s.bits += 8.0 * len(data)
    s.pixels += rgb.shape[0] * rgb.shape[1]
    _measure(s, rgb, out, gt, ids)


def summary(result: dict[str, Any]) -> str:
    """The BD-rates, recall and seconds as a few text lines."""
    lines = [f"CamVid {result['config']['split']}, {len(result['frames'])} frames, {result['cpu']}"]
    for label, per in result["bd_rate"].items():
        vals = ", ".join(
            f"{r} {v['value']:+.1f} %" if v["value"] is not None else f"{r} n/a"
            for r, v in per.items()
        )
        lines.append(f"BD-rate {label}: {vals}")
    for key, per in result["recall"].items():
        vals = ", ".join(f"{c} {100 * v:.1f} %" for c, v in per.items() if v is not None)
        lines.append(f"recall of the ground-truth ROI ({key.replace('_', ' ')}): {vals}")
    s = result["encode_s"]
    if s["semcodec"] and s["semcodec-roi"]:
        lines.append(
            f"encode s per frame: {s['semcodec-roi']:.3f} with the ROI, {s['semcodec']:.3f} "
            f"without ({s['semcodec-roi'] / s['semcodec']:.2f}x)"
        )
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    """ROI, background and whole-image PSNR against bpp, one panel each (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharex=True)
    for ax, region in zip(axes, MEASURES, strict=True):
        for label, curve in result["curves"].items():
            ax.plot(curve["bpp"], curve["psnr"][region], marker="o", ms=3, label=label)
        ax.set_title(f"{region} PSNR")
        ax.set_xlabel("bpp")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("PSNR (dB)")
    axes[0].legend()
    fig.suptitle(f"CamVid {result['config']['split']}: ROI = {', '.join(result['config']['roi'])}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
