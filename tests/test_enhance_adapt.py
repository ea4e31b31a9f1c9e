"""The enhancement network fitted to one picture: the update's bytes, the decoder's use of it,
and the encoder's gradient fit (effort 8, 9)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import semcodec
from semcodec.encoder import adapt
from semcodec.encoder.codec import Codec
from semcodec.encoder.enhance import adapted, choose
from semcodec.encoder.options import EncodeOptions
from semcodec.errors import CorruptData
from semcodec.format import container
from semcodec.format.container import LayerKind
from semcodec.format.enhance import UPDATE_LIMIT, Adjust, Update, decode_adjust, encode_adjust
from semcodec.intgrid.enhancer import neutral

pytestmark = pytest.mark.usefixtures("one_thread", "adapting_efforts")
WIDTH = 8  # the tiny-enh network's first layer


@pytest.fixture
def adapting_efforts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Efforts 8 and 9 with the adaptations they ran until 2026-12-07 (no effort adapts now:
    test_effort.py checks that)."""
    monkeypatch.setattr(adapt, "ADAPT_CONFIGS", {8: adapt.WHOLE, 9: adapt.BANDED})


def _picture(h: int = 72, w: int = 88, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 2.5, y * 3.0, (x + y) * 1.2], 2)
    return np.clip(base + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(np.uint8)


def _update(seed: int = 0, exponent: int = 2) -> Update:
    rows = np.zeros((12, WIDTH), np.int64)
    rng = np.random.default_rng(seed)
    rows[[0, 5, 11]] = rng.integers(-9, 10, (3, WIDTH))
    rows[5, 0] = -UPDATE_LIMIT
    rows[0, 1] = UPDATE_LIMIT
    return Update(rows, exponent)


def _adjust(update: Update | None) -> Adjust:
    offs = np.zeros((12, 3), np.int64)
    offs[2] = (3, -1, 0)
    return Adjust(np.arange(12) % 16, offs, np.array([[True, False]]), 64, update)


def test_update_round_trips_through_the_layer() -> None:
    for seed, exponent in ((0, 0), (1, 3), (2, 8)):
        adj = _adjust(_update(seed, exponent))
        data = encode_adjust(adj)
        assert data[0] == 2 and data[1] & 4
        back = decode_adjust(data, 11, 50, 70, WIDTH)
        assert back.update is not None and back.update.exponent == exponent
        assert np.array_equal(back.update.rows, adj.update.rows)
        assert np.array_equal(back.gains, adj.gains) and np.array_equal(back.offsets, adj.offsets)
        assert np.array_equal(back.tiles, adj.tiles)


def test_layer_without_update_keeps_version_1() -> None:
    """The bytes of a layer without an update are version 1's, and decode as they always did."""
    data = encode_adjust(_adjust(None))
    assert data == encode_adjust(_adjust(Update(np.zeros((12, WIDTH), np.int64), 2)))
    # the bytes the release before updates wrote for this adjustment
    assert data.hex() == (
        "0103061032547698ba00000000000003ff00000000000000000000000000000000000000000000000000000"
        "00080"
    )
    back = decode_adjust(data, 11, 50, 70, WIDTH)
    assert back.update is None
    assert decode_adjust(data, 11, 50, 70).update is None  # no channels needed


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d[:-1],  # truncated codes
        lambda d: d + b"\0",  # trailing bytes
        lambda d: bytes([1]) + d[1:],  # an update in a version-1 layer
        lambda d: d[:1] + bytes([d[1] & ~4]) + d[2:],  # version 2 without its update
    ],
)
def test_corrupt_update_is_refused(mutate) -> None:
    data = encode_adjust(_adjust(_update(4)))
    with pytest.raises(CorruptData):
        decode_adjust(mutate(data), 11, 50, 70, WIDTH)


def _update_bytes(head: int, mask: int, body: bytes, width: int = WIDTH) -> bytes:
    """A layer of neutral gains whose update block is built by hand."""
    block = bytes([head, width]) + mask.to_bytes(2, "little") + body
    return bytes([2, 4, 6]) + bytes(6 * [0x88]) + block


