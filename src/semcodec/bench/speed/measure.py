"""Speed benchmark, measuring: end-to-end and per-stage encode/decode times, peak memory,
networks alone. ``report.py`` formats what this measures; ``startup.py`` times whole commands.

Run as ``semcodec bench speed --images DIR [--model default] [--limit N] [--qualities 0,50]
[--threads 2] [--repeats 3] [--out bench-out/speed.json]``.

Every configuration (one image at one quality, or one set of networks) runs in a fresh child
process so that its peak resident memory is its own: the parent reads the child's
``ru_maxrss`` from ``os.wait4`` (the per-child form of ``getrusage(RUSAGE_CHILDREN)``, whose
``ru_maxrss`` is only the maximum over all children so far).  The parent imports neither torch
nor numpy: Linux carries the exec'ing process's high-water RSS into the child's ``ru_maxrss``,
so a heavy parent would inflate every child's figure.

Per configuration the child reports the import and model-loading times separately, then the
median over ``--repeats`` runs (after one warm-up) of a whole ``Codec.encode_with_stats`` and
``Codec.decode``, and of each stage inside them.  Stage times come from the Codec's own stage
clock (the ``StageTimes`` each encode and decode returns), renamed to this report's stages.
``other`` is the end-to-end time minus the timed stages (alpha coding, output assembly).

The networks-alone check times the segmentation network (``logits_lowres``), CompNet and the
generator on a 768×512 input in fp32 and bf16 autocast, against the targets of the speed
issues (segmentation ≤ 1.5 s, generator ≤ 0.5 s, at 2 threads).  Without trained default
weights the default *architecture* is also timed with random weights (speed does not depend
on weight values), next to the model actually used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from semcodec.bench import common
from semcodec.bench.common import default_arch_model
from semcodec.bench.speed.stages import (
    CODEC_TARGET_QUALITY,
    CODEC_TARGETS,
    DECODE_STAGES,
    ENCODE_STAGES,
    TARGETS,
)
from semcodec.bench.speed.throughput import ThroughputConfig, measure_throughput

__all__ = [
    "SCHEMA",
    "TARGETS",
    "ENCODE_STAGES",
    "DECODE_STAGES",
    "machine_info",
    "library_versions",
    "default_weights_available",
    "run_speed",
    "measure_and_write",
    "main",
]

SCHEMA = "semcodec-speed/2"


# ----- environment (parent side: light imports only) -------------------------------------------
def machine_info() -> dict[str, Any]:
    """CPU model, cores and RAM: speed numbers mean nothing without the machine."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram_gib: float | None = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gib = round(int(line.split()[1]) / 2**20, 1)
                break
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    try:
        load: list[float] | None = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "ram_gib": ram_gib,
        "platform": platform.platform(),
        "loadavg": load,
    }


#: The keys of library_versions this report keeps (the codecs' and the runtime's).
_VERSION_KEYS = (
    "python",
    "torch",
    "numpy",
    "pillow",
    "libavif",
    "libwebp",
    "openjpeg",
    "libjpeg",
    "imagecodecs",
    "constriction",
)


def library_versions() -> dict[str, str | None]:
    """Versions that change codec speed and output: Python, torch, Pillow and its codecs."""
    versions = common.library_versions()
    return {key: versions[key] for key in _VERSION_KEYS}


def default_weights_available() -> bool:
    """True once trained default weights (models/default-<sha8>.pt) are installed."""
    try:
        folder = resources.files("semcodec._weights")
    except ModuleNotFoundError:
        return False
    return any(p.name.startswith("default-") and p.name.endswith(".pt") for p in folder.iterdir())


# ----- child processes ------------------------------------------------------------------------
def _child_env(threads: int) -> dict[str, str]:
    """Thread caps for every math library before torch starts (set_num_threads alone is late)."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    return env


def _spawn(spec: dict[str, Any], threads: int, timeout_s: float | None) -> dict[str, Any]:
    """Run one configuration in a fresh interpreter; add its own peak RSS (os.wait4)."""
    with tempfile.TemporaryDirectory(prefix="semcodec-speed-") as tmp:
        spec_path, result_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        err_path = Path(tmp) / "stderr.txt"
        spec_path.write_text(json.dumps(spec))
        cmd = [sys.executable, "-m", "semcodec.bench.speed", "--worker", str(spec_path)]
        cmd.append(str(result_path))
        t0 = time.perf_counter()
        with err_path.open("wb") as err:
            proc = subprocess.Popen(
                cmd, env=_child_env(threads), stdout=subprocess.DEVNULL, stderr=err
            )
            status, usage = _wait(proc, timeout_s)
        wall = time.perf_counter() - t0
        out: dict[str, Any] = {}
        if result_path.exists():
            out = json.loads(result_path.read_text())
        code = os.waitstatus_to_exitcode(status) if status is not None else None
        if code != 0 and not out.get("error"):
            tail = err_path.read_text(errors="replace").strip().splitlines()[-5:]
            why = "timed out" if status is None else f"exit status {code}"
            out["error"] = f"child {why}: " + " | ".join(tail)
    out["peak_rss_mib"] = round(usage.ru_maxrss / 1024, 1) if usage else None  # KiB on Linux
    out["process_s"] = round(wall, 3)
    return out


def _wait(proc: subprocess.Popen, timeout_s: float | None) -> tuple[int | None, Any]:
    """wait4 the child (its own rusage); kill it past the timeout."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if deadline else 0)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return status, usage
        if deadline is not None and time.monotonic() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            return None, usage
        time.sleep(0.05)


