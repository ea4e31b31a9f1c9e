"""Matched-bytes comparison: semcodec at one setting against a classic codec (AVIF by default)
at the largest quality whose file is not larger, per image, with PSNR, MS-SSIM and the
perceptual metrics of both.  Answers "at the same file size, which looks better?" without
the curve fitting of BD-rates.

JSON (``"schema": "semcodec-matched/1"``)::

    {"schema", "created", "environment", "config": {"models", "quality", "against",
     "residual", "effort", "threads", "codec_threads", "metrics"},
     "metrics": {name: {"status", "reason", ...}},          # optional metrics, as in bench rd
     "images": [{"name", "path", "width", "height"}],
     "runs": [{"model", "codec",                            # semcodec-base at quality 0
               "records": [{"image", "semcodec": RECORD, "against": RECORD | null,
                            "against_quality": int | null, "next_bytes": int | null,
                            "reason": str | null}],
               "mean": {"n", "semcodec": MEANS, "against": MEANS}}]}

RECORD is a ``bench rd`` record (bytes, bpp, psnr, msssim, msssim_db, ssimulacra2, ...);
``next_bytes`` is the size at ``against_quality + 1`` (null at the top of the range), so the
match can be checked; MEANS are means over the images where both sides succeeded, with
``mean_shift`` (per channel) and ``max_abs_shift`` (largest on one image and channel) of the
records' colour shift.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from semcodec.bench import quality
from semcodec.bench.codecs import CodecAdapter, make_adapter
from semcodec.bench.rd.results import finite, jsonable, utc_now
from semcodec.bench.rd.run import environment, load_rgb, measure_record, unique_names
from semcodec.defaults import DEFAULT_EFFORT

SCHEMA = "semcodec-matched/1"
#: Codecs a match can be searched for, with their integer quality range (larger = bigger file).
QUALITY_RANGES: dict[str, tuple[int, int]] = {"avif": (0, 100), "webp": (0, 100), "jpeg": (1, 100)}
#: Record fields averaged in ``mean`` (the optional metrics join them where measured).
MEAN_FIELDS: tuple[str, ...] = ("bytes", "bpp", "psnr", "msssim", "msssim_db")


@dataclass(frozen=True)
class Match:
    """The largest quality whose file fits, its bytes, and the size one step up (if any)."""

    quality: int | None
    size: int | None
    next_size: int | None
    tried: dict[int, int]


def largest_fitting_quality(
    size_at: Callable[[int], int], max_bytes: int, lo: int = 0, hi: int = 100
) -> Match:
    """Binary search for the largest quality in [lo, hi] whose size is <= max_bytes.

    Assumes size grows with quality (true of AVIF, WebP and JPEG encoders up to a few bytes of
    noise); about log2(hi − lo) + 2 encodes.  ``quality`` is None when even ``lo`` is larger.
    """
    tried: dict[int, int] = {}

    def size(q: int) -> int:
        if q not in tried:
            tried[q] = size_at(q)
        return tried[q]

    if size(lo) > max_bytes:
        return Match(None, None, tried[lo], tried)
    if size(hi) <= max_bytes:
        return Match(hi, tried[hi], None, tried)
    good, bad = lo, hi  # invariant: size(good) fits, size(bad) does not
    while bad - good > 1:
        mid = (good + bad) // 2
        if size(mid) <= max_bytes:
            good = mid
        else:
            bad = mid
    return Match(good, tried[good], tried[bad], tried)


def _semcodec_adapter(model: str, setting: int, residual: str, effort: int) -> CodecAdapter:
    """Quality 0 is the base layer alone (``semcodec-base``); above it, base + residual."""
    name = "semcodec-base" if setting == 0 else "semcodec"
    return make_adapter(name, model=model, residual=residual, effort=effort)


def _match_one(
    rgb: np.ndarray,
    ours: CodecAdapter,
    setting: int,
    against: CodecAdapter,
    qrange: tuple[int, int],
    extras: Sequence[str],
) -> dict[str, Any]:
    """One image: semcodec's record, then the other codec's at the largest quality that fits."""
    sem = measure_record(ours, rgb, setting, extras)
    out: dict[str, Any] = {
        "semcodec": sem,
        "against": None,
        "against_quality": None,
        "next_bytes": None,
        "reason": None,
    }
    if sem["error"]:
        out["reason"] = f"semcodec failed: {sem['error']}"
        return out
    try:
        m = largest_fitting_quality(
            lambda q: len(against.encode(rgb, q)), sem["bytes"], lo=qrange[0], hi=qrange[1]
        )
    except Exception as e:  # noqa: BLE001 - one failing image must not lose the others
        out["reason"] = f"{against.name} failed: {type(e).__name__}: {e}"
        return out
    out["next_bytes"] = m.next_size
    if m.quality is None:
        out["reason"] = (
            f"{against.name} quality {qrange[0]} is already {m.next_size} bytes, "
            f"more than semcodec's {sem['bytes']}"
        )
        return out
    rec = measure_record(against, rgb, m.quality, extras)
    out.update(against=rec, against_quality=m.quality)
    if rec["error"]:
        out["reason"] = f"{against.name} failed: {rec['error']}"
    elif rec["bytes"] != m.size:
        out["reason"] = f"{against.name} is not deterministic: {m.size} then {rec['bytes']} bytes"
    return out


def _means(records: Sequence[Mapping[str, Any]], extras: Sequence[str]) -> dict[str, Any]:
    """Mean of each side over the images where both succeeded and a match exists."""
    ok = [r for r in records if r["against"] is not None and not r["reason"]]
    fields = (*MEAN_FIELDS, *extras)
    mean: dict[str, Any] = {"n": len(ok)}
    for side in ("semcodec", "against"):
        mean[side] = {
            f: finite(np.mean([np.nan if r[side][f] is None else r[side][f] for r in ok]))
            if ok
            else None
            for f in fields
        }
        shifts = [r[side]["mean_shift"] for r in ok if r[side].get("mean_shift")]
        mean[side]["mean_shift"] = [finite(v) for v in np.mean(shifts, 0)] if shifts else None
        mean[side]["max_abs_shift"] = finite(np.abs(shifts).max()) if shifts else None
    if ok:
        mean["against_quality"] = finite(np.mean([r["against_quality"] for r in ok]))
    return mean


def run_matched(
    images: Sequence[Path | str],
    models: Sequence[str],
    *,
    setting: int = 0,
    against: str = "avif",
    residual: str = "avif",
    effort: int = DEFAULT_EFFORT,
    threads: int = 2,
    codec_threads: int = 1,
    metrics: Sequence[str] | None = None,
) -> dict[str, Any]:
    """For each model, semcodec at ``setting`` on every image against ``against`` at matched
    bytes; returns the JSON-ready result (schema in the module docstring)."""
    import torch

    if against not in QUALITY_RANGES:
        raise ValueError(f"--against must be one of {', '.join(QUALITY_RANGES)}, got {against!r}")
    plan = quality.plan_metrics(quality.parse_metrics(",".join(metrics) if metrics else None))
    for name, info in plan.info.items():
        if info["reason"]:
            print(f"note: metric {name} left out: {info['reason']}", file=sys.stderr)
    other = make_adapter(against, threads=codec_threads)
    reason = other.unavailable_reason()
    if reason:
        raise RuntimeError(f"{against} unavailable: {reason}")
    paths = [Path(p) for p in images]
    names = unique_names(paths)
    pixels = [load_rgb(p) for p in paths]
    old_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    runs: list[dict[str, Any]] = []
    try:
        for model in models:
            ours = _semcodec_adapter(model, setting, residual, effort)
            why = ours.unavailable_reason()
            if why:
                raise RuntimeError(why)
            records = []
            for name, rgb in zip(names, pixels, strict=True):
                rec = _match_one(rgb, ours, setting, other, QUALITY_RANGES[against], plan.extras)
                if rec["reason"]:
                    print(f"note: {model} {name}: {rec['reason']}", file=sys.stderr)
                records.append({"image": name, **rec})
            runs.append(
                {
                    "model": model,
                    "codec": ours.name,
                    "codec_info": ours.info(),
                    "records": records,
                    "mean": _means(records, plan.extras),
                }
            )
    finally:
        torch.set_num_threads(old_threads)
    result = {
        "schema": SCHEMA,
        "created": utc_now(),
        "environment": environment(),
        "config": {
            "models": list(models),
            "quality": setting,
            "against": against,
            "against_info": other.info(),
            "residual": residual,
            "effort": effort,
            "threads": threads,
            "codec_threads": codec_threads,
            "metrics": plan.measured,
        },
        "metrics": plan.info,
        "images": [
            {"name": n, "path": str(p), "width": a.shape[1], "height": a.shape[0]}
            for n, p, a in zip(names, paths, pixels, strict=True)
        ],
        "runs": runs,
    }
    return jsonable(result)


def _cells(rec: Mapping[str, Any] | None, extras: Sequence[str]) -> list[str]:
    """bytes, bpp, PSNR, MS-SSIM and the optional metrics of one side, for a Markdown row."""
    if rec is None:
        return ["—"] * (4 + len(extras))

    def f(key: str, spec: str) -> str:
        v = rec.get(key)
        return "—" if v is None else format(v, spec)

    spec = {"ssimulacra2": ".2f", "butteraugli": ".3f"}
    return [f("bytes", ".0f"), f("bpp", ".4f"), f("psnr", ".2f"), f("msssim", ".4f")] + [
        f(x, spec[x]) for x in extras
    ]


def _shift_note(means: Mapping[str, Any]) -> str:
    """The colour-shift line of a model: mean decoded − original per channel, largest image's."""
    shift = means.get("mean_shift")
    if not shift:
        return "colour shift not measured"
    rgb = ", ".join(f"{c} {v:+.2f}" for c, v in zip("RGB", shift, strict=True))
    return (
        f"mean colour shift (decoded − original, 8-bit levels) {rgb}; "
        f"largest on one image and channel {means['max_abs_shift']:.2f}"
    )


