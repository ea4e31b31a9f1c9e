"""Running the front benchmark: every configuration on every image, in worker processes that
each run one thread (torch.set_num_threads(1), OMP_NUM_THREADS=1, AVIF and JPEG XL on one
thread), so a CPU second means the same for every codec; then the summary."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from semcodec.bench.front.configs import ANCHOR, Config
from semcodec.bench.front.measure import measure_image
from semcodec.bench.front.summary import summarise

__all__ = ["SCHEMA", "THREAD_VARS", "join_earlier", "run_front", "settings"]

SCHEMA = "semcodec-front/1"
#: Thread caps set before torch starts in a worker (set_num_threads alone comes too late).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: What ``ONEDNN_MAX_CPU_ISA=AVX2`` caps for torch's convolutions, set for the other libraries
#: too: numpy's OpenBLAS (the integer grid's matrix products: it picks AVX-512 kernels by
#: itself, 0.087 against 0.122 CPU-s of a Kodak decode) and ATen's own kernels.
AVX2_CAPS = {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2"}
ENV_RECORDED = (*THREAD_VARS, "ONEDNN_MAX_CPU_ISA", *AVX2_CAPS, "SEMCODEC_BF16")


def avx2_capped() -> bool:
    """Whether this run checks speed as on an AVX2-only CPU; then the workers get AVX2_CAPS
    (where not set already), which only a fresh process can take (OpenBLAS reads its variable
    as it loads)."""
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() != "AVX2":
        return False
    for var, value in AVX2_CAPS.items():
        os.environ.setdefault(var, value)
    return True


def one_thread() -> None:
    """Cap this process at one thread for every math library and torch."""
    for var in THREAD_VARS:
        os.environ[var] = "1"
    import torch

    torch.set_num_threads(1)


def _job(args: tuple[Config, str, list, list[str], str]) -> list[dict[str, Any]]:
    """A worker's unit of work: one configuration on one image."""
    return measure_image(*args)


def _order(configs: Sequence[Config]) -> list[tuple[Config, int]]:
    """Slowest configurations first, so the last jobs to finish are short ones."""
    weight = {"jxl": 2.0}

    def cost(c: Config) -> float:
        if c.codec == "avif":
            return 2.0 ** (6 - c.level)
        return weight.get(c.codec, 2.0 ** max(0, c.level - 4))

    return sorted(((c, i) for i, c in enumerate(configs)), key=lambda ci: -cost(ci[0]))


def run_front(
    images: Sequence[Path],
    configs: Sequence[Config],
    qualities: Sequence[int],
    extras: Sequence[str],
    *,
    model: str = "default",
    jobs: int = 1,
    jxl_distances: Sequence[float] = (8.0, 4.0, 2.5, 1.5, 1.0),
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """Measure every configuration × image × setting and sum the run up (a JSON-ready dict):
    ``qualities`` for semcodec and AVIF, ``jxl_distances`` for JPEG XL."""
    order = {c.name: list(jxl_distances if c.codec == "jxl" else qualities) for c in configs}
    for var in THREAD_VARS:
        os.environ[var] = "1"  # inherited by the workers before their torch starts
    work = [
        (cfg, str(p), order[cfg.name], list(extras), model)
        for cfg, _ in _order(configs)
        for p in images
    ]
    t0 = time.perf_counter()
    records: list[dict[str, Any]] = []
    fresh = avx2_capped()  # the BLAS cap needs worker processes, even for one job
    if jobs <= 1 and not fresh:
        one_thread()
        results = map(_job, work)
        _collect(results, work, records, log, t0)
    else:
        ctx = get_context("spawn")
        pool_args = {"mp_context": ctx, "initializer": one_thread}
        with ProcessPoolExecutor(max(1, jobs), **pool_args) as pool:
            _collect(pool.map(_job, work), work, records, log, t0)
    wall = time.perf_counter() - t0
    for c in configs:
        if c.codec == "semcodec" and c.enhance:
            order[Config(c.codec, c.level, enhance=False, gating=c.gating).name] = list(qualities)
    avif = [c.name for c in configs if c.is_avif]
    summary = summarise(records, order, ANCHOR, avif)
    return {
        "schema": SCHEMA,
        "config": {
            "configurations": [c.name for c in configs],
            "qualities": list(qualities),
            "images": [str(p) for p in images],
            "anchor": ANCHOR,
            "model": model,
            "jobs": jobs,
            "threads": 1,
            "metrics": ["psnr", "msssim_db", *extras],
            "env": {k: os.environ.get(k) for k in ENV_RECORDED},
        },
        "run_wall_s": wall,
        "records": records,
        **summary,
    }


def _collect(results: Any, work: list, records: list, log: Any, t0: float) -> None:
    """Gather each job's records, one progress line per job on ``log``."""
    for i, (recs, job) in enumerate(zip(results, work, strict=True), 1):
        records.extend(recs)
        errors = [r["error"] for r in recs if r.get("error")]
        note = f" ({len(errors)} errors: {errors[0]})" if errors else ""
        if log is not None:
            elapsed = time.perf_counter() - t0
            print(f"[{i}/{len(work)} {elapsed:.0f}s] {job[0].name} {Path(job[1]).stem}{note}",
                  file=log, flush=True)  # fmt: skip


def join_earlier(result: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """This run with the configurations only an earlier run of the same images and
    qualities measured (e.g. AVIF, measured once, beside new semcodec efforts), summed up
    again; ValueError when the runs' images or qualities differ."""
    for key in ("images", "qualities", "anchor"):
        if result["config"][key] != earlier["config"][key]:
            raise ValueError(f"the earlier run has other {key}: {earlier['config'][key]}")
    ours = {r["codec"] for r in result["records"]}
    taken = [r for r in earlier["records"] if r["codec"] not in ours]
    records = result["records"] + taken
    order = {name: list(rows) for name, rows in settings(records).items()}
    avif = [n for n in order if n.startswith("avif-")]
    joined = {**result, "records": records, **summarise(records, order, ANCHOR, avif)}
    joined["config"] = {**result["config"], "joined": sorted({r["codec"] for r in taken})}
    return joined


def settings(records: Sequence[dict[str, Any]]) -> dict[str, list]:
    """Each configuration's settings in the order first seen."""
    out: dict[str, list] = {}
    for r in records:
        seen = out.setdefault(r["codec"], [])
        if r["setting"] not in seen:
            seen.append(r["setting"])
    return out
