"""The integer grid's fast kernels against a plain int64 reference, on tables at the 2**24 edge.

Each fast path (numpy's fused im2col products in chunks and threads, bands with halos, torch's
convolutions) must give the reference's integers exactly, at any size, band, chunk or thread
count: the reference below is a slow, obviously correct integer convolution.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from semcodec.intgrid import ops
from semcodec.intgrid.enhancer import CENTRE, IntEnhancer, check_enh_table
from semcodec.intgrid.enhancer_torch import torch_band_kernel


# ----- the reference ----------------------------------------------------------------------------
def ref_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int64 (H, W, O): sum over taps and inputs of w * x (zero padded) + b, in integers."""
    h, wd, _ = x.shape
    k = w.shape[-1]
    p = k // 2
    xp = np.pad(x.astype(np.int64), ((p, p), (p, p), (0, 0)))
    out = np.zeros((h, wd, w.shape[0]), np.int64) + b.astype(np.int64)
    for dy in range(k):
        for dx in range(k):
            out += xp[dy : dy + h, dx : dx + wd] @ w[:, :, dy, dx].T.astype(np.int64)
    return out


def ref_round(acc: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """int64: acc * 2**-shift rounded half to even (exact in float64 below 2**53)."""
    return np.round(acc / np.power(2.0, shift.astype(np.float64))).astype(np.int64)


def ref_correction(state: dict, rgb: np.ndarray, labels: np.ndarray, quality: int) -> np.ndarray:
    """int64 (H, W, 3): the enhancement network on the whole picture, integers throughout."""
    s, _, layers, classes, amax = (int(v) for v in state["meta"])
    h, w = rgb.shape[:2]
    gh, gw = labels.shape
    ext = np.pad(rgb, ((0, gh * 8 - h), (0, gw * 8 - w), (0, 0)), mode="edge")
    ext = ext.astype(np.int64) - CENTRE
    x = np.zeros((gh * 8 // s, gw * 8 // s, 3 * s * s), np.int64)
    for c in range(3):
        for dy in range(s):
            for dx in range(s):
                x[:, :, c * s * s + dy * s + dx] = ext[dy::s, dx::s, c]
    idx = np.minimum(labels, classes)
    idx = np.repeat(np.repeat(idx, 8 // s, 0), 8 // s, 1)
    qb = state["quality_bias"].astype(np.int64)
    rows = state["class_bias"].astype(np.int64) + np.round(quality * qb / 100).astype(np.int64)
    v = x
    for i in range(layers + 2):
        acc = ref_conv(v, state[f"c{i}.w"], state[f"c{i}.b"])
        if i == 0:
            acc += rows[idx]
        v = ref_round(acc, state[f"c{i}.s"])
        if i < layers + 1:
            v = np.clip(v, 0, amax)
    out = np.zeros((gh * 8, gw * 8, 3), np.int64)
    for c in range(3):
        for dy in range(s):
            for dx in range(s):
                out[dy::s, dx::s, c] = v[:, :, c * s * s + dy * s + dx]
    return out[:h, :w]


# ----- tables at the budget's edge --------------------------------------------------------------
def edge_layer(
    rng: np.random.Generator, co: int, ci: int, in_max: int, extra: np.ndarray | int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Integer weights and bias whose accumulator bound is exactly 2**24 - 1 per channel; half
    the channels' weights share one sign, so flat inputs drive their sums to the edge, and the
    last channel's sum is mostly one weight too wide for fp16 or bf16."""
    w = rng.integers(-1000, 1001, (co, ci, 3, 3))
    w[: co // 2] = np.abs(w[: co // 2]) * rng.choice([-1, 1], (co // 2, 1, 1, 1))
    room = (ops.ACC_LIMIT - np.broadcast_to(extra, (co,))) * 0.97
    w = np.trunc(w * (room / (np.abs(w).sum(axis=(1, 2, 3)) * in_max))[:, None, None, None])
    w = w.astype(np.int64)
    w[-1] = rng.integers(-3, 4, (ci, 3, 3))  # the last channel: one odd weight of ~15 bits
    w[-1, 0, 1, 1] = 0
    w[-1, 0, 1, 1] = (int(room[-1]) // in_max - np.abs(w[-1]).sum()) | 1
    b = ops.ACC_LIMIT - ops.accumulator_bound(w, np.zeros(co, np.int64), in_max, extra)
    b = b * rng.choice([-1, 1], co)
    assert (ops.accumulator_bound(w, b, in_max, extra) == ops.ACC_LIMIT).all()
    return w.astype(np.int32), b.astype(np.int32)


def edge_table(s2d: int, width: int, layers: int, seed: int, classes: int = 5) -> dict:
    """A random enhancement table whose every layer's bound is 2**24 - 1 exactly."""
    rng = np.random.default_rng(seed)
    amax = 511
    cin = 3 * s2d * s2d
    state = {"meta": np.array([s2d, width, layers, classes, amax], np.int64)}
    for i in range(layers + 2):
        ci = cin if i == 0 else width
        co = cin if i == layers + 1 else width
        extra = 0
        if i == 0:
            cb = rng.integers(-(1 << 18), 1 << 18, (classes + 1, co))
            qb = rng.integers(-(1 << 18), 1 << 18, (classes + 1, co))
            extra = np.abs(cb).max(0) + np.abs(qb).max(0)
            state["class_bias"], state["quality_bias"] = cb.astype(np.int32), qb.astype(np.int32)
        w, b = edge_layer(rng, co, ci, CENTRE if i == 0 else amax, extra)
        low, high = (6, 13) if i == layers + 1 else (11, 17)
        state[f"c{i}.w"], state[f"c{i}.b"] = w, b
        state[f"c{i}.s"] = rng.integers(low, high, co).astype(np.int32)
    check_enh_table(state)
    return state


def edge_picture(h: int, w: int, seed: int) -> np.ndarray:
    """Random pixels with flat black and white blocks (inputs at their bounds)."""
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    rgb[: h // 3, : w // 2] = 0
    rgb[h // 2 :, w // 2 :] = 255
    return rgb


# ----- the tests --------------------------------------------------------------------------------
def test_edge_tables_reach_the_budget() -> None:
    """The tables below sit at 2**24 - 1 exactly: one more and the check refuses them."""
    state = edge_table(2, 8, 1, seed=0)
    state["c1.b"] = state["c1.b"] + np.sign(state["c1.b"]).astype(np.int32)
    with pytest.raises(ValueError):
        check_enh_table(state)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("chunk", [1, 1 << 20])
@pytest.mark.parametrize("k", [3, 5])
def test_intconv_equals_reference(
    monkeypatch: pytest.MonkeyPatch, threads: int, chunk: int, k: int
) -> None:
    """ops.IntConv (fused im2col products by chunks of rows, on threads) gives the integers."""
    monkeypatch.setattr(ops, "CHUNK_BYTES", chunk)
    rng = np.random.default_rng(k)
    ci, co, in_max = 5, 7, 511
    w, b = edge_layer(rng, co, ci, in_max)
    if k == 5:
        w = np.pad(w, ((0, 0), (0, 0), (1, 1), (1, 1)))
        w[:, :, 0, 0] = 1  # taps outside the 3x3 window count too
        b = (b - np.sign(b) * ci * in_max).astype(np.int32)
    shift = rng.integers(8, 16, co).astype(np.int32)
    x = rng.integers(0, in_max + 1, (13, 11, ci))
    x[:4] = in_max
    conv = ops.IntConv(w, b, shift)
    src = ops.Padded.zeros(13, 11, ci, conv.pad)
    src.interior()[...] = x
    out = np.full((13 * src.wp, co), np.nan, np.float32)
    with ThreadPoolExecutor(threads) as pool:
        conv.into(src, out, pool=pool, threads=threads)
    got = np.round(out.reshape(13, src.wp, co)[:, :11]).astype(np.int64)
    assert np.array_equal(got, ref_round(ref_conv(x, w, b), shift))
    assert np.array_equal(np.round(conv(x.astype(np.float32))).astype(np.int64), got)


SIZES = [(37, 53), (64, 40), (9, 130)]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["numpy", "torch"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("s2d,width,layers", [(2, 8, 2), (4, 16, 1)])
def test_enhancer_kernels_equal_reference(
    monkeypatch: pytest.MonkeyPatch, kernel: str, threads: int, s2d: int, width: int, layers: int
) -> None:
    """Every kernel, band size and thread count gives the reference's correction exactly."""
    import torch

    state = edge_table(s2d, width, layers, seed=s2d)
    monkeypatch.setattr(ops, "CHUNK_BYTES", 1)  # one row per product: many chunks on threads
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for n, (h, w) in enumerate(SIZES):
            rgb = edge_picture(h, w, n)
            labels = np.random.default_rng(n).integers(0, 8, ((h + 7) // 8, (w + 7) // 8))
            want = ref_correction(state, rgb, labels, 37)
            for band in (3, 128):
                enh = IntEnhancer(state, threads=threads, band=band)
                if kernel == "torch":
                    enh.kernel = torch_band_kernel(enh)
                got = enh.correction(rgb, labels, 37)
                assert got.dtype == np.int32
                assert np.array_equal(got, want), (h, w, band)
    finally:
        torch.set_num_threads(previous)


def test_bias_tables_reach_the_edge() -> None:
    """The edge pictures drive some first-layer sums close to 2**24 (the tables are tight)."""
    state = edge_table(2, 8, 2, seed=2)
    rgb = edge_picture(16, 16, 0)
    x = rgb.astype(np.int64) - CENTRE
    x = ops.unshuffle(x, 2)
    acc = ref_conv(x, state["c0.w"], state["c0.b"])
    assert np.abs(acc).max() > 0.8 * ops.ACC_LIMIT


@pytest.mark.parametrize("den", [1, 2, 8, 512, 3, 100])
def test_round_div_rounds_half_to_even_exactly(den: int) -> None:
    """The decoder's divisions (the power-of-two ones by shifts) round as exact arithmetic does,
    ties to even, negative numerators included."""
    from fractions import Fraction

    from semcodec.intgrid.ops import round_div

    rng = np.random.default_rng(den)
    num = np.concatenate([np.arange(-3 * den, 3 * den + 1), rng.integers(-(2**40), 2**40, 500)])
    want = [round(Fraction(int(n), den)) for n in num]  # Python rounds a Fraction half to even
    got = round_div(num.astype(np.int64), den)
    assert got.dtype == np.int64
    assert got.tolist() == want


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_round_shift_rounds_half_to_even(dtype) -> None:
    """round_shift is num / 2**bits rounded half to even (Python's round on the fraction),
    negative numbers and ties included, in the input's dtype for int32."""
    num = np.arange(-2100, 2100).astype(dtype)
    for bits in range(0, 11):
        want = np.array([round(int(v) / (1 << bits)) for v in num])
        got = ops.round_shift(num, bits)
        assert np.array_equal(got, want), bits
        assert got.dtype == (np.int32 if dtype == np.int32 else np.int64)
    big = np.array([2**30 + 2**8, -(2**30) - 2**8 - 1, 2**31 - 2**10], np.int32)
    assert ops.round_shift(big, 9).tolist() == [round(int(v) / 512) for v in big]


def test_padded_over_a_used_store_has_zero_pads() -> None:
    """A buffer laid over a store that held anything reads zero at every pad."""
    h, w, c, p = 5, 7, 3, 1
    store = np.full(ops.Padded.size(h, w, c, p) + 10, np.nan, np.float32)
    buf = ops.Padded.over(store, h, w, c, p)
    buf.interior()[...] = 1
    grid = buf.flat[: (h + 2 * p) * buf.wp * c].reshape(h + 2 * p, buf.wp, c)
    assert np.isnan(grid).sum() == 0 and grid.sum() == h * w * c
    assert (grid[p : p + h, p : p + w] == 1).all()
    assert (buf.flat[(h + 2 * p) * buf.wp * c :] == 0).all()


def test_one_pass_space_to_depth_matches_the_two_step_one() -> None:
    """The input written straight into the padded buffer, and the output cast while it goes
    back to pixels, are unshuffle/shuffle's, in their channel orders."""
    from semcodec.intgrid.enhancer import network_input, to_pixels, unshuffled_into

    rng = np.random.default_rng(3)
    for s in (1, 2, 4):
        band = rng.integers(0, 256, (3 * s, 5 * s, 3)).astype(np.uint8)
        buf = ops.Padded.over(
            np.empty(ops.Padded.size(3, 5, 3 * s * s, 1), np.float32), 3, 5, 3 * s * s, 1
        )
        unshuffled_into(buf.interior(), band, s)
        want = ops.unshuffle(band, s).astype(np.float32) - CENTRE
        assert np.array_equal(buf.interior(), want) and np.array_equal(network_input(band, s), want)
        e = rng.integers(-500, 500, (3, 5, 3 * s * s)).astype(np.float32)
        px = to_pixels(e, s, 5 * s - 1)
        assert px.dtype == np.int32
        assert np.array_equal(px, ops.shuffle(e, s)[:, : 5 * s - 1].astype(np.int32))


@pytest.mark.parametrize("s", [1, 2, 4, 8])
def test_grid_rows_apply_like_the_int32_picture(s: int) -> None:
    """apply reading a band's network output on its grid (GridRows: clipped, depth-to-space
    and cast per chunk) gives the pixels it gives from the band's int32 picture, for bands
    whose rows are not a multiple of s or of apply's chunk, at an offset, with gains, offsets
    and tiles, and corrections beyond the clip."""
    from semcodec.format.enhance import Adjust
    from semcodec.intgrid.enhancer import APPLY_ROWS, GridRows, apply, to_pixels

    rng = np.random.default_rng(s)
    gh, gw = 11, 7  # the map: 88 x 56 pixels
    labels = rng.integers(0, 12, (gh, gw))
    rows, w, y0 = APPLY_ROWS + 13, 53, 24  # picture rows y0 .. y0 + rows of an 88 x 53 picture
    e = rng.integers(-3000, 3000, (-(-rows // s), -(-w // s), 3 * s * s)).astype(np.float32)
    e.flat[::97] = 1 << 22  # beyond CORR_LIMIT
    e.flat[1::89] = -(1 << 22)
    rgb = rng.integers(0, 256, (rows, w, 3)).astype(np.uint8)
    adjust = Adjust(
        rng.integers(0, 16, 12), rng.integers(-128, 128, (12, 3)), rng.random((6, 4)) < 0.7, 16
    )
    want = apply(rgb, to_pixels(e, s, w)[:rows], labels, adjust, 11, y0)
    got = apply(rgb, GridRows(e, s, w, rows), labels, adjust, 11, y0)
    assert np.array_equal(got, want)
    assert np.array_equal(GridRows(e, s, w, rows).pixels(), to_pixels(e, s, w)[:rows])
