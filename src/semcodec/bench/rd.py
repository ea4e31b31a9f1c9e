"""Rate–distortion benchmark: run codecs over images, aggregate, BD-rates, table, JSON, CSV, plot.

``run_benchmark`` returns a JSON-ready dict (non-finite floats are stored as ``null``).  The
same dict is what ``write_json`` stores and ``compare``/``crops`` read back.

JSON schema (``"schema": "semcodec-bench/1"``)::

    {
      "schema": "semcodec-bench/1",
      "created": "2025-01-01T12:00:00Z",            # UTC, ISO 8601
      "environment": {"python": str, "platform": str, "numpy": str, "pillow": str,
                      "torch": str, "pytorch_msssim": str, "imagecodecs": str | null,
                      "libraries": {"libjpeg": str | null, "libwebp": ..., "openjpeg": ...,
                                    "libavif": ..., "libjpeg_turbo": ..., "avif_codecs": ...,
                                    "libjxl": ...}},
      "config": {"anchor": "jpeg", "codecs": [str, ...], "qualities": {codec: [setting, ...]},
                 "model": str, "residual": str,
                 "threads": int,                              # torch: semcodec nets, MS-SSIM
                 "codec_threads": int},                       # AVIF / JPEG XL libraries
      "codecs": {codec: {"status": "ok" | "skipped", "reason": str | null,
                         "description": str, "setting": "quality" | "ratio" | "distance",
                         "settings": [setting, ...], "default_settings": [...], ...}},
      "images": [{"name": str, "path": str, "width": int, "height": int,
                  "msssim_scales": int}],                     # 5 unless the image is small
      "records": [{"image": str, "codec": str, "setting": int | float | str,
                   "bytes": int, "bpp": float,                 # bpp = 8 * bytes / (W * H)
                   "psnr": float | null, "msssim": float | null, "msssim_db": float | null,
                   "msssim_scales": int, "encode_s": float, "decode_s": float,
                   "layer_bytes": {"map": int, "compact": int, "residual": int,
                                   "container": int} | null,  # semcodec codecs only
                   "error": str | null}],                      # one per image x codec x setting
      "aggregate": {codec: [{"setting": ..., "n": int,        # images averaged (errors excluded)
                             "bpp": float, "psnr": float, "msssim": float,
                             "msssim_db": float,              # mean of per-image dB values
                             "encode_s": float, "decode_s": float,    # arithmetic means
                             "layer_bpp": {"map": float, ...} | null}]},  # mean bpp per layer
      "bd": {"anchor": str, "min_points": int, "reason": str | null,
             "codecs": {codec: {"bpp_range": [min, max],      # of the aggregated curve
                                "psnr" | "msssim_db": {
                                  "cubic" | "pchip": {
                                    "bd_rate": float | null,  # percent vs anchor, < 0 is better
                                    "reason": str | null,     # why bd_rate is null
                                    "interval": [lo, hi] | null,   # overlapping quality range
                                    "bd_dist": float | null,  # dB gain at equal rate
                                    "bd_dist_reason": str | null}}}}}
    }

BD values are computed on the aggregated curves (mean bpp vs mean quality per setting), the
usual practice for Kodak-style image sets.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import json
import math
import platform
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from PIL import Image

from semcodec.bench.bdrate import METHODS, bd_dist_result, bd_rate_result
from semcodec.bench.codecs import CodecAdapter, Setting, get_codec, settings_or_default
from semcodec.bench.metrics import ms_ssim, msssim_scales, psnr
from semcodec.defaults import DEFAULT_EFFORT
from semcodec.imageio import IMAGE_SUFFIXES, list_images

__all__ = [
    "SCHEMA",
    "METRICS",
    "IMAGE_SUFFIXES",
    "ProgressBar",
    "list_images",
    "load_rgb",
    "bpp",
    "run_benchmark",
    "aggregate",
    "bd_against",
    "format_table",
    "write_json",
    "read_json",
    "write_csv",
    "plot_rd",
    "compare",
    "crops",
    "format_markdown",
    "LAYERS",
]

SCHEMA = "semcodec-bench/1"
#: torch threads for MS-SSIM: not worth parallelising, and on a busy CPU two spinning threads
#: made it 13x slower (1.64 s vs 0.12 s per Kodak image, measured while training ran).
METRIC_THREADS = 1
#: Quality measures BD-rates are computed on (both "larger is better").
METRICS: tuple[str, ...] = ("psnr", "msssim_db")
#: Layers of a semcodec file as the report names them (``container`` = header, table, CRCs).
LAYERS: tuple[str, ...] = ("map", "compact", "residual", "container")
CSV_FIELDS = (
    "image",
    "width",
    "height",
    "codec",
    "setting",
    "bytes",
    "bpp",
    "psnr",
    "msssim",
    "msssim_db",
    "msssim_scales",
    "encode_s",
    "decode_s",
    "map_bytes",
    "compact_bytes",
    "residual_bytes",
    "container_bytes",
    "error",
)


class ProgressBar:
    """Minimal stderr progress bar (no tqdm dependency); silent unless stderr is a TTY."""

    def __init__(self, total: int, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = max(total, 1)
        self.done = 0
        self.start = time.monotonic()
        isatty = getattr(self.stream, "isatty", lambda: False)
        self.enabled = enabled and bool(isatty())

    def update(self, label: str = "", n: int = 1) -> None:
        """Advance and redraw in place; the ETA assumes steps take similar time."""
        self.done += n
        if not self.enabled:
            return
        frac = self.done / self.total
        width = 30
        fill = int(round(frac * width))
        elapsed = time.monotonic() - self.start
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        line = (
            f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} "
            f"{frac:4.0%} eta {eta:5.0f}s {label[:40]:<40}"
        )
        self.stream.write(line)
        self.stream.flush()

    def message(self, text: str) -> None:
        """Print a line to stderr without garbling the bar (it redraws on the next update)."""
        if self.enabled:
            self.stream.write("\r\033[K")
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        """Finish the line so later output does not overwrite the bar."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def load_rgb(path: Path | str) -> np.ndarray:
    """Read an image as 8-bit RGB, the only input the adapters and metrics accept."""
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()


