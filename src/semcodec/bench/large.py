"""`make bench-large`: encode and decode a 6000x4000 photo; report time and peak memory per stage.

The photo is matplotlib's bundled ``grace_hopper.jpg`` cropped to 3:2, upsampled (Lanczos) to the
target size, with seeded grain (sigma 2 grey levels) so the residual has real detail to code.
Encode and decode each run in a child process; the parent reads the child's peak RSS and CPU time
from ``os.wait4`` (the child's own ``rusage``), so the figures are those of a fresh process.

Model: ``--model`` or ``SEMCODEC_MODEL``, else the shipped ``default`` bundle if its weights exist,
else ``default-arch``: the default architecture with seeded random weights, the same compute and
memory as a trained default model (layer sizes differ).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from semcodec.bench.common import DEFAULT_ARCH, default_arch_model
from semcodec.format.tiling import MAP_SCALE

OUT = Path("bench-out/large")


def _register(model: str) -> None:
    """Make the pseudo-model ``default-arch`` known in this process."""
    if model == DEFAULT_ARCH:
        default_arch_model()


def _default_model() -> str:
    """The trained default bundle if shipped, else its architecture with random weights."""
    from semcodec.zoo import registry

    path = registry.weights_path("default")
    if path is not None and path.exists():
        return "default"
    return DEFAULT_ARCH


def make_photo(width: int, height: int, path: Path) -> None:
    """A real photograph at the requested size (upsampled, plus seeded grain), as a PNG."""
    import matplotlib
    from PIL import Image

    src = Image.open(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg")
    src = src.convert("RGB")
    w, h = src.size
    ch = min(h, round(w * height / width))
    src = src.crop((0, (h - ch) // 2, w, (h - ch) // 2 + ch))
    big = np.asarray(src.resize((width, height), Image.LANCZOS), dtype=np.int16)
    rng = np.random.default_rng(0)
    for y in range(0, height, 500):  # in bands: bounded memory for the grain
        band = big[y : y + 500]
        band += np.rint(rng.normal(0.0, 2.0, band.shape)).astype(np.int16)
    Image.fromarray(np.clip(big, 0, 255).astype(np.uint8)).save(path, compress_level=1)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two uint8 arrays (inf when equal)."""
    d = a.astype(np.int32) - b  # int32: a quarter of float64's memory on 24-Mpixel images
    mse = float(np.square(d, out=d).sum(dtype=np.int64)) / d.size
    return 10 * float(np.log10(255.0**2 / mse)) if mse else float("inf")


def seam_report(ref: np.ndarray, images: dict[str, np.ndarray], band: int = 4) -> dict:
    """PSNR within `band` px of the default tiling's core borders vs elsewhere (seams show as a gap)."""
    from semcodec.encoder.codec import DEFAULT_TILING, MULTIPLE

    h, w = ref.shape[:2]
    regions = DEFAULT_TILING.regions(-(-h // MULTIPLE) * MULTIPLE, -(-w // MULTIPLE) * MULTIPLE)
    mask = np.zeros((h, w), bool)
    for r in regions:
        y0, _, x0, _ = r.core
        if y0:
            mask[max(0, y0 - band) : y0 + band] = True
        if x0:
            mask[:, max(0, x0 - band) : x0 + band] = True
    rows = sorted({r.core[0] for r in regions} - {0})
    cols = sorted({r.core[2] for r in regions} - {0})
    out: dict = {"tiles": len(regions)}
    for name, img in images.items():
        out[name] = {"all": _psnr(img, ref), "interior": _psnr(img[~mask], ref[~mask])}
        out[name]["borders"] = _psnr(img[mask], ref[mask]) if mask.any() else float("nan")
        out[name]["border_step_ratio"] = _step_ratio(img, rows, cols)
    return out


def _step_ratio(img: np.ndarray, rows: list[int], cols: list[int]) -> float:
    """Mean |difference| between the two pixel lines at each core border, divided by the same
    16, 32 and 48 px away (same phase of the 8-px network grid and the 16-px residual blocks):
    about 1 without seams, larger where tiles do not join up."""

    def step(off: int) -> float:
        s = [np.abs(img[v + off].astype(np.int16) - img[v + off - 1]).mean() for v in rows]
        s += [np.abs(img[:, v + off].astype(np.int16) - img[:, v + off - 1]).mean() for v in cols]
        return float(np.mean(s))

    if not rows and not cols:
        return float("nan")
    return step(0) / float(np.mean([step(o) for o in (-48, -32, -16, 16, 32, 48)]))


def _child(argv: list[str]) -> None:
    """Run one encode or decode and print its stage timings as JSON (the measured process)."""
    import torch

    op, model, src, dst, quality, residual, threads = argv
    torch.set_num_threads(int(threads))
    _register(model)
    from semcodec.encoder.codec import Codec

    start, cpu_start = time.perf_counter(), time.process_time()
    codec = Codec(model)
    timings = {"model_load": time.perf_counter() - start}
    cpu = {"model_load": time.process_time() - cpu_start}
    info: dict = {}
    if op == "encode":
        data, stats = codec.encode_with_stats(src, quality=int(quality), residual=residual)
        times = stats.times
        Path(dst).write_bytes(data)
        c = codec.bundle.comp.cfg.out_channels
        info = {"bytes": len(data), "layers": stats.layer_bytes, "compact_channels": c}
    else:
        result = codec.decode(Path(src).read_bytes(), keep_base=True)
        times = result.times
        t = time.perf_counter()
        c = time.process_time()
        result.image.save(dst, compress_level=1)
        np.save(Path(dst).with_suffix(".base.npy"), result.base)
        times.wall["write_png"] = time.perf_counter() - t
        times.cpu["write_png"] = time.process_time() - c
    timings.update(times.wall)
    cpu.update(times.cpu)
    timings["total"] = time.perf_counter() - start
    cpu["total"] = time.process_time() - cpu_start
    print(json.dumps({"timings": timings, "cpu_timings": cpu, **info}))


def _measure(args: list[str]) -> dict:
    """Run a child; return its JSON plus wall time, CPU time and peak RSS (from wait4)."""
    cmd = [sys.executable, "-m", "semcodec.bench.large", "--child", *args]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"child {args[0]} failed with exit code {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result.update(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mib=usage.ru_maxrss / 1024,  # Linux: KiB
    )
    return result


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m semcodec.bench.large`` (and of its child processes)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1:])
        return 0
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default=os.environ.get("SEMCODEC_MODEL"))
    p.add_argument("--width", type=int, default=6000)
    p.add_argument("--height", type=int, default=4000)
    p.add_argument("--quality", type=int, default=50)
    p.add_argument("--residual", default="avif")
    p.add_argument("--threads", type=int, default=1, help="torch threads in the children")
    args = p.parse_args(argv)
    return run_large(
        args.model,
        width=args.width,
        height=args.height,
        quality=args.quality,
        residual=args.residual,
        threads=args.threads,
    )