def format_markdown(result: Mapping[str, Any]) -> str:
    """Per image and mean: bytes, bpp and quality of semcodec and of the other codec."""
    cfg = result["config"]
    extras = [m for m in cfg["metrics"] if m in quality.EXTRA_FIELDS]
    other = cfg["against"]
    titles = {"ssimulacra2": "SSIMULACRA2", "butteraugli": "Butteraugli"}
    side = ["bytes", "bpp", "PSNR", "MS-SSIM", *(titles[x] for x in extras)]
    head = (
        ["model", "image"]
        + [f"semcodec {c}" for c in side]
        + [f"{other} q"]
        + [f"{other} {c}" for c in side]
    )
    lines = [
        f"semcodec quality {cfg['quality']} against {other} at the largest quality whose file "
        "is not larger (per image); the mean is over the images with a match.",
        "",
        "| " + " | ".join(head) + " |",
        "|---|---|" + "---:|" * (len(head) - 2),
    ]
    notes: list[str] = []
    for run in result["runs"]:
        for r in run["records"]:
            q = "—" if r["against_quality"] is None else str(r["against_quality"])
            row = [run["model"], r["image"], *_cells(r["semcodec"], extras), q]
            row += _cells(r["against"], extras)
            lines.append("| " + " | ".join(row) + " |")
            if r["reason"]:
                notes.append(f"{run['model']} {r['image']}: {r['reason']}")
        mean = run["mean"]
        if mean["n"]:
            aq = format(mean["against_quality"], ".1f")
            row = [run["model"], f"**mean of {mean['n']}**"]
            row += [*_cells(mean["semcodec"], extras), aq, *_cells(mean["against"], extras)]
            lines.append("| " + " | ".join(row) + " |")
            notes.append(f"{run['model']}: {_shift_note(mean['semcodec'])}")
    for name, info in result.get("metrics", {}).items():
        if info.get("status") == "skipped":
            notes.append(f"metric {name} left out: {info.get('reason')}")
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def crops(
    result: Mapping[str, Any],
    out_dir: Path | str,
    names: Sequence[str] | None = None,
    size: int = 256,
) -> list[Path]:
    """One sheet per image: original, each model's decode, and the other codec at the first
    model's matched quality (same crop, centred); files are re-encoded, results hold no pixels."""
    from semcodec.bench.rd.report import label_panel

    cfg = result["config"]
    other = make_adapter(cfg["against"], threads=cfg["codec_threads"])
    ours = [
        (run["model"], _semcodec_adapter(run["model"], cfg["quality"], cfg["residual"],
                                         cfg["effort"]), {r["image"]: r for r in run["records"]})
        for run in result["runs"]
    ]  # fmt: skip
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for info in result["images"]:
        if names and info["name"] not in names:
            continue
        rgb = load_rgb(info["path"])
        h, w = rgb.shape[:2]
        cs = min(size, h, w)
        box = (slice((h - cs) // 2, (h - cs) // 2 + cs), slice((w - cs) // 2, (w - cs) // 2 + cs))
        panels = [label_panel(Image.fromarray(rgb[box]), "original")]
        for model, adapter, _ in ours:
            data = adapter.encode(rgb, cfg["quality"])
            label = f"{Path(model).stem.split('-')[0]} {len(data)} B"
            panels.append(label_panel(Image.fromarray(adapter.decode(data)[box]), label))
        first = ours[0][2][info["name"]]
        if first["against_quality"] is not None:
            data = other.encode(rgb, first["against_quality"])
            label = f"{cfg['against']} q{first['against_quality']} {len(data)} B"
            panels.append(label_panel(Image.fromarray(other.decode(data)[box]), label))
        sheet = Image.new("RGB", (sum(p.width for p in panels), panels[0].height), "white")
        for i, p in enumerate(panels):
            sheet.paste(p, (i * panels[0].width, 0))
        path = out / f"{info['name']}_q{cfg['quality']}.png"
        sheet.save(path)
        written.append(path)
    return written
