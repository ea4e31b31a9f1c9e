"""The configurations a front benchmark runs: semcodec efforts, AVIF speeds in each chroma
layout, JPEG XL efforts, each named once so records, tables and the plot agree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ANCHOR", "CHROMAS", "Config", "configurations", "parse_ints"]

#: The BD-rate anchor: AVIF at libavif's default speed in 4:2:0 (what most AVIF files are).
ANCHOR = "avif-s6-420"
#: AVIF chroma layouts and Pillow's subsampling value of each.
CHROMAS = {"420": "4:2:0", "444": "4:4:4"}


@dataclass(frozen=True)
class Config:
    """One encoder configuration; ``name`` is its key in records and tables."""

    codec: str  # "semcodec", "avif" or "jxl"
    level: int  # semcodec / JPEG XL effort, AVIF speed
    chroma: str = ""  # AVIF: "420" or "444"
    enhance: bool = True  # semcodec: False scores the same files without their ENHANCE layer
    gating: bool = True  # semcodec: False codes with the generator's prediction in every tile
    #: AVIF: libaom options beyond the preset of its speed (Pillow's ``advanced``), ((key,
    #: value), ...); such a configuration is measured against the front, not part of it
    aom: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        """'semcodec-e5', 'semcodec-e5-plain', 'avif-s6-420', 'jxl-e7',
        'aom-s3-444-min-partition-size=8' (AVIF with libaom options)."""
        if self.codec == "avif":
            preset = f"s{self.level}-{self.chroma}"
            if self.aom:
                return f"aom-{preset}-" + "-".join(f"{k}={v}" for k, v in self.aom)
            return f"avif-{preset}"
        base = f"{self.codec}-e{self.level}"
        if not self.gating:
            base += "-ungated"
        return base if self.enhance else base + "-plain"

    @property
    def is_avif(self) -> bool:
        """Whether this configuration builds the front (an AVIF preset)."""
        return self.codec == "avif" and not self.aom


def parse_ints(spec: str, lo: int, hi: int, what: str) -> list[int]:
    """'1,3,5' → [1, 3, 5], each within lo..hi (ValueError names the bad one)."""
    out: list[int] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        try:
            v = int(part)
        except ValueError:
            raise ValueError(f"{what}: {part!r} is not a whole number") from None
        if not lo <= v <= hi:
            raise ValueError(f"{what}: {v} is outside {lo}..{hi}")
        if v not in out:
            out.append(v)
    return out


def configurations(
    efforts: Sequence[int],
    avif_speeds: Sequence[int],
    chromas: Sequence[str],
    jxl_efforts: Sequence[int] = (),
    ungated: Sequence[int] = (),
) -> list[Config]:
    """Every configuration of a run, the anchor included whatever the lists say."""
    unknown = [c for c in chromas if c not in CHROMAS]
    if unknown:
        raise ValueError(f"chroma must be one of {', '.join(CHROMAS)}, got {unknown[0]!r}")
    out = [Config("avif", s, c) for s in avif_speeds for c in chromas]
    if Config("avif", 6, "420") not in out:
        out.append(Config("avif", 6, "420"))
    out += [Config("jxl", e) for e in jxl_efforts]
    out += [Config("semcodec", e) for e in efforts]
    out += [Config("semcodec", e, gating=False) for e in ungated]
    return out
