"""Bjøntegaard delta rate (BD-rate) and delta distortion (BD-PSNR), two fit variants.

Both variants model log-rate as a function of distortion (for BD-rate) or distortion as a
function of log-rate (for BD-PSNR / BD-dist) and average the gap between the anchor and test
curves over the interval where both curves have data:

* ``"cubic"`` — the classic VCEG-M33 method: a least-squares cubic polynomial through all
  points of each curve, integrated analytically.
* ``"pchip"`` — the piecewise-cubic variant of the JVET/VCEG common-test-condition
  spreadsheets: monotone piecewise-cubic Hermite interpolation (Fritsch–Carlson PCHIP, the same
  slopes as ``scipy.interpolate.PchipInterpolator``), each piece integrated exactly.

BD-rate is returned in percent: negative means the test codec needs fewer bits for the same
distortion.  Invalid inputs (fewer than ``min_points`` usable points, non-overlapping ranges)
give ``nan`` and a human-readable reason instead of raising, so a benchmark report can carry on.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from semcodec.metrics import msssim_to_db  # re-exported: BD-rates on MS-SSIM use dB

Method = Literal["cubic", "pchip"]
METHODS: tuple[Method, ...] = ("cubic", "pchip")

__all__ = [
    "METHODS",
    "BDResult",
    "BDRateWarning",
    "Pchip",
    "bd_rate",
    "bd_rate_result",
    "bd_dist",
    "bd_dist_result",
    "bd_psnr",
    "msssim_to_db",
]


class BDRateWarning(UserWarning):
    """Emitted when a BD value is nan, so callers of the float API still learn why."""


@dataclass(frozen=True)
class BDResult:
    """A BD value with the reason it is nan (if it is) and the integration interval used."""

    value: float
    reason: str | None = None
    interval: tuple[float, float] | None = None

    @property
    def ok(self) -> bool:
        """True when the value is a finite number (callers branch on this, not on nan tests)."""
        return self.reason is None and math.isfinite(self.value)


class Pchip:
    """Monotone piecewise-cubic Hermite interpolant (Fritsch–Carlson), scipy-free.

    Slopes follow ``scipy.interpolate.PchipInterpolator``: weighted harmonic mean of the
    neighbouring secant slopes at interior knots (zero at local extrema), and the
    shape-preserving three-point formula at the ends.  Between knots where the data are
    monotone, the interpolant is monotone too.
    """

    def __init__(self, x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray):
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if x.ndim != 1 or x.shape != y.shape or x.size < 2:
            raise ValueError("Pchip needs two 1-D arrays of equal length >= 2")
        if not np.all(np.diff(x) > 0):
            raise ValueError("Pchip needs strictly increasing x")
        self.x, self.y = x, y
        self.d = self._slopes(x, y)

    @staticmethod
    def _slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Knot derivatives chosen so the interpolant does not overshoot monotone data."""
        h = np.diff(x)
        delta = np.diff(y) / h
        n = x.size
        d = np.zeros(n)
        if n == 2:
            d[:] = delta[0]
            return d
        for k in range(1, n - 1):
            a, b = delta[k - 1], delta[k]
            if a == 0.0 or b == 0.0 or np.sign(a) != np.sign(b):
                d[k] = 0.0
            else:
                w1 = 2.0 * h[k] + h[k - 1]
                w2 = h[k] + 2.0 * h[k - 1]
                d[k] = (w1 + w2) / (w1 / a + w2 / b)
        d[0] = Pchip._edge(h[0], h[1], delta[0], delta[1])
        d[-1] = Pchip._edge(h[-1], h[-2], delta[-1], delta[-2])
        return d

    @staticmethod
    def _edge(h0: float, h1: float, m0: float, m1: float) -> float:
        """One-sided three-point end slope, limited to keep the end piece shape-preserving."""
        d = ((2.0 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
        if np.sign(d) != np.sign(m0):
            return 0.0
        if np.sign(m0) != np.sign(m1) and abs(d) > abs(3.0 * m0):
            return 3.0 * m0
        return float(d)

    def _coeffs(self, k: int) -> tuple[float, float, float, float]:
        """Power-basis coefficients of piece k in s = x − x_k (so it can be integrated)."""
        h = self.x[k + 1] - self.x[k]
        delta = (self.y[k + 1] - self.y[k]) / h
        d0, d1 = self.d[k], self.d[k + 1]
        c2 = (3.0 * delta - 2.0 * d0 - d1) / h
        c3 = (d0 + d1 - 2.0 * delta) / (h * h)
        return float(self.y[k]), float(d0), float(c2), float(c3)

    def _piece(self, xv: np.ndarray) -> np.ndarray:
        """Index of the piece each x falls in (end pieces extend outwards)."""
        return np.clip(np.searchsorted(self.x, xv, side="right") - 1, 0, self.x.size - 2)

    def __call__(self, xq: float | np.ndarray) -> float | np.ndarray:
        """Evaluate the interpolant (the end pieces are extended beyond the data)."""
        xv = np.atleast_1d(np.asarray(xq, dtype=np.float64))
        coeffs = np.array([self._coeffs(k) for k in range(self.x.size - 1)])
        k = self._piece(xv)
        c0, c1, c2, c3 = coeffs[k].T
        s = xv - self.x[k]
        out = c0 + s * (c1 + s * (c2 + s * c3))
        return float(out[0]) if np.ndim(xq) == 0 else out

    def integrate(self, a: float, b: float) -> float:
        """Exact integral over [a, b] within the data range, summing the cubic pieces."""
        if b < a:
            return -self.integrate(b, a)
        total = 0.0
        for k in range(self.x.size - 1):
            lo, hi = max(a, self.x[k]), min(b, self.x[k + 1])
            if hi <= lo:
                continue
            c0, c1, c2, c3 = self._coeffs(k)

            def prim(s: float, c0=c0, c1=c1, c2=c2, c3=c3) -> float:
                return s * (c0 + s * (c1 / 2.0 + s * (c2 / 3.0 + s * c3 / 4.0)))

            total += prim(hi - self.x[k]) - prim(lo - self.x[k])
        return total


def _clean(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, what: str
) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Drop unusable points, sort by x and merge equal x, so the fits are well defined."""
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        return x, y, f"{what}: rates and distortions have different lengths"
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if x.size:
        ux, inv = np.unique(x, return_inverse=True)
        if ux.size != x.size:  # equal abscissae (e.g. two settings giving the same file)
            y = np.bincount(inv, weights=y) / np.bincount(inv)
            x = ux
    return x, y, None


def _prepare(
    rates: Sequence[float] | np.ndarray,
    dists: Sequence[float] | np.ndarray,
    what: str,
    min_points: int,
    rate_axis: bool,
) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Return (abscissa, ordinate) for one curve, or a reason why it cannot be used."""
    r = np.asarray(rates, dtype=np.float64).ravel()
    d = np.asarray(dists, dtype=np.float64).ravel()
    if r.shape != d.shape:
        return r, d, f"{what}: {r.size} rates but {d.size} distortions"
    with np.errstate(divide="ignore", invalid="ignore"):
        logr = np.where(r > 0, np.log(np.where(r > 0, r, 1.0)), np.nan)
    dropped = int(np.sum(~(np.isfinite(logr) & np.isfinite(d))))
    if rate_axis:
        x, y, why = _clean(logr, d, what)
    else:
        x, y, why = _clean(d, logr, what)
    if why:
        return x, y, why
    if x.size < min_points:
        extra = f" ({dropped} non-finite or non-positive dropped)" if dropped else ""
        axis = "rate" if rate_axis else "distortion"
        return (
            x,
            y,
            (f"{what}: {x.size} usable points with distinct {axis}{extra}, need >= {min_points}"),
        )
    return x, y, None


def _integral(x: np.ndarray, y: np.ndarray, lo: float, hi: float, method: Method) -> float:
    """Integral of the fitted curve y(x) over [lo, hi]."""
    if method == "cubic":
        p = np.polyint(np.polyfit(x, y, 3))
        return float(np.polyval(p, hi) - np.polyval(p, lo))
    if method == "pchip":
        return Pchip(x, y).integrate(lo, hi)
    raise ValueError(f"unknown BD method {method!r}; expected one of {METHODS}")


def _bd(
    anchor: tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray],
    test: tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray],
    method: Method,
    min_points: int,
    rate_axis: bool,
) -> BDResult:
    """Mean vertical gap between two fitted curves over their common abscissa range."""
    if method not in METHODS:
        raise ValueError(f"unknown BD method {method!r}; expected one of {METHODS}")
    xa, ya, why = _prepare(*anchor, "anchor", min_points, rate_axis)
    if why:
        return BDResult(math.nan, why)
    xt, yt, why = _prepare(*test, "test", min_points, rate_axis)
    if why:
        return BDResult(math.nan, why)
    lo, hi = max(xa[0], xt[0]), min(xa[-1], xt[-1])
    if not hi > lo:
        axis = "log-rate" if rate_axis else "distortion"
        return BDResult(
            math.nan,
            f"{axis} ranges do not overlap: anchor [{xa[0]:.4g}, {xa[-1]:.4g}], "
            f"test [{xt[0]:.4g}, {xt[-1]:.4g}]",
        )
    gap = (_integral(xt, yt, lo, hi, method) - _integral(xa, ya, lo, hi, method)) / (hi - lo)
    return BDResult(float(gap), None, (float(lo), float(hi)))


