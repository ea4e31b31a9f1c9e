"""How the networks use this CPU: bf16 only where it is native and faster, all cores, same files.

- **bf16.** Autocast to bf16 speeds up segmentation and CompNet on CPUs with native bf16
  (AVX-512 BF16, AMX) but is emulated, about 75x slower, everywhere else. ``bf16_decision``
  decides once per process: native support (CPU flags, and oneDNN not capped below it by
  ``ONEDNN_MAX_CPU_ISA``) and a short measurement that bf16 is faster, made once per machine
  and kept in the user's cache folder (``bf16_cache_path``), so that two commands on one
  machine never decide differently under different load; ``SEMCODEC_BF16=0|1`` overrides. The decoder never uses bf16 (the generator is integer-exact, see intgrid/generator_torch.py).
- **Threads.** oneDNN's float results depend on the thread count, and the encoder's stored
  outputs (labels, compact symbols) must not. ``run_parallel`` runs independent pieces of
  work, each on one thread, side by side on up to torch's thread count: the split depends on
  the image size only, so files are identical with 1, 2 or 64 threads.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch

T = TypeVar("T")

BF16_ENV = "SEMCODEC_BF16"
_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# oneDNN ISA caps (ONEDNN_MAX_CPU_ISA) at or above which bf16 kernels are native
_BF16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16",
              "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "AVX10_2_512",
              "AVX10_2_512_AMX_2", "ALL", "DEFAULT")  # fmt: skip


def cpu_model() -> str:
    """The CPU's marketing name (/proc/cpuinfo), for every timing we print."""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is missing)."""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def isa_cap() -> str | None:
    """oneDNN's instruction-set cap from the environment (None: the CPU's best)."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    return cap.strip().upper() if cap else None


_FROM_ENV = "from-env"


def native_bf16(flags: frozenset[str] | None = None, cap: str | None = _FROM_ENV) -> bool:
    """Whether bf16 convolutions run natively: the CPU has them and oneDNN may use them.

    cap is oneDNN's ISA cap (None: uncapped); by default it is read from the environment.
    """
    flags = cpu_flags() if flags is None else flags
    cap = isa_cap() if cap == _FROM_ENV else cap
    if flags:
        has = any(f in flags for f in _BF16_FLAGS)
    else:  # no cpuinfo: ask torch (which ignores the oneDNN cap)
        has = bool(torch.cpu._is_avx512_bf16_supported())
    return has and (cap is None or cap in _BF16_ISAS)


@dataclass(frozen=True)
class Bf16Decision:
    """Whether the encoder networks autocast to bf16, and why (shown by `semcodec doctor`)."""

    use: bool
    reason: str


def bf16_autocast(enabled: bool):
    """CPU bf16 autocast for the encoder networks, a no-op when disabled (see bf16_decision)."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)


def _measure_speedup() -> float:
    """fp32 seconds / bf16 seconds of a convolution shaped like the encoder's (one thread)."""
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).eval()
    x = torch.randn(1, 64, 96, 96, generator=torch.Generator().manual_seed(0))
    best = {}
    with torch.no_grad(), single_thread():
        for bf16 in (False, True, False, True):
            with bf16_autocast(bf16):
                conv(x)  # warm-up (kernel creation)
                t = time.perf_counter()
                for _ in range(3):
                    conv(x)
                dt = time.perf_counter() - t
            best[bf16] = min(best.get(bf16, dt), dt)
    return best[False] / best[True]


def bf16_cache_path() -> Path:
    """Where this machine's measured bf16 gain is kept: one file per CPU, ISA cap and torch."""
    base = os.environ.get("SEMCODEC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "semcodec",
    )
    key = "|".join((cpu_model(), ",".join(sorted(cpu_flags())), isa_cap() or "", torch.__version__))
    return Path(base) / f"bf16-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def _cached_gain(cache: Path) -> float | None:
    """The gain measured earlier on this machine (None: none yet, or an unreadable file)."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        gain = float(json.loads(cache.read_text())["gain"])
        if gain > 0:
            return gain
    return None


def _keep_gain(cache: Path, gain: float) -> None:
    """Record the measured gain for later processes (atomic; silently skipped if unwritable)."""
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"gain": gain, "cpu": cpu_model(), "torch": torch.__version__}))
        os.replace(tmp, cache)


def decide_bf16(
    env: dict[str, str] | None = None,
    native: bool | None = None,
    speedup: Callable[[], float] = _measure_speedup,
    cache: Path | None = None,
) -> Bf16Decision:
    """The bf16 policy: the override, else native support and a measured gain of 10 % or more
    (read from ``cache`` where an earlier process measured it, else measured and kept there)."""
    env = os.environ if env is None else env
    forced = env.get(BF16_ENV, "").strip().lower()
    if forced in ("0", "no", "off", "false"):
        return Bf16Decision(False, f"off ({BF16_ENV}={forced})")
    if forced in ("1", "yes", "on", "true"):
        return Bf16Decision(True, f"on ({BF16_ENV}={forced})")
    if not (native_bf16() if native is None else native):
        return Bf16Decision(False, "off (no native bf16: it would be emulated)")
    gain = _cached_gain(cache) if cache is not None else None
    how = "measured once on this machine" if gain is not None else "measured"
    if gain is None:
        gain = speedup()
        if cache is not None:
            _keep_gain(cache, gain)
    if gain < 1.1:
        return Bf16Decision(False, f"off (native, but {how} {gain:.2f}x of fp32)")
    return Bf16Decision(True, f"on (native, {how} {gain:.2f}x faster than fp32)")


@functools.cache
def bf16_decision() -> Bf16Decision:
    """The process-wide bf16 decision (made on first use, from this machine's kept measurement)."""
    return decide_bf16(cache=bf16_cache_path())


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """torch on one intra-op thread inside the block (restored after)."""
    previous = torch.get_num_threads()
    if previous == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run_parallel(tasks: Sequence[Callable[[], T]], workers: int | None = None) -> list[T]:
    """Run each task on one thread, up to `workers` (default: torch's thread count) at a time.

    Each task's result is what it computes alone on one thread, so the results do not depend
    on how many workers there are; the caller's split must depend on its input only.
    """
    workers = max(1, min(len(tasks), workers or torch.get_num_threads()))
    with single_thread():
        if workers == 1:
            return [t() for t in tasks]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(lambda t: t(), tasks))


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_THRESHOLD = 4 << 20  # encoder networks: their worker threads do not share heaps
MMAP_THRESHOLD_NETWORK = 32 << 20  # while a network runs: its layers reused from the heap
TRIM_THRESHOLD = 128 << 10  # glibc's default, which an explicit mmap threshold keeps


