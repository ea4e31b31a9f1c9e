"""Speed benchmark, the codec runs (child side): one image at one quality, encode and decode
timed end to end and per stage, with AVIF on the same image beside them.

Per configuration the child reports the import and model-loading times separately, then the
median over ``--repeats`` runs (after one warm-up) of a whole ``Codec.encode_with_stats`` and
``Codec.decode``, and of each stage inside them.  Stage times come from the Codec's own stage
clock (the ``StageTimes`` each encode and decode returns), renamed to this report's stages.
``other`` is the end-to-end time minus the timed stages (alpha coding, output assembly).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from semcodec.bench.common import DEFAULT_ARCH, default_arch_model
from semcodec.bench.speed.stages import DECODE_STAGES, ENCODE_STAGES
from semcodec.bench.speed.timing import median, time_call

__all__ = ["stage_medians", "worker_codec"]

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
    "enhance": "enhancement",  # decoder: the enhancement network
    # encoder: the enhancement's decode, fit, adaptation and check (enhance.ENHANCE_STAGES)
    "enhance_decode": "enhancement",
    "enhance_fit": "enhancement",
    "enhance_adapt": "enhancement",
    "enhance_check": "enhancement",
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


def stage_medians(runs: list[dict[str, float]], total: list[float], stages: Sequence[str]) -> dict:
    """Per-stage medians; ``other`` is each run's unattributed time (wall or CPU alike)."""
    for r, t in zip(runs, total, strict=True):
        r["other"] = max(0.0, t - sum(v for k, v in r.items() if k != "other"))
    return {s: round(median([r.get(s, 0.0) for r in runs]), 6) for s in stages}


def worker_codec(spec: dict[str, Any]) -> dict[str, Any]:
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
    if spec["model"] == DEFAULT_ARCH:
        default_arch_model()  # a pseudo-model: registered in each process that loads it
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
        "map_decode_s": round(median(map_t), 6),
        "width": w,
        "height": h,
        "quality": q,
        "bytes": len(data),
        "bpp": 8 * len(data) / (w * h),
        "layer_bytes": dict(stats.layer_bytes),
        "import_s": round(t1 - t0, 4),
        "model_load_s": round(t2 - t1, 4),
        "rss_after_load_mib": round(rss_load, 1),
        "encode_s": round(median(enc_t), 6),
        "decode_s": round(median(dec_t), 6),
        "encode_runs": [round(x, 6) for x in enc_t],
        "decode_runs": [round(x, 6) for x in dec_t],
        "encode_stages": stage_medians(enc_st, enc_t, ENCODE_STAGES),
        "decode_stages": stage_medians(dec_st, dec_t, DECODE_STAGES),
        "encode_cpu_s": round(median(enc_c), 6),
        "decode_cpu_s": round(median(dec_c), 6),
        "encode_stages_cpu": stage_medians(enc_sc, enc_c, ENCODE_STAGES),
        "decode_stages_cpu": stage_medians(dec_sc, dec_c, DECODE_STAGES),
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

    e, _, _ = time_call(enc, spec["repeats"])
    d, _, _ = time_call(dec, spec["repeats"])
    return {"quality": q, "bytes": len(data), "encode_s": round(e, 6), "decode_s": round(d, 6)}