def bpp(num_bytes: int, width: int, height: int) -> float:
    """Bits per pixel of a whole file: 8 · bytes / (W · H), every header byte included."""
    return 8.0 * num_bytes / (width * height)


def _finite(x: Any) -> float | None:
    """JSON has no nan/inf: store them as null."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _num(x: Any) -> float:
    """null back to nan for arithmetic."""
    return math.nan if x is None else float(x)


def _jsonable(obj: Any) -> Any:
    """Recursively replace nan/inf by None and numpy scalars by Python ones."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _finite(obj)
    return obj


def _environment() -> dict[str, Any]:
    """Library versions: codec results change with them, so a report must name them."""
    import PIL
    import pytorch_msssim
    import torch
    from PIL import features

    def feat(name: str) -> str | None:
        try:
            return features.version(name)
        except Exception:  # noqa: BLE001 - informative only
            return None

    try:
        import imagecodecs

        ic: str | None = imagecodecs.__version__
        jxl: str | None = imagecodecs.jpegxl_version()
    except Exception:  # noqa: BLE001 - optional dependency, informative only
        ic = jxl = None
    try:
        from PIL import _avif

        avif_codecs: str | None = _avif.codec_versions()
    except Exception:  # noqa: BLE001 - Pillow without AVIF
        avif_codecs = None
    try:
        from importlib.metadata import version

        msssim_version: str | None = version("pytorch-msssim")
    except Exception:  # noqa: BLE001 - informative only
        msssim_version = getattr(pytorch_msssim, "__version__", None)
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "pillow": PIL.__version__,
        "torch": torch.__version__,
        "pytorch_msssim": msssim_version,
        "imagecodecs": ic,
        "libraries": {
            "libjpeg": feat("jpg"),
            "libwebp": feat("webp"),
            "openjpeg": feat("jpg_2000"),
            "libavif": feat("avif"),
            "libjpeg_turbo": feat("libjpeg_turbo"),
            "avif_codecs": avif_codecs,  # libavif's AV1 encoder/decoder (aom, dav1d, …)
            "libjxl": jxl,
        },
    }


