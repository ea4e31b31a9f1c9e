"""What one encode asks for (quality, effort, residual coder, gating, ROI, refinement, ...).

A frozen value passed to each ``Codec`` call, so one loaded model serves any number of
encodes with different settings side by side (threads of a Dask worker): the Codec holds the
model only, never a call's settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from semcodec.defaults import (
    CHROMAS,
    DEFAULT_CHROMA,
    DEFAULT_EFFORT,
    DEFAULT_QUALITY,
    DEFAULT_RESIDUAL,
    EFFORTS,
)
from semcodec.encoder.gating import GatingConfig
from semcodec.format.metadata import KINDS as METADATA_KINDS
from semcodec.format.residual import BACKENDS
from semcodec.format.roi import RoiConfig

if TYPE_CHECKING:  # refine.py needs torch; options are built before torch is imported
    from semcodec.encoder.refine import RefineConfig

__all__ = ["ANALYSIS_FIELDS", "SETTINGS", "EncodeOptions"]

# the fields ``Codec.analyse`` consumes: an Analysis is reused only with the same values
ANALYSIS_FIELDS = ("refine", "metadata", "roi")
# the AVIF residual's layout of each chroma setting (None: the coder's own choice)
_LAYOUTS = {"444": None, "420": "4:2:0"}
MAX_REFINE = 1000  # refinement steps (--refine-steps)
# the names every entry point takes (semcodec.encode, Pillow's save, the batch task, the CLI's
# flags): EncodeOptions' fields, with roi_strength beside roi (EncodeOptions.from_kwargs)
SETTINGS = (
    "quality",
    "effort",
    "residual",
    "chroma",
    "metadata",
    "gating",
    "roi",
    "roi_strength",
    "refine",
)  # not ``enhance``: benchmarks' knob (the files without the ENHANCE layer), no flag


@dataclass(frozen=True)
class EncodeOptions:
    """One encode's settings; invalid values fail here, before any model runs."""

    quality: int = DEFAULT_QUALITY  # 0 (base layer only) .. 100
    effort: int = DEFAULT_EFFORT  # 1..9: encoder time for fewer bytes; decoding never depends on it
    residual: str = DEFAULT_RESIDUAL  # the residual layer's coder (format.residual.BACKENDS)
    gating: GatingConfig = field(default_factory=GatingConfig)  # per-tile prediction choice
    roi: RoiConfig | None = None  # classes that get the residual's bits (roi.parse_roi)
    refine: RefineConfig | None = None  # latent refinement (refine.py); None: off
    metadata: frozenset[str] = frozenset(METADATA_KINDS)  # input metadata kinds the file keeps
    enhance: bool = True  # False: no ENHANCE layer (benchmarks: the files without it)
    chroma: str = DEFAULT_CHROMA  # the AVIF residual's chroma layout: 444, or 420 everywhere

    def __post_init__(self) -> None:
        """Refuse settings no encode can honour, with the value in the message."""
        if isinstance(self.quality, bool) or not 0 <= int(self.quality) <= 100:
            raise ValueError(f"quality must be 0..100, got {self.quality}")
        if self.effort not in EFFORTS:
            raise ValueError(f"effort must be 1..9, got {self.effort}")
        if self.residual not in BACKENDS:
            raise ValueError(
                f"unknown residual backend {self.residual!r}; choose one of {', '.join(BACKENDS)}"
            )
        if self.chroma not in CHROMAS:
            raise ValueError(f"chroma must be one of {', '.join(CHROMAS)}, got {self.chroma!r}")
        if self.chroma != DEFAULT_CHROMA and self.residual != "avif":
            raise ValueError(f"chroma {self.chroma} needs the avif residual, not {self.residual}")
        unknown = set(self.metadata) - set(METADATA_KINDS)
        if unknown:
            raise ValueError(f"unknown metadata kinds {sorted(unknown)} (known: icc, exif, xmp)")
        object.__setattr__(self, "quality", int(self.quality))
        object.__setattr__(self, "effort", int(self.effort))
        object.__setattr__(self, "metadata", frozenset(self.metadata))
        object.__setattr__(self, "enhance", bool(self.enhance))

    def but(self, **changes: Any) -> EncodeOptions:
        """These options with some fields changed (validated again); self when none are."""
        return replace(self, **changes) if changes else self

    @classmethod
    def from_kwargs(cls, **settings: Any) -> EncodeOptions:
        """The one path from a user's settings (SETTINGS) to options, so every entry point takes
        the same names and values and refuses a bad one with the same ValueError.

        None is a setting's default; ``metadata`` is "all", "none", "icc,exif" or a set of
        kinds; ``gating`` True/False or a GatingConfig; ``roi`` "car,pedestrian:2", a list, a
        dict or a RoiConfig, with ``roi_strength`` (0..4); ``refine`` gradient steps (0: off)
        or a RefineConfig.
        """
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise ValueError(f"unknown encode setting {unknown[0]!r}; known: {', '.join(SETTINGS)}")
        given = {k: v for k, v in settings.items() if v is not None}
        roi = given.pop("roi", None)
        strength = given.pop("roi_strength", None)
        if roi is not None or strength is not None:
            from semcodec.encoder.roi_spec import parse_roi

            given["roi"] = parse_roi(roi, strength)
        if "metadata" in given:
            given["metadata"] = _metadata_of(given["metadata"])
        if "gating" in given:
            given["gating"] = _gating_of(given["gating"])
        if "refine" in given:
            given["refine"] = _refine_of(given["refine"])
        if "chroma" in given:
            given["chroma"] = str(given["chroma"])
        return cls(**given)

    def layout(self) -> str | None:
        """The residual layout every candidate is coded in; None: the backend's (AVIF 4:4:4)."""
        return _LAYOUTS[self.chroma]

    def analysis_key(self) -> tuple[Any, ...]:
        """The values an Analysis depends on (ANALYSIS_FIELDS)."""
        return tuple(getattr(self, name) for name in ANALYSIS_FIELDS)


def _metadata_of(value: Any) -> frozenset[str]:
    """The metadata kinds of "all", "none", "icc,exif" or an iterable of kinds (one message)."""
    from semcodec.format.metadata import parse_selection

    text = value if isinstance(value, str) else ",".join(str(kind) for kind in value)
    return parse_selection(text)


def _gating_of(value: Any) -> GatingConfig:
    """A GatingConfig of True/False or itself."""
    if isinstance(value, GatingConfig):
        return value
    if isinstance(value, bool):
        return GatingConfig(enabled=value)
    raise ValueError(f"gating must be True, False or a GatingConfig, got {value!r}")


def _refine_of(value: Any) -> RefineConfig | None:
    """A RefineConfig of a number of gradient steps (0: none) or itself."""
    from semcodec.encoder.refine_config import RefineConfig

    if isinstance(value, RefineConfig):
        return value if value.steps else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REFINE:
        raise ValueError(f"refine must be 0..{MAX_REFINE} gradient steps, got {value!r}")
    return RefineConfig(steps=value) if value else None