# the Codec's own stage clock (EncodeStats.times, DecodeResult.times) -> this report's stages;
# stages not listed (alpha, assemble) count as "other".
_CODEC_STAGES: dict[str, str] = {
    "load": "input",
    "segment": "segmentation",
    "compnet": "compnet",
    "map_coder": "map_coding",
    "compact_coder": "compact_coding",
    "generator": "generator",
    "residual": "residual_coding",
    "pack": "container",
    "unpack": "container",
    "gating": "generator",  # decoder: the blend of a gated file's predictions
    "enhance": "enhancement",  # the enhancement network (encoder: its fit and the check)
}
_UNREPORTED = {"alpha", "assemble"}


def _stages(times: Any, unknown: set[str]) -> tuple[dict[str, float], dict[str, float]]:
    """An encode's or decode's (wall, CPU) seconds per report stage, from the StageTimes it
    returned (EncodeStats.times, DecodeResult.times).

    Stage names the mapping does not know (the codec changed) are collected in ``unknown``;
    their time lands in ``other``.
    """
    out: tuple[dict[str, float], dict[str, float]] = ({}, {})
    for src, dst in ((times.wall, out[0]), (times.cpu, out[1])):
        for name, t in src.items():
            stage = _CODEC_STAGES.get(name)
            if stage is None:
                if name not in _UNREPORTED:
                    unknown.add(name)
                continue
            dst[stage] = dst.get(stage, 0.0) + t
    return out


def _median(xs: Sequence[float]) -> float:
    """Median, robust to one slow run on a shared machine."""
    return float(statistics.median(xs))


def _stage_medians(runs: list[dict[str, float]], total: list[float], stages: Sequence[str]) -> dict:
    """Per-stage medians; ``other`` is each run's unattributed time (wall or CPU alike)."""
    for r, t in zip(runs, total, strict=True):
        r["other"] = max(0.0, t - sum(v for k, v in r.items() if k != "other"))
    return {s: round(_median([r.get(s, 0.0) for r in runs]), 6) for s in stages}


