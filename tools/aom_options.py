"""libaom options against AVIF's speed–size front: which of them buy more than a slower speed.

For each image and quality, AVIF (Pillow/libavif, one thread, 4:4:4) is encoded at each preset
speed of the front (and speed 6 in 4:2:0, the anchor) and at each candidate: a speed with
libaom options (Pillow's ``advanced``). Every file is decoded and scored (PSNR, MS-SSIM dB,
SSIMULACRA 2 where installed); the encode's CPU seconds are recorded. The table gives, per
candidate, its CPU and BD-rate change against the preset of its speed and the points it lies
beyond the front of the presets at its own CPU (the front benchmark's measurement and
arithmetic, ``semcodec.bench.front``). Behind docs/benchmarks.md's table of libaom options
(efforts 6 and 7 without 4x4 partitions, ``residual_avif.AOM_OPTIONS``).

    .venv/bin/python tools/aom_options.py IMAGES... [--qualities 10,35,60,85] \\
        [--front-speeds 0,1,2,3,4,5,6,7] --candidate 3:min-partition-size=8 [--out F.json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from semcodec.bench.front.configs import ANCHOR, Config
from semcodec.bench.front.measure import measure_image
from semcodec.bench.front.report import triple
from semcodec.bench.front.run import settings
from semcodec.bench.front.summary import FRONT_METRICS, summarise


def parse_candidate(text: str) -> Config:
    """'SPEED:key=val;key=val' → AVIF 4:4:4 at that speed with those libaom options."""
    speed, _, rest = text.partition(":")
    options = tuple((k, v) for k, _, v in (kv.partition("=") for kv in rest.split(";") if kv))
    if not options:
        raise ValueError(f"candidate {text!r} names no libaom option")
    return Config("avif", int(speed), "444", aom=options)


def configurations(front_speeds: Sequence[int], candidates: Sequence[str]) -> list[Config]:
    """The anchor, the presets of the front (4:4:4) and the candidates."""
    out = [Config("avif", 6, "420")] + [Config("avif", s, "444") for s in front_speeds]
    return out + [parse_candidate(text) for text in candidates]


def table(records: Sequence[Mapping[str, Any]], configs: Sequence[Config]) -> list[str]:
    """Per candidate: CPU and BD-rate change against its speed's preset, points beyond the
    presets' front at its CPU (P / M / S)."""
    presets = [c.name for c in configs if c.is_avif]
    rows = summarise(records, settings(records), ANCHOR, presets)["configurations"]
    lines = [
        "| candidate | CPU | BD-rate change (points) | beyond the front |",
        "|---|---:|---|---|",
    ]
    for cfg in configs:
        preset = Config("avif", cfg.level, cfg.chroma).name
        if cfg.is_avif or cfg.name not in rows or preset not in rows:
            continue
        row, ref = rows[cfg.name], rows[preset]
        change = {
            m: None if row["bd_rate"][m] is None or ref["bd_rate"][m] is None
            else row["bd_rate"][m] - ref["bd_rate"][m]
            for m in FRONT_METRICS
        }  # fmt: skip
        cpu = 100 * (row["encode_cpu_s"] / ref["encode_cpu_s"] - 1)
        lines.append(
            f"| `{cfg.name}` | {cpu:+.0f} % | {triple(change)} | {triple(row['beyond'])} |"
        )
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
        for cfg in configs:
            records += measure_image(cfg, str(path), qualities, extras)
    if args.out:
        args.out.write_text(json.dumps(records))
    print("\n".join(table(records, configs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
