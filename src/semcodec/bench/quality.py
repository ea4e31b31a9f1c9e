"""Which quality metrics a benchmark measures and how each image pair is scored: PSNR and
MS-SSIM always (the schema's core and their BD-rates), SSIMULACRA 2 and Butteraugli when asked
for and installed; a metric that cannot run is absent from the results, with the reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # light at import: the CLI reads the names below without loading torch
    import numpy as np

__all__ = [
    "ALWAYS",
    "DEFAULT_METRICS",
    "EXTRA_FIELDS",
    "METRIC_NAMES",
    "MetricPlan",
    "parse_metrics",
    "plan_metrics",
    "score",
]

#: Every name ``--metrics`` accepts, in report order.
METRIC_NAMES: tuple[str, ...] = ("psnr", "ms-ssim", "ssimulacra2", "butteraugli")
#: Measured whatever is asked: the result schema, its aggregates and BD-rates are built on them.
ALWAYS: tuple[str, ...] = ("psnr", "ms-ssim")
#: ``--metrics`` default: butteraugli is opt-in (an external process per image, seconds each).
DEFAULT_METRICS = "psnr,ms-ssim,ssimulacra2"
#: The optional metrics' record / aggregate field (same name as the metric).
EXTRA_FIELDS: tuple[str, ...] = ("ssimulacra2", "butteraugli")

_DESCRIPTIONS = {
    "ssimulacra2": "SSIMULACRA 2 (Python port ssimulacra2 of libjxl's reference), 100 = "
    "identical, higher is better",
    "butteraugli": "Butteraugli distance, 3-norm (libjxl's butteraugli_main), lower is better",
}


def parse_metrics(spec: str | None) -> list[str]:
    """'psnr,ssimulacra2' → the metrics to measure (PSNR and MS-SSIM always included), in
    report order; ValueError names an unknown one."""
    names = [s.strip().lower() for s in (spec if spec is not None else DEFAULT_METRICS).split(",")]
    names = [{"msssim": "ms-ssim"}.get(n, n) for n in names if n]
    unknown = [n for n in names if n not in METRIC_NAMES]
    if unknown:
        raise ValueError(
            f"unknown metric(s): {', '.join(unknown)}; known: {', '.join(METRIC_NAMES)}"
        )
    wanted = set(names) | set(ALWAYS)
    return [n for n in METRIC_NAMES if n in wanted]


def _version(name: str) -> str | None:
    """Installed package version of a metric's implementation (None if not a package)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _unavailable_reason(name: str) -> str | None:
    """Why an optional metric cannot run here (None when it can)."""
    from semcodec import metrics

    if name == "ssimulacra2":
        return metrics.ssimulacra2_unavailable_reason()
    return metrics.butteraugli_unavailable_reason()


@dataclass(frozen=True)
class MetricPlan:
    """The optional metrics that will be measured and the status of each one asked for."""

    extras: tuple[str, ...]
    info: dict[str, dict[str, Any]]

    @property
    def measured(self) -> list[str]:
        """Every metric in the records: the core two plus the available extras."""
        return [*ALWAYS, *self.extras]


def plan_metrics(requested: Sequence[str]) -> MetricPlan:
    """Check each requested optional metric once, before the run, so its absence is one note."""
    extras: list[str] = []
    info: dict[str, dict[str, Any]] = {}
    for name in requested:
        if name not in EXTRA_FIELDS:
            continue
        reason = _unavailable_reason(name)
        entry: dict[str, Any] = {
            "status": "skipped" if reason else "ok",
            "reason": reason,
            "description": _DESCRIPTIONS[name],
        }
        if name == "ssimulacra2":
            entry["version"] = _version("ssimulacra2")
        info[name] = entry
        if not reason:
            extras.append(name)
    return MetricPlan(tuple(extras), info)


def score(ref: np.ndarray, out: np.ndarray, extras: Sequence[str]) -> dict[str, float | None]:
    """The optional metrics of one decoded image; a failure raises, so the caller records the
    error instead of a substitute number."""
    from semcodec import metrics

    scorers = {"ssimulacra2": metrics.ssimulacra2, "butteraugli": metrics.butteraugli}
    return {name: scorers[name](ref, out) for name in extras}
