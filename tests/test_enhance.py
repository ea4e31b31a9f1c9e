"""The enhancement network: float and integer forms, the ENHANCE layer, encoder and decoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.encoder.codec import Codec
from semcodec.encoder.enhance import choose, pays
from semcodec.errors import CorruptData
from semcodec.format import container
from semcodec.format.container import LayerKind
from semcodec.format.enhance import GAIN_ONE, Adjust, decode_adjust, encode_adjust
from semcodec.intgrid import enhancer as intenhance
from semcodec.intgrid.enhancer import IntEnhancer, apply, neutral
from semcodec.models.enhance import ENHANCE_CONFIGS, EnhanceNet
from semcodec.zoo import bundles as zoo
from semcodec.zoo.bundles import random_enhancer


def _picture(h: int = 72, w: int = 88, seed: int = 0) -> np.ndarray:
    """A smooth picture with texture: something a post-filter can change."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 2.5, y * 3.0, (x + y) * 1.2], 2)
    return np.clip(base + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(np.uint8)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ENHANCE_CONFIGS))
def test_every_config_forward_backward(name: str) -> None:
    net = EnhanceNet(ENHANCE_CONFIGS[name])
    torch.nn.init.normal_(net.last.weight, std=0.01)
    x = torch.rand(2, 3, 32, 48) * 255
    labels = torch.randint(0, 12, (2, 4, 6))
    out = net(x, labels, torch.tensor([10, 90]))
    assert out.shape == x.shape
    out.sum().backward()
    assert all(p.grad is not None for p in net.parameters())


def test_untrained_network_changes_nothing() -> None:
    """The last layer starts at zero: a fresh network is the identity."""
    net = EnhanceNet(ENHANCE_CONFIGS["small"])
    x = torch.rand(1, 3, 32, 32) * 255
    assert torch.equal(net(x, torch.zeros(1, 4, 4, dtype=torch.long), torch.tensor([50])), x)


def test_integer_form_follows_float() -> None:
    net, table = random_enhancer("small", seed=3)
    img = _picture(64, 96)
    labels = np.random.default_rng(1).integers(0, 12, (8, 12))
    corr = IntEnhancer(table).correction(img, labels, 40) / (1 << intenhance.CORR_SHIFT)
    with torch.no_grad():
        f = (
            net.correction(
                torch.from_numpy(img).permute(2, 0, 1)[None].float(),
                torch.from_numpy(labels)[None],
                torch.tensor([40]),
            )[0]
            .permute(1, 2, 0)
            .numpy()
        )
    assert np.abs(f).max() > 2  # the random network does something
    assert np.abs(corr - f).mean() < 0.05 * np.abs(f).mean() + 0.05


def test_bands_do_not_change_the_result() -> None:
    _, table = random_enhancer("small", seed=4)
    img, labels = _picture(80, 64), np.random.default_rng(2).integers(0, 11, (10, 8))
    whole = IntEnhancer(table).correction(img, labels, 70)
    assert np.array_equal(IntEnhancer(table, band=3).correction(img, labels, 70), whole)


def test_default_bands_take_a_narrow_picture_whole() -> None:
    """Bands of at least BAND rows, more for a narrow picture within BAND_POSITIONS: a
    portrait Kodak picture (128 + 2 positions wide, 192 rows) is one band, a landscape one
    takes BAND rows, a wide one never fewer."""
    from semcodec.intgrid.enhancer import BAND, BAND_POSITIONS, band_rows

    assert band_rows(128 + 2) == 192
    assert band_rows(192 + 2) == BAND
    assert band_rows(480 + 2) == BAND
    assert all(w * band_rows(w) <= BAND_POSITIONS for w in (130, 150, 194))