def run_large(
    model: str | None,
    *,
    width: int = 6000,
    height: int = 4000,
    quality: int = 50,
    residual: str = "avif",
    threads: int = 1,
) -> int:
    """Synthesise the photo, encode and decode it in children, print and save the figures."""
    model = model or _default_model()
    OUT.mkdir(parents=True, exist_ok=True)
    photo = OUT / f"photo-{width}x{height}.png"
    if not photo.exists():
        make_photo(width, height, photo)
    tag = f"{model}-q{quality}-{residual}"
    sem, decoded = OUT / f"{tag}.sem", OUT / f"{tag}.png"
    common = [model, str(quality), residual, str(threads)]
    enc = _measure(["encode", model, str(photo), str(sem), *common[1:]])
    dec = _measure(["decode", model, str(sem), str(decoded), *common[1:]])
    from PIL import Image

    ref = np.asarray(Image.open(photo).convert("RGB"))
    full = np.asarray(Image.open(decoded).convert("RGB"))
    base = np.load(decoded.with_suffix(".base.npy"))
    decoded.with_suffix(".base.npy").unlink()
    seams = seam_report(ref, {"full": full, "base": base})
    mh, mw = -(-height // MAP_SCALE), -(-width // MAP_SCALE)
    report = {
        "image": f"{width}x{height}",
        "model": model,
        "quality": quality,
        "residual": residual,
        "torch_threads": threads,
        "bpp": 8 * enc["bytes"] / (width * height),
        "psnr_db": seams["full"]["all"],
        "tiles": seams["tiles"],
        "psnr_by_region_db": {k: v for k, v in seams.items() if k != "tiles"},
        "map_symbols": mh * mw,
        "compact_symbols": enc["compact_channels"] * mh * mw,
        "encode": enc,
        "decode": dec,
    }
    (OUT / f"{tag}.json").write_text(json.dumps(report, indent=2))
    print(f"{report['image']} photo, model {model}, quality {quality}, {residual} residual")
    print(f"  {enc['bytes']} bytes, {report['bpp']:.3f} bpp, PSNR {report['psnr_db']:.2f} dB")
    for layer in ("base", "full"):
        r = seams[layer]
        print(
            f"  {layer} PSNR: tile borders {r['borders']:.2f} dB, interior {r['interior']:.2f} dB "
            f"({seams['tiles']} tiles); step across borders / nearby {r['border_step_ratio']:.3f}"
        )
    for name, r in (("encode", enc), ("decode", dec)):
        stages = ", ".join(f"{k} {v:.1f}" for k, v in r["cpu_timings"].items() if k != "total")
        print(
            f"  {name}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, "
            f"peak RSS {r['peak_rss_mib']:.0f} MiB  (CPU s per stage: {stages})"
        )
    print(f"  results in {OUT}/{tag}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
