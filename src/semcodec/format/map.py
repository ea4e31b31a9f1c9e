"""Lossless context-adaptive coder for the semantic label map (design element A1).

Why this design: label maps are mostly large uniform regions, so the useful information is
*where the class changes* and *to which neighbour's class*. Each label is coded relative to its
causal neighbours (left, top, top-right, top-left): the context is the equality pattern of those
four labels (15 set partitions, plus the class itself when all four agree), and the coded symbol
is the rank of the label among the distinct neighbour classes, or an escape followed by the class
among the remaining ones (one adaptive class-frequency table). Statistics are shared across
classes, so they are learned quickly even on the small 1/8-resolution maps. All probabilities are
adaptive integer counts divided once by their total, so encoder and decoder agree bit for bit and
no table is stored.

Payload layout (the container gives the exact payload length and the image size):

* constant map: ``0x00, class``;
* coded map: ``0x01``, bitmask of the classes present (``ceil(num_classes / 8)`` bytes, LSB
  first), varint number of 32-bit words, the range coder's words (little endian).
"""

from __future__ import annotations

import constriction
import numpy as np

from semcodec.errors import CorruptData
from semcodec.format.varint import get_varint, put_varint

__all__ = ["encode_map", "decode_map", "check_payload_size", "MAX_SYMBOLS"]

MAX_SYMBOLS = 1 << 26
"""Largest map (h*w) accepted, so a bogus size cannot make the decoder allocate gigabytes."""

_MODE_CONSTANT = 0x00
_MODE_CODED = 0x01

_INC = 16  # count increment per coded symbol
_LIMIT = 256  # halve a multi-outcome table when its total exceeds this (fast adaptation)
_LIMIT_FLAT = 2048  # halve the binary "all neighbours agree" tables later (skewed statistics)
_LIMIT_ESC = 128  # the escape class table tracks recently seen classes (measured on CamVid)
_INIT = 1
_CACHE_STATES = 1 << 16  # probability arrays kept per map, at most (a Kodak map: ~2,000)


def _canonical_patterns() -> dict[tuple[int, ...], int]:
    """Number every equality pattern of 1 or 4 neighbours (restricted growth strings)."""
    pats: list[tuple[int, ...]] = [(0,)]

    def grow(prefix: tuple[int, ...]) -> None:
        if len(prefix) == 4:
            pats.append(prefix)
            return
        for v in range(max(prefix) + 2):
            grow(prefix + (v,))

    grow((0,))
    return {p: i for i, p in enumerate(pats)}


_PATTERNS = _canonical_patterns()


# A coded map spends at least log2(LIMIT_FLAT / (LIMIT_FLAT - 1)) bits per label (its most
# skewed adaptive table is halved at that total); a range coder cannot write less than the
# information content, so shorter payloads cannot describe the declared size.
_MIN_BITS = float(np.log2(_LIMIT_FLAT / (_LIMIT_FLAT - 1)))
PLAUSIBLE = 0.5  # safety factor on the payload lower bounds (rounding, coder flush)


def check_payload_size(data: bytes, height: int, width: int, what: str) -> None:
    """Refuse a coded map too short for height x width labels, before any per-label loop."""
    need = int(height * width * _MIN_BITS * PLAUSIBLE / 8) - 16
    if data[:1] == bytes([_MODE_CODED]) and len(data) < need:
        raise CorruptData(
            f"semantic map layer of {len(data)} bytes is too short for {what} (needs >= {need})"
        )


