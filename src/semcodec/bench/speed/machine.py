"""Speed benchmark, the machine a run measures on: CPU, RAM, load, library versions and
installed weights, which speed numbers mean nothing without, and whether the CPU is too busy
to trust them. Parent side: light imports only."""

from __future__ import annotations

import contextlib
import os
import platform
from importlib import resources
from pathlib import Path
from typing import Any

from semcodec.bench import common

__all__ = ["busy_warning", "default_weights_available", "library_versions", "machine_info"]


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


def busy_warning(m: dict[str, Any], threads: int, during: bool = False) -> list[str]:
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
