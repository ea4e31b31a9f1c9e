"""A user's ROI specification ('car,pedestrian:2', a list or a dict) as a RoiConfig.

The library's words: errors (RoiError, a ValueError) name classes, weights and strength, never
a command-line flag; the command line adds its own (``--roi``) where it catches them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from semcodec.format.classes import CLASSES
from semcodec.format.roi import RoiConfig, RoiError

__all__ = ["RoiError", "parse_roi"]


def _class_id(name: str) -> int:
    """A class name's id; the one-line error lists the valid names."""
    key = name.strip().lower()
    if key not in CLASSES:
        raise RoiError(f"unknown ROI class {name.strip()!r}; valid classes: {', '.join(CLASSES)}")
    return CLASSES.index(key)


def _weight(text: str, name: str) -> float:
    """A per-class weight from 'name:W'."""
    try:
        w = float(text)
    except ValueError:
        raise RoiError(f"ROI weight of {name!r} is not a number: {text!r}") from None
    return round(w, 1)


def _entries(spec: str | Iterable[str] | Mapping[str, float]) -> Iterator[tuple[str, float]]:
    """(name, weight) pairs of 'car,pedestrian:2', a list of such items or a dict."""
    if isinstance(spec, Mapping):
        yield from ((str(k), float(v)) for k, v in spec.items())
        return
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    for item in items:
        name, sep, w = str(item).partition(":")
        if not name.strip():
            raise RoiError(f"empty ROI class name in {spec!r}; valid classes: {', '.join(CLASSES)}")
        yield name, (_weight(w, name) if sep else 1.0)


def parse_roi(
    spec: str | Iterable[str] | Mapping[str, float] | RoiConfig | None,
    strength: float | None = None,
    margin: int | None = None,
) -> RoiConfig | None:
    """The RoiConfig of a user's specification ('car,pedestrian:2'); None stays None."""
    if spec is None:
        if strength is not None:
            raise RoiError("an ROI strength needs ROI classes")
        return None
    if isinstance(spec, RoiConfig):
        base = spec
    else:
        weights: dict[int, float] = {}
        for name, w in _entries(spec):
            weights[_class_id(name)] = w
        base = RoiConfig(weights)
    return RoiConfig(
        dict(base.weights),
        base.strength if strength is None else round(float(strength), 1),
        base.margin if margin is None else int(margin),
    )
