"""Speed benchmark, the result's summary: means over images per quality, and the verdicts
against the whole-codec and networks-alone targets (parent side: no torch, no numpy)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from semcodec.bench.speed.stages import (
    CODEC_TARGET_QUALITY,
    CODEC_TARGETS,
    DECODE_STAGES,
    ENCODE_STAGES,
    TARGETS,
)

__all__ = ["codec_verdicts", "network_verdicts", "quality_summary"]


def quality_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over images per quality (of the per-image medians), max peak RSS."""
    out: dict[str, Any] = {}
    for q in sorted({r["quality"] for r in runs if not r.get("error")}):
        rs = [r for r in runs if r["quality"] == q and not r.get("error")]
        mean = statistics.fmean
        rss = [r["peak_rss_mib"] for r in rs if r.get("peak_rss_mib") is not None]
        out[str(q)] = {
            "n": len(rs),
            "bpp": round(mean(r["bpp"] for r in rs), 5),
            "encode_s": round(mean(r["encode_s"] for r in rs), 6),
            "decode_s": round(mean(r["decode_s"] for r in rs), 6),
            "encode_cpu_s": round(mean(r.get("encode_cpu_s", math.nan) for r in rs), 6),
            "decode_cpu_s": round(mean(r.get("decode_cpu_s", math.nan) for r in rs), 6),
            "model_load_s": round(mean(r["model_load_s"] for r in rs), 4),
            "import_s": round(mean(r["import_s"] for r in rs), 4),
            "map_decode_s": round(mean(r.get("map_decode_s", math.nan) for r in rs), 6),
            "peak_rss_mib": max(rss) if rss else None,
            "encode_stages": {
                s: round(mean(r["encode_stages"][s] for r in rs), 6) for s in ENCODE_STAGES
            },
            "decode_stages": {
                s: round(mean(r["decode_stages"][s] for r in rs), 6) for s in DECODE_STAGES
            },
            "encode_stages_cpu": {
                s: round(mean(r["encode_stages_cpu"][s] for r in rs), 6) for s in ENCODE_STAGES
            },
            "decode_stages_cpu": {
                s: round(mean(r["decode_stages_cpu"][s] for r in rs), 6) for s in DECODE_STAGES
            },
        }
    return out


def network_verdicts(net: dict[str, Any]) -> dict[str, Any]:
    """Target checks for the precision the codec actually runs each network in."""
    out: dict[str, Any] = {}
    for name, target in TARGETS.items():
        secs = (net.get("seconds") or {}).get(name)
        if not secs:
            continue
        prec = (net.get("codec_precision") or {}).get(name, "fp32")
        cpu = (net.get("cpu_seconds") or {}).get(name, {}).get(prec)
        if secs.get(prec) is None:
            continue
        out[name] = {
            "target_s": target,
            "codec_precision": prec,
            "seconds": secs[prec],
            "cpu_seconds": cpu,
            "meets": secs[prec] <= target,
            # CPU time summed over threads: about the idle-machine wall time at 1 thread, an
            # upper bound for more threads (apart from spinning), and immune to a busy machine
            "meets_cpu": None if cpu is None else cpu <= target,
        }
    return out


def codec_verdicts(summary: dict[str, Any]) -> dict[str, Any]:
    """Whole-codec targets (CODEC_TARGETS) against the quality-50 means and the peak RSS."""
    s = summary.get(str(CODEC_TARGET_QUALITY))
    if not s:
        return {}
    rss_mb = None if s["peak_rss_mib"] is None else s["peak_rss_mib"] * 2**20 / 1e6
    got = {"encode_s": s["encode_s"], "decode_s": s["decode_s"], "peak_rss_mb": rss_mb}
    return {
        k: {"target": t, "measured": got[k], "meets": got[k] is not None and got[k] <= t}
        for k, t in CODEC_TARGETS.items()
    }