def bd_rate_result(
    anchor_rates: Sequence[float] | np.ndarray,
    anchor_dists: Sequence[float] | np.ndarray,
    test_rates: Sequence[float] | np.ndarray,
    test_dists: Sequence[float] | np.ndarray,
    method: Method = "pchip",
    min_points: int = 4,
) -> BDResult:
    """BD-rate in percent with the reason for nan, for reports that must explain gaps.

    Distortion is any quality measure where larger is better (PSNR, MS-SSIM in dB).  The
    interval is the overlapping distortion range; ``interval`` in the result is in those units.
    """
    r = _bd((anchor_rates, anchor_dists), (test_rates, test_dists), method, min_points, False)
    if not r.ok:
        return r
    return BDResult((math.exp(r.value) - 1.0) * 100.0, None, r.interval)


def bd_rate(
    anchor_rates: Sequence[float] | np.ndarray,
    anchor_dists: Sequence[float] | np.ndarray,
    test_rates: Sequence[float] | np.ndarray,
    test_dists: Sequence[float] | np.ndarray,
    method: Method = "pchip",
    min_points: int = 4,
) -> float:
    """BD-rate in percent (nan plus a BDRateWarning when it cannot be computed)."""
    r = bd_rate_result(anchor_rates, anchor_dists, test_rates, test_dists, method, min_points)
    if r.reason:
        warnings.warn(f"BD-rate is nan: {r.reason}", BDRateWarning, stacklevel=2)
    return r.value


def bd_dist_result(
    anchor_rates: Sequence[float] | np.ndarray,
    anchor_dists: Sequence[float] | np.ndarray,
    test_rates: Sequence[float] | np.ndarray,
    test_dists: Sequence[float] | np.ndarray,
    method: Method = "pchip",
    min_points: int = 4,
) -> BDResult:
    """BD-distortion (e.g. BD-PSNR in dB) over the common log-rate range, with reason."""
    return _bd((anchor_rates, anchor_dists), (test_rates, test_dists), method, min_points, True)


def bd_dist(
    anchor_rates: Sequence[float] | np.ndarray,
    anchor_dists: Sequence[float] | np.ndarray,
    test_rates: Sequence[float] | np.ndarray,
    test_dists: Sequence[float] | np.ndarray,
    method: Method = "pchip",
    min_points: int = 4,
) -> float:
    """BD-distortion in the distortion's units; positive means the test codec is better."""
    r = bd_dist_result(anchor_rates, anchor_dists, test_rates, test_dists, method, min_points)
    if r.reason:
        warnings.warn(f"BD-distortion is nan: {r.reason}", BDRateWarning, stacklevel=2)
    return r.value


bd_psnr = bd_dist