def _check_num_classes(num_classes: int) -> None:
    """Reject a class count that cannot index a uint8 map."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
        raise TypeError(f"num_classes must be an int, got {type(num_classes).__name__}")
    if not 1 <= num_classes <= 256:
        raise ValueError(f"num_classes must be in 1..256, got {num_classes}")


def _check_size(height: int, width: int) -> None:
    """Reject sizes that are empty or too large to allocate safely."""
    for name, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    if height * width > MAX_SYMBOLS:
        raise ValueError(f"map of {height}x{width} exceeds {MAX_SYMBOLS} symbols")


Coder = constriction.stream.queue.RangeEncoder | constriction.stream.queue.RangeDecoder


def _stay_probs(tab: list[int], run: int) -> tuple[np.ndarray, list[list[int]]]:
    """(run, 2) probabilities of a binary "all neighbours agree" table over ``run`` labels
    that each keep the neighbours' class, and the table after each (run + 1 states): the
    same floats and counts as ``run`` single steps of the context loop."""
    a, b = tab
    probs, states = [], [[a, b]]
    for _ in range(run):
        total = float(a + b)
        probs.append([a / total, b / total])
        a += _INC
        if a + b > _LIMIT_FLAT:
            a, b = (a + 1) >> 1, (b + 1) >> 1
        states.append([a, b])
    return np.array(probs), states


def _agree_run(prev: list[int], x: int, v: int) -> int:
    """How many labels from x on have top-left, top and top-right neighbours all equal to v
    (the row above, its last label repeated past the edge)."""
    last = len(prev) - 1
    n = 0
    while (
        x + n <= last
        and prev[x + n - 1] == v
        and prev[x + n] == v
        and prev[min(x + n + 1, last)] == v
    ):
        n += 1
    return n


def _run(
    height: int, width: int, m: int, symbols: list[list[int]] | None, coder: Coder
) -> tuple[list[list[int]], Coder]:
    """The one context loop shared by encoder and decoder (``symbols is None`` → decode).

    Labels are compact class indices ``0..m-1`` (``m >= 2``). Returns the coded/decoded rows
    and the coder at its end (the decoder may be a clone of the one given).

    Two speed-ups leave the bits as they were. A table's probabilities are made once per
    distinct state of its counts (``cache``). And where a stretch of labels has all four
    neighbours equal to the left one's class (one binary table, whose states follow from the
    count rule alone), the labels that keep that class are coded in one call: the encoder
    knows how many; the decoder decodes the whole stretch as if each did, and where one did
    not (or the bits after it fit no label of those models), decodes again from a clone
    taken before, up to that label.
    """
    model = constriction.stream.model.Categorical(perfect=False)
    encoding = symbols is not None
    patterns = _PATTERNS
    agree = patterns[(0, 0, 0, 0)] * 257  # + class + 1: the key of "all four are that class"
    first_row = patterns[(0,)] * 257
    # context key -> adaptive counts over (k distinct neighbours + escape)
    tables: dict[int, list[int]] = {}
    esc = [_INIT] * m  # class frequencies for escapes
    buf = np.zeros(1, dtype=np.int32)
    rows: list[list[int]] = []
    prev: list[int] = []
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def code(counts: list[int], n: int, sym: int) -> int:
        """Code one symbol over the first ``n`` entries of ``counts`` (n >= 2)."""
        sub = tuple(counts[:n])
        p = cache.get(sub)
        if p is None:  # counts over their total (float division, correctly rounded as numpy's)
            if len(cache) >= _CACHE_STATES:  # bounded memory whatever the map
                cache.clear()
            total = float(sum(sub))
            p = cache[sub] = np.array([[c / total for c in sub]])
        if encoding:
            buf[0] = sym
            coder.encode(buf, model, p)
            return sym
        return int(coder.decode(model, p)[0])

    def stays(row: list[int], x: int, run: int, key: int) -> int:
        """Code the labels from x that keep class row[x - 1], as far as ``run``; how many."""
        nonlocal coder
        v = row[x - 1]
        tab = tables.setdefault(key, [_INIT, _INIT])
        probs, states = _stay_probs(tab, run)
        if encoding:
            n = 0
            while n < run and row[x + n] == v:
                n += 1
            if n:
                coder.encode(np.zeros(n, np.int32), model, probs[:n])
        else:
            before = coder.clone()
            try:
                escapes = np.flatnonzero(coder.decode(model, probs))
            except Exception:  # past the stretch's end the bits may fit no label: one by one
                coder = before
                n = 0
                while n < run:
                    mark = coder.clone()
                    if coder.decode(model, probs[n : n + 1])[0]:
                        coder = mark
                        break
                    n += 1
            else:
                n = int(escapes[0]) if len(escapes) else run
                if n < run:  # the stretch ends at label n: decode again, up to it
                    coder = before
                    if n:
                        coder.decode(model, probs[:n])
            row[x : x + n] = [v] * n
        tab[:] = states[n]
        return n

    for y in range(height):
        row = symbols[y] if encoding else [0] * width
        x = 0
        while x < width:
            if x > 0:  # a stretch that keeps the left label's class, coded at once
                v = row[x - 1]
                run = width - x if y == 0 else _agree_run(prev, x, v)
                if run > 1:
                    x += stays(row, x, run, (first_row if y == 0 else agree) + v + 1)
                    if x >= width:
                        break
            if y == 0:
                if x == 0:
                    cands: list[int] = []
                    pat: tuple[int, ...] = ()
                else:
                    cands = [row[x - 1]]
                    pat = (0,)
            else:
                t = prev[x]
                left = row[x - 1] if x > 0 else t
                tr = prev[x + 1] if x + 1 < width else t
                tl = prev[x - 1] if x > 0 else t
                cands = [left]
                pat_l = [0]
                for v in (t, tr, tl):
                    if v in cands:
                        pat_l.append(cands.index(v))
                    else:
                        pat_l.append(len(cands))
                        cands.append(v)
                pat = tuple(pat_l)
            k = len(cands)
            sym = row[x] if encoding else -1
            if k == 0:
                idx = k  # first pixel: always an "escape"
            else:
                key = patterns[pat] * 257 + (cands[0] + 1 if k == 1 else 0)
                tab = tables.get(key)
                if tab is None:
                    tab = [_INIT] * (k + 1)
                    tables[key] = tab
                n = k + 1 if k < m else k  # no escape when every class is a neighbour
                if encoding:
                    idx = cands.index(sym) if sym in cands else k
                else:
                    idx = 0
                idx = code(tab, n, idx)
                tab[idx] += _INC
                if sum(tab) > (_LIMIT_FLAT if k == 1 else _LIMIT):
                    for i in range(k + 1):
                        tab[i] = (tab[i] + 1) >> 1
            if idx < k:
                sym = cands[idx]
            else:
                rest = [c for c in range(m) if c not in cands]
                if len(rest) == 1:
                    sym = rest[0]
                else:
                    j = rest.index(sym) if encoding else 0
                    j = code([esc[c] for c in rest], len(rest), j)
                    sym = rest[j]
                esc[sym] += _INC
                if sum(esc) > _LIMIT_ESC:
                    for i in range(m):
                        esc[i] = (esc[i] + 1) >> 1
            row[x] = sym
            x += 1
        rows.append(row)
        prev = row
    return rows, coder


def encode_map(labels: np.ndarray, num_classes: int) -> bytes:
    """Losslessly code a (h, w) uint8 label map whose values are < num_classes."""
    _check_num_classes(num_classes)
    if not isinstance(labels, np.ndarray) or labels.ndim != 2:
        raise ValueError("labels must be a 2-D numpy array")
    if labels.dtype != np.uint8:
        raise ValueError(f"labels must be uint8, got {labels.dtype}")
    h, w = labels.shape
    _check_size(h, w)
    present = np.flatnonzero(np.bincount(labels.ravel(), minlength=256))
    if present[-1] >= num_classes:
        raise ValueError(f"label {int(present[-1])} out of range for {num_classes} classes")
    if len(present) == 1:
        return bytes([_MODE_CONSTANT, int(present[0])])
    lut = np.zeros(256, dtype=np.int64)
    lut[present] = np.arange(len(present))
    compact = lut[labels].tolist()
    enc = constriction.stream.queue.RangeEncoder()
    _run(h, w, len(present), compact, enc)
    words = enc.get_compressed().astype("<u4", copy=False)
    mask = np.zeros((num_classes + 7) // 8 * 8, dtype=np.uint8)
    mask[present] = 1
    mask_bytes = np.packbits(mask, bitorder="little").tobytes()
    return bytes([_MODE_CODED]) + mask_bytes + put_varint(len(words)) + words.tobytes()


def decode_map(data: bytes, height: int, width: int, num_classes: int) -> np.ndarray:
    """Inverse of encode_map; raises CorruptData on any malformed payload."""
    _check_num_classes(num_classes)
    _check_size(height, width)
    data = bytes(data)
    if not data:
        raise CorruptData("semantic map: empty payload")
    mode = data[0]
    if mode == _MODE_CONSTANT:
        if len(data) != 2:
            raise CorruptData("semantic map: bad constant-map payload length")
        if data[1] >= num_classes:
            raise CorruptData("semantic map: class out of range")
        return np.full((height, width), data[1], dtype=np.uint8)
    if mode != _MODE_CODED:
        raise CorruptData(f"semantic map: unknown mode {mode}")
    nmask = (num_classes + 7) // 8
    if len(data) < 1 + nmask:
        raise CorruptData("semantic map: truncated class mask")
    mask = np.unpackbits(np.frombuffer(data, np.uint8, nmask, 1), bitorder="little")
    present = np.flatnonzero(mask)
    if len(present) < 2 or present[-1] >= num_classes:
        raise CorruptData("semantic map: invalid class mask")
    nwords, pos = get_varint(data, 1 + nmask)
    if len(data) - pos != 4 * nwords or nwords == 0:
        raise CorruptData("semantic map: payload length does not match word count")
    # each symbol costs at least 2^-24 of a bit range, so any real stream is far shorter
    if nwords > height * width + 16:
        raise CorruptData("semantic map: payload too long for the map size")
    words = np.frombuffer(data, dtype="<u4", offset=pos).astype(np.uint32)
    try:
        dec = constriction.stream.queue.RangeDecoder(words)
        rows, dec = _run(height, width, len(present), None, dec)
        exhausted = dec.maybe_exhausted()
    except CorruptData:
        raise
    except Exception as exc:  # constriction reports invalid streams with its own errors
        raise CorruptData(f"semantic map: range decoder failed: {exc}") from exc
    if not exhausted:
        raise CorruptData("semantic map: trailing data after the last symbol")
    compact = np.array(rows, dtype=np.int64).reshape(height, width)
    return present.astype(np.uint8)[compact]