@pytest.mark.parametrize(
    "data",
    [
        _update_bytes(0x09, 1, bytes(WIDTH)),  # step exponent 9
        _update_bytes(0x80, 1, bytes(WIDTH)),  # Exp-Golomb order 8
        _update_bytes(0x02, 1 << 12, b"\x80"),  # a row beyond the classes
        _update_bytes(0x02, 0, b""),  # no row
        _update_bytes(0x02, 1, bytes(4)),  # 4 bytes of zero bits: prefixes without codes
        _update_bytes(0x02, 1, b"\x00\x02" + bytes(8)),  # a value beyond the limit
        _update_bytes(0x02, 1, b""),  # nothing coded
        _update_bytes(0x00, 1, b"\x7f\xc1"),  # padding bits not zero
        _update_bytes(0x00, 3, b"\x7f\xff\xc0"),  # a named row without a change
        _update_bytes(0x00, 1, b"\x7f\xc0", WIDTH + 1),  # rows of another network's width
        _update_bytes(0x00, 1, b"", 0),  # rows of no value
    ],
)
def test_malformed_update_block(data: bytes) -> None:
    good = decode_adjust(_update_bytes(0x00, 1, b"\x7f\xc0"), 11, 8, 8, WIDTH).update
    assert good is not None and good.rows[0].tolist() == [1] + [0] * 7 and not good.rows[1:].any()
    with pytest.raises(CorruptData):
        decode_adjust(data, 11, 8, 8, WIDTH)


def test_layer_with_update_reads_without_the_network() -> None:
    """The layer records the rows' width: `semcodec info` reads it without a model."""
    from semcodec.decoder.info import _enhance_info

    data = encode_adjust(_adjust(_update()))
    assert np.array_equal(decode_adjust(data, 11, 50, 70).update.rows, _update().rows)
    header = container.Header(70, 50, "RGB", "m", "0" * 16, 50, 0, 8, 8)
    info = _enhance_info(data, header)
    assert info is not None and info["update_rows"] == 3


def _tiny_file(quality: int = 30) -> bytes:
    return Codec("tiny-enh").encode(_picture(), quality=quality, enhance=False)


def _with_layer(data: bytes, adjust: Adjust) -> bytes:
    header, layers = container.unpack(data)
    return container.pack(header, {**layers, LayerKind.ENHANCE: encode_adjust(adjust)})


def test_decoder_adds_the_update_to_its_table() -> None:
    codec = Codec("tiny-enh")
    data = _tiny_file()
    plain = codec.decode(data)
    pixels, labels = np.asarray(plain.image), plain.semantic_map
    enh = codec.decoder.enhancer
    update = Update(np.clip(_update(3).rows, -9, 9), 2)
    adj = Adjust(neutral(11).gains, neutral(11).offsets, None, 64, update)
    out = np.asarray(codec.decode(_with_layer(data, adj)).image)
    assert not np.array_equal(out, np.asarray(codec.decode(_with_layer(data, neutral(11))).image))
    want = enh.enhance(pixels, labels, plain.header.quality, adj)
    assert np.array_equal(out, want)
    assert np.array_equal(np.asarray(semcodec.decode(_with_layer(data, adj))), want)  # no torch


def test_update_beyond_the_accumulator_budget_is_corrupt() -> None:
    codec = Codec("tiny-enh")
    rows = np.full((12, WIDTH), UPDATE_LIMIT, np.int64)
    adj = Adjust(neutral(11).gains, neutral(11).offsets, None, 64, Update(rows, 8))
    with pytest.raises(CorruptData, match="exact range"):
        codec.decode(_with_layer(_tiny_file(), adj))


@pytest.mark.slow
def test_adapted_file_decodes_to_the_encoders_picture() -> None:
    """The encoder's fitted update, checked with the integer network, is what decoders show."""
    codec = Codec("tiny-enh")
    original = _picture()
    data = codec.encode(original, quality=0, enhance=False)
    res = codec.decode(data)
    args = (codec.decoder.enhancer, original, np.asarray(res.image), res.semantic_map)
    start = choose(*args, 0)
    # as part of a file of 100 kB, where the rows' bits are cheap: every row that helps stays
    fitted = adapted(*args, EncodeOptions(quality=0, effort=9), start, 100_000)
    assert fitted is not None and fitted.adjust.update is not None
    assert fitted.adjust.update.rows.any()
    assert fitted.mse_after < start.mse_after  # the fit helps this picture
    # in a file of 20 bytes no row is worth its bits
    assert adapted(*args, EncodeOptions(quality=0, effort=9), start, 20) is None
    file = _with_layer(data, fitted.adjust)
    assert np.array_equal(np.asarray(codec.decode(file).image), fitted.picture)
    assert np.array_equal(np.asarray(semcodec.decode(file)), fitted.picture)


@pytest.mark.slow
def test_encoder_writes_the_update_where_it_pays() -> None:
    """A picture the network with other rows would restore: the file carries the update, and
    decoders show the encoder's picture."""
    from semcodec.encoder.enhance import enhanced_file

    codec = Codec("tiny-enh")
    data = _tiny_file(quality=60)
    header, layers = container.unpack(data)
    res = codec.decode(data)
    pixels = np.asarray(res.image)
    rows = np.zeros((12, WIDTH), np.int64)
    rows[np.unique(res.semantic_map)] = np.array([6, -5, 4, -6, 5, -4, 6, -5])
    target = Adjust(neutral(11).gains, neutral(11).offsets, None, 64, Update(rows, 2))
    original = codec.decoder.enhancer.enhance(pixels, res.semantic_map, 60, target)
    for effort, version in ((7, 1), (9, 2)):
        opts = EncodeOptions(quality=60, effort=effort)
        out, kept = enhanced_file(codec.decoder, data, header, layers, original, opts)
        assert kept[LayerKind.ENHANCE][0] == version
    err = np.mean((np.asarray(codec.decode(out).image) - original.astype(float)) ** 2)
    closed = choose(codec.decoder.enhancer, original, pixels, res.semantic_map, 60)
    assert err < closed.mse_after
    assert np.array_equal(np.asarray(semcodec.decode(out)), np.asarray(codec.decode(out).image))


