"""Throughput of the integer enhancement network's kernels: GMAC/s on a Kodak-size picture.

``semcodec bench kernels [--configs small-s2,s4-w64-l4] [--threads 1,2]`` (``python -m
semcodec.bench.kernels`` runs the same command) times ``IntEnhancer.correction`` with a seeded
random table of each configuration, numpy and torch kernels, at each thread count (numpy: the
kernel's pool, BLAS on one thread; torch: its intra-op threads), and prints the median of the
runs. Set the instruction set through the environment first (ONEDNN_MAX_CPU_ISA=AVX2
ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell OMP_NUM_THREADS=1), and say the machine's
load with the figures.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import click
import numpy as np

from semcodec.models.enhance import ENHANCE_CONFIGS, EnhanceConfig

KODAK = (512, 768)  # rows, columns
KERNELS = ("numpy", "torch")  # the integer network's convolutions: numpy's or torch's


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


class _CommaList(click.ParamType):
    """A comma-separated list (``small-s2,s4-w64-l4``, ``1,2``): names each checked against the
    known ones, or whole numbers of at least 1 (``kind=int``)."""

    name = "list"

    def __init__(self, known: list[str] | None = None, kind: type = str) -> None:
        self.known, self.kind = known, kind

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The list, or one usage error naming the first bad item."""
        if isinstance(value, list):
            return value
        out = []
        for item in (i.strip() for i in str(value).split(",")):
            if self.known is not None and item not in self.known:
                self.fail(f"unknown {item!r}; known: {', '.join(self.known)}", param, ctx)
            try:
                out.append(self.kind(item))
            except ValueError:
                self.fail(f"{item!r} is not a whole number", param, ctx)
            if self.kind is int and out[-1] < 1:
                self.fail(f"{item!r} must be at least 1", param, ctx)
        return out


@click.command("kernels", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--configs",
    type=_CommaList(sorted(ENHANCE_CONFIGS)),
    default="small-s2,s4-w64-l4",
    show_default=True,
    help="Comma-separated enhancement configurations (models.enhance.ENHANCE_CONFIGS).",
)
@click.option(
    "--kernels",
    type=_CommaList(list(KERNELS)),
    default=",".join(KERNELS),
    show_default=True,
    help="Comma-separated kernels.",
)
@click.option(
    "--threads",
    type=_CommaList(kind=int),
    default="1,2",
    show_default=True,
    help="Comma-separated thread counts.",
)
@click.option(
    "--runs", type=click.IntRange(min=1), default=5, show_default=True, help="Timed runs (median)."
)
def kernels_command(configs: list[str], kernels: list[str], threads: list[int], runs: int) -> None:
    """Throughput of the integer enhancement network's kernels on a Kodak-size picture: one line
    per configuration, kernel and thread count (with the load average: on a shared machine the
    CPU seconds tell more than the wall seconds)."""
    click.echo(f"load average {os.getloadavg()[0]:.2f}; {KODAK[1]}x{KODAK[0]}, median of {runs}")
    for name in configs:
        kmac = macs_per_pixel(ENHANCE_CONFIGS[name]) / 1e3
        for kernel in kernels:
            for n in threads:
                t = time_kernel(name, kernel, n, runs)
                click.echo(
                    f"{name:10s} {kmac:5.1f} kMAC/px {kernel:5s} {n} thr "
                    f"{t.seconds:7.4f} s {t.gmacs:6.1f} GMAC/s (CPU {t.cpu_seconds:7.4f} s)"
                )


if __name__ == "__main__":
    kernels_command()
