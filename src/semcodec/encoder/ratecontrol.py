"""Rate control: find the highest encoder quality whose file fits a byte budget.

Kept separate from the CLI so the search can be tested with a fake encoder, and reused by
anything that needs a size target (``--target-size``, ``--target-bpp``, ``semcodec.encode``).

The size curve is not one monotone line from quality 0: quality 0 is the base layer alone
(map, compact layer, generator), while qualities 1..100 are residual files that grow with
quality and start below quality 0's size on many images (the residual then codes the image
itself, and no compact layer is sent). The search therefore bisects 1..100 and tries quality 0
only where quality 1 does not fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from semcodec.errors import SemcodecError

__all__ = [
    "Target",
    "TargetNotMet",
    "budget_of",
    "bytes_for_bpp",
    "fit_budget",
    "encode_to",
    "search_quality",
]

MIN_QUALITY = 0
MAX_QUALITY = 100
BASE_ONLY = 0  # the quality that writes no residual: the base layer alone


class TargetNotMet(SemcodecError):
    """No quality's file fits the budget: nothing is written (a script trusts the exit code)."""


@dataclass(frozen=True)
class Target:
    """A file budget in place of a quality: ``size`` bytes or ``bpp`` bits per pixel (one)."""

    size: int | None = None
    bpp: float | None = None

    def __post_init__(self) -> None:
        """Refuse a budget no file can be measured against, with the value in the message."""
        if (self.size is None) == (self.bpp is None):
            raise ValueError("give target_size or target_bpp, not both")
        if self.size is not None and (isinstance(self.size, bool) or int(self.size) < 1):
            raise ValueError(f"target_size must be at least 1 byte, got {self.size}")
        if self.bpp is not None and not float(self.bpp) > 0:
            raise ValueError(f"target_bpp must be above 0, got {self.bpp}")

    @classmethod
    def of(
        cls, quality: int | None, target_size: int | None, target_bpp: float | None
    ) -> Target | None:
        """The target of an entry point's settings (None: encode at the quality), checked once."""
        if target_size is None and target_bpp is None:
            return None
        if quality is not None:
            raise ValueError("give quality or a target (target_size, target_bpp), not both")
        return cls(target_size, target_bpp)

    def budget(self, width: int, height: int) -> int:
        """The byte budget of this target for an image of this size."""
        return budget_of(self.size, self.bpp, width, height)


def bytes_for_bpp(bpp: float, width: int, height: int) -> int:
    """Whole-file byte budget of a bits-per-pixel target, rounded down so the target is not exceeded."""
    if bpp < 0:
        raise ValueError(f"target bpp must be >= 0, got {bpp}")
    return int(bpp * width * height // 8)


def budget_of(target_size: int | None, target_bpp: float | None, width: int, height: int) -> int:
    """The byte budget of a size or a bits-per-pixel target (exactly one of them)."""
    if (target_size is None) == (target_bpp is None):
        raise ValueError("give exactly one of target_size and target_bpp")
    if target_size is not None:
        return target_size
    assert target_bpp is not None
    return bytes_for_bpp(target_bpp, width, height)


def _bisect(
    encode: Callable[[int], bytes], max_bytes: int, lo: int, hi: int
) -> tuple[int, bytes] | None:
    """The highest quality in [lo, hi] whose file fits, assuming size grows with quality;
    None when ``lo``'s does not fit. A returned file is always one that was measured to fit."""
    smallest = encode(lo)
    if len(smallest) > max_bytes:
        return None
    largest = encode(hi)
    if len(largest) <= max_bytes:
        return hi, largest
    good_q, good, bad_q = lo, smallest, hi  # invariant: good_q fits, bad_q does not
    while bad_q - good_q > 1:
        mid = (good_q + bad_q) // 2
        data = encode(mid)
        if len(data) <= max_bytes:
            good_q, good = mid, data
        else:
            bad_q = mid
    return good_q, good


def search_quality(
    encode_fn: Callable[[int], bytes],
    max_bytes: int,
    lo: int = MIN_QUALITY,
    hi: int = MAX_QUALITY,
) -> tuple[int, bytes, bool]:
    """The highest quality in [lo, hi] whose file has at most ``max_bytes``.

    Returns ``(quality, data, met)``. Qualities above 0 are bisected (size grows with them);
    quality 0, the base layer alone, is tried only when the lowest residual quality does not
    fit. A file with ``met=True`` was measured to fit, even if the encoder is not perfectly
    monotone. If none fits, returns the smallest file tried (the lowest residual quality's or
    quality 0's) with ``met=False``: the command line refuses it and names its size and quality.
    Each quality is encoded at most once; at most ``3 + ceil(log2(hi - lo))`` encodes.
    """
    if max_bytes < 0:
        raise ValueError(f"target size must be >= 0 bytes, got {max_bytes}")
    if not lo <= hi:
        raise ValueError(f"empty quality range {lo}..{hi}")
    cache: dict[int, bytes] = {}

    def encode(q: int) -> bytes:
        """Encode once per quality: encodes are the expensive part."""
        if q not in cache:
            cache[q] = encode_fn(q)
        return cache[q]

    first = max(lo, BASE_ONLY + 1)
    if first <= hi:
        found = _bisect(encode, max_bytes, first, hi)
        if found is not None:
            return found[0], found[1], True
    if lo == BASE_ONLY:
        base = encode(BASE_ONLY)
        if len(base) <= max_bytes:
            return BASE_ONLY, base, True
    q = min(cache, key=lambda k: (len(cache[k]), -k))  # the smallest file tried
    return q, cache[q], False


def fit_budget(encode_fn: Callable[[int], bytes], max_bytes: int) -> tuple[int, bytes]:
    """The highest quality's file within ``max_bytes``; TargetNotMet, naming the smallest file
    and its quality, when none fits."""
    quality, data, met = search_quality(encode_fn, max_bytes)
    if not met:
        raise TargetNotMet(
            f"target of {max_bytes} bytes cannot be met: the smallest file is {len(data)} bytes "
            f"(quality {quality}); nothing written"
        )
    return quality, data


def encode_to(
    codec: Any, image: Any, options: Any, target: Target | None, progress: Any = None
) -> tuple[int, bytes, Any]:
    """(quality, file, its EncodeStats) of one encode at the options' quality, or at the
    highest quality within ``target``: every entry point's encode, the networks run once."""
    analysis = codec.analyse(image, options, progress)
    stats = {}

    def encode(quality: int) -> bytes:
        """One quality's file, keeping its stats."""
        data, stats[quality] = codec.finish(analysis, options.but(quality=quality), progress)
        return data

    if target is None:
        quality, data = options.quality, encode(options.quality)
    else:
        budget = target.budget(analysis.img.width, analysis.img.height)
        quality, data = fit_budget(encode, budget)
    return quality, data, stats[quality]
