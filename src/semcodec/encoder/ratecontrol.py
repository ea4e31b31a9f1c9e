"""Rate control: find the highest encoder quality whose file fits a byte budget.

Kept separate from the CLI so the search can be tested with a fake encoder, and reused by
anything that needs a size target (``--target-size``, ``--target-bpp``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["bytes_for_bpp", "search_quality"]

MIN_QUALITY = 0
MAX_QUALITY = 100


def bytes_for_bpp(bpp: float, width: int, height: int) -> int:
    """Whole-file byte budget of a bits-per-pixel target, rounded down so the target is not exceeded."""
    if bpp < 0:
        raise ValueError(f"target bpp must be >= 0, got {bpp}")
    return int(bpp * width * height // 8)


def search_quality(
    encode_fn: Callable[[int], bytes],
    max_bytes: int,
    lo: int = MIN_QUALITY,
    hi: int = MAX_QUALITY,
) -> tuple[int, bytes, bool]:
    """Bisect quality in [lo, hi] for the largest output of at most ``max_bytes``.

    Returns ``(quality, data, met)``. Assumes size grows with quality (quality ``lo`` is the
    smallest file); a returned file with ``met=True`` is always verified to fit, even if the
    encoder is not perfectly monotone. If even ``lo`` is too large, returns ``lo``'s output with
    ``met=False``: the command line refuses it (no file over a budget, exit 1) and says its size.
    Each quality is encoded at most once; at most ``2 + ceil(log2(hi - lo))`` encodes.
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

    smallest = encode(lo)
    if len(smallest) > max_bytes:
        return lo, smallest, False
    largest = encode(hi)
    if len(largest) <= max_bytes:
        return hi, largest, True
    good_q, good, bad_q = lo, smallest, hi  # invariant: good_q fits, bad_q does not
    while bad_q - good_q > 1:
        mid = (good_q + bad_q) // 2
        data = encode(mid)
        if len(data) <= max_bytes:
            good_q, good = mid, data
        else:
            bad_q = mid
    return good_q, good, True
