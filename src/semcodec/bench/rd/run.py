"""Running the rate–distortion benchmark: every image × codec × setting encoded, decoded and
scored, after one untimed warm-up per codec."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from semcodec.bench import quality
from semcodec.bench.codecs import CodecAdapter, Setting, make_adapter, settings_or_default
from semcodec.bench.common import library_versions
from semcodec.bench.rd.results import (
    SCHEMA,
    aggregate,
    bd_against,
    bpp,
    enhancement_gain,
    jsonable,
    predictions,
    tile_modes,
    utc_now,
)
from semcodec.defaults import DEFAULT_EFFORT
from semcodec.metrics import colour_shift, ms_ssim, msssim_scales, psnr
from semcodec.progress import Progress

#: torch threads for MS-SSIM: not worth parallelising, and on a busy CPU two spinning threads
#: made it 13x slower (1.64 s vs 0.12 s per Kodak image, measured while training ran).
METRIC_THREADS = 1


def load_rgb(path: Path | str) -> np.ndarray:
    """Read an image as 8-bit RGB, the only input the adapters and metrics accept."""
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()


def environment() -> dict[str, Any]:
    """Library versions: codec results change with them, so a report must name them."""
    v = library_versions(jxl=True)
    libraries = ("libjpeg", "libwebp", "openjpeg", "libavif", "libjpeg_turbo", "avif_codecs")
    top = ("python", "platform", "numpy", "pillow", "torch", "pytorch_msssim", "imagecodecs")
    libraries = (*libraries, "libjxl")
    metric_packages = {k: _dist_version(k) for k in ("scipy", "ssimulacra2")}
    return {
        **{k: v[k] for k in top},
        **metric_packages,
        "libraries": {k: v[k] for k in libraries},
    }


def _dist_version(name: str) -> str | None:
    """A metric package's version (None when not installed)."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def unique_names(paths: Sequence[Path]) -> list[str]:
    """Image names for the report: the file stem, disambiguated if stems repeat."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for p in paths:
        stem = p.stem
        seen[stem] = seen.get(stem, 0) + 1
        names.append(stem if seen[stem] == 1 else f"{stem}~{seen[stem]}")
    return names


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` torch threads, then restore the previous count."""
    import torch

    old = torch.get_num_threads()
    if old == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def measure_record(
    adapter: CodecAdapter, rgb: np.ndarray, setting: Setting, extras: Sequence[str] = ()
) -> dict[str, Any]:
    """Encode, decode and score one image at one setting; errors become a record field.

    ``extras`` are the optional metrics (``quality.EXTRA_FIELDS``) to add to the record.
    """
    h, w = rgb.shape[:2]
    rec: dict[str, Any] = {
        "bytes": None,
        "bpp": None,
        "psnr": None,
        "msssim": None,
        "msssim_db": None,
        "msssim_scales": msssim_scales(h, w),
        "encode_s": None,
        "decode_s": None,
        "layer_bytes": None,
        "tiles": None,
        "mean_shift": None,
        **{name: None for name in extras},
        "error": None,
    }
    try:
        t0 = time.perf_counter()
        data = adapter.encode(rgb, setting)
        t1 = time.perf_counter()
        out = adapter.decode(data)
        t2 = time.perf_counter()
        rec.update(bytes=len(data), bpp=bpp(len(data), w, h), encode_s=t1 - t0, decode_s=t2 - t1)
        rec["layer_bytes"] = adapter.layer_bytes(data)
        if hasattr(adapter, "tile_shares"):
            rec["tiles"] = adapter.tile_shares(data)
        if out.shape != rgb.shape or out.dtype != np.uint8:
            raise ValueError(f"decoded {out.shape} {out.dtype}, expected {rgb.shape} uint8")
        with _torch_threads(METRIC_THREADS):
            m = ms_ssim(rgb, out)
        rec.update(psnr=psnr(rgb, out), msssim=m.value, msssim_db=m.db, msssim_scales=m.scales)
        rec["mean_shift"] = colour_shift(rgb, out)
        rec.update(quality.score(rgb, out, extras))
        if getattr(adapter, "enhances", lambda: False)():
            rec["plain"] = plain_scores(adapter.plain(data), rgb, out, extras)
    except Exception as e:  # noqa: BLE001 - one failing file must not lose a long run
        rec["error"] = f"{type(e).__name__}: {e}"
    return rec


def plain_scores(
    plain: tuple[int, np.ndarray, np.ndarray, float] | None,
    rgb: np.ndarray,
    out: np.ndarray,
    extras: Sequence[str],
) -> dict[str, Any] | None:
    """The scores of a file decoded without its enhancement, and the squared error per class
    with and without it (None: the file has no ENHANCE layer, so both are the same)."""
    if plain is None:
        return None
    size, picture, labels, tiles_on = plain
    h, w = rgb.shape[:2]
    m = ms_ssim(rgb, picture)
    from semcodec.format.classes import MAP_NAMES

    err_plain = ((picture.astype(np.float64) - rgb) ** 2).sum(2)
    err_enh = ((out.astype(np.float64) - rgb) ** 2).sum(2)
    per_class = {
        MAP_NAMES[k]: [float(err_plain[labels == k].sum()), float(err_enh[labels == k].sum()),
                       int((labels == k).sum())]
        for k in np.unique(labels)
    }  # fmt: skip
    return {
        "bytes": size,
        "bpp": bpp(size, w, h),
        "psnr": psnr(rgb, picture),
        "msssim": m.value,
        "msssim_db": m.db,
        **quality.score(rgb, picture, extras),
        "class_sse": per_class,
        "tiles_on": tiles_on,
    }


