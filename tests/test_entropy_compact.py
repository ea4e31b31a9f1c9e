"""Compact layer coder (A2): context tables of 2 and 3 neighbours, and refitting them by counting."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.format.compact import (
    context_index,
    decode_compact,
    encode_compact,
    table_neighbours,
    validate_table,
)
from semcodec.models.context_model import ContextModel
from semcodec.train.fit_table import count_table, refit_bundle, table_bits

LEVELS = 6


def _smooth_symbols(c: int, h: int, w: int, seed: int) -> np.ndarray:
    """Symbols with diagonal structure, which a top-right neighbour predicts."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = ((xx + yy) // 3 + rng.integers(0, LEVELS, (c, 1, 1))) % LEVELS
    noise = rng.random((c, h, w)) < 0.1
    return np.where(noise, rng.integers(0, LEVELS, (c, h, w)), base).astype(np.int64)


@pytest.mark.parametrize("neighbours", [2, 3])
def test_round_trip(neighbours: int) -> None:
    rng = np.random.default_rng(neighbours)
    table = rng.integers(1, 500, (3, (LEVELS + 1) ** neighbours, LEVELS)).astype(np.int32)
    assert table_neighbours(table) == neighbours
    for shape in [(3, 1, 1), (3, 1, 9), (3, 7, 1), (3, 11, 13)]:
        s = rng.integers(0, LEVELS, shape)
        data = encode_compact(s, table)
        np.testing.assert_array_equal(decode_compact(data, shape, table), s)


def test_top_right_context_is_causal_and_outside_at_the_border() -> None:
    s = np.arange(12).reshape(1, 3, 4) % LEVELS
    ctx = context_index(s, LEVELS, 3)
    k = LEVELS + 1
    # row 1, column 1: left s[1,0], top s[0,1], top-right s[0,2]
    assert ctx[0, 1, 1] == (s[0, 1, 0] * k + s[0, 0, 1]) * k + s[0, 0, 2]
    # last column: the top-right neighbour is outside
    assert ctx[0, 1, 3] % k == LEVELS
    # first row: top and top-right outside
    assert ctx[0, 0, 2] % (k * k) == LEVELS * k + LEVELS


def test_validate_table_rejects_other_shapes() -> None:
    ok2 = np.ones((3, (LEVELS + 1) ** 2, LEVELS), np.int32)
    ok3 = np.ones((3, (LEVELS + 1) ** 3, LEVELS), np.int32)
    validate_table(ok2, 3, LEVELS)
    validate_table(ok3, 3, LEVELS)
    for bad in (
        np.ones((3, (LEVELS + 1) ** 4, LEVELS), np.int32),
        np.ones((3, 50, LEVELS), np.int32),
        np.ones((2, (LEVELS + 1) ** 2, LEVELS), np.int32),
        ok2.astype(np.int64),
        ok2 * 0,
    ):
        with pytest.raises(ValueError):
            validate_table(bad, 3, LEVELS)


@pytest.mark.parametrize("neighbours", [2, 3])
def test_rate_term_equals_coded_bits(neighbours: int) -> None:
    """The training rate is the ideal code length of the coder's own table (within 1 %)."""
    torch.manual_seed(0)
    ctx = ContextModel(3, 8, neighbours)
    with torch.no_grad():
        ctx.logits.normal_(0, 2)
    y = torch.randint(0, 8, (1, 3, 24, 24)).float()
    bits = float(ctx.bits(y).detach())
    coded = 8 * len(encode_compact(y[0].long().numpy(), ctx.integer_table()))
    assert abs(coded - bits) < 0.01 * bits + 64


def test_load_integer_table_needs_the_same_context() -> None:
    table3 = np.ones((3, (LEVELS + 1) ** 3, LEVELS), np.int32)
    with pytest.raises(ValueError):
        ContextModel(3, LEVELS, neighbours=2).load_integer_table(table3)
    m = ContextModel(3, LEVELS, neighbours=3)
    m.load_integer_table(table3)
    np.testing.assert_array_equal(m.integer_table(), np.full_like(table3, 2**16 // LEVELS))


def test_counted_table_codes_its_data_in_fewer_bits() -> None:
    """A counted 3-neighbour table beats a counted 2-neighbour one on diagonal structure."""
    train = [_smooth_symbols(3, 16, 16, seed) for seed in range(8)]
    held = [_smooth_symbols(3, 16, 16, seed) for seed in range(8, 12)]
    t2 = count_table(train, LEVELS, 2)
    t3 = count_table(train, LEVELS, 3)
    uniform = np.ones_like(t2)
    assert table_bits(held, t2) < table_bits(held, uniform)
    assert table_bits(held, t3) < table_bits(held, t2)
    # the ideal length is what the coder achieves (within its flush overhead)
    coded = sum(8 * len(encode_compact(s, t3)) for s in held)
    assert abs(coded - table_bits(held, t3)) < 0.02 * coded + 64 * len(held)


@pytest.mark.slow
def test_refit_bundle_keeps_the_networks_and_changes_only_the_compact_layer(tmp_path) -> None:
    from semcodec.encoder.codec import Codec
    from semcodec.format.container import LayerKind, unpack
    from semcodec.zoo.bundles import REGISTRY, load_bundle, save_bundle

    tiny = load_bundle("tiny")
    src = save_bundle(tmp_path, REGISTRY["tiny"], tiny.seg, tiny.comp, tiny.gen, tiny.compact_table)
    rng = np.random.default_rng(0)
    images = [
        np.repeat(np.repeat(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8), 8, 0), 8, 1)
        for _ in range(3)
    ]
    out, fit = refit_bundle(src, images, tmp_path / "fit", neighbours=3)
    fitted = load_bundle(str(out))
    assert table_neighbours(fitted.compact_table) == 3
    assert fitted.info["compact_table"]["neighbours"] == 3
    assert fitted.info["compact_table"] == fit
    for a, b in ((tiny.comp, fitted.comp), (tiny.gen, fitted.gen), (tiny.seg, fitted.seg)):
        for (k, v), w in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
            assert torch.equal(v.half().float(), w), k
    old, new = Codec(str(src)), Codec(str(out))
    f_old, f_new = old.encode(images[0], quality=0), new.encode(images[0], quality=0)
    assert unpack(f_old)[1][LayerKind.SEMANTIC_MAP] == unpack(f_new)[1][LayerKind.SEMANTIC_MAP]
    np.testing.assert_array_equal(
        np.asarray(old.decode(f_old).image), np.asarray(new.decode(f_new).image)
    )


def test_fine_tuning_needs_the_bundles_context(tmp_path) -> None:
    import click

    from semcodec.train.codec_nets import CodecNets, init_from_bundle
    from semcodec.zoo.bundles import REGISTRY, load_bundle, save_bundle

    tiny = load_bundle("tiny")
    levels = tiny.levels
    table3 = np.ones((tiny.compact_table.shape[0], (levels + 1) ** 3, levels), np.int32)
    path = save_bundle(tmp_path, REGISTRY["tiny"], tiny.seg, tiny.comp, tiny.gen, table3)
    with pytest.raises(click.UsageError, match="--context-neighbours 3"):
        init_from_bundle(CodecNets("tiny", "tiny"), path)
    nets = CodecNets("tiny", "tiny", neighbours=3)
    init_from_bundle(nets, path)
    np.testing.assert_array_equal(nets.ctx.integer_table(), np.full_like(table3, 2**16 // levels))
