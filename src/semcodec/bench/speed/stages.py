"""Speed benchmark, what measuring and reporting share: the stages an encode and a decode are
timed in, and the targets they are held to (one module, so that neither imports the other)."""

from __future__ import annotations

#: Targets of the speed issues, seconds on a 768×512 input at 2 threads.
TARGETS: dict[str, float] = {"segmentation": 1.5, "generator": 0.5}
#: Whole-codec targets on 768×512 Kodak images, 2 threads of an AVX2-only machine:
#: encode at quality 50, decode, and peak resident memory (MB = 10^6 bytes).
CODEC_TARGETS: dict[str, float] = {"encode_s": 2.0, "decode_s": 0.6, "peak_rss_mb": 1000.0}
CODEC_TARGET_QUALITY = 50
ENCODE_STAGES: tuple[str, ...] = (
    "input",
    "segmentation",
    "compnet",
    "map_coding",
    "compact_coding",
    "generator",
    "residual_coding",
    "enhancement",
    "container",
    "other",
)
DECODE_STAGES: tuple[str, ...] = (
    "container",
    "map_coding",
    "compact_coding",
    "generator",
    "residual_coding",
    "enhancement",
    "other",
)
