"""Per-tile prediction (decoder/prediction.py, encoder/gating.py, format/gating.py): modes layer,
masked compact layer, blending, and gated files that decode bit-exactly through both integer
generators."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from semcodec.decoder import prediction as predict
from semcodec.encoder import gating, rdcost, residual
from semcodec.encoder import prediction as encoder_prediction
from semcodec.encoder.codec import Codec
from semcodec.encoder.options import EncodeOptions
from semcodec.encoder.rdcost import rd_cost
from semcodec.errors import CorruptData
from semcodec.format import container
from semcodec.format.compact import decode_compact, encode_compact
from semcodec.format.container import Header, LayerKind
from semcodec.format.gating import (
    BASE,
    GEN,
    NONE,
    GatingPlan,
    decode_gating,
    encode_gating,
    no_prediction,
    read_plan,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _photo(h: int = 72, w: int = 136, seed: int = 3) -> np.ndarray:
    """Smooth left half, straight-edged stripes and noise on the right."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    smooth = np.stack([100 + x, 80 + y, 150 - 0.5 * x], -1)
    stripes = 255.0 * ((x // 3) % 2)[..., None].repeat(3, -1)
    rgb = np.where((x < w // 2)[..., None], smooth, stripes) + rng.normal(0, 4, (h, w, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def test_modes_round_trip_and_refuse_bad_headers() -> None:
    rng = np.random.default_rng(0)
    modes = rng.integers(0, 3, (5, 7))
    data = encode_gating(GatingPlan(8, 4, modes))
    got = decode_gating(data, 5 * 8 - 3, 7 * 8)  # a partial last tile row
    assert np.array_equal(got.modes, modes) and (got.tile_blocks, got.radius) == (8, 4)
    assert (
        not got.all_symbols
        and decode_gating(encode_gating(GatingPlan(8, 4, modes, True)), 40, 56).all_symbols
    )
    with pytest.raises(CorruptData):
        decode_gating(b"\x02" + data[1:], 40, 56)
    with pytest.raises(CorruptData):
        decode_gating(data[:2], 40, 56)
    with pytest.raises(ValueError):
        GatingPlan(8, 4, np.full((2, 2), 3))
    with pytest.raises(ValueError):
        GatingPlan(3, 4, modes)


def test_masked_compact_layer_codes_only_used_positions() -> None:
    table = Codec("tiny").bundle.compact_table
    c, levels = table.shape[0], table.shape[-1]
    rng = np.random.default_rng(1)
    symbols = rng.integers(0, levels, (c, 9, 13))
    used = np.zeros((9, 13), bool)
    used[:, :5] = True
    data = encode_compact(symbols, table, used)
    out = decode_compact(data, symbols.shape, table, used)
    assert np.array_equal(out[:, used], symbols[:, used]) and (out[:, ~used] == levels).all()
    assert len(data) < len(encode_compact(symbols, table))
    assert encode_compact(symbols, table, np.zeros_like(used)) == b""


def test_blend_is_each_tiles_prediction_away_from_borders_and_mixes_near_them() -> None:
    modes = np.array([[GEN, NONE]])
    crop = (64, 128)
    gen = np.full((64, 128, 3), 200, np.uint8)
    out = predict.blend({GEN: gen, NONE: predict.FLAT}, modes, crop, 8, 4)
    assert (out[:, :60] == 200).all() and (out[:, 68:] == 128).all()
    row = out[0, 59:69, 0].astype(int)
    assert (np.diff(row) <= 0).all() and 128 < row[4] < 200  # a ramp, no step
    hard = predict.blend({GEN: gen, NONE: predict.FLAT}, modes, crop, 8, 0)
    assert (hard[:, :64] == 200).all() and (hard[:, 64:] == 128).all()


def test_base_mode_is_the_integer_bilinear_base() -> None:
    from semcodec.intgrid.generator import integer_base

    levels = 16
    sym = np.random.default_rng(2).integers(0, levels, (3, 4, 6))
    px = predict.base_pixels(sym, levels, (30, 45))
    u = integer_base(sym, levels)
    want = np.round(127.5 * (u / (256 * (levels - 1)) + 1)).clip(0, 255)
    assert px.shape == (30, 45, 3) and np.abs(want.transpose(1, 2, 0)[:30, :45] - px).max() <= 1


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec("tiny")


def test_gated_file_decodes_to_the_encoders_prediction_with_both_generators(codec: Codec) -> None:
    """A gated file (every tile 'base': the tiny random generator predicts badly, so the
    encoder's own choice would be 'none' everywhere, a file without GATING in version 5)."""
    from semcodec.decoder.pipeline import Decoder, numpy_generator
    from semcodec.zoo.bundles import decoder_parts

    rgb = _photo()
    data = codec.encode(rgb, quality=40, gating=gating.GatingConfig(modes=(BASE,)))
    _, layers = container.unpack(data)
    assert LayerKind.GATING in layers
    res = codec.decode(data, keep_base=True)
    assert res.modes is not None and (res.modes == BASE).all()
    parts = decoder_parts(codec.bundle)
    dec = Decoder(parts, numpy_generator(parts)).decode(data, keep_base=True)
    assert np.array_equal(np.asarray(dec.image), np.asarray(res.image))
    assert np.array_equal(dec.base, res.base)
    ungated = codec.encode(rgb, quality=50, gating=gating.GatingConfig(enabled=False))
    assert LayerKind.GATING not in container.unpack(ungated)[1]
    assert LayerKind.GATING not in container.unpack(codec.encode(rgb, quality=0))[1]  # -q 0


def _repack(data: bytes, **changes: bytes | None) -> bytes:
    """The same file with some layers replaced (None: removed)."""
    header, layers = container.unpack(data)
    for name, payload in changes.items():
        kind = LayerKind[name]
        if payload is None:
            layers.pop(kind, None)
        else:
            layers[kind] = payload
    return container.pack(header, layers)


def test_the_decoder_follows_each_tiles_mode(codec: Codec) -> None:
    """One tile's mode changed ('base' → 'none', its symbols dropped) changes its pixels, and
    only near that tile: a decoder that ignored the choices would give the same image."""
    cfg = gating.GatingConfig(modes=(BASE,))  # every tile 'base': all symbols coded
    data = codec.encode(_photo(), quality=40, gating=cfg)
    header, layers = container.unpack(data)
    mh, mw = -(-header.height // 8), -(-header.width // 8)
    head = decode_gating(layers[LayerKind.GATING], mh, mw)
    modes = head.modes
    assert (modes == BASE).all()
    table = codec.bundle.compact_table
    symbols = decode_compact(layers[LayerKind.COMPACT], (table.shape[0], mh, mw), table)
    flipped = modes.copy()
    flipped[0, 0] = NONE
    used = predict.used_blocks(flipped, mh, mw, head.tile_blocks)
    other = _repack(
        data,
        GATING=encode_gating(GatingPlan(head.tile_blocks, head.radius, flipped)),
        COMPACT=encode_compact(symbols, table, used),
    )
    a = codec.decode(data, keep_base=True).base.astype(int)
    b = codec.decode(other, keep_base=True).base.astype(int)
    side = head.tile_blocks * 8
    inner = side - head.radius - 4  # beyond the blend and the bilinear base's half block
    assert (b[:inner, :inner] == predict.FLAT).all() and (
        a[:inner, :inner] != b[:inner, :inner]
    ).any()
    far = side + head.radius + 4
    assert (a[:, far:] == b[:, far:]).all() and (a[far:, :] == b[far:, :]).all()


def test_a_file_that_uses_no_base_has_no_compact_layer(codec: Codec) -> None:
    none_only = EncodeOptions(quality=60, gating=gating.GatingConfig(modes=(NONE,)))
    rgb = _photo()
    data = codec.encode(rgb, none_only)
    header, layers = container.unpack(data)
    assert LayerKind.COMPACT not in layers and LayerKind.GATING not in layers
    res = codec.decode(data, keep_base=True)
    assert (res.base == predict.FLAT).all()  # the prediction is flat grey
    assert res.modes is not None and (res.modes == NONE).all()
    # the residual coder alone, on the image itself, in the layout of least RD cost
    from semcodec.format.residual import get_backend

    avif = get_backend("avif")
    assert layers[LayerKind.RESIDUAL] == avif.encode(rgb.astype(np.int16) - 128, 60)
    from semcodec.decoder.info import file_info

    assert file_info(data)["residual_chroma"] == "4:4:4"
    fast = codec.encode(rgb, none_only, effort=residual.VERIFY_EFFORT - 1)
    plain = avif.encode(rgb.astype(np.int16) - 128, 60, residual.VERIFY_EFFORT - 1)
    assert container.unpack(fast)[1][LayerKind.RESIDUAL] == plain
    plan = GatingPlan(8, 4, res.modes)
    with pytest.raises(CorruptData, match="COMPACT"):  # a compact layer no tile uses
        codec.decode(_repack(data, GATING=encode_gating(plan), COMPACT=b"\x00" * 8))
    gated = codec.encode(rgb, quality=60)
    if (codec.decode(gated).modes != NONE).any():
        with pytest.raises(CorruptData, match="no COMPACT"):
            codec.decode(_repack(gated, COMPACT=None))


def test_container_rules_for_the_gating_layer() -> None:
    h = Header(16, 16, "RGB", "tiny", "0" * 16, 50, 2, 8, 16)
    base = {LayerKind.SEMANTIC_MAP: b"m", LayerKind.RESIDUAL: b"r"}
    with pytest.raises(ValueError, match="COMPACT"):
        container.pack(h, base, version=4)
    assert container.unpack(container.pack(h, base))[1] == base  # version 5: no prediction
    data = container.pack(h, {**base, LayerKind.GATING: b"g"}, version=0)
    assert data[8] == 3  # format version 3
    assert container.pack(h, {**base, LayerKind.COMPACT: b"c"}, version=0)[8] == 1
    h0 = Header(16, 16, "RGB", "tiny", "0" * 16, 0, 0, 8, 16)
    with pytest.raises(ValueError, match="RESIDUAL"):
        container.pack(h0, {LayerKind.SEMANTIC_MAP: b"m", LayerKind.GATING: b"g"})


def test_a_file_without_prediction_decodes_as_its_gated_version_4_twin(codec: Codec) -> None:
    """Version 5 leaves the GATING layer of a file without prediction out; the same layers
    with the layer of every tile 'none' (what version 4 wrote) decode to the same pixels, and
    a version-1 file (COMPACT, no GATING) still means the generator everywhere."""
    data = codec.encode(_photo(), quality=60)
    header, layers = container.unpack(data)
    assert data[8] == 5 and LayerKind.GATING not in layers and LayerKind.COMPACT not in layers
    mh, mw = -(-header.height // 8), -(-header.width // 8)
    plan = no_prediction(mh, mw)
    assert (plan.modes == NONE).all() and plan.modes.shape == (-(-mh // 8), -(-mw // 8))
    for tile_blocks, radius in ((8, 4), (4, 0), (16, 32)):
        modes = np.full((-(-mh // tile_blocks), -(-mw // tile_blocks)), NONE)
        gating_layer = encode_gating(GatingPlan(tile_blocks, radius, modes))
        old = container.pack(header, {**layers, LayerKind.GATING: gating_layer}, version=4)
        assert old[8] == 4 and len(old) > len(data) + len(gating_layer)
        a, b = codec.decode(data), codec.decode(old)
        assert np.array_equal(np.asarray(a.image), np.asarray(b.image))
        assert np.array_equal(a.semantic_map, b.semantic_map)
    assert read_plan(None, True, mh, mw) is None  # version 1: the generator on every tile
    assert (read_plan(None, False, mh, mw).modes == NONE).all()


def test_info_and_base_layer_of_a_file_without_compact_layer(tmp_path, monkeypatch) -> None:
    from click.testing import CliRunner

    from semcodec.cli import cli

    monkeypatch.chdir(tmp_path)
    none_only = gating.GatingConfig(modes=(NONE,))
    data = Codec("tiny").encode(_photo(), quality=60, gating=none_only)
    (tmp_path / "n.sem").write_bytes(data)
    r = CliRunner().invoke(cli, ["info", "n.sem"])
    assert r.exit_code == 0 and "no compact layer" in r.stdout and "none 100" in r.stdout
    r = CliRunner().invoke(cli, ["decode", "n.sem", "--layer", "base", "-o", "b.png"])
    assert r.exit_code == 0, r.output
    assert "no base layer" in r.stderr
    assert (np.asarray(Image.open("b.png")) == predict.FLAT).all()


def _counting_compnet(codec: Codec, monkeypatch) -> list[int]:
    """Count CompNet's calls on this codec's bundle."""
    calls = [0]
    comp = codec.bundle.comp
    forward = comp.forward

    def counted(*args, **kwargs):
        calls[0] += 1
        return forward(*args, **kwargs)

    monkeypatch.setattr(comp, "forward", counted)
    return calls


def test_from_search_quality_up_the_image_is_coded_without_the_networks(
    monkeypatch,
) -> None:
    """From SEARCH_QUALITY up, the default effort writes header + map + gating + residual of
    the image itself without running CompNet or the generator: the same file as a full search
    that may only choose 'none'; lower qualities and -q 0 still search, at any effort."""
    rgb = _photo()
    q = encoder_prediction.SEARCH_QUALITY
    fast = Codec("tiny")
    options = EncodeOptions(quality=q, gating=gating.GatingConfig(modes=(NONE,)))
    calls = _counting_compnet(fast, monkeypatch)
    monkeypatch.setattr(fast, "reconstruct", lambda *a: pytest.fail("generator ran"))
    data, stats = fast.encode_with_stats(rgb, options)
    assert calls[0] == 0 and "compnet" not in stats.times.wall
    _, layers = container.unpack(data)
    assert LayerKind.COMPACT not in layers and LayerKind.GATING not in layers
    monkeypatch.undo()  # the generator back; a full search that may only choose 'none'
    calls = _counting_compnet(fast, monkeypatch)
    monkeypatch.setattr(encoder_prediction, "searches", lambda opts: True)
    assert fast.encode(rgb, options) == data and calls[0] > 0
    monkeypatch.undo()
    for effort, quality in ((5, q - 1), (5, 0), (9, q - 1)):
        searching = Codec("tiny")
        calls = _counting_compnet(searching, monkeypatch)
        searching.encode(rgb, quality=quality, effort=effort)
        assert calls[0] > 0, (effort, quality)
        monkeypatch.undo()


def test_rd_cost_is_equal_along_the_coders_curve() -> None:
    """Twice the bits for slope(q) more dB costs the same; more bits for the same error more."""
    q = 40
    mse = 20.0
    sharper = mse / 10 ** (rdcost.slope_db(q) / 10)  # PSNR + slope(q) dB
    assert rd_cost(4000.0, sharper, q) == pytest.approx(rd_cost(2000.0, mse, q), abs=1e-9)
    assert rd_cost(4000.0, mse, q) > rd_cost(2000.0, mse, q)
    assert rd_cost(2000.0, sharper, q) < rd_cost(2000.0, mse, q)