def plain_records(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A '<codec>-plain' record per record that has enhancement scores: the same file without
    its ENHANCE layer (where it has none, the file itself)."""
    out = []
    for rec in records:
        if "plain" not in rec or rec.get("error"):
            continue
        p = rec["plain"]
        fields = {
            k: v for k, v in (p or rec).items() if k not in ("class_sse", "plain", "tiles_on")
        }
        out.append(
            {
                **{k: v for k, v in rec.items() if k != "plain"},
                **fields,
                "codec": f"{rec['codec']}-plain",
            }
        )
    return out


def _warm_up(adapters: Mapping[str, tuple[CodecAdapter, Sequence[Setting]]]) -> None:
    """One untimed round trip per codec so library/model loading is not billed to image 1."""
    ramp = np.linspace(0, 255, 64, dtype=np.float64)
    tiny = np.stack(np.broadcast_arrays(ramp[:, None], ramp[None, :], 128.0), axis=-1)
    tiny = np.ascontiguousarray(tiny.astype(np.uint8))
    for adapter, settings in adapters.values():
        if not settings:
            continue
        try:
            adapter.decode(adapter.encode(tiny, settings[0]))
        except Exception:  # noqa: BLE001 - real failures show up in the records
            pass


def run_benchmark(
    images: Sequence[Path | str],
    codecs: Sequence[str],
    qualities: Mapping[str, Sequence[Setting]] | None = None,
    progress: bool = True,
    *,
    anchor: str = "jpeg",
    model: str = "default",
    residual: str = "avif",
    threads: int = 2,
    codec_threads: int = 1,
    min_points: int = 4,
    effort: int = DEFAULT_EFFORT,
    metrics: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Measure every image × codec × setting and derive aggregates and BD-rates.

    ``metrics`` (names of ``quality.METRIC_NAMES``; default ``quality.DEFAULT_METRICS``): PSNR
    and MS-SSIM are always measured; an optional metric that is not installed is left out of
    the records, with the reason in ``result["metrics"][name]["reason"]``.

    ``qualities`` maps codec name to its settings; codecs not in it use their defaults.
    Unavailable codecs (e.g. ``jxl`` without imagecodecs, ``semcodec`` before its pipeline
    exists) are skipped with the reason recorded in ``result["codecs"][name]["reason"]``.
    ``threads`` caps torch's intra-op threads (semcodec's networks; MS-SSIM always uses
    ``METRIC_THREADS``); ``codec_threads``
    is what the AVIF and JPEG XL libraries get.  They are separate because libavif's output
    depends on its thread count (a few bytes per file), so classic-codec results stay comparable
    across runs at the default of 1 whatever torch uses.
    """
    import torch

    paths = [Path(p) for p in images]
    qualities = dict(qualities or {})
    plan = quality.plan_metrics(quality.parse_metrics(",".join(metrics) if metrics else None))
    for name, info in plan.info.items():
        if info["reason"]:
            print(f"note: metric {name} left out: {info['reason']}", file=sys.stderr)
    codec_info: dict[str, dict[str, Any]] = {}
    adapters: dict[str, tuple[CodecAdapter, list[Setting]]] = {}
    for name in codecs:
        try:
            adapter = make_adapter(
                name, model=model, residual=residual, threads=codec_threads, effort=effort
            )
        except KeyError as e:
            codec_info[name] = {"status": "skipped", "reason": str(e.args[0]), "settings": []}
            continue
        settings = settings_or_default(adapter, qualities.get(name))
        reason = adapter.unavailable_reason()
        info = adapter.info()
        info.update(status="skipped" if reason else "ok", reason=reason, settings=settings)
        codec_info[name] = info
        if reason:
            print(f"note: skipping {name}: {reason}", file=sys.stderr)
        else:
            adapters[name] = (adapter, settings)

    old_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    _warm_up(adapters)
    names = unique_names(paths)
    total = len(paths) * sum(len(s) for _, s in adapters.values())
    bar = Progress(total, enabled=progress)
    image_info: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    try:
        for path, name in zip(paths, names, strict=True):
            rgb = load_rgb(path)
            h, w = rgb.shape[:2]
            image_info.append(
                {
                    "name": name,
                    "path": str(path),
                    "width": w,
                    "height": h,
                    "msssim_scales": msssim_scales(h, w),
                }
            )
            for cname, (adapter, settings) in adapters.items():
                for s in settings:
                    rec = {"image": name, "codec": cname, "setting": s}
                    rec.update(measure_record(adapter, rgb, s, plan.extras))
                    if rec["error"]:
                        bar.message(f"warning: {name} {cname} {s}: {rec['error']}")
                    records.append(rec)
                    bar.advance(1, f"{name} {cname} {s}"[:40])
    finally:
        torch.set_num_threads(old_threads)
        bar.close()

    sizes = {i["name"]: (i["width"], i["height"]) for i in image_info}
    plain = plain_records(records)
    records.extend(plain)
    settings = {c: s for c, (_, s) in adapters.items()}
    for c in {r["codec"] for r in plain}:
        settings[c] = settings[c.removesuffix("-plain")]
    agg = aggregate(records, settings, sizes)
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "created": utc_now(),
        "environment": environment(),
        "config": {
            "anchor": anchor,
            "codecs": list(codecs),
            "qualities": {c: s for c, (_, s) in adapters.items()},
            "model": model,
            "residual": residual,
            "effort": effort,
            "threads": threads,
            "codec_threads": codec_threads,
            "metrics": plan.measured,
        },
        "codecs": codec_info,
        "metrics": plan.info,
        "images": image_info,
        "records": records,
        "aggregate": agg,
        "bd": bd_against(agg, anchor, min_points=min_points),
        "tile_modes": tile_modes(records),
        "prediction": predictions(records, sizes, anchor),
        "enhancement": enhancement_gain(records, agg, min_points),
    }
    return jsonable(result)