def _mallopt(threshold: int, trim: int = TRIM_THRESHOLD) -> bool:
    """Set glibc's mmap and trim thresholds (False where that is not possible)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, trim)
        )
    except (OSError, AttributeError):
        return False


#: a worker process with one torch thread: large blocks stay in its one heap, freed memory is
#: kept for the next file (see keep_heap)
WORKER_MMAP_THRESHOLD = 256 << 20
WORKER_TRIM_THRESHOLD = 512 << 20
_KEEP_HEAP = False


def keep_heap() -> bool:
    """Keep freed memory in the heap: for a batch worker with one torch thread, where the 4 MB
    threshold's reason (per-thread heaps that grow) does not hold and its page faults do cost:
    a Kodak encode took 1.25 s of CPU (0.27 s system) instead of 0.81 s (0.005 s system) on one
    thread of the 2-core AMD EPYC, peak RSS 483 against 502 MiB. Skipped like
    return_large_frees where the user set MALLOC_MMAP_THRESHOLD_ or libc is not glibc."""
    global _KEEP_HEAP
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not platform.libc_ver()[0] == "glibc":
        return False
    _KEEP_HEAP = True
    return _mallopt(WORKER_MMAP_THRESHOLD, WORKER_TRIM_THRESHOLD)


@functools.cache
def return_large_frees() -> bool:
    """Serve allocations over 4 MB by mmap, so freed activations go back to the OS (glibc).

    glibc raises its mmap threshold after large frees and then keeps big tensors in per-thread
    heaps, which the encoder's worker threads do not share: peak RSS of a 768x512 encode grew
    to 949 MiB that way (AVX2, 2 threads); a fixed 4 MB threshold keeps it at 755 MiB. The
    generator and the segmentation network raise it while they run (``network_heap``).
    Skipped where the user set MALLOC_MMAP_THRESHOLD_ or libc is not glibc.
    """
    if _KEEP_HEAP:  # a one-thread worker keeps its heap (keep_heap)
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not platform.libc_ver()[0] == "glibc":
        return False
    return _mallopt(MMAP_THRESHOLD)


@contextlib.contextmanager
def network_heap() -> Iterator[None]:
    """A 32 MB mmap threshold (64 MB trim) while a network whose layer outputs are a few MB
    runs, the 4 MB one again after it: at 4 MB each such output is a fresh mmap with its page
    faults. The generator's 9 MB outputs: decode 450 instead of 370 ms at 768x512; the
    segmentation network's 4–10 MB at its working scale: 0.33 instead of 0.21 s per Kodak
    image in the encoder (both AVX2)."""
    active = return_large_frees() and not _KEEP_HEAP
    if active:  # freed layers stay in the heap for the next one instead of being trimmed
        _mallopt(MMAP_THRESHOLD_NETWORK, 2 * MMAP_THRESHOLD_NETWORK)
    try:
        yield
    finally:
        if active:
            _mallopt(MMAP_THRESHOLD)


def diagnostics() -> dict[str, str]:
    """What `semcodec doctor` prints: versions, CPU, ISA, bf16 and threads."""
    decision = bf16_decision()
    return {
        "semcodec": _version(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "torch cpu capability": torch.backends.cpu.get_cpu_capability(),
        "oneDNN ISA cap": isa_cap() or "none (the CPU's best)",
        "native bf16": "yes" if native_bf16() else "no",
        "bf16 autocast (encoder)": decision.reason,
        "threads": str(torch.get_num_threads()),
        "decoder arithmetic": "integer grid (bit-exact on every CPU and thread count)",
    }


def _version() -> str:
    """The installed package version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("semcodec")
    except PackageNotFoundError:
        return "unknown"