def _unique_names(paths: Sequence[Path]) -> list[str]:
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


def _measure(adapter: CodecAdapter, rgb: np.ndarray, setting: Setting) -> dict[str, Any]:
    """Encode, decode and score one image at one setting; errors become a record field."""
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
        if out.shape != rgb.shape or out.dtype != np.uint8:
            raise ValueError(f"decoded {out.shape} {out.dtype}, expected {rgb.shape} uint8")
        with _torch_threads(METRIC_THREADS):
            m = ms_ssim(rgb, out)
        rec.update(psnr=psnr(rgb, out), msssim=m.value, msssim_db=m.db, msssim_scales=m.scales)
    except Exception as e:  # noqa: BLE001 - one failing file must not lose a long run
        rec["error"] = f"{type(e).__name__}: {e}"
    return rec


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


def _utc_now() -> str:
    """The ``created`` stamp of a result: UTC, ISO 8601, seconds."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
) -> dict[str, Any]:
    """Measure every image × codec × setting and derive aggregates and BD-rates.

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
    codec_info: dict[str, dict[str, Any]] = {}
    adapters: dict[str, tuple[CodecAdapter, list[Setting]]] = {}
    for name in codecs:
        try:
            adapter = get_codec(
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
    names = _unique_names(paths)
    total = len(paths) * sum(len(s) for _, s in adapters.values())
    bar = ProgressBar(total, enabled=progress)
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
                    rec.update(_measure(adapter, rgb, s))
                    if rec["error"]:
                        bar.message(f"warning: {name} {cname} {s}: {rec['error']}")
                    records.append(rec)
                    bar.update(f"{name} {cname} {s}")
    finally:
        torch.set_num_threads(old_threads)
        bar.close()

    sizes = {i["name"]: (i["width"], i["height"]) for i in image_info}
    agg = aggregate(records, {c: s for c, (_, s) in adapters.items()}, sizes)
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "created": _utc_now(),
        "environment": _environment(),
        "config": {
            "anchor": anchor,
            "codecs": list(codecs),
            "qualities": {c: s for c, (_, s) in adapters.items()},
            "model": model,
            "residual": residual,
            "effort": effort,
            "threads": threads,
            "codec_threads": codec_threads,
        },
        "codecs": codec_info,
        "images": image_info,
        "records": records,
        "aggregate": agg,
        "bd": bd_against(agg, anchor, min_points=min_points),
    }
    return _jsonable(result)


