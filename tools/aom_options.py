"""libaom options against AVIF's speed–size front: which of them buy more than a slower speed.

For each image and quality, AVIF (Pillow/libavif, one thread, 4:4:4) is encoded at each preset
speed of the front (and speed 6 in 4:2:0, the anchor) and at each candidate: a speed with
libaom options (Pillow's ``advanced``). Every file is decoded and scored (PSNR, MS-SSIM dB,
SSIMULACRA 2 where installed); the encode's CPU seconds are recorded. The table gives, per
candidate, its CPU and BD-rate change against the preset of its speed and the points it lies
beyond the front of the presets at its own CPU (the front benchmark's arithmetic,
``semcodec.bench.front.summary``). Behind docs/benchmarks.md's table of libaom options
(efforts 6 and 7 without 4x4 partitions, ``residual_avif.AOM_OPTIONS``).

    .venv/bin/python tools/aom_options.py IMAGES... [--qualities 10,35,60,85] \\
        [--front-speeds 0,1,2,3,4,5,6,7] --candidate 3:min-partition-size=8 [--out F.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semcodec import metrics
from semcodec.bench import quality
from semcodec.bench.codecs import AvifAdapter
from semcodec.bench.front.summary import FRONT_METRICS, summarise
from semcodec.bench.rd.run import load_rgb

ANCHOR = "avif-s6-420"


def parse_candidate(text: str) -> tuple[str, int, dict[str, str]]:
    """'SPEED:key=val;key=val' → its name, the speed and the options."""
    speed, _, rest = text.partition(":")
    options = dict(kv.split("=", 1) for kv in rest.split(";") if kv)
    if not options:
        raise ValueError(f"candidate {text!r} names no libaom option")
    return f"k{int(speed)}-" + "-".join(f"{k}={v}" for k, v in options.items()), int(speed), options


def measure(
    rgb: np.ndarray,
    image: str,
    name: str,
    adapter: AvifAdapter,
    qualities: Sequence[int],
    extras: Sequence[str],
) -> list[dict[str, Any]]:
    """One configuration on one picture: a record per quality (the front benchmark's fields)."""
    h, w = rgb.shape[:2]
    adapter.encode(np.ascontiguousarray(rgb[:64, :64]), qualities[0])  # set-up, not billed
    records = []
    for q in qualities:
        t = time.process_time()
        data = adapter.encode(rgb, q)
        cpu = time.process_time() - t
        out = adapter.decode(data)
        records.append(
            {
                "image": image,
                "codec": name,
                "setting": q,
                "bytes": len(data),
                "bpp": 8 * len(data) / (w * h),
                "encode_cpu_s": cpu,
                "map_cpu_s": 0.0,
                "psnr": metrics.psnr(rgb, out),
                "msssim_db": metrics.ms_ssim(rgb, out).db,
                **quality.score(rgb, out, extras),
            }
        )
    return records


def configurations(
    front_speeds: Sequence[int], candidates: Sequence[str]
) -> dict[str, tuple[AvifAdapter, int | None]]:
    """name → (adapter, the preset speed a candidate is compared with; None for a preset)."""
    out: dict[str, tuple[AvifAdapter, int | None]] = {ANCHOR: (AvifAdapter(6, 1, "4:2:0"), None)}
    for s in front_speeds:
        out[f"avif-s{s}-444"] = (AvifAdapter(s, 1, "4:4:4"), None)
    for text in candidates:
        name, speed, options = parse_candidate(text)
        out[name] = (AvifAdapter(speed, 1, "4:4:4", options), speed)
    return out


def table(records: Sequence[Mapping[str, Any]], bases: Mapping[str, int | None]) -> list[str]:
    """Per candidate: CPU and BD-rate change against its speed's preset, points beyond the
    presets' front at its CPU (P / M / S)."""
    order: dict[str, list[Any]] = {}
    for r in records:
        order.setdefault(r["codec"], [])
        if r["setting"] not in order[r["codec"]]:
            order[r["codec"]].append(r["setting"])
    presets = [n for n, base in bases.items() if base is None]
    rows = summarise(records, order, ANCHOR, presets)["configurations"]

    def three(values: Sequence[float | None]) -> str:
        return " / ".join("–" if v is None else f"{v:+.1f}" for v in values)

    lines = [
        "| candidate | CPU | BD-rate change (points) | beyond the front |",
        "|---|---:|---|---|",
    ]
    for name, base in bases.items():
        if base is None or name not in rows or f"avif-s{base}-444" not in rows:
            continue
        row, ref = rows[name], rows[f"avif-s{base}-444"]
        change = [
            None if row["bd_rate"][m] is None or ref["bd_rate"][m] is None
            else row["bd_rate"][m] - ref["bd_rate"][m]
            for m in FRONT_METRICS
        ]  # fmt: skip
        cpu = 100 * (row["encode_cpu_s"] / ref["encode_cpu_s"] - 1)
        beyond = [row["beyond"][m] for m in FRONT_METRICS]
        lines.append(f"| `{name}` | {cpu:+.0f} % | {three(change)} | {three(beyond)} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every configuration on every image, write the records, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("images", nargs="+", type=Path)
    ap.add_argument("--qualities", default="10,35,60,85")
    ap.add_argument("--front-speeds", default="0,1,2,3,4,5,6,7")
    ap.add_argument("--candidate", action="append", default=[], metavar="SPEED:KEY=VAL;...")
    ap.add_argument("--metrics", default="ssimulacra2", help="beyond PSNR and MS-SSIM")
    ap.add_argument("--out", type=Path, help="records as JSON")
    args = ap.parse_args(argv)
    qualities = [int(q) for q in args.qualities.split(",")]
    extras = [m for m in args.metrics.split(",") if m]
    configs = configurations([int(s) for s in args.front_speeds.split(",")], args.candidate)
    records: list[dict[str, Any]] = []
    for path in args.images:
        rgb = load_rgb(str(path))
        for name, (adapter, _) in configs.items():
            records += measure(rgb, path.stem, name, adapter, qualities, extras)
    if args.out:
        args.out.write_text(json.dumps(records))
    print("\n".join(table(records, {n: base for n, (_, base) in configs.items()})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
