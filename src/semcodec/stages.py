"""What each stage of an encode or decode reports: its seconds (``StageTimes``, kept by a
``Clock``) and its tiles (``TileProgress``). Standard library only, so the torch-free decoder,
the encoder, the batch engine and the benchmarks share it without click or torch; the bar that
shows it on a terminal is ``progress.py``'s."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

# called as progress(stage, done, total) after each tile of a tiled image (total 0: a stage began)
TileProgress = Callable[[str, int, int], None]


@dataclass
class StageTimes:
    """Wall and CPU seconds (all threads) per stage of one encode or decode (benchmarks)."""

    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)

    def copy(self) -> StageTimes:
        """An independent copy, to go on from without changing this one."""
        return StageTimes(dict(self.wall), dict(self.cpu))


class Clock:
    """Records wall and CPU seconds since the previous call under a stage name (benchmarks)."""

    def __init__(self, times: StageTimes | None = None):
        """Add to ``times`` (a fresh StageTimes if None), which the caller returns."""
        self.times = times if times is not None else StageTimes()
        self.t, self.c = time.perf_counter(), time.process_time()

    def __call__(self, stage: str) -> None:
        """Close the current stage."""
        t, c = time.perf_counter(), time.process_time()
        wall, cpu = self.times.wall, self.times.cpu
        wall[stage] = wall.get(stage, 0.0) + t - self.t
        cpu[stage] = cpu.get(stage, 0.0) + c - self.c
        self.t, self.c = t, c
