"""Rate–distortion results: the JSON-ready result dict, aggregation, BD-rates against an anchor,
merging runs, comparing two runs, JSON and CSV files (schema in ``semcodec.bench.rd``)."""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from semcodec.bench.bdrate import METHODS, bd_dist_result, bd_rate_result
from semcodec.bench.codecs import Setting

SCHEMA = "semcodec-bench/1"
#: Quality measures BD-rates are computed on (all "larger is better"); ``ssimulacra2`` only
#: where both curves have it.  Butteraugli (lower is better, a max-like distance) has no BD.
METRICS: tuple[str, ...] = ("psnr", "msssim_db", "ssimulacra2")
#: The metrics every result has; the others are optional (``semcodec.bench.quality``).
CORE_METRICS: tuple[str, ...] = ("psnr", "msssim_db")
#: Optional per-record metrics, averaged like the core ones where present.
OPTIONAL_FIELDS: tuple[str, ...] = ("ssimulacra2", "butteraugli")
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
    "ssimulacra2",
    "butteraugli",
    "encode_s",
    "decode_s",
    "map_bytes",
    "compact_bytes",
    "residual_bytes",
    "container_bytes",
    "error",
)


def bpp(num_bytes: int, width: int, height: int) -> float:
    """Bits per pixel of a whole file: 8 · bytes / (W · H), every header byte included."""
    return 8.0 * num_bytes / (width * height)


def finite(x: Any) -> float | None:
    """JSON has no nan/inf: store them as null."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def num(x: Any) -> float:
    """null back to nan for arithmetic."""
    return math.nan if x is None else float(x)


def jsonable(obj: Any) -> Any:
    """Recursively replace nan/inf by None and numpy scalars by Python ones."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return finite(obj)
    return obj


def utc_now() -> str:
    """The ``created`` stamp of a result: UTC, ISO 8601, seconds."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        groups.setdefault(r["codec"], {}).setdefault(setting_key(r["setting"]), []).append(r)
    out: dict[str, list[dict[str, Any]]] = {}
    for codec, by_setting in groups.items():
        keys = (
            [setting_key(s) for s in order[codec]] if order and codec in order else list(by_setting)
        )
        rows = []
        for k in keys:
            rs = by_setting.get(k)
            if not rs:
                continue
            row: dict[str, Any] = {"setting": rs[0]["setting"], "n": len(rs)}
            for f in ("bpp", "psnr", "msssim", "msssim_db", "encode_s", "decode_s"):
                row[f] = finite(np.mean([_stored(r, f) for r in rs]))
            for f in OPTIONAL_FIELDS:
                if any(f in r for r in rs):  # a mean over only some images would mislead: nan
                    row[f] = finite(np.mean([_stored(r, f) for r in rs]))
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
        out[layer] = finite(np.mean(vals))
    return out


def _stored(rec: Mapping[str, Any], field: str) -> float:
    """A record's value as float; a null quality in an error-free record was inf (lossless)."""
    v = rec.get(field)
    if v is None:
        return math.inf if field in ("psnr", "msssim_db") else math.nan
    return float(v)


def setting_key(setting: Any) -> Any:
    """Settings compare equal across int/float spellings (JSON may turn 16.0 into 16)."""
    if isinstance(setting, (int, float)) and not isinstance(setting, bool):
        return float(setting)
    return setting


def has_metric(rows: Sequence[Mapping[str, Any]], metric: str) -> bool:
    """Whether a curve carries a metric (an optional one may not have been measured)."""
    return metric in CORE_METRICS or any(r.get(metric) is not None for r in rows)


def bd_metrics(*curves: Sequence[Mapping[str, Any]]) -> list[str]:
    """The BD metrics every given curve has: the core two, plus SSIMULACRA 2 where measured."""
    return [m for m in METRICS if all(has_metric(rows, m) for rows in curves)]


def _curve(rows: Sequence[Mapping[str, Any]], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(rates, qualities) arrays of an aggregated curve, nan where missing."""
    return (
        np.array([num(r.get("bpp")) for r in rows]),
        np.array([num(r.get(metric)) for r in rows]),
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
        "bd_rate": finite(rate.value),
        "reason": rate.reason,
        "interval": list(rate.interval) if rate.interval else None,
        "bd_dist": finite(dist.value),
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
            for metric in bd_metrics(agg[anchor], rows):
                entry[metric] = {
                    m: _bd_entry(agg[anchor], rows, metric, m, min_points) for m in METHODS
                }
        out["codecs"][codec] = entry
    return out


def _image_curve(
    records: Sequence[Mapping[str, Any]],
    codec: str,
    image: str,
    size: tuple[int, int],
    layer: str | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(bpp, PSNR) of one codec on one image; bpp of one layer's bytes when `layer` is given."""
    rs = [r for r in records if r["codec"] == codec and r["image"] == image and not r.get("error")]
    rs.sort(key=lambda r: num(r.get("bytes")))
    if layer is None:
        rates = [num(r.get("bpp")) for r in rs]
    else:
        rates = [bpp((r.get("layer_bytes") or {}).get(layer, 0), *size) for r in rs]
    return np.array(rates), np.array([_stored(r, "psnr") for r in rs])


def _bd_value(
    anchor: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray], min_points: int
) -> float | None:
    """BD-rate (PSNR, PCHIP) of one curve pair, None where it cannot be computed."""
    r = bd_rate_result(*anchor, *test, method="pchip", min_points=min_points)
    return finite(r.value)