def _worker_codec(spec: dict[str, Any]) -> dict[str, Any]:
    """One image at one quality: import, model load, warm-up, then timed repeats."""
    import resource

    t0 = time.perf_counter()
    import numpy as np
    import torch
    from PIL import Image

    torch.set_num_threads(spec["threads"])
    import semcodec.encoder.codec as cm
    from semcodec import runtime

    t1 = time.perf_counter()
    codec = cm.Codec(spec["model"])
    t2 = time.perf_counter()
    avif = _avif_times(spec) if spec.get("avif") else None
    rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with Image.open(spec["image"]) as im:
        rgb = np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
    unknown: set[str] = set()
    q, residual = int(spec["quality"]), spec["residual"]
    data, stats = codec.encode_with_stats(rgb, quality=q, residual=residual)  # warm-up
    codec.decode(data)
    enc_t: list[float] = []
    dec_t: list[float] = []
    enc_c: list[float] = []
    dec_c: list[float] = []
    enc_st: list[dict[str, float]] = []
    dec_st: list[dict[str, float]] = []
    enc_sc: list[dict[str, float]] = []
    dec_sc: list[dict[str, float]] = []
    for _ in range(spec["repeats"]):
        a, ac = time.perf_counter(), time.process_time()
        data, stats = codec.encode_with_stats(rgb, quality=q, residual=residual)
        b, bc = time.perf_counter(), time.process_time()
        wall, cpu = _stages(stats.times, unknown)
        enc_st.append(wall)
        enc_sc.append(cpu)
        decoded = codec.decode(data)
        c, cc = time.perf_counter(), time.process_time()
        wall, cpu = _stages(decoded.times, unknown)
        dec_st.append(wall)
        dec_sc.append(cpu)
        enc_t.append(b - a)
        dec_t.append(c - b)
        enc_c.append(bc - ac)
        dec_c.append(cc - bc)
    from semcodec.decoder.maplayer import full_size_map, read_map

    map_t = []
    for _ in range(max(3, spec["repeats"])):
        a = time.perf_counter()
        header, labels = read_map(data)
        full_size_map(labels, header)
        map_t.append(time.perf_counter() - a)
    h, w = rgb.shape[:2]
    return {
        "image": Path(spec["image"]).stem,
        "map_decode_s": round(_median(map_t), 6),
        "width": w,
        "height": h,
        "quality": q,
        "bytes": len(data),
        "bpp": 8 * len(data) / (w * h),
        "layer_bytes": dict(stats.layer_bytes),
        "import_s": round(t1 - t0, 4),
        "model_load_s": round(t2 - t1, 4),
        "rss_after_load_mib": round(rss_load, 1),
        "encode_s": round(_median(enc_t), 6),
        "decode_s": round(_median(dec_t), 6),
        "encode_runs": [round(x, 6) for x in enc_t],
        "decode_runs": [round(x, 6) for x in dec_t],
        "encode_stages": _stage_medians(enc_st, enc_t, ENCODE_STAGES),
        "decode_stages": _stage_medians(dec_st, dec_t, DECODE_STAGES),
        "encode_cpu_s": round(_median(enc_c), 6),
        "decode_cpu_s": round(_median(dec_c), 6),
        "encode_stages_cpu": _stage_medians(enc_sc, enc_c, ENCODE_STAGES),
        "decode_stages_cpu": _stage_medians(dec_sc, dec_c, DECODE_STAGES),
        "unhooked": sorted(unknown),
        "threads": torch.get_num_threads(),
        "bf16": codec.bf16,
        "runtime": runtime.diagnostics(),
        "avif": avif,
        "error": None,
    }


def _avif_times(spec: dict[str, Any]) -> dict[str, Any]:
    """AVIF (Pillow, speed 6) on the same image in the same process: encode and decode seconds."""
    import io

    from PIL import Image

    with Image.open(spec["image"]) as im:
        img = im.convert("RGB")
    q = int(spec["avif"])

    def enc() -> bytes:
        buf = io.BytesIO()
        img.save(buf, "AVIF", quality=q, speed=6)
        return buf.getvalue()

    data = enc()

    def dec() -> None:
        with Image.open(io.BytesIO(data)) as im:
            im.load()

    e, _, _ = _time_call(enc, spec["repeats"])
    d, _, _ = _time_call(dec, spec["repeats"])
    return {"quality": q, "bytes": len(data), "encode_s": round(e, 6), "decode_s": round(d, 6)}


def _time_call(fn: Callable[[], Any], repeats: int) -> tuple[float, float, list[float]]:
    """Median wall and CPU seconds of ``fn`` after one untimed warm-up call, and the runs."""
    fn()
    runs, cpus = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        runs.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return _median(runs), _median(cpus), runs