def test_scratch_buffers_are_reused_and_change_nothing() -> None:
    """One enhancer's bands reuse its thread's buffers, across pictures of other sizes and
    side by side on two threads, and give what a fresh enhancer gives."""
    from concurrent.futures import ThreadPoolExecutor

    _, table = random_enhancer("small", seed=4)
    rng = np.random.default_rng(2)
    jobs = [
        (_picture(80, 64, seed=1), rng.integers(0, 11, (10, 8)), 70),
        (_picture(40, 120, seed=2), rng.integers(0, 11, (5, 15)), 30),
        (_picture(96, 48, seed=3), rng.integers(0, 11, (12, 6)), 90),
    ]
    want = [IntEnhancer(table).correction(*job) for job in jobs]
    enh = IntEnhancer(table, threads=1, band=4)
    for job, w in zip(jobs + jobs, want + want, strict=True):
        assert np.array_equal(enh.correction(*job), w)
    kept = {k: v.ctypes.data for k, v in enh.scratch.buffers.items()}
    assert set(kept) == {"even", "odd", "out"}
    enh.correction(*jobs[1])  # no band larger than before: the same buffers
    assert kept == {k: v.ctypes.data for k, v in enh.scratch.buffers.items()}
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda job: enh.correction(*job), jobs * 4))
    assert all(np.array_equal(g, w) for g, w in zip(got, want * 4, strict=True))


def test_quality_and_map_reach_the_network() -> None:
    _, table = random_enhancer("small", seed=5)
    enh = IntEnhancer(table)
    img = _picture(32, 32)
    zeros, ones = np.zeros((4, 4), np.int64), np.ones((4, 4), np.int64)
    assert not np.array_equal(enh.correction(img, zeros, 10), enh.correction(img, zeros, 90))
    assert not np.array_equal(enh.correction(img, zeros, 50), enh.correction(img, ones, 50))


def test_table_out_of_range_is_refused() -> None:
    _, table = random_enhancer("small", seed=6)
    bad = dict(table)
    bad["c1.w"] = table["c1.w"] * 1000
    with pytest.raises(ValueError, match="exact range"):
        intenhance.check_enh_table(bad)


def test_layer_round_trip() -> None:
    tiles = np.array([[True, False, True], [False, True, True]])
    offs = np.zeros((12, 3), np.int64)
    offs[3] = (-5, 0, 7)
    adj = Adjust(np.arange(12) % 16, offs, tiles, 32)
    back = decode_adjust(encode_adjust(adj), 11, 50, 70)
    assert np.array_equal(back.gains, adj.gains)
    assert np.array_equal(back.offsets, offs)
    assert np.array_equal(back.tiles, tiles)
    assert back.tile == 32
    plain = decode_adjust(encode_adjust(neutral(11)), 11, 50, 70)
    assert plain.tiles is None and not plain.offsets.any()
    assert len(encode_adjust(neutral(11))) == 9


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d[:-1],
        lambda d: d + b"\0",
        lambda d: bytes([2]) + d[1:],
        lambda d: d[:1] + bytes([d[1] | 4]) + d[2:],
        lambda d: d[:2] + bytes([40]) + d[3:],
        lambda d: b"",
    ],
)
def test_malformed_layer_is_corrupt(mutate) -> None:
    adj = Adjust(np.full(12, 8), np.ones((12, 3), np.int64), np.ones((2, 3), bool), 32)
    with pytest.raises(CorruptData):
        decode_adjust(mutate(encode_adjust(adj)), 11, 50, 70)


def test_apply_uses_gains_offsets_and_tiles() -> None:
    img = np.full((16, 16, 3), 100, np.uint8)
    corr = np.full((16, 16, 3), 3 << intenhance.CORR_SHIFT, np.int64)  # +3 levels
    labels = np.zeros((2, 2), np.int64)
    labels[1] = 11  # bottom half unknown
    adj = neutral(11)
    assert (apply(img, corr, labels, adj, 11) == 103).all()
    gains = adj.gains.copy()
    gains[0] = 2 * GAIN_ONE // 2 + 8  # 2.0
    offs = adj.offsets.copy()
    offs[11] = (-4, 0, 4)  # -1 / 0 / +1 levels on unknown pixels
    out = apply(img, corr, labels, Adjust(gains, offs, None), 11)
    assert (out[:8] == 106).all()
    assert (out[8:, :, 0] == 102).all() and (out[8:, :, 2] == 104).all()
    masked = apply(img, corr, labels, Adjust(adj.gains, adj.offsets, np.array([[False]]), 16), 11)
    assert (masked == 100).all()


