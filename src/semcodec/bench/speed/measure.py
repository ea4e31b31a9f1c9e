"""Speed benchmark, measuring: the run spec, one child process per configuration, and the
JSON result with its summary and targets. ``child.py`` runs a configuration in its own
process, ``codec_runs.py`` times the codec, ``networks.py`` the networks alone, ``summary.py``
holds the results to the targets; ``report.py`` formats the result; ``startup.py`` times
whole commands; ``throughput.py`` whole batches.

Run as ``semcodec bench speed --images DIR [--model default] [--limit N] [--qualities 0,50]
[--threads 2] [--repeats 3] [--out bench-out/speed.json]``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from semcodec.bench.common import DEFAULT_ARCH
from semcodec.bench.speed.child import spawn
from semcodec.bench.speed.machine import (
    busy_warning,
    default_weights_available,
    library_versions,
    machine_info,
)
from semcodec.bench.speed.stages import CODEC_TARGET_QUALITY
from semcodec.bench.speed.summary import codec_verdicts, network_verdicts, quality_summary
from semcodec.bench.speed.throughput import ThroughputConfig, measure_throughput

__all__ = ["SCHEMA", "run_speed", "measure_and_write"]


SCHEMA = "semcodec-speed/2"


def _self_maxrss_mib() -> float:
    """This process's peak RSS so far (MiB): a floor under every child's ru_maxrss."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_speed(
    images: Sequence[Path],
    *,
    model: str = "default",
    qualities: Sequence[int] = (0, 50),
    threads: int = 2,
    repeats: int = 3,
    residual: str = "avif",
    net_size: tuple[int, int] = (768, 512),
    nets: bool = True,
    timeout_s: float | None = 1800.0,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
    startup: bool = True,
    batch: ThroughputConfig | None = None,
) -> dict[str, Any]:
    """Measure every image × quality in its own process, the networks alone, start-up, then
    the throughput of whole batches (``batch``)."""
    requested, note = model, None
    if model == "default" and not default_weights_available():
        model = DEFAULT_ARCH
        note = (
            f"no trained default weights (models/default-*.pt): measured {DEFAULT_ARCH}, the "
            "default architecture with seeded random weights (its compute and memory, not its "
            "pictures or file sizes)"
        )
        log(f"note: {note}")
    started = machine_info()
    warnings = busy_warning(started, threads)
    parent_rss = _self_maxrss_mib()
    if parent_rss > 150:
        warnings.append(
            f"this process already peaked at {parent_rss:.0f} MiB, and Linux carries that into "
            "each child's ru_maxrss: peak RSS figures are at least that (run from the CLI)"
        )
    for w in warnings:
        log(f"warning: {w}")
    runs: list[dict[str, Any]] = []
    for path in images:
        for q in qualities:
            log(f"  {path.name} quality {q} …")
            spec = {
                "kind": "codec",
                "image": str(path),
                "model": model,
                "quality": int(q),
                "residual": residual,
                "threads": threads,
                "repeats": repeats,
                "avif": CODEC_TARGET_QUALITY if q == CODEC_TARGET_QUALITY else None,
            }
            r = spawn(spec, threads, timeout_s)
            r.setdefault("image", path.stem)
            r.setdefault("quality", int(q))
            if r.get("error"):
                log(f"  warning: {path.name} q{q}: {r['error']}")
            runs.append(r)
    networks: list[dict[str, Any]] = []
    if nets:
        specs = [{"label": model, "model": model, "arch": None}]
        if model == DEFAULT_ARCH:  # the child registers it; the row says its weights are random
            specs = [{"label": "default architecture", "model": model, "arch": "default"}]
        for s in specs:
            log(f"  networks alone: {s['label']} at {net_size[0]}×{net_size[1]} …")
            s.update(kind="nets", size=list(net_size), threads=threads, repeats=repeats)
            r = spawn(s, threads, timeout_s)
            r.setdefault("label", s["label"])
            if not r.get("error"):
                r["targets"] = network_verdicts(r)
            else:
                log(f"  warning: networks {s['label']}: {r['error']}")
            networks.append(r)
    started_up = None
    if startup:
        from semcodec.bench.speed.startup import measure_startup

        log("  start-up: whole commands on a 64x64 file …")
        started_up = measure_startup(model, threads, repeats)
        if started_up.get("error"):
            log(f"  warning: start-up: {started_up['error']}")
    throughput = None
    if batch is not None:
        batch = dataclasses.replace(batch, model=model)
        throughput = measure_throughput(images, batch, log)
        for row in throughput["modes"]:
            if row.get("error"):
                log(f"  warning: batch {row['mode']}: {row['error']}")
    finished = machine_info()
    return {
        "schema": SCHEMA,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {
            **started,
            "loadavg_after": finished["loadavg"],
            "parent_maxrss_mib": round(parent_rss, 1),
        },
        "warnings": warnings + busy_warning(finished, threads, during=True),
        "versions": library_versions(),
        "config": {
            "model": model,
            "model_requested": requested,
            "model_note": note,
            "qualities": [int(q) for q in qualities],
            "threads": threads,
            "repeats": repeats,
            "residual": residual,
            "net_size": list(net_size),
            "images": [str(p) for p in images],
        },
        "runs": runs,
        "summary": quality_summary(runs),
        "codec_targets": codec_verdicts(quality_summary(runs)),
        "networks": networks,
        "startup": started_up,
        "throughput": throughput,
    }


def measure_and_write(
    images_dir: Path,
    *,
    out: Path,
    limit: int | None = None,
    model: str = "default",
    qualities: Sequence[int] = (0, 50),
    threads: int = 2,
    repeats: int = 3,
    residual: str = "avif",
    net_size: tuple[int, int] = (768, 512),
    nets: bool = True,
    timeout_s: float | None = 1800.0,
    startup: bool = True,
    batch: ThroughputConfig | None = None,
) -> int:
    """Measure, print the table, write the JSON; the exit status (2 bad arguments, 1 a failure)."""
    if not images_dir.is_dir():
        print(f"error: {images_dir} is not a directory", file=sys.stderr)
        return 2
    from semcodec.imageio import list_images  # the parent keeps light imports

    images = list_images(images_dir, limit)
    if not images:
        print(f"error: no images in {images_dir}", file=sys.stderr)
        return 2
    if threads < 1 or repeats < 1 or not qualities:
        print("error: --threads and --repeats must be >= 1, --qualities non-empty", file=sys.stderr)
        return 2
    result = run_speed(
        images,
        model=model,
        qualities=qualities,
        threads=threads,
        repeats=repeats,
        residual=residual,
        net_size=net_size,
        nets=nets,
        timeout_s=timeout_s,
        startup=startup,
        batch=batch,
    )
    from semcodec.bench.speed.report import format_speed_table

    print(format_speed_table(result))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    batches = (result.get("throughput") or {}).get("modes", [])
    failed = [r for r in (*result["runs"], *result["networks"]) if r.get("error")]
    failed += [r for r in batches if r.get("error") and "not installed" not in r["error"]]
    return 1 if failed else 0
