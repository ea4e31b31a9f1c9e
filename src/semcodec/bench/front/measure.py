"""One configuration on one image at every quality: encode and decode CPU seconds of this
process (one thread), bytes, PSNR, MS-SSIM and SSIMULACRA 2, and semcodec's stage clock.

Runs in the benchmark's worker processes: each caches its semcodec Codec, so model loading is
never billed to an image, and warms each configuration up once before timing it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semcodec.bench.front.configs import CHROMAS, Config

__all__ = ["MAP_STAGES", "measure_image"]

#: The semcodec encode stages (its stage clock's names) that make the map: reported apart.
MAP_STAGES = ("segment", "map_coder")

_CODECS: dict[str, Any] = {}
_WARM: set[str] = set()


def _codec(model: str) -> Any:
    """This process's semcodec Codec of a model (loaded once)."""
    if model not in _CODECS:
        from semcodec.encoder.codec import Codec

        _CODECS[model] = Codec(model)
    return _CODECS[model]


def _cpu(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """fn's result, its process CPU seconds (user + system, every thread) and wall seconds."""
    c, t = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - t


def _avif(rgb: np.ndarray, cfg: Config, quality: int) -> bytes:
    """Pillow/libavif on one thread at the configuration's speed, chroma layout and libaom
    options."""
    from semcodec.bench.codecs import AvifAdapter

    return AvifAdapter(cfg.level, 1, CHROMAS[cfg.chroma], dict(cfg.aom)).encode(rgb, quality)


class _Run:
    """Encode and decode of one configuration (semcodec's stats kept for the ledger)."""

    def __init__(self, cfg: Config, model: str) -> None:
        self.cfg = cfg
        self.model = model
        self.stages: dict[str, float] = {}
        self.decode_stages: dict[str, float] = {}

    def encode(self, rgb: np.ndarray, quality: float) -> bytes:
        """A complete file of this configuration (``quality``: JPEG XL's distance)."""
        cfg = self.cfg
        if cfg.codec == "avif":
            return _avif(rgb, cfg, int(quality))
        if cfg.codec == "jxl":
            from semcodec.bench.codecs import JxlAdapter

            return JxlAdapter(cfg.level, 1).encode(rgb, quality)
        from semcodec.encoder.gating import GatingConfig
        from semcodec.encoder.options import EncodeOptions

        opts = EncodeOptions(
            quality=int(quality), effort=cfg.level, gating=GatingConfig(cfg.gating)
        )
        data, stats = _codec(self.model).encode_with_stats(rgb, opts)
        self.stages = dict(stats.times.cpu)
        return bytes(data)

    def decode(self, data: bytes) -> np.ndarray:
        """The decoded picture, RGB uint8."""
        if self.cfg.codec == "avif":
            from semcodec.bench.codecs import _pil_decode

            return _pil_decode(data)
        if self.cfg.codec == "jxl":
            from semcodec.bench.codecs import JxlAdapter

            return JxlAdapter(self.cfg.level, 1).decode(data)
        result = _numpy_decoder(self.model).decode(data)
        self.decode_stages = dict(result.times.cpu)
        return np.asarray(result.image.convert("RGB"), dtype=np.uint8).copy()


@functools.cache
def _numpy_decoder(model: str) -> Any:
    """The release's decoder on numpy's kernels: what ``semcodec decode`` runs (it never
    imports torch), although this worker has torch for the encoder."""
    from semcodec.decoder.pipeline import Decoder

    codec = _codec(model)
    return _one_thread(
        Decoder(codec.decoder.parts, None, codec.limits, codec.tiling, use_torch=False)
    )


def _one_thread(dec: Any) -> Any:
    """numpy's kernels on this thread only (they start a thread per core by themselves)."""
    parts = dec.parts
    if dec.enhancer is not None:
        dec.enhancer.threads = 1
    if parts.generator is not None:
        generator = parts.integer_generator()
        generator.threads = 1
        dec.generator = generator.forward
    return dec


def _plain(model: str, data: bytes) -> tuple[bytes, np.ndarray, float]:
    """The same file without its ENHANCE layer, its picture and its decode CPU seconds."""
    from semcodec.decoder.pipeline import Decoder
    from semcodec.format import container
    from semcodec.format.container import LayerKind

    header, layers = container.unpack(data)
    plain = container.pack(header, {k: v for k, v in layers.items() if k != LayerKind.ENHANCE})
    codec = _codec(model)
    parts = codec.decoder.parts
    dec = _one_thread(
        Decoder(parts, None, codec.limits, codec.tiling, enhance=False, use_torch=False)
    )
    result, cpu, _ = _cpu(lambda: dec.decode(plain))
    return plain, np.asarray(result.image.convert("RGB"), dtype=np.uint8).copy(), cpu


def _scores(rgb: np.ndarray, out: np.ndarray, extras: Sequence[str]) -> dict[str, Any]:
    """PSNR, MS-SSIM (and dB) and the optional metrics of one decoded picture."""
    from semcodec.bench import quality
    from semcodec.metrics import ms_ssim, psnr

    m = ms_ssim(rgb, out)
    return {"psnr": psnr(rgb, out), "msssim": m.value, "msssim_db": m.db,
            **quality.score(rgb, out, extras)}  # fmt: skip


def _warm_up(run: _Run, rgb: np.ndarray, quality: float) -> None:
    """One untimed round trip on a crop, so one-time set-up is not billed to an image."""
    if run.cfg.name in _WARM:
        return
    crop = np.ascontiguousarray(rgb[:128, :192])
    run.decode(run.encode(crop, quality))
    _WARM.add(run.cfg.name)


def measure_image(
    cfg: Config,
    path: str,
    qualities: Sequence[float],
    extras: Sequence[str],
    model: str = "default",
) -> list[dict[str, Any]]:
    """Records of one configuration on one image, one per setting (errors recorded)."""
    from semcodec.bench.rd.run import load_rgb

    rgb = load_rgb(path)
    h, w = rgb.shape[:2]
    run = _Run(cfg, model)
    _warm_up(run, rgb, qualities[0])
    records = []
    for q in qualities:
        rec: dict[str, Any] = {"image": Path(path).stem, "codec": cfg.name, "setting": q}
        try:
            data, enc_cpu, enc_wall = _cpu(lambda q=q: run.encode(rgb, q))
            out, dec_cpu, _ = _cpu(lambda data=data: run.decode(data))
            rec.update(bytes=len(data), bpp=8 * len(data) / (w * h), encode_cpu_s=enc_cpu,
                       decode_cpu_s=dec_cpu, encode_s=enc_wall, decode_s=None)  # fmt: skip
            rec.update(_scores(rgb, out, extras))
            if cfg.codec == "semcodec":
                rec["stages_cpu"] = dict(run.stages)
                rec["decode_stages_cpu"] = dict(run.decode_stages)
                rec["map_cpu_s"] = sum(run.stages.get(s, 0.0) for s in MAP_STAGES)
            records.append(rec)
            if cfg.codec == "semcodec" and cfg.enhance:
                records.append(_plain_record(rec, cfg, model, data, rgb, extras))
        except Exception as e:  # noqa: BLE001 - one failing file must not lose the run
            rec["error"] = f"{type(e).__name__}: {e}"
            records.append(rec)
    return records


def _plain_record(
    rec: dict[str, Any],
    cfg: Config,
    model: str,
    data: bytes,
    rgb: np.ndarray,
    extras: Sequence[str],
) -> dict[str, Any]:
    """The same file without its ENHANCE layer: its bytes, scores, its decode CPU, and the
    encode CPU less the enhancement's stage (what the encode costs without it)."""
    h, w = rgb.shape[:2]
    plain, picture, dec_cpu = _plain(model, data)
    stages = {k: v for k, v in rec["stages_cpu"].items() if not k.startswith("enhance")}
    out = {
        **rec,
        "codec": Config(cfg.codec, cfg.level, enhance=False, gating=cfg.gating).name,
        "bytes": len(plain),
        "bpp": 8 * len(plain) / (w * h),
        "encode_cpu_s": rec["encode_cpu_s"]
        - sum(v for k, v in rec["stages_cpu"].items() if k.startswith("enhance")),
        "decode_cpu_s": dec_cpu,
        "stages_cpu": stages,
        "decode_stages_cpu": None,
    }
    out.update(_scores(rgb, picture, extras))
    return out
