"""The AVIF speed–size front: its points, its lower convex hull in log CPU, its value at a CPU.

Pure arithmetic on (encode CPU seconds, BD-rate %) pairs, so it is tested with known inputs.
A configuration is on the front when no other is both faster and smaller; between two front
points the front is a straight line in log CPU (the field's speed–size curves are drawn so),
and of those lines only the lower convex hull counts: a point above the line joining its
neighbours is beaten by mixing them (encoding some images at each).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["Point", "beyond", "front_at", "lower_hull", "pareto"]

Point = tuple[float, float]  # (encode CPU seconds, BD-rate %): lower is better in both


def pareto(points: Sequence[Point]) -> list[Point]:
    """The points no other beats in both CPU and BD-rate, fastest first (finite, CPU > 0)."""
    usable = sorted(
        (float(c), float(b)) for c, b in points if c > 0 and math.isfinite(c) and math.isfinite(b)
    )
    out: list[Point] = []
    for cpu, bd in usable:
        if not out or bd < out[-1][1]:
            if out and out[-1][0] == cpu:
                out[-1] = (cpu, bd)
            else:
                out.append((cpu, bd))
    return out


def _cross(o: Point, a: Point, b: Point) -> float:
    """z of (a − o) × (b − o) with x = log CPU: > 0 when o → a → b turns left."""
    ox, ax, bx = math.log(o[0]), math.log(a[0]), math.log(b[0])
    return (ax - ox) * (b[1] - o[1]) - (a[1] - o[1]) * (bx - ox)


def lower_hull(points: Sequence[Point]) -> list[Point]:
    """The front: the lower convex hull of the Pareto points in (log CPU, BD-rate), fastest
    first; BD-rate falls along it and each step buys less per doubling of CPU."""
    hull: list[Point] = []
    for p in pareto(points):
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) <= 0:
            hull.pop()
        hull.append(p)
    return hull


def front_at(hull: Sequence[Point], cpu: float) -> float | None:
    """The front's BD-rate at an encode CPU: linear in log CPU between hull points, its
    slowest point's beyond them (more CPU never has to cost bytes); None below its fastest
    point (the front has no configuration that fast)."""
    if not hull or not cpu > 0:
        return None
    if cpu < hull[0][0]:
        return None
    for (c0, b0), (c1, b1) in zip(hull, hull[1:], strict=False):
        if cpu <= c1:
            t = (math.log(cpu) - math.log(c0)) / (math.log(c1) - math.log(c0))
            return b0 + t * (b1 - b0)
    return hull[-1][1]


def beyond(bd_rate: float | None, front: float | None) -> float | None:
    """Points a configuration lies beyond the front at its CPU (positive: fewer bytes than
    the front; negative: behind it); None where either is unknown."""
    if bd_rate is None or front is None or not math.isfinite(bd_rate):
        return None
    return front - bd_rate