def tile_modes(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Mean share of tiles per prediction mode, per codec and setting (gated codecs only)."""
    groups: dict[str, dict[str, list[Mapping[str, float]]]] = {}
    for r in records:
        if r.get("tiles") and not r.get("error"):
            groups.setdefault(r["codec"], {}).setdefault(str(r["setting"]), []).append(r["tiles"])
    return {
        codec: {
            setting: {m: float(np.mean([t[m] for t in ts])) for m in ts[0]}
            for setting, ts in by.items()
        }
        for codec, by in groups.items()
    }


def prediction_value(
    records: Sequence[Mapping[str, Any]],
    sizes: Mapping[str, tuple[int, int]],
    codec: str = "semcodec",
    reference: str = "residual-coder",
    anchor: str | None = "avif",
    min_points: int = 4,
) -> dict[str, Any] | None:
    """What the base layer is worth to the residual coder, per image and as a mean.

    ``prediction``: BD-rate (PSNR, PCHIP) of semcodec's residual bytes alone against the
    residual coder coding the image itself with the same settings (negative: the base saves
    the residual coder that share of its bytes). ``whole_file``: BD-rate of semcodec's whole
    files against ``anchor`` on the same image.
    """
    have = {r["codec"] for r in records if not r.get("error")}
    if codec not in have or reference not in have:
        return None
    per_image: dict[str, dict[str, float | None]] = {}
    for image, size in sizes.items():
        mine = _image_curve(records, codec, image, size, "residual")
        ref = _image_curve(records, reference, image, size, None)
        row = {"prediction": _bd_value(ref, mine, min_points)}
        if anchor in have:
            whole = _image_curve(records, codec, image, size, None)
            row["whole_file"] = _bd_value(
                _image_curve(records, anchor, image, size, None), whole, min_points
            )
        per_image[image] = row

    def mean(key: str) -> float | None:
        vals = [v[key] for v in per_image.values() if v.get(key) is not None]
        return finite(float(np.mean(vals))) if vals else None

    def worst(key: str) -> list | None:
        vals = [(v[key], k) for k, v in per_image.items() if v.get(key) is not None]
        return list(max(vals)[::-1]) if vals else None

    return {
        "codec": codec,
        "reference": reference,
        "anchor": anchor if anchor in have else None,
        "metric": "psnr",
        "method": "pchip",
        "per_image": per_image,
        "mean_prediction": mean("prediction"),
        "mean_whole_file": mean("whole_file"),
        "worst_prediction": worst("prediction"),
        "worst_whole_file": worst("whole_file"),
    }


def fmt(x: Any, spec: str) -> str:
    """Format a possibly-null number for the text table."""
    return "—" if x is None else format(x, spec)


def write_json(result: Mapping[str, Any], path: Path | str) -> None:
    """Strict JSON (no NaN tokens), indented for diffs."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(jsonable(result), indent=1, allow_nan=False) + "\n")


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
            key = (r["image"], r["codec"], setting_key(r["setting"]))
            if key in seen:
                raise ValueError(f"{key[1]} setting {key[2]} on {key[0]} is in two runs")
            seen.add(key)
            records.append(r)
        for name, info in res["codecs"].items():
            if info.get("status") == "ok" or name not in codecs:
                codecs[name] = info
        for name, settings in res["config"].get("qualities", {}).items():
            known = qualities.setdefault(name, [])
            known += [s for s in settings if setting_key(s) not in {setting_key(t) for t in known}]
    config = dict(results[0]["config"])
    config["anchor"] = anchor or config.get("anchor", "jpeg")
    config["codecs"] = list(codecs)
    config["qualities"] = qualities
    config["metrics"] = [
        m
        for m in config.get("metrics", ["psnr", "ms-ssim"])
        if all(m in r["config"].get("metrics", ["psnr", "ms-ssim"]) for r in results)
    ]
    config["merged_from"] = [{"created": r.get("created"), "config": r["config"]} for r in results]
    sizes = {n: (i["width"], i["height"]) for n, i in images.items()}
    agg = aggregate(records, qualities, sizes)
    merged = {
        **results[0],
        "created": utc_now(),
        "config": config,
        "codecs": codecs,
        "images": list(images.values()),
        "records": records,
        "metrics": _merge_metric_info(results),
        "aggregate": agg,
        "bd": bd_against(agg, config["anchor"], min_points=results[0]["bd"].get("min_points", 4)),
        "tile_modes": tile_modes(records),
        "prediction": predictions(records, sizes, config["anchor"]),
        "enhancement": enhancement_gain(records, agg, results[0]["bd"].get("min_points", 4)),
    }
    return jsonable(merged)


def predictions(
    records: Sequence[Mapping[str, Any]], sizes: Mapping[str, tuple[int, int]], anchor: str
) -> dict[str, Any]:
    """The prediction value of every semcodec codec that ran beside the residual coder."""
    return {
        c: pv
        for c in ("semcodec", "semcodec-ungated")
        if (pv := prediction_value(records, sizes, c, anchor=anchor))
    }


def _merge_metric_info(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Optional-metric status of merged runs: a run that measured a metric wins over one that
    skipped it (its records carry the values)."""
    out: dict[str, Any] = {}
    for res in results:
        for name, info in res.get("metrics", {}).items():
            if info.get("status") == "ok" or name not in out:
                out[name] = info
    return out


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
            for metric in bd_metrics(old["aggregate"][codec], rows)
        }
    s = stream if stream is not None else sys.stdout
    s2 = any("ssimulacra2" in e for e in out.values())
    hdr = f"{'codec':<14}{'PSNR cubic':>12}{'pchip':>9}{'MS-SSIM-dB cubic':>18}{'pchip':>9}"
    hdr += f"{'SSIMULACRA2 cubic':>19}{'pchip':>9}" if s2 else ""
    print("BD-rate of new run vs old run (%, negative = new needs fewer bits)", file=s)
    print(hdr, file=s)
    print("-" * len(hdr), file=s)
    for codec, e in out.items():
        p, m = e["psnr"], e["msssim_db"]
        line = (
            f"{codec:<14}{fmt(p['cubic']['bd_rate'], '+.2f'):>12}"
            f"{fmt(p['pchip']['bd_rate'], '+.2f'):>9}{fmt(m['cubic']['bd_rate'], '+.2f'):>18}"
            f"{fmt(m['pchip']['bd_rate'], '+.2f'):>9}"
        )
        if s2:
            q = e.get("ssimulacra2")
            cells = [q[md]["bd_rate"] if q else None for md in METHODS]
            line += f"{fmt(cells[0], '+.2f'):>19}{fmt(cells[1], '+.2f'):>9}"
        print(line, file=s)
    only = sorted(set(old["aggregate"]) ^ set(new["aggregate"]))
    if only:
        print(f"not in both runs: {', '.join(only)}", file=s)
    return out


def enhancement_gain(
    records: Sequence[Mapping[str, Any]],
    agg: Mapping[str, Sequence[Mapping[str, Any]]],
    min_points: int = 4,
) -> dict[str, Any]:
    """What the ENHANCE layer did: BD-rates of each codec against its own files decoded
    without it, and per quality the share of files that carry it, its bytes, and the PSNR
    gain overall and per class (summed squared errors over the images)."""
    out: dict[str, Any] = {}
    for codec in sorted({r["codec"] for r in records if "plain" in r}):
        plain = f"{codec}-plain"
        if codec not in agg or plain not in agg:
            continue
        rows = [r for r in records if r["codec"] == codec and not r.get("error")]
        per_q: dict[str, Any] = {}
        for key in sorted({setting_key(r["setting"]) for r in rows}, key=str):
            rs = [r for r in rows if setting_key(r["setting"]) == key]
            with_layer = [r for r in rs if r.get("plain")]
            classes: dict[str, list[float]] = {}
            for r in with_layer:
                for name, (sse_plain, sse_enh, n) in r["plain"]["class_sse"].items():
                    acc = classes.setdefault(name, [0.0, 0.0, 0.0])
                    acc[0] += sse_plain
                    acc[1] += sse_enh
                    acc[2] += n
            per_q[str(key)] = {
                "files_with_layer": len(with_layer) / max(1, len(rs)),
                "tiles_enhanced": float(
                    np.mean([r["plain"]["tiles_on"] if r.get("plain") else 0.0 for r in rs])
                ),
                "layer_bytes": float(
                    np.mean([r["bytes"] - r["plain"]["bytes"] for r in with_layer])
                )
                if with_layer
                else 0.0,
                "psnr_gain": float(np.mean([r["psnr"] - (r["plain"] or r)["psnr"] for r in rs])),
                "class_psnr_gain": {
                    name: float(10 * np.log10(max(a[0], 1e-9) / max(a[1], 1e-9)))
                    for name, a in classes.items()
                },
            }
        out[codec] = {
            "bd": bd_against({plain: agg[plain], codec: agg[codec]}, plain, min_points)["codecs"][
                codec
            ],
            "per_quality": per_q,
        }
    return out