def _worker_nets(spec: dict[str, Any]) -> dict[str, Any]:
    """Segmentation, CompNet and generator alone on one input size, fp32 and bf16 autocast."""
    import torch

    torch.set_num_threads(spec["threads"])
    from semcodec.models.compnet import dequantize
    from semcodec.zoo.bundles import load_bundle

    t0 = time.perf_counter()
    b = load_bundle(default_arch_model() if spec["arch"] else spec["model"])
    seg, comp, gen = b.seg, b.comp, b.gen
    load_s = time.perf_counter() - t0
    w, h = spec["size"]
    f = 8  # map and compact resolution: 1/8 (Codec.MULTIPLE)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(1, 3, h, w, generator=g)
    labels = torch.randint(0, comp.cfg.num_classes, (1, h // f, w // f), generator=g)
    levels = comp.cfg.levels
    sym = torch.randint(0, levels, (1, comp.cfg.out_channels, h // f, w // f), generator=g)
    t = dequantize(sym, levels)
    from semcodec import runtime
    from semcodec.zoo.bundles import fix_random

    # what the decoder runs: the bundle's integer table, or one fixed from its weights
    integer = b.fixed if b.fixed is not None else fix_random(gen, levels)
    calls: dict[str, Callable[[], Any]] = {
        "segmentation": lambda: seg.logits_lowres(x),
        "compnet": lambda: comp(x, labels),
        "generator": lambda: gen(t, labels, (h, w)),
    }
    native = runtime.native_bf16()
    precisions = ("fp32", "bf16") if native else ("fp32",)  # emulated bf16 is not timed
    results: dict[str, dict[str, float | None]] = {}
    cpu: dict[str, dict[str, float | None]] = {}
    runs: dict[str, dict[str, list[float]]] = {}
    with torch.no_grad():
        for net, fn in calls.items():
            results[net], cpu[net], runs[net] = {"bf16": None}, {"bf16": None}, {}
            for prec in precisions:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
                    med, med_cpu, rs = _time_call(fn, spec["repeats"])
                results[net][prec] = round(med, 6)
                cpu[net][prec] = round(med_cpu, 6)
                runs[net][prec] = [round(r, 6) for r in rs]
        if integer is not None:
            med, med_cpu, rs = _time_call(lambda: integer.forward(sym, labels), spec["repeats"])
            results["generator"]["integer"] = round(med, 6)
            cpu["generator"]["integer"] = round(med_cpu, 6)
            runs["generator"]["integer"] = [round(r, 6) for r in rs]
    use = runtime.bf16_decision().use
    precision = {"segmentation": "bf16" if use else "fp32", "compnet": "bf16" if use else "fp32",
                 "generator": "integer" if integer is not None else "fp32"}  # fmt: skip
    return {
        "label": spec["label"],
        "model": spec["model"],
        "arch": spec["arch"],
        "weights": "random weights, speed only" if spec["arch"] else "weights as loaded",
        "size": [w, h],
        "threads": torch.get_num_threads(),
        "load_s": round(load_s, 4),
        "seconds": results,
        "cpu_seconds": cpu,
        "runs": runs,
        "codec_precision": precision,
        "runtime": runtime.diagnostics(),
        "error": None,
    }


def _worker_main(spec_path: str, result_path: str) -> int:
    """Child entry point: run one spec and write its JSON result (errors included)."""
    spec = json.loads(Path(spec_path).read_text())
    try:
        out = _worker_codec(spec) if spec["kind"] == "codec" else _worker_nets(spec)
        code = 0
    except Exception as e:  # noqa: BLE001 - reported in the parent's table, the run goes on
        out = {"error": f"{type(e).__name__}: {e}"}
        code = 1
    Path(result_path).write_text(json.dumps(out))
    return code


# ----- parent ---------------------------------------------------------------------------------
def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
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


def _self_maxrss_mib() -> float:
    """This process's peak RSS so far (MiB): a floor under every child's ru_maxrss."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _busy_warning(m: dict[str, Any], threads: int, during: bool = False) -> list[str]:
    """Flag oversubscription: torch's spinning threads slow down many-fold on a busy CPU."""
    load, cpus = m.get("loadavg"), m.get("usable_cpus")
    if not load or not cpus:
        return []
    # the 1-minute load at the end includes this benchmark's own child (about `threads`)
    others = load[0] - (threads if during else 0)
    if others + threads <= cpus + 0.5:
        return []
    when = "during the run" if during else "at the start"
    return [
        f"CPU busy {when}: load average {load[0]:.2f} on {cpus} usable CPUs with {threads} "
        "benchmark threads; timings are inflated (measure on an otherwise idle machine)"
    ]


def _verdicts(net: dict[str, Any]) -> dict[str, Any]:
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
        model = "tiny"
        note = (
            "no trained default weights (models/default-*.pt): measured --model tiny; the "
            "networks-alone check also times the default architecture with random weights"
        )
        log(f"note: {note}")
    started = machine_info()
    warnings = _busy_warning(started, threads)
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
            r = _spawn(spec, threads, timeout_s)
            r.setdefault("image", path.stem)
            r.setdefault("quality", int(q))
            if r.get("error"):
                log(f"  warning: {path.name} q{q}: {r['error']}")
            runs.append(r)
    networks: list[dict[str, Any]] = []
    if nets:
        specs = [{"label": model, "model": model, "arch": None}]
        if note is not None:
            specs.append({"label": "default architecture", "model": "default", "arch": "default"})
        for s in specs:
            log(f"  networks alone: {s['label']} at {net_size[0]}×{net_size[1]} …")
            s.update(kind="nets", size=list(net_size), threads=threads, repeats=repeats)
            r = _spawn(s, threads, timeout_s)
            r.setdefault("label", s["label"])
            if not r.get("error"):
                r["targets"] = _verdicts(r)
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
        "warnings": warnings + _busy_warning(finished, threads, during=True),
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
        "summary": _summary(runs),
        "codec_targets": _codec_verdicts(_summary(runs)),
        "networks": networks,
        "startup": started_up,
        "throughput": throughput,
    }


def _codec_verdicts(summary: dict[str, Any]) -> dict[str, Any]:
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the child processes (``python -m semcodec.bench.speed --worker``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"] and len(argv) == 3:
        return _worker_main(argv[1], argv[2])
    print(
        "this module runs the benchmark's child processes; use `semcodec bench speed`",
        file=sys.stderr,
    )
    return 2
