"""Throughput of the integer enhancement network's kernels: GMAC/s on a Kodak-size picture.

``python -m semcodec.bench.kernels [--configs small-s2 s4-w64-l4] [--threads 1 2]`` times
``IntEnhancer.correction`` with a seeded random table of each configuration, numpy and torch
kernels, at each thread count (numpy: the kernel's pool, BLAS on one thread; torch: its
intra-op threads), and prints the median of the runs. Set the instruction set through the
environment first (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell
OMP_NUM_THREADS=1), and say the machine's load with the figures.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import numpy as np

from semcodec.models.enhance import ENHANCE_CONFIGS, EnhanceConfig

KODAK = (512, 768)  # rows, columns


@dataclass(frozen=True)
class Timing:
    """One configuration, kernel and thread count: seconds per picture and throughput."""

    config: str
    kernel: str
    threads: int
    seconds: float  # wall, median of the runs
    cpu_seconds: float  # the process's CPU time (all threads), median of the runs
    gmacs: float  # multiply-adds per wall second


def macs_per_pixel(cfg: EnhanceConfig) -> float:
    """Multiply-adds per picture pixel: 3x3 convolutions at 1/s2d, 3 s2d^2 channels in and out."""
    cin = 3 * cfg.s2d**2
    per_cell = 9 * (cin * cfg.width + cfg.layers * cfg.width**2 + cfg.width * cin)
    return per_cell / cfg.s2d**2


def picture(size: tuple[int, int] = KODAK, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random uint8 picture and map of that size (the speed does not depend on it)."""
    rng = np.random.default_rng(seed)
    h, w = size
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return rgb, rng.integers(0, 12, ((h + 7) // 8, (w + 7) // 8))


def time_kernel(
    name: str, kernel: str, threads: int, runs: int = 5, size: tuple[int, int] = KODAK
) -> Timing:
    """Median seconds per picture of one configuration's correction, and its GMAC/s."""
    import torch

    from semcodec.intgrid.enhancer import IntEnhancer
    from semcodec.intgrid.enhancer_torch import torch_band_kernel
    from semcodec.zoo.bundles import random_enhancer

    _, table = random_enhancer(name, seed=0)
    enh = IntEnhancer(table, threads=threads)
    if kernel == "torch":
        enh.kernel = torch_band_kernel(enh)
    rgb, labels = picture(size)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        enh.correction(rgb, labels, 50)  # warm up
        times, cpu = [], []
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            enh.correction(rgb, labels, 50)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    finally:
        torch.set_num_threads(previous)
    seconds = float(np.median(times))
    macs = macs_per_pixel(ENHANCE_CONFIGS[name]) * size[0] * size[1]
    return Timing(name, kernel, threads, seconds, float(np.median(cpu)), macs / seconds / 1e9)


def main(argv: list[str] | None = None) -> None:
    """Print one line per configuration, kernel and thread count (with the load average: on a
    shared machine the CPU seconds tell more than the wall seconds)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=["small-s2", "s4-w64-l4"])
    ap.add_argument("--kernels", nargs="+", default=["numpy", "torch"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}; {KODAK[1]}x{KODAK[0]}, median of {args.runs}")
    for name in args.configs:
        kmac = macs_per_pixel(ENHANCE_CONFIGS[name]) / 1e3
        for kernel in args.kernels:
            for threads in args.threads:
                t = time_kernel(name, kernel, threads, args.runs)
                print(
                    f"{name:10s} {kmac:5.1f} kMAC/px {kernel:5s} {threads} thr "
                    f"{t.seconds:7.4f} s {t.gmacs:6.1f} GMAC/s (CPU {t.cpu_seconds:7.4f} s)"
                )


if __name__ == "__main__":
    main()
