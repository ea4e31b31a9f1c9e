"""A front run as text: the configuration table (CPU, BD-rates, the front at its CPU and the
distance), the stage ledger of semcodec's efforts, and the plot of BD-rate against encode CPU
with the front drawn."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from semcodec.bench.front.summary import FRONT_METRICS

__all__ = ["format_ledger", "format_markdown", "plot_front", "triple"]

_LABELS = {"psnr": "PSNR", "msssim_db": "MS-SSIM dB", "ssimulacra2": "SSIMULACRA 2"}


def _pct(x: float | None) -> str:
    """A BD-rate or distance in percent points, '–' when unknown."""
    return "–" if x is None or not math.isfinite(x) else f"{x:+.1f}"


def _s(x: float | None, digits: int = 2) -> str:
    """Seconds, '–' when unknown."""
    return "–" if x is None else f"{x:.{digits}f}"


def triple(d: Mapping[str, float | None] | None) -> str:
    """The three metrics' values as 'a / b / c'."""
    d = d or {}
    return " / ".join(_pct(d.get(m)) for m in FRONT_METRICS)


def format_markdown(result: Mapping[str, Any]) -> str:
    """The configuration table, sorted by encode CPU (semcodec rows with the map's CPU and
    the front without it)."""
    rows = result["configurations"]
    head = (
        "| configuration | encode CPU s / image | of it the map | decode CPU s | "
        "BD-rate PSNR | MS-SSIM dB | SSIMULACRA 2 | front at its CPU (P / M / S) | "
        "beyond the front | beyond, map's CPU left out |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for name, r in sorted(rows.items(), key=lambda kv: kv[1]["encode_cpu_s"] or 0.0):
        bd = r["bd_rate"]
        avif = r["avif"]
        lines.append(
            f"| {name} | {_s(r['encode_cpu_s'])} | {_s(r['map_cpu_s'])} | "
            f"{_s(r['decode_cpu_s'], 3)} | {_pct(bd.get('psnr'))} | "
            f"{_pct(bd.get('msssim_db'))} | {_pct(bd.get('ssimulacra2'))} | "
            f"{'' if avif else triple(r['front'])} | {'' if avif else triple(r['beyond'])} | "
            f"{'' if avif else triple(r['beyond_no_map'])} |"
        )
    return "\n".join(lines)


def format_ledger(result: Mapping[str, Any]) -> str:
    """semcodec's encode CPU per stage per configuration (its stage clock, seconds/image)."""
    rows = {n: r for n, r in result["configurations"].items() if r.get("stages_cpu")}
    if not rows:
        return ""
    stages = sorted({s for r in rows.values() for s in r["stages_cpu"]})
    lines = [
        "| configuration | " + " | ".join(stages) + " | total | decode |",
        "|---|" + "---:|" * (len(stages) + 2),
    ]
    for name, r in rows.items():
        cells = [_s(r["stages_cpu"].get(s), 3) for s in stages]
        lines.append(
            f"| {name} | " + " | ".join(cells)
            + f" | {_s(r['encode_cpu_s'], 3)} | {_s(r['decode_cpu_s'], 3)} |"
        )  # fmt: skip
    return "\n".join(lines)


def plot_front(result: Mapping[str, Any], path: Path | str) -> bool:
    """BD-rate against encode CPU (log axis), one panel per metric, the AVIF front drawn;
    False when matplotlib is not installed (nothing written)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = result["configurations"]
    fig, axes = plt.subplots(1, len(FRONT_METRICS), figsize=(5 * len(FRONT_METRICS), 4.2))
    for ax, m in zip(axes, FRONT_METRICS, strict=True):
        hull = result["fronts"].get(m) or []
        if hull:
            ax.plot(
                [p[0] for p in hull], [p[1] for p in hull], "-", color="0.6", label="AVIF front"
            )
        for name, r in rows.items():
            bd, cpu = r["bd_rate"].get(m), r["encode_cpu_s"]
            if bd is None or not cpu:
                continue
            style = _style(name)
            ax.plot([cpu], [bd], style, ms=6)
            ax.annotate(name.replace("avif-", "").replace("semcodec-", ""), (cpu, bd),
                        fontsize=7, xytext=(3, 3), textcoords="offset points")  # fmt: skip
            if r.get("map_cpu_s") and "plain" not in name:
                ax.plot([cpu - r["map_cpu_s"]], [bd], "o", mfc="none", mec="C3", ms=6)
        ax.set_xscale("log")
        ax.set_xlabel("encode CPU s / image (one thread)")
        ax.set_ylabel(f"BD-rate vs {result['config']['anchor']}, {_LABELS[m]} (%)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("semcodec efforts (red; hollow: the map's CPU left out) and AVIF (blue 4:2:0, "
                 "green 4:4:4)", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _style(name: str) -> str:
    """Marker of a configuration: AVIF by layout, JPEG XL, semcodec (plain: a cross)."""
    if name.startswith("avif"):
        return "s" + ("C0" if name.endswith("420") else "C2")
    if name.startswith("jxl"):
        return "^C1"
    return "xC3" if "plain" in name else "oC3"
