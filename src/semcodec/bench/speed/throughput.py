"""Batch throughput: images per second of whole ``semcodec encode`` commands over the same
images, with ``-j 1``, ``-j 2`` and ``--cluster local:2``.

Each mode is one command, as a user runs it (start-up, model loading and worker start
included in ``wall_s``); ``batch_s`` is the batch itself after the command's imports (planning,
model loading, workers' start and every file), from the command's own ``--report`` summary. Nothing is capped: ``-j 1`` uses torch's threads, the
workers of ``-j 2`` and of the cluster one thread each, as the commands do by default.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semcodec.bench.common import known_everywhere

#: the modes measured: label and the command's extra arguments
MODES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("-j 1", ("-j", "1")),
    ("-j 2", ("-j", "2")),
    ("cluster local:2", ("--cluster", "local:2")),
)
#: the throughput target on 2 cores: -j 2 (or the cluster) against -j 1, images per second
SPEEDUP_TARGET = 1.7


@dataclass(frozen=True)
class ThroughputConfig:
    """What a throughput run encodes, and how."""

    model: str = "default"
    quality: int = 50
    residual: str = "avif"
    modes: tuple[tuple[str, tuple[str, ...]], ...] = MODES
    timeout_s: float = 1800.0


def _cluster_available() -> bool:
    """Whether the [cluster] extra is installed (the cluster mode is skipped otherwise)."""
    return importlib.util.find_spec("distributed") is not None


def _run_mode(images: Sequence[Path], extra: tuple[str, ...], cfg: ThroughputConfig) -> dict:
    """One whole batch command into a fresh folder: wall time and its report's summary."""
    with tempfile.TemporaryDirectory(prefix="semcodec-batch-") as tmp:
        report = Path(tmp) / "report.jsonl"
        cmd = [sys.executable, "-m", "semcodec.cli", "encode", *map(str, images), "-d", tmp,
               "-q", str(cfg.quality), "--model", cfg.model, "--residual", cfg.residual,
               "--quiet", "--report", str(report), *extra]  # fmt: skip
        with known_everywhere(cfg.model, dict(os.environ)) as env:
            started = time.perf_counter()
            try:
                proc = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=cfg.timeout_s, env=env
                )
            except subprocess.TimeoutExpired:
                return {"error": f"timed out after {cfg.timeout_s:.0f} s"}
            wall = time.perf_counter() - started
        lines = report.read_text().splitlines() if report.exists() else []
    summary = json.loads(lines[-1]) if lines else {}
    if proc.returncode != 0 or summary.get("failed"):
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        return {"error": f"exit status {proc.returncode}: {tail}"}
    n = len(images)
    return {
        "images": n,
        "wall_s": round(wall, 3),
        "images_per_s": round(n / wall, 4),
        "batch_s": summary.get("seconds"),
        "batch_images_per_s": summary.get("images_per_second"),
        "error": None,
    }


def measure_throughput(images: Sequence[Path], cfg: ThroughputConfig, log: Any) -> dict:
    """Every mode on the same images, and each mode's speed-up over the first (-j 1)."""
    rows: list[dict[str, Any]] = []
    for label, extra in cfg.modes:
        if "--cluster" in extra and not _cluster_available():
            rows.append({"mode": label, "error": "not installed (the [cluster] extra)"})
            continue
        log(f"  batch throughput: {len(images)} images, encode -q {cfg.quality} {label} …")
        rows.append({"mode": label, **_run_mode(images, extra, cfg)})
    base = rows[0] if rows and not rows[0].get("error") else None
    for row in rows:
        if base is not None and not row.get("error"):
            row["speedup"] = round(row["images_per_s"] / base["images_per_s"], 3)
    return {
        "quality": cfg.quality,
        "model": cfg.model,
        "residual": cfg.residual,
        "speedup_target": SPEEDUP_TARGET,
        "modes": rows,
    }


def throughput_lines(result: dict[str, Any] | None) -> list[str]:
    """The report table: images per second per mode, whole command and batch part."""
    if not result:
        return []
    lines = [
        "",
        f"batch throughput: encode -q {result['quality']} --model {result['model']}, whole "
        f"commands (start-up included) and their batch part; target: -j 2 or the cluster "
        f">= {result['speedup_target']}x -j 1",
        f"  {'mode':<18}{'images':>7}{'wall s':>9}{'img/s':>8}{'batch s':>9}{'img/s':>8}"
        f"{'speed-up':>10}",
    ]
    for row in result["modes"]:
        if row.get("error"):
            lines.append(f"  {row['mode']:<18}error: {row['error']}")
            continue
        lines.append(
            f"  {row['mode']:<18}{row['images']:>7}{row['wall_s']:>9.2f}"
            f"{row['images_per_s']:>8.2f}{row['batch_s']:>9.2f}"
            f"{row['batch_images_per_s']:>8.2f}{row.get('speedup', 0):>9.2f}x"
        )
    return lines