def _apply_by_definition(rgb, corr, labels, adjust, classes) -> np.ndarray:
    """docs/format.md §12 per pixel in Python integers: round half to even of
    (corr * gain + offset * 2**6 * 8 / 4) / 2**9, where the tile is on, then clipped."""
    out = np.empty_like(rgb)
    for y in range(rgb.shape[0]):
        for x in range(rgb.shape[1]):
            c = min(int(labels[y // 8, x // 8]), classes)
            on = adjust.tiles is None or adjust.tiles[y // adjust.tile, x // adjust.tile]
            for ch in range(3):
                total = (
                    int(corr[y, x, ch]) * int(adjust.gains[c]) + int(adjust.offsets[c, ch]) * 128
                )
                q, r = divmod(total, 512)
                delta = q + (r > 256 or (r == 256 and q % 2 == 1)) if on else 0
                out[y, x, ch] = min(255, max(0, int(rgb[y, x, ch]) + delta))
    return out


@pytest.mark.parametrize("rows", [32, 5])  # one pass, and passes that cut map cells and tiles
def test_apply_matches_the_definition_at_the_extremes(
    monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    monkeypatch.setattr(intenhance, "APPLY_ROWS", rows)
    rng = np.random.default_rng(5)
    h, w, classes = 21, 27, 11
    rgb = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
    rgb[:3] = 0
    rgb[3:6] = 255
    corr = rng.integers(-3000, 3000, (h, w, 3)).astype(np.int32)
    corr[::4, ::3] = rng.choice([-(1 << 23), -(1 << 20) - 1, (1 << 20) + 1, 1 << 23], (6, 9, 3))
    corr[1::4, 1::3] = rng.choice([-256, -64, 64, 192, 256], (5, 9, 3))  # ties at gain 8 and 4
    corr[2::4, 2::3] = rng.integers(-60000, 60000, (5, 9, 3))  # changes of up to ±117 levels
    labels = rng.integers(0, classes + 3, (3, 4))  # values above the classes: the last row
    gains = np.arange(classes + 1) % 16
    gains[0], gains[1] = 0, 15
    offsets = rng.integers(-128, 128, (classes + 1, 3))
    tiles = rng.random((3, 4)) < 0.7
    for adjust in (
        Adjust(gains, offsets, None),
        Adjust(gains, offsets, tiles, 8),
        neutral(classes),
    ):
        got = apply(rgb, corr, labels, adjust, classes)
        assert np.array_equal(got, _apply_by_definition(rgb, corr, labels, adjust, classes))
    band = apply(rgb[8:], corr[8:], labels, Adjust(gains, offsets, tiles, 8), classes, 8)
    whole = apply(rgb, corr, labels, Adjust(gains, offsets, tiles, 8), classes)
    assert np.array_equal(band, whole[8:])


def test_choice_fits_gains_and_leaves_the_offsets_zero() -> None:
    """A picture decoded a few levels too red: the fit still changes only the gains (offsets
    cost BD-rate in every metric on held-out pictures), and the layer's bytes carry none."""
    _, table = random_enhancer("small", seed=7)
    enh = IntEnhancer(table)
    original = _picture(64, 64, seed=2)
    decoded = original.astype(int) + np.random.default_rng(4).integers(-5, 6, original.shape)
    decoded[..., 0] += 4
    decoded = np.clip(decoded, 0, 255).astype(np.uint8)
    labels = np.zeros((8, 8), np.int64)
    c = choose(enh, original, decoded, labels, 50)
    assert not c.adjust.offsets.any()
    assert not decode_adjust(encode_adjust(c.adjust), enh.classes, 64, 64).offsets.any()


def test_choice_is_never_worse() -> None:
    _, table = random_enhancer("small", seed=7)
    enh = IntEnhancer(table)
    original = _picture(64, 64, seed=1)
    decoded = np.clip(
        original.astype(int) + np.random.default_rng(3).integers(-6, 7, original.shape), 0, 255
    ).astype(np.uint8)
    labels = np.zeros((8, 8), np.int64)
    for quality in (20, 50, 90):
        c = choose(enh, original, decoded, labels, quality)
        assert c.mse_after <= c.mse_before


def _tiny_file(quality: int = 40) -> tuple[bytes, np.ndarray]:
    img = _picture(72, 88)
    return Codec("tiny-enh").encode(img, quality=quality), img


def _with_layer(data: bytes, adjust: Adjust) -> bytes:
    header, layers = container.unpack(data)
    layers = {**layers, LayerKind.ENHANCE: encode_adjust(adjust)}
    return container.pack(header, layers)


def test_decoder_applies_the_layer() -> None:
    data, _ = _tiny_file()
    codec = Codec("tiny-enh")
    plain = codec.decode(data)
    assert not plain.enhanced
    adj = neutral(11)
    enhanced = codec.decode(_with_layer(data, adj))
    assert enhanced.enhanced
    pixels = np.asarray(plain.image)
    corr = codec.decoder.enhancer.correction(pixels, plain.semantic_map, plain.header.quality)
    want = apply(pixels, corr, plain.semantic_map, adj, 11)
    assert np.array_equal(np.asarray(enhanced.image), want)
    assert not np.array_equal(want, pixels)
    # a changed gain changes the pixels: the decoder reads the layer
    gains = adj.gains.copy()
    gains[:] = 0
    zeroed = codec.decode(_with_layer(data, Adjust(gains, adj.offsets, None)))
    assert np.array_equal(np.asarray(zeroed.image), pixels)


def test_decoder_without_enhancement_option() -> None:
    data, _ = _tiny_file()
    codec = Codec("tiny-enh")
    enhanced = _with_layer(data, neutral(11))
    from semcodec.decoder.pipeline import Decoder

    dec = Decoder(codec.decoder.parts, enhance=False)
    assert np.array_equal(
        np.asarray(dec.decode(enhanced).image), np.asarray(codec.decode(data).image)
    )


def test_torch_free_decoder_matches() -> None:
    import semcodec

    data, _ = _tiny_file()
    enhanced = _with_layer(data, neutral(11))
    codec = Codec("tiny-enh")
    assert np.array_equal(
        np.asarray(semcodec.decode(enhanced)), np.asarray(codec.decode(enhanced).image)
    )


def test_release_without_network_refuses_the_layer() -> None:
    data = Codec("tiny").encode(_picture(), quality=40)
    header, layers = container.unpack(data)
    layers[LayerKind.ENHANCE] = encode_adjust(neutral(11))
    with pytest.raises(CorruptData, match="no enhancement network"):
        Codec("tiny").decode(container.pack(header, layers))


def test_layer_needs_format_version_4() -> None:
    data, _ = _tiny_file()
    out = _with_layer(data, neutral(11))
    assert out[8] == 5
    with pytest.raises(ValueError, match="needs format version 4"):
        container.pack(*container.unpack(out), version=3)


@pytest.mark.slow
def test_encoder_keeps_the_layer_only_where_it_pays() -> None:
    """The encoder's file is the plain file, or the plain file plus a layer of lower cost."""
    codec = Codec("tiny-enh")
    for q in (0, 20, 60):
        data = codec.encode(_picture(), quality=q)
        header, layers = container.unpack(data)
        plain = codec.encode(_picture(), quality=q, enhance=False)
        if LayerKind.ENHANCE not in layers:
            assert data == plain
            continue
        original = _picture().astype(float)
        mse = [
            np.mean((np.asarray(Codec("tiny-enh").decode(d).image) - original) ** 2)
            for d in (data, plain)
        ]
        assert mse[0] < mse[1]


def test_pays_rejects_an_empty_mask() -> None:
    from semcodec.encoder.enhance import EnhanceChoice

    adj = Adjust(np.full(12, 8), np.zeros((12, 3), np.int64), np.zeros((1, 1), bool))
    assert not pays(EnhanceChoice(adj, np.zeros((1, 1, 3), np.uint8), 10.0, 1.0), 1000, 1018, 50)


def test_unknown_label_conditions_the_networks_as_unknown_as() -> None:
    from semcodec.format.classes import UNKNOWN_AS
    from semcodec.models.compnet import one_hot_map

    oh = one_hot_map(torch.tensor([[[0, 10, 11]]]), 11)
    assert oh[0, :, 0, 2].sum() == 1 and oh[0, UNKNOWN_AS, 0, 2] == 1 and oh[0, 10, 0, 1] == 1


def test_integer_generators_read_unknown_as_the_float_one_does() -> None:
    """numpy and torch integer generators: an UNKNOWN map position is classes.UNKNOWN_AS."""
    from semcodec.format.classes import UNKNOWN_AS
    from semcodec.intgrid.generator_torch import from_table

    parts = zoo.decoder_parts(Codec("tiny").bundle)
    rng = np.random.default_rng(0)
    symbols = rng.integers(0, parts.levels, (parts.channels, 4, 4))
    labels = rng.integers(0, 11, (4, 4))
    labels[1:3, 1:3] = 11
    as_class = np.where(labels == 11, UNKNOWN_AS, labels)
    numpy_out = parts.integer_generator().forward(symbols, labels)
    assert np.array_equal(numpy_out, parts.integer_generator().forward(symbols, as_class))
    assert np.array_equal(numpy_out, from_table(parts.generator).forward_numpy(symbols, labels))


def test_unknown_map_round_trip_and_info() -> None:
    """A release whose map has UNKNOWN: the map layer, decode_map and info carry it."""
    import semcodec
    from semcodec.decoder.info import file_info

    codec = Codec("tiny-enh")
    assert codec.bundle.map_symbols == 12
    data = codec.encode(_picture(), quality=30)
    ids = semcodec.decode_map(data, size="stored")
    assert (ids == semcodec.UNKNOWN).any()
    assert np.array_equal(ids, codec.decode(data).semantic_map)
    assert "unknown" in file_info(data)["classes"]
    # a release without UNKNOWN refuses such a map
    from semcodec.format.map import encode_map

    with pytest.raises(ValueError):
        encode_map(ids, Codec("tiny").bundle.map_symbols)


def _corrected(enh: IntEnhancer, decoded: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The decoded picture with the network's correction at gain 1: a picture it fits."""
    corr = enh.correction(decoded, labels, 50)
    return apply(decoded, corr, labels, neutral(enh.classes), enh.classes)


def _strips(h: int = 256, w: int = 128) -> tuple[IntEnhancer, np.ndarray, np.ndarray]:
    """A random network, a noisy picture and an empty map (one class)."""
    _, table = random_enhancer("small", seed=7)
    enh = IntEnhancer(table)
    decoded = _picture(h, w, seed=2)
    return enh, decoded, np.zeros((h // 8, w // 8), np.int64)


def test_choice_picture_is_what_the_decoder_applies() -> None:
    """With tiles switched off (where the original is the decoded picture itself) the
    choice's picture is apply's with the chosen mask: what a decoder shows."""
    enh, decoded, labels = _strips(128, 128)
    original = _corrected(enh, decoded, labels)
    original[:64] = decoded[:64]  # the top tiles lose by the layer
    c = choose(enh, original, decoded, labels, 50)
    assert c.adjust.tiles is not None and c.adjust.tiles[1].all() and not c.adjust.tiles[0].any()
    corr = enh.correction(decoded, labels, 50)
    assert np.array_equal(c.picture, apply(decoded, corr, labels, c.adjust, enh.classes))


def test_fit_rows_takes_every_nth_whole_strip() -> None:
    from semcodec.encoder.enhance import fit_rows

    rows = fit_rows(300, 2)
    assert rows is not None
    assert np.array_equal(rows, np.r_[0:64, 128:192])
    assert fit_rows(127, 2) is None  # one whole strip: no smaller sample
    assert fit_rows(640, 1) is None


def test_sampled_fit_sees_only_its_strips() -> None:
    """Strips 0 and 2 take the network's correction, strips 1 and 3 none: the fit on every
    second strip finds the gains of strips 0 and 2 alone (class 0 well above the whole
    picture's, where strip 1 halves it), leaves class 1 (strip 3 only) as trained, and the
    sampled choice keeps the layer on every tile."""
    from semcodec.encoder.enhance import choose_sampled

    enh, decoded, labels = _strips()
    labels[16:24], labels[24:32] = 2, 1  # strips 0 and 1 of class 0, 2 of class 2, 3 of 1
    original = _corrected(enh, decoded, labels)
    for y in (64, 192):
        original[y : y + 64] = decoded[y : y + 64]
    original[:64, :64] = decoded[:64, :64]  # a tile a per-tile choice would switch off
    sampled = choose_sampled(enh, original, decoded, labels, 50, stride=2)
    whole = choose(enh, original, decoded, labels, 50)
    rows = np.r_[0:64, 128:192]
    seen = choose(enh, original[rows], decoded[rows], labels[rows[::8] // 8], 50)
    assert sampled.adjust.gains[0] == seen.adjust.gains[0] >= whole.adjust.gains[0] + 2
    assert sampled.adjust.gains[1] == GAIN_ONE  # class 1 is not in the sample: as trained
    assert seen.adjust.tiles is not None and sampled.adjust.tiles is None


def test_decoder_can_keep_to_numpy_kernels_beside_torch() -> None:
    """use_torch=False gives what a decode without torch runs (benchmarks), the same pixels."""
    from semcodec.decoder.pipeline import Decoder

    parts = Codec("tiny-enh").decoder.parts
    assert "torch" in __import__("sys").modules
    numpy_dec = Decoder(parts, use_torch=False)
    torch_dec = Decoder(parts)
    assert numpy_dec.enhancer.kernel == numpy_dec.enhancer.run_numpy
    assert torch_dec.enhancer.kernel != torch_dec.enhancer.run_numpy
    data, _ = _tiny_file()
    data = _with_layer(data, neutral(11))
    a, b = numpy_dec.decode(data), torch_dec.decode(data)
    assert a.enhanced and np.array_equal(np.asarray(a.image), np.asarray(b.image))


def test_distilled_loss_adds_the_teachers_term() -> None:
    """MSE to the original, plus weight × MSE to what the teacher makes of the same input."""
    from semcodec.train.enhance import distilled_loss

    original = torch.zeros(1, 3, 8, 8)
    out = torch.full((1, 3, 8, 8), 2.0)

    class Teacher(torch.nn.Module):
        def forward(self, dec, lab, q):  # noqa: ANN001, ANN201
            return dec + 1.0  # 3 where out is 2: squared error 1

    inputs = (torch.full((1, 3, 8, 8), 2.0), torch.zeros(1, 1, 1), torch.tensor([50]))
    assert float(distilled_loss(out, original, None, inputs, 1.0)) == 4.0
    assert float(distilled_loss(out, original, Teacher(), inputs, 0.0)) == 4.0
    assert float(distilled_loss(out, original, Teacher(), inputs, 0.5)) == 4.5


def test_gains_of_every_class_at_once_are_least_squares_gains() -> None:
    """fit_gains (per-class sums in one pass) gives each class its least-squares gain
    (sum c t / sum c c in eighths, rounded, 0..15), and the trained gain to a class under
    MIN_PIXELS pixels."""
    from semcodec.encoder.enhance import MIN_PIXELS, fit_gains

    def least_squares(c: np.ndarray, t: np.ndarray) -> int:
        den = float((c * c).sum(dtype=np.float64))
        a = float((c * t).sum(dtype=np.float64)) / den if den > 0 else 1.0
        return int(np.clip(np.round(a * GAIN_ONE), 0, 15))

    rng = np.random.default_rng(8)
    for _ in range(20):
        idx = rng.integers(0, 12, (8, 12)).repeat(8, 0).repeat(8, 1)
        idx[idx == 5] = 4  # a class absent
        idx[:8, :8] = 5  # and one under MIN_PIXELS
        c = rng.normal(0, 3, (64, 96, 3)).astype(np.float32)
        t = (c * rng.uniform(0, 2) + rng.normal(0, 2, (64, 96, 3))).astype(np.float32)
        got = fit_gains(c, t, idx, 11)
        for k in range(12):
            sel = idx == k
            want = GAIN_ONE if sel.sum() < MIN_PIXELS else least_squares(c[sel], t[sel])
            assert got[k] == want, k
