"""The enhancement network on an integer grid, in numpy: the same pixels on every CPU.

Its float form is ``models/enhance.py``. As in the integer generator (intgrid/generator.py, docs/format.md
§7), every convolution sums integers (scaled by a power of two per output channel) whose
magnitudes stay below 2**24, so an fp32 matrix product gives the exact sum in any order. Pixels
enter as v - 128; the first layer adds a per-class bias table and a quality-scaled one (both
integers on its accumulator grid); ReLU outputs are integers in [0, act_max]; the last layer
gives the correction in units of 2**-CORR_SHIFT pixel levels. The decoder applies it per pixel
with the file's per-class gain and offset (``apply``), where its tile mask says so. A file may
also carry an update of the first layer's class bias rows (``Update``), fitted by the encoder to
that picture; it is added to the integer table before the network runs.

The image is processed in bands of rows with a halo wider than the network's reach, so the
result does not depend on the band size (or the image's size beyond its own pixels).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor

import numpy as np

from semcodec.format.enhance import (
    GAIN_ONE,
    MAX_UPDATE_EXPONENT,
    OFFSET_UNIT,
    UPDATE_LIMIT,
    Adjust,
    Update,
)
from semcodec.intgrid.blas import kernel_pool
from semcodec.intgrid.ops import (
    ACC_LIMIT,
    IntConv,
    Padded,
    accumulator_bound,
    available_cpus,
    round_div,
    round_shift,
    within_budget,
)

CENTRE = 128
CORR_SHIFT = 6  # the last layer's output grid: 2**-6 pixel levels
assert GAIN_ONE & (GAIN_ONE - 1) == 0, "gains in a power-of-two unit: apply shifts"
APPLY_SHIFT = CORR_SHIFT + GAIN_ONE.bit_length() - 1  # gain × correction: 2**-9 levels
OFFSET_STEP = (1 << CORR_SHIFT) * GAIN_ONE // OFFSET_UNIT  # one offset unit on that grid
ENH_META = ("s2d", "width", "layers", "classes", "act_max")
BAND = 128  # rows (at the network's 1/s2d scale) per band at least; each overlaps by the reach
#: positions of a band (at that scale, pads included) up to which a narrow picture takes more
#: rows: a portrait Kodak picture (128 + 2 positions wide) in one band of 192 rows instead of
#: two of 134 and 70 (6 % of its network's work was halo), in as much memory as a landscape one
BAND_POSITIONS = 192 * (128 + 2)


# (uint8 (h s, w s, 3) picture rows on the map's grid, class index int (h, w), bias rows
# float32 (classes + 1, width)) → (h, w, 3 s s) integers, fp32 or int32: the network on one
# band, in the last layer's grid
BandKernel = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def network_input(band: np.ndarray, s: int) -> np.ndarray:
    """float32 (h, w, 3 s s): uint8 rows space-to-depth (``unshuffle``'s order), minus CENTRE."""
    out = np.empty((band.shape[0] // s, band.shape[1] // s, band.shape[2] * s * s), np.float32)
    unshuffled_into(out, band, s)
    return out


def unshuffled_into(dst: np.ndarray, band: np.ndarray, s: int) -> None:
    """network_input written into dst (h, w, 3 s s), a view with its last axis contiguous,
    in one pass (no space-to-depth copy first)."""
    h, w, cs = dst.shape
    src = band.reshape(h, s, w, s, -1).transpose(0, 2, 4, 1, 3)  # (h, w, c, dy, dx)
    np.subtract(src, np.float32(CENTRE), out=dst.reshape(h, w, cs // (s * s), s, s))


def to_pixels(e: np.ndarray, s: int, w: int) -> np.ndarray:
    """int32 (h s, w, c): a band's output (h, gw, c s s) depth-to-space (``shuffle``'s
    order), cast in the same pass, first w columns."""
    h, gw, cs = e.shape
    c = cs // (s * s)
    out = np.empty((h * s, gw * s, c), np.int32)
    view = e.reshape(h, gw, c, s, s).transpose(0, 3, 1, 4, 2)  # (h, dy, gw, dx, c)
    np.copyto(out.reshape(h, s, gw, s, c), view, casting="unsafe")
    return out[:, :w]


class GridRows:
    """A band's output on the network's grid (h, gw, c s s), read as picture rows: ``clipped``
    gives rows r0..r1 clipped, depth-to-space and cast to int32 in one pass into a buffer of
    a few rows, with no int32 picture of the whole band first (``to_pixels``: a pass over
    memory and its page faults, about 4 ms of a Kodak decode)."""

    def __init__(self, e: np.ndarray, s: int, w: int, rows: int) -> None:
        h, gw, cs = e.shape
        self.e, self.s, self.w, self.c, self.rows = e, s, w, cs // (s * s), rows
        self.grid = e.reshape(h, gw, self.c, s, s).transpose(0, 3, 1, 4, 2)  # (h, dy, gw, dx, c)
        self.buf = np.empty(0, np.int32)

    def __len__(self) -> int:
        return self.rows

    def pixels(self) -> np.ndarray:
        """int32 (rows, w, c): the whole band as picture rows (``to_pixels``)."""
        return to_pixels(self.e, self.s, self.w)[: self.rows]

    def clipped(self, r0: int, r1: int, limit: int) -> np.ndarray:
        """int32 (r1 - r0, w, c): rows r0..r1 (r0 a multiple of s) clipped to ±limit, a view
        of a buffer the next call overwrites."""
        s, gw = self.s, self.grid.shape[2]
        n = -(-(r1 - r0) // s)
        if self.buf.size < n * s * gw * s * self.c:
            self.buf = np.empty(n * s * gw * s * self.c, np.int32)
        dst = self.buf[: n * s * gw * s * self.c].reshape(n, s, gw, s, self.c)
        np.clip(self.grid[r0 // s : r0 // s + n], -limit, limit, out=dst, casting="unsafe")
        return dst.reshape(n * s, gw * s, self.c)[: r1 - r0, : self.w]


def grid_rows(rgb: np.ndarray, y0: int, y1: int, cols: np.ndarray) -> np.ndarray:
    """uint8 rows y0..y1 of the picture on the map's grid: the last row and column repeated
    past the picture's edges (a view where nothing needs repeating)."""
    h, w = rgb.shape[:2]
    part = rgb[y0:y1] if y1 <= h else rgb[np.minimum(np.arange(y0, y1), h - 1)]
    return part if len(cols) == w else part[:, cols]


def class_rows(labels: np.ndarray, classes: int, repeat: int) -> np.ndarray:
    """The bias-table row of each position of the map repeated ``repeat`` times each way: its
    class, or the last row for unknown and void positions."""
    idx = np.minimum(labels.astype(np.int64), classes)
    return np.repeat(np.repeat(idx, repeat, 0), repeat, 1)


def halo_bands(cuts: Sequence[int], halo: int) -> list[tuple[int, int, int, int]]:
    """(first, last) rows each band runs, ``halo`` rows either side within cuts[0]..cuts[-1],
    and the (first, last) rows of the band itself, for bands between successive ``cuts``."""
    lo, hi = cuts[0], cuts[-1]
    return [
        (max(lo, r0 - halo), min(hi, r1 + halo), r0, r1)
        for r0, r1 in zip(cuts, cuts[1:], strict=False)
    ]


def band_rows(width: int) -> int:
    """Rows per band for a picture ``width`` positions wide (pads included): BAND, or more
    while the band stays within BAND_POSITIONS."""
    return max(BAND, BAND_POSITIONS // max(1, width))


class Scratch(threading.local):
    """float32 buffers that one thread's bands reuse from call to call: fresh ones, a few MB
    each, were page-faulted in on every band wherever large blocks are mmapped (the
    encoder's 4 MB threshold, runtime.return_large_frees): 6,200 faults of a Kodak decode
    instead of 2,000. Kept while the network is, as large as the largest band."""

    def __init__(self) -> None:
        self.buffers: dict[str, np.ndarray] = {}

    def get(self, name: str, size: int) -> np.ndarray:
        """A buffer of ``size`` floats (what it held before is undefined)."""
        buf = self.buffers.get(name)
        if buf is None or buf.size < size:
            buf = self.buffers[name] = np.empty(size, np.float32)
        return buf[:size]


class IntEnhancer:
    """The integer enhancement network of a release, from its stored table."""

    def __init__(
        self, state: dict[str, np.ndarray], threads: int | None = None, band: int | None = None
    ):
        """Build from the table (enh_table): meta, convs c0..cN, class bias tables.

        threads: the numpy kernel's threads (default: the available cores); band: rows per
        band at the network's scale (default: ``band_rows``). The result depends on neither.
        """
        self.meta = {k: int(v) for k, v in zip(ENH_META, state["meta"].tolist(), strict=True)}
        n = self.meta["layers"] + 2
        self.convs = [
            IntConv(state[f"c{i}.w"], state[f"c{i}.b"], state[f"c{i}.s"]) for i in range(n)
        ]
        if len({c.k for c in self.convs}) != 1 or self.convs[0].k % 2 == 0:
            raise ValueError("enhancement table: convolutions of one odd kernel size expected")
        self.class_bias = state["class_bias"].astype(np.int64)  # (classes + 1, width)
        self.quality_bias = state["quality_bias"].astype(np.int64)  # (classes + 1, width)
        self.state = state
        self.threads = max(1, threads or available_cpus())
        self.band = None if band is None else max(1, band)
        self.kernel: BandKernel = self.run_numpy
        self.scratch = Scratch()

    @property
    def classes(self) -> int:
        return self.meta["classes"]

    @property
    def reach(self) -> int:
        """Rows (at the network's scale) an output row depends on, either side: the halo."""
        return sum(c.pad for c in self.convs)

    def check(self) -> None:
        """Refuse a table whose accumulators could leave fp32's exact integers."""
        check_enh_table(self.state)

    @property
    def width(self) -> int:
        """Channels of the first layer: the length of a class bias row."""
        return self.meta["width"]

    def updated_bias(self, update: Update | None) -> np.ndarray:
        """int64 (classes + 1, width): the class bias table with a file's update added."""
        if update is None:
            return self.class_bias
        shift = self.convs[0].shift.astype(np.int64)
        step = np.left_shift(np.int64(1), int(update.exponent) + shift)
        return self.class_bias + np.asarray(update.rows, np.int64) * step[None, :]

    def update_range(self) -> tuple[np.ndarray, np.ndarray]:
        """float64 (classes + 1, width): the lowest and highest change of each class bias
        entry, in activation units, that keeps the first layer's accumulators exact."""
        c0 = self.state["c0.w"], self.state["c0.b"]
        rest = accumulator_bound(*c0, CENTRE, np.abs(self.quality_bias).max(axis=0))
        room = (ACC_LIMIT - rest).astype(np.float64)[None, :]  # the largest |class bias| allowed
        scale = np.power(2.0, -self.convs[0].shift.astype(np.float64))[None, :]
        return (-room - self.class_bias) * scale, (room - self.class_bias) * scale

    def check_update(self, update: Update) -> None:
        """ValueError unless the updated table keeps the first layer's accumulators exact."""
        rows = np.asarray(update.rows)
        if rows.shape != self.class_bias.shape:
            raise ValueError("enhancement update: one row per class of the network's width")
        if np.abs(rows).max(initial=0) > UPDATE_LIMIT:
            raise ValueError("enhancement update: a value beyond its limit")
        if not 0 <= update.exponent <= MAX_UPDATE_EXPONENT:
            raise ValueError("enhancement update: a step out of range")
        extra = np.abs(self.updated_bias(update)).max(axis=0) + np.abs(self.quality_bias).max(
            axis=0
        )
        c0 = self.state["c0.w"], self.state["c0.b"]
        if not within_budget(accumulator_bound(*c0, CENTRE, extra)):
            raise ValueError("enhancement update: the first layer can leave fp32's exact range")

    def bias_rows(self, quality: int, update: Update | None = None) -> np.ndarray:
        """float32 (classes + 1, width): the first layer's class bias at this quality (with a
        file's update), scaled."""
        rows = self.updated_bias(update) + round_div(int(quality) * self.quality_bias, 100)
        scale = np.power(2.0, -self.convs[0].shift.astype(np.float64))
        return (rows * scale).astype(np.float32)

    def bands(
        self, rgb: np.ndarray, labels: np.ndarray, quality: int, update: Update | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, int32 (rows, W, 3)): the correction of a uint8 (H, W, 3) picture in
        2**-CORR_SHIFT levels, band by band (memory bounded by the band, not the picture).

        labels (ceil(H/8), ceil(W/8)) is the file's map; values above the classes (unknown)
        take the last row of the bias tables. The picture is extended to the map's grid by
        repeating its last row and column. Bands overlap by the network's reach, so the
        result depends neither on the band size nor on the kernel.
        """
        for y0, band in self.grid_bands(rgb, labels, quality, update):
            yield y0, band.pixels()

    def grid_bands(
        self, rgb: np.ndarray, labels: np.ndarray, quality: int, update: Update | None = None
    ) -> Iterator[tuple[int, GridRows]]:
        """``bands`` on the network's grid: (first row, GridRows of the band's rows), valid
        until the next band is asked for (the kernel's buffers are reused)."""
        h, w = rgb.shape[:2]
        s = self.meta["s2d"]
        gh, gw = labels.shape
        nh = gh * 8 // s  # rows of the network's grid
        idx = class_rows(labels, self.classes, 8 // s)  # the map at the network's scale
        rows = self.bias_rows(quality, update)
        cols = np.minimum(np.arange(gw * 8), w - 1)
        halo = self.reach
        step = self.band or band_rows(gw * 8 // s + 2 * self.convs[0].pad)
        for a, b, y0, y1 in halo_bands([*range(0, nh, step), nh], halo):
            e = self.kernel(grid_rows(rgb, a * s, b * s, cols), idx[a:b], rows)
            yield y0 * s, GridRows(e[y0 - a : y1 - a], s, w, max(0, min(h - y0 * s, (y1 - y0) * s)))

    def correction(
        self, rgb: np.ndarray, labels: np.ndarray, quality: int, update: Update | None = None
    ) -> np.ndarray:
        """int32 (H, W, 3): the whole picture's correction (``bands`` joined)."""
        parts = [c for _, c in self.bands(rgb, labels, quality, update) if len(c)]
        return np.concatenate(parts, 0)

    def enhance(
        self, rgb: np.ndarray, labels: np.ndarray, quality: int, adjust: Adjust
    ) -> np.ndarray:
        """uint8 (H, W, 3): the picture with its correction applied as a file says, by bands."""
        out = np.empty_like(rgb)
        for y0, band in self.grid_bands(rgb, labels, quality, adjust.update):
            y1 = y0 + len(band)
            out[y0:y1] = apply(rgb[y0:y1], band, labels, adjust, self.classes, y0)
        return out

    def run_numpy(self, band: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The network on one band in numpy (BandKernel): fp32 matrix products, in place, on
        our band threads with BLAS on one thread (``blas.py``)."""
        with kernel_pool(self.threads) as pool:
            return self._run(band, idx, rows, pool)

    def _run(
        self, band: np.ndarray, idx: np.ndarray, rows: np.ndarray, pool: Executor | None
    ) -> np.ndarray:
        """fp32 (h, w, 3 s s), a view of this thread's scratch buffer that its next band
        overwrites. The input is written straight into the first layer's padded buffer and
        each layer's output into the next one's, two stores taking turns."""
        s, p = self.meta["s2d"], self.convs[0].pad
        h, w = band.shape[0] // s, band.shape[1] // s
        amax = np.float32(self.meta["act_max"])
        widths = [3 * s * s] + [c.out_channels for c in self.convs[:-1]]
        most = max(Padded.size(h, w, c, p) for c in widths)
        stores = [self.scratch.get("even", most), self.scratch.get("odd", most)]
        src = Padded.over(stores[0], h, w, widths[0], p)
        unshuffled_into(src.interior(), band, s)
        for i, conv in enumerate(self.convs[:-1]):
            dst = Padded.over(stores[(i + 1) % 2], h, w, conv.out_channels, p)

            def hidden(v: np.ndarray, y0: int, y1: int, first: bool = i == 0) -> None:
                if first:
                    v[:, :w] += rows[idx[y0:y1]]
                np.rint(v, out=v)  # half to even, as np.round; the ufunc without its wrapper
                np.clip(v, 0, amax, out=v)
                v[:, w:] = 0  # the next layer's pads

            conv.into(src, dst.rows().reshape(h * dst.wp, -1), hidden, pool, self.threads)
            src = dst
        last = self.convs[-1]
        out = self.scratch.get("out", h * src.wp * last.out_channels).reshape(h * src.wp, -1)

        def final(v: np.ndarray, y0: int, y1: int) -> None:
            np.rint(v, out=v)

        last.into(src, out, final, pool, self.threads)
        return out.reshape(h, src.wp, -1)[:, :w]


CORR_LIMIT = 1 << 20  # |correction| beyond this saturates the pixel at any gain >= 1
APPLY_ROWS = 32  # picture rows per pass of apply: its int32 work stays in the L2 cache


def on_rows(grid: np.ndarray, cell: int, y0: int, y1: int, w: int) -> np.ndarray:
    """Rows y0..y1 (first w columns) of a per-cell array (gy, gx, ...) repeated ``cell``
    times each way: a map-grid or tile-grid value at every pixel."""
    rows = grid[np.arange(y0, y1) // cell]
    return np.repeat(rows, cell, axis=1)[:, :w]


def apply(
    rgb: np.ndarray,
    corr: np.ndarray | GridRows,
    labels: np.ndarray,
    adjust: Adjust,
    classes: int,
    y0: int = 0,
) -> np.ndarray:
    """uint8 (h, W, 3): picture rows y0.. plus their correction (int32 rows, or a band's
    network output as GridRows), per class gain and offset, in integers.

    int32 throughout (half the memory traffic of int64), APPLY_ROWS rows at a time, the
    per-class values looked up on the map's grid and repeated: the correction is first
    clipped to ±CORR_LIMIT, which changes no pixel, since beyond it the change (at least
    2**20 / 2**9 levels at gain 1) saturates at 0 or 255 whatever the offset.
    """
    h, w = rgb.shape[:2]
    cls = np.minimum(labels.astype(np.int64), classes)
    gains = adjust.gains.astype(np.int32)[cls]  # (gh, gw) on the map's grid
    offsets = None
    if np.any(adjust.offsets):  # only earlier -e 8 and -e 9 files carry them: a pass saved
        offsets = (adjust.offsets.astype(np.int32) * OFFSET_STEP)[cls]  # 2**-CORR_SHIFT / 8
    out = np.empty((h, w, 3), np.uint8)
    for r0 in range(0, h, APPLY_ROWS):
        r1 = min(h, r0 + APPLY_ROWS)
        a, b = y0 + r0, y0 + r1
        if isinstance(corr, GridRows):
            total = corr.clipped(r0, r1, CORR_LIMIT)
        else:
            total = np.clip(corr[r0:r1], -CORR_LIMIT, CORR_LIMIT).astype(np.int32, copy=False)
        total *= on_rows(gains, 8, a, b, w)[..., None]
        if offsets is not None:
            total += on_rows(offsets, 8, a, b, w)
        delta = round_shift(total, APPLY_SHIFT)
        if adjust.tiles is not None:
            delta *= on_rows(adjust.tiles, adjust.tile, a, b, w)[..., None]
        delta += rgb[r0:r1]
        np.clip(delta, 0, 255, out=delta)
        out[r0:r1] = delta
    return out


def neutral(classes: int) -> Adjust:
    """The network as trained, everywhere: gain 1, no offset, no mask."""
    return Adjust(
        np.full(classes + 1, GAIN_ONE, np.int64), np.zeros((classes + 1, 3), np.int64), None
    )


def check_enh_table(state: dict[str, np.ndarray]) -> None:
    """ValueError unless every accumulator of the table stays within fp32's exact integers."""
    meta = {k: int(v) for k, v in zip(ENH_META, state["meta"].tolist(), strict=True)}
    n = meta["layers"] + 2
    amax = meta["act_max"]
    for i in range(n):
        extra = 0
        if i == 0:
            extra = sum(
                np.abs(state[key].astype(np.int64)).max(axis=0)
                for key in ("class_bias", "quality_bias")
            )
        in_max = CENTRE if i == 0 else amax
        if not within_budget(accumulator_bound(state[f"c{i}.w"], state[f"c{i}.b"], in_max, extra)):
            raise ValueError(f"enhancement layer {i} can leave fp32's exact range")
    if meta["s2d"] not in (1, 2, 4, 8) or state["c0.w"].shape[1] != 3 * meta["s2d"] ** 2:
        raise ValueError("enhancement table: bad space-to-depth layout")