def aggregate(
    records: Iterable[Mapping[str, Any]],
    order: Mapping[str, Sequence[Setting]] | None = None,
    sizes: Mapping[str, tuple[int, int]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Mean bpp / quality / time per codec and setting over the images without errors.

    ``sizes`` (image name → (width, height)) is needed for the per-layer bpp of layered codecs.
    """
    groups: dict[str, dict[Any, list[Mapping[str, Any]]]] = {}
    for r in records:
        if r.get("error"):
            continue
        groups.setdefault(r["codec"], {}).setdefault(_key(r["setting"]), []).append(r)
    out: dict[str, list[dict[str, Any]]] = {}
    for codec, by_setting in groups.items():
        keys = [_key(s) for s in order[codec]] if order and codec in order else list(by_setting)
        rows = []
        for k in keys:
            rs = by_setting.get(k)
            if not rs:
                continue
            row: dict[str, Any] = {"setting": rs[0]["setting"], "n": len(rs)}
            for f in ("bpp", "psnr", "msssim", "msssim_db", "encode_s", "decode_s"):
                row[f] = _finite(np.mean([_stored(r, f) for r in rs]))
            row["layer_bpp"] = _layer_bpp(rs, sizes)
            rows.append(row)
        out[codec] = rows
    return out


def _layer_bpp(
    rs: Sequence[Mapping[str, Any]], sizes: Mapping[str, tuple[int, int]] | None
) -> dict[str, float | None] | None:
    """Mean bpp of each layer: shows where a layered codec's bits go (None for classic codecs)."""
    if not sizes or any(not r.get("layer_bytes") or r["image"] not in sizes for r in rs):
        return None
    out: dict[str, float | None] = {}
    for layer in LAYERS:
        vals = [bpp(r["layer_bytes"].get(layer, 0), *sizes[r["image"]]) for r in rs]
        out[layer] = _finite(np.mean(vals))
    return out


def _stored(rec: Mapping[str, Any], field: str) -> float:
    """A record's value as float; a null quality in an error-free record was inf (lossless)."""
    v = rec.get(field)
    if v is None:
        return math.inf if field in ("psnr", "msssim_db") else math.nan
    return float(v)


def _key(setting: Any) -> Any:
    """Settings compare equal across int/float spellings (JSON may turn 16.0 into 16)."""
    if isinstance(setting, (int, float)) and not isinstance(setting, bool):
        return float(setting)
    return setting


def _curve(rows: Sequence[Mapping[str, Any]], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(rates, qualities) arrays of an aggregated curve, nan where missing."""
    return (
        np.array([_num(r.get("bpp")) for r in rows]),
        np.array([_num(r.get(metric)) for r in rows]),
    )


def _bd_entry(
    anchor_rows: Sequence[Mapping[str, Any]],
    test_rows: Sequence[Mapping[str, Any]],
    metric: str,
    method: str,
    min_points: int,
) -> dict[str, Any]:
    """BD-rate and BD-distortion of one curve pair, with reasons when nan."""
    ra, da = _curve(anchor_rows, metric)
    rt, dt = _curve(test_rows, metric)
    rate = bd_rate_result(ra, da, rt, dt, method=method, min_points=min_points)  # type: ignore[arg-type]
    dist = bd_dist_result(ra, da, rt, dt, method=method, min_points=min_points)  # type: ignore[arg-type]
    return {
        "bd_rate": _finite(rate.value),
        "reason": rate.reason,
        "interval": list(rate.interval) if rate.interval else None,
        "bd_dist": _finite(dist.value),
        "bd_dist_reason": dist.reason,
    }


def bd_against(
    agg: Mapping[str, Sequence[Mapping[str, Any]]], anchor: str = "jpeg", min_points: int = 4
) -> dict[str, Any]:
    """BD-rates of every codec's aggregated curve against the anchor's, both fit variants."""
    out: dict[str, Any] = {"anchor": anchor, "min_points": min_points, "reason": None, "codecs": {}}
    if anchor not in agg:
        out["reason"] = f"anchor {anchor!r} has no results in this run"
    for codec, rows in agg.items():
        bpps = [r["bpp"] for r in rows if r.get("bpp") is not None]
        entry: dict[str, Any] = {"bpp_range": [min(bpps), max(bpps)] if bpps else None}
        if codec != anchor and anchor in agg:
            for metric in METRICS:
                entry[metric] = {
                    m: _bd_entry(agg[anchor], rows, metric, m, min_points) for m in METHODS
                }
        out["codecs"][codec] = entry
    return out


def _fmt(x: Any, spec: str) -> str:
    """Format a possibly-null number for the text table."""
    return "—" if x is None else format(x, spec)


def _bd_rates(entry: Mapping[str, Any]) -> list[str]:
    """BD-rates of one codec in table order: PSNR cubic, PSNR pchip, MS-SSIM dB cubic, pchip."""
    return [_fmt(entry[mt][md]["bd_rate"], "+.1f") for mt in METRICS for md in METHODS]


def format_table(result: Mapping[str, Any]) -> str:
    """Human-readable summary: per-setting means, then BD-rates against the anchor."""
    lines: list[str] = []
    header = (
        f"{'codec':<14}{'setting':>8}{'n':>4}{'bpp':>8}{'PSNR':>8}{'MS-SSIM':>9}"
        f"{'MS-SSIM dB':>11}{'enc ms':>9}{'dec ms':>9}"
    )
    lines += [header, "-" * len(header)]
    for codec, rows in result["aggregate"].items():
        for r in rows:
            lines.append(
                f"{codec:<14}{str(r['setting']):>8}{r['n']:>4}{_fmt(r['bpp'], '.4f'):>8}"
                f"{_fmt(r['psnr'], '.2f'):>8}{_fmt(r['msssim'], '.4f'):>9}"
                f"{_fmt(r['msssim_db'], '.2f'):>11}"
                f"{_fmt(None if r['encode_s'] is None else r['encode_s'] * 1e3, '.1f'):>9}"
                f"{_fmt(None if r['decode_s'] is None else r['decode_s'] * 1e3, '.1f'):>9}"
            )
    for name, info in result.get("codecs", {}).items():
        if info.get("status") == "skipped":
            lines.append(f"{name:<14} skipped: {info.get('reason')}")
    layered = [
        (c, r) for c, rows in result["aggregate"].items() for r in rows if r.get("layer_bpp")
    ]
    if layered:
        lines.append("")
        h3 = f"{'codec':<14}{'setting':>8}" + "".join(f"{k + ' bpp':>15}" for k in LAYERS)
        lines += [h3, "-" * len(h3)]
        for codec, r in layered:
            cells = "".join(f"{_fmt(r['layer_bpp'].get(k), '.4f'):>15}" for k in LAYERS)
            lines.append(f"{codec:<14}{str(r['setting']):>8}{cells}")
    bd = result["bd"]
    lines.append("")
    lines.append(f"BD-rate vs {bd['anchor']} (%, negative = fewer bits; cubic / pchip)")
    if bd.get("reason"):
        lines.append(f"  {bd['reason']}")
    h2 = f"{'codec':<14}{'bpp range':>16}{'PSNR cubic':>12}{'pchip':>9}{'MS-SSIM-dB cubic':>18}{'pchip':>9}"
    lines += [h2, "-" * len(h2)]
    for codec, e in bd["codecs"].items():
        rng = e.get("bpp_range")
        rng_s = f"{rng[0]:.3f}–{rng[1]:.3f}" if rng else "—"
        if codec == bd["anchor"]:
            lines.append(f"{codec:<14}{rng_s:>16}{'(anchor)':>12}")
            continue
        if "psnr" not in e:
            lines.append(f"{codec:<14}{rng_s:>16}")
            continue
        pc, pp, mc, mp = _bd_rates(e)
        lines.append(f"{codec:<14}{rng_s:>16}{pc:>12}{pp:>9}{mc:>18}{mp:>9}")
        for metric in METRICS:
            for method in METHODS:
                why = e[metric][method]["reason"]
                if why:
                    lines.append(f"  {metric}/{method}: {why}")
    return "\n".join(lines)


def _md_ms(x: Any) -> str:
    """Seconds as milliseconds for a Markdown cell."""
    return "—" if x is None else f"{x * 1e3:.0f}"


def format_markdown(result: Mapping[str, Any], *, per_setting: bool = True) -> str:
    """Markdown tables for docs/benchmarks.md: BD-rates, per-setting means, semcodec layers."""
    bd = result["bd"]
    n = len(result.get("images", []))
    env = result.get("environment", {})
    cfg = result.get("config", {})
    lines = [
        f"Mean over {n} image{'s' if n != 1 else ''}; run {result.get('created', '?')}, "
        f"torch threads {cfg.get('threads', '?')}, AVIF/JXL threads "
        f"{cfg.get('codec_threads', cfg.get('threads', '?'))}, Pillow {env.get('pillow', '?')}.",
        "",
        f"BD-rate against {bd['anchor']} (%, negative = fewer bits at equal quality; "
        "cubic = Bjøntegaard polynomial, pchip = piecewise cubic as in the JVET/VCEG CTC)"
        " and BD-PSNR (dB at equal rate, cubic):",
        "",
        "| codec | bpp range | PSNR cubic | PSNR pchip | MS-SSIM dB cubic | MS-SSIM dB pchip "
        "| BD-PSNR (dB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    if bd.get("reason"):
        lines.insert(2, f"({bd['reason']})")
    notes: list[str] = []
    for codec, e in bd["codecs"].items():
        rng = e.get("bpp_range")
        rng_s = f"{rng[0]:.3f}–{rng[1]:.3f}" if rng else "—"
        if codec == bd["anchor"] or "psnr" not in e:
            tag = "anchor" if codec == bd["anchor"] else "—"
            lines.append(f"| {codec} | {rng_s} | {tag} | | | | |")
            continue
        rates = " | ".join(_bd_rates(e))
        bd_psnr = _fmt(e["psnr"]["cubic"]["bd_dist"], "+.2f")
        lines.append(f"| {codec} | {rng_s} | {rates} | {bd_psnr} |")
        whys = {e[mt][md]["reason"] for mt in METRICS for md in METHODS} - {None}
        notes += [f"{codec}: {w}" for w in sorted(whys)]
    for name, info in result.get("codecs", {}).items():
        if info.get("status") == "skipped":
            notes.append(f"{name} skipped: {info.get('reason')}")
    if notes:
        lines += ["", *[f"- {t}" for t in notes]]
    if per_setting:
        lines += [
            "",
            "| codec | setting | bpp | PSNR (dB) | MS-SSIM | MS-SSIM (dB) | encode (ms) "
            "| decode (ms) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for codec, rows in result["aggregate"].items():
            for r in rows:
                lines.append(
                    f"| {codec} | {r['setting']} | {_fmt(r['bpp'], '.3f')} "
                    f"| {_fmt(r['psnr'], '.2f')} | {_fmt(r['msssim'], '.4f')} "
                    f"| {_fmt(r['msssim_db'], '.2f')} | {_md_ms(r['encode_s'])} "
                    f"| {_md_ms(r['decode_s'])} |"
                )
    layered = [
        (codec, r)
        for codec, rows in result["aggregate"].items()
        for r in rows
        if r.get("layer_bpp")
    ]
    if layered:
        lines += [
            "",
            "Bits per layer (mean bpp; container = header, layer table and CRCs):",
            "",
            "| codec | setting | total | map | compact | residual | container |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for codec, r in layered:
            lb = r["layer_bpp"]
            cells = " | ".join(_fmt(lb.get(k), ".4f") for k in LAYERS)
            lines.append(f"| {codec} | {r['setting']} | {_fmt(r['bpp'], '.4f')} | {cells} |")
    return "\n".join(lines) + "\n"


def write_json(result: Mapping[str, Any], path: Path | str) -> None:
    """Strict JSON (no NaN tokens), indented for diffs."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(_jsonable(result), indent=1, allow_nan=False) + "\n")


def read_json(path: Path | str | Mapping[str, Any]) -> dict[str, Any]:
    """Load a result file (dicts pass through) and check it is one of ours."""
    if isinstance(path, Mapping):
        return dict(path)
    data = json.loads(Path(path).read_text())
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a {SCHEMA} result (schema={data.get('schema')!r})")
    return data


def write_csv(result: Mapping[str, Any], path: Path | str) -> None:
    """One row per image × codec × setting, for spreadsheets and pandas."""
    sizes = {i["name"]: (i["width"], i["height"]) for i in result["images"]}
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in result["records"]:
            width, height = sizes.get(r["image"], (None, None))
            layers = {f"{k}_bytes": v for k, v in (r.get("layer_bytes") or {}).items()}
            w.writerow({**r, **layers, "width": width, "height": height})


def plot_rd(result: Mapping[str, Any], path: Path | str, title: str | None = None) -> None:
    """Two panels, bpp vs PSNR and bpp vs MS-SSIM dB, one line per codec (Agg, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 5), layout="constrained")
    FigureCanvasAgg(fig)  # Agg explicitly, without touching pyplot's global backend
    axes = fig.subplots(1, 2)
    for codec, rows in result["aggregate"].items():
        rows = sorted((r for r in rows if r.get("bpp") is not None), key=lambda r: r["bpp"])
        x = [r["bpp"] for r in rows]
        for ax, metric in zip(axes, METRICS, strict=True):
            y = [_num(r.get(metric)) for r in rows]
            style = "--" if codec == result["bd"]["anchor"] else "-"
            ax.plot(x, y, style, marker="o", markersize=3, label=codec)
    n = len(result.get("images", []))
    for ax, ylabel in zip(axes, ("PSNR (dB, RGB)", "MS-SSIM (dB)"), strict=True):
        ax.set_xlabel("bits per pixel")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
        ax.set_xlim(left=0)
    fig.suptitle(title or f"Rate–distortion, mean over {n} image{'s' if n != 1 else ''}")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=120)


def merge(
    runs: Sequence[Path | str | Mapping[str, Any]], anchor: str | None = None
) -> dict[str, Any]:
    """One result from runs over the same images (e.g. codec lanes run in parallel).

    Records are concatenated (an image × codec × setting measured twice is an error, as is an
    image name with two sizes); aggregates and BD-rates are recomputed. ``config`` is the first
    run's with the union of codecs and settings; ``config.merged_from`` keeps every input's
    ``created`` time and ``config``.
    """
    results = [read_json(r) for r in runs]
    if not results:
        raise ValueError("nothing to merge")
    images: dict[str, dict[str, Any]] = {}
    seen: set[tuple[str, str, Any]] = set()
    records: list[dict[str, Any]] = []
    codecs: dict[str, Any] = {}
    qualities: dict[str, list[Any]] = {}
    for res in results:
        for im in res["images"]:
            old = images.setdefault(im["name"], im)
            if (old["width"], old["height"]) != (im["width"], im["height"]):
                raise ValueError(f"image {im['name']} has two sizes in the runs to merge")
        for r in res["records"]:
            key = (r["image"], r["codec"], _key(r["setting"]))
            if key in seen:
                raise ValueError(f"{key[1]} setting {key[2]} on {key[0]} is in two runs")
            seen.add(key)
            records.append(r)
        for name, info in res["codecs"].items():
            if info.get("status") == "ok" or name not in codecs:
                codecs[name] = info
        for name, settings in res["config"].get("qualities", {}).items():
            known = qualities.setdefault(name, [])
            known += [s for s in settings if _key(s) not in {_key(t) for t in known}]
    config = dict(results[0]["config"])
    config["anchor"] = anchor or config.get("anchor", "jpeg")
    config["codecs"] = list(codecs)
    config["qualities"] = qualities
    config["merged_from"] = [{"created": r.get("created"), "config": r["config"]} for r in results]
    sizes = {n: (i["width"], i["height"]) for n, i in images.items()}
    agg = aggregate(records, qualities, sizes)
    merged = {
        **results[0],
        "created": _utc_now(),
        "config": config,
        "codecs": codecs,
        "images": list(images.values()),
        "records": records,
        "aggregate": agg,
        "bd": bd_against(agg, config["anchor"], min_points=results[0]["bd"].get("min_points", 4)),
    }
    return _jsonable(merged)


def compare(
    old_json: Path | str | Mapping[str, Any],
    new_json: Path | str | Mapping[str, Any],
    *,
    min_points: int = 4,
    stream: TextIO | None = None,
) -> dict[str, Any]:
    """BD-rate of each codec in a new run against the same codec in an old run, printed.

    Useful to track a codec across commits or model versions: negative means the new run
    needs fewer bits for the same quality.
    """
    old, new = read_json(old_json), read_json(new_json)
    out: dict[str, Any] = {}
    for codec, rows in new["aggregate"].items():
        if codec not in old["aggregate"]:
            continue
        out[codec] = {
            metric: {
                m: _bd_entry(old["aggregate"][codec], rows, metric, m, min_points) for m in METHODS
            }
            for metric in METRICS
        }
    s = stream if stream is not None else sys.stdout
    hdr = f"{'codec':<14}{'PSNR cubic':>12}{'pchip':>9}{'MS-SSIM-dB cubic':>18}{'pchip':>9}"
    print("BD-rate of new run vs old run (%, negative = new needs fewer bits)", file=s)
    print(hdr, file=s)
    print("-" * len(hdr), file=s)
    for codec, e in out.items():
        p, m = e["psnr"], e["msssim_db"]
        print(
            f"{codec:<14}{_fmt(p['cubic']['bd_rate'], '+.2f'):>12}"
            f"{_fmt(p['pchip']['bd_rate'], '+.2f'):>9}{_fmt(m['cubic']['bd_rate'], '+.2f'):>18}"
            f"{_fmt(m['pchip']['bd_rate'], '+.2f'):>9}",
            file=s,
        )
    only = sorted(set(old["aggregate"]) ^ set(new["aggregate"]))
    if only:
        print(f"not in both runs: {', '.join(only)}", file=s)
    return out


def _label(img: Image.Image, text: str) -> Image.Image:
    """Add a caption strip above a panel so the PNG is self-explanatory."""
    from PIL import ImageDraw

    strip = 18
    out = Image.new("RGB", (img.width, img.height + strip), (255, 255, 255))
    out.paste(img, (0, strip))
    ImageDraw.Draw(out).text((3, 3), text, fill=(0, 0, 0))
    return out


def crops(
    result: Mapping[str, Any] | Path | str,
    out_dir: Path | str,
    *,
    reference: str = "semcodec",
    codecs: Sequence[str] | None = None,
    settings: Sequence[Setting] | None = None,
    size: int = 256,
    origin: tuple[int, int] | None = None,
) -> list[Path]:
    """Side-by-side crops of ``reference`` and each other codec at matched bpp, as PNGs.

    For every image and reference setting, each other codec uses the setting whose bpp on
    *that image* is closest to the reference's.  Files are re-encoded (results do not store
    pixels) with the run's model/residual options.  Panels: original, reference, then the
    others; the crop is ``size`` px square at ``origin`` (x, y), centred by default.  Writes
    ``<image>_<reference>-<setting>.png`` and returns the paths.
    """
    res = read_json(result) if not isinstance(result, Mapping) else result
    cfg = res.get("config", {})
    by_key = {
        (r["image"], r["codec"], _key(r["setting"])): r
        for r in res["records"]
        if not r.get("error") and r.get("bpp") is not None
    }
    available = [c for c in res["aggregate"] if c != reference]
    others = [c for c in (codecs or available) if c in available]
    ref_settings = (
        list(settings)
        if settings is not None
        else [r["setting"] for r in res["aggregate"].get(reference, [])]
    )
    if reference not in res["aggregate"]:
        raise ValueError(f"reference codec {reference!r} has no results in this run")

    def make(name: str) -> CodecAdapter:
        return get_codec(
            name,
            model=cfg.get("model", "default"),
            residual=cfg.get("residual", "avif"),
            threads=cfg.get("codec_threads", cfg.get("threads", 1)),
        )

    adapters = {c: make(c) for c in [reference, *others]}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for info in res["images"]:
        name = info["name"]
        rgb = load_rgb(info["path"])
        h, w = rgb.shape[:2]
        cs = min(size, h, w)
        x0, y0 = origin if origin else ((w - cs) // 2, (h - cs) // 2)
        x0, y0 = max(0, min(x0, w - cs)), max(0, min(y0, h - cs))
        box = (slice(y0, y0 + cs), slice(x0, x0 + cs))
        for s in ref_settings:
            ref = by_key.get((name, reference, _key(s)))
            if ref is None:
                continue
            panels = [_label(Image.fromarray(rgb[box]), "original")]
            picks = [(reference, s, ref["bpp"])]
            for c in others:
                cands = [r for (im, cc, _), r in by_key.items() if im == name and cc == c]
                if cands:
                    best = min(cands, key=lambda r: abs(r["bpp"] - ref["bpp"]))
                    picks.append((c, best["setting"], best["bpp"]))
            for c, setting, b in picks:
                dec = adapters[c].decode(adapters[c].encode(rgb, setting))
                panels.append(_label(Image.fromarray(dec[box]), f"{c} {setting} {b:.3f}bpp"))
            sheet = Image.new("RGB", (sum(p.width for p in panels), panels[0].height), "white")
            xoff = 0
            for p in panels:
                sheet.paste(p, (xoff, 0))
                xoff += p.width
            safe = str(s).replace("/", "_")
            path = out / f"{name}_{reference}-{safe}.png"
            sheet.save(path)
            written.append(path)
    return written