@pytest.mark.slow
def test_update_that_does_not_pay_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small files: the update costs more bytes than it saves, so -e 9 writes the closed form."""
    codec = Codec("tiny-enh")
    with_fit = {q: codec.encode(_picture(), quality=q, effort=9) for q in (0, 40)}
    monkeypatch.setattr(adapt, "ADAPT_CONFIGS", {})
    for q, data in with_fit.items():
        assert codec.encode(_picture(), quality=q, effort=9) == data


def test_efforts_below_8_never_adapt(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = Codec("tiny-enh")
    before = {e: codec.encode(_picture(), quality=0, effort=e) for e in (5, 7)}

    def refuse(*args, **kwargs):
        raise AssertionError("adapted below effort 8")

    monkeypatch.setattr(adapt, "fit_update", refuse)
    for e, data in before.items():
        assert codec.encode(_picture(), quality=0, effort=e) == data
    assert adapt.adapt_config(7) is None
    assert adapt.adapt_config(9).steps > adapt.adapt_config(8).steps


def test_rounded_fit_stays_within_the_exact_range() -> None:
    """However far the float fit goes, the rounded update keeps the integer network exact."""
    enh = Codec("tiny-enh").decoder.enhancer
    active = torch.ones(12)
    for sign in (1.0, -1.0):
        delta = torch.full((12, WIDTH), sign * 1e6)
        steps = adapt.quantised(delta, active, 0, enh)
        assert (np.sign(steps) == sign).any()  # it moves as far as the range lets it
        enh.check_update(Update(steps, 0))
        lo, hi = enh.update_range()
        assert (lo <= 0).all() and (hi >= 0).all()  # the table as trained is inside


@pytest.mark.slow
def test_fit_is_the_same_with_any_number_of_torch_threads() -> None:
    """The encoder writes the same bytes with 1 or more threads: the gradient fit runs on one."""
    codec = Codec("default")  # the tiny network's sums are too small to be split
    original = _picture(256, 320, seed=4)
    data = codec.encode(original, quality=40, enhance=False)
    res = codec.decode(data)
    args = (codec.decoder.enhancer, original, np.asarray(res.image), res.semantic_map)
    start = choose(*args, 40)
    fits = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        try:
            fitted = adapted(*args, EncodeOptions(quality=40, effort=9), start, 100_000)
        finally:
            torch.set_num_threads(1)
        assert fitted is not None and fitted.adjust.update is not None
        fits.append((fitted.adjust.update.rows, fitted.adjust.gains, fitted.adjust.offsets))
    for a, b in zip(*fits, strict=True):
        np.testing.assert_array_equal(a, b)


def test_step_bands_cover_every_row_once_with_the_networks_reach() -> None:
    """Each cycle of banded steps sees every network row once, and a band run with its halo
    gives the whole picture's correction on its rows (so a step's loss is the picture's on
    those rows)."""
    assert adapt.step_bands(10, 4, 2) == [(0, 4, 0, 2), (0, 7, 2, 5), (3, 9, 5, 7), (5, 10, 7, 10)]
    assert adapt.step_bands(10, 1, 2) == [(0, 10, 0, 10)]
    assert adapt.step_bands(3, 8, 1) == [(0, 2, 0, 1), (0, 3, 1, 2), (1, 3, 2, 3)]
    enh = Codec("tiny-enh").decoder.enhancer
    table = adapt.FloatTable.of(enh, 50)
    s = table.s2d
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.integers(-128, 128, (1, 3 * s * s, 20, 12)).astype(np.float32))
    idx = torch.from_numpy(rng.integers(0, enh.classes + 1, (1, 20, 12)))
    delta = torch.zeros_like(table.rows)
    with torch.no_grad():
        whole = table.correction(x, idx, delta)
        seen = 0
        for band in adapt.step_bands(20, 3, enh.reach):
            r0, r1 = band[2:]
            part = table.band_correction(x, idx, delta, band)
            assert torch.equal(part, whole[..., r0 * s : r1 * s, :])
            seen += r1 - r0
    assert seen == 20
    assert adapt.BANDED.bands > 1 and adapt.WHOLE.bands == 1
