"""The numpy integer generator (intgrid/generator.py) and a release's decoder parts (decoder/parts.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.decoder import parts
from semcodec.errors import ModelError
from semcodec.intgrid import generator, generator_torch, ops
from semcodec.zoo import bundles as zoo

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bundle():
    return zoo.load_bundle("tiny")


def _inputs(levels: int, channels: int, h: int = 6, w: int = 9, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, levels, (channels, h, w)), rng.integers(0, 11, (h, w))


def test_numpy_and_torch_integer_generators_give_the_same_pixels(bundle) -> None:
    state = {k: v.numpy() for k, v in bundle.integer_generator.state.items()}
    gen = generator.IntegerGenerator(state)
    for seed in range(3):
        sym, lab = _inputs(bundle.levels, gen.channels, seed=seed)
        want = bundle.integer_generator.forward(
            torch.from_numpy(sym)[None], torch.from_numpy(lab)[None]
        )
        got = gen.forward(sym, lab)
        assert got.dtype == np.uint8 and got.shape == (48, 72, 3)
        assert np.array_equal(got, want[0].permute(1, 2, 0).numpy())
    assert np.array_equal(generator_torch.from_table(state).forward_numpy(sym, lab), got)


def _torch_pixels(table: dict, sym: np.ndarray, lab: np.ndarray) -> np.ndarray:
    """The torch integer generator's pixels from a numpy table, as the decoder calls it."""
    return generator_torch.from_table(table).forward_numpy(sym, lab)


def _oldest_release() -> parts.DecoderParts:
    """The first shipped release's parts."""
    oldest = parts.find_parts(parts.installed_release_meta()[0]["hash"])
    assert oldest is not None
    return oldest


@pytest.mark.slow
def test_a_changed_weight_changes_the_numpy_pixels() -> None:
    """The comparison above has teeth: one integer weight of a trained table moves pixels."""
    released = _oldest_release()  # a shipped release: every conv is in use
    state = {k: v.copy() for k, v in released.generator.items()}
    sym, lab = _inputs(released.levels, released.channels)
    ref = generator.IntegerGenerator(state).forward(sym, lab)
    last = f"c{2 * int(state['meta'][3]) + 1}.w"
    state[last][0, 0, 1, 1] += 2000
    assert not np.array_equal(generator.IntegerGenerator(state).forward(sym, lab), ref)
    want = _torch_pixels(released.generator, sym, lab)
    assert np.array_equal(ref, want)


def test_numpy_generator_on_threads_gives_the_same_pixels(monkeypatch) -> None:
    """Rows split over the generator's threads (one row per product) change no pixel."""
    released = _oldest_release()
    sym, lab = _inputs(released.levels, released.channels, seed=3)
    want = _torch_pixels(released.generator, sym, lab)
    monkeypatch.setattr(ops, "CHUNK_BYTES", 1)
    for threads in (1, 2, 3):
        got = generator.IntegerGenerator(released.generator, threads=threads).forward(sym, lab)
        assert np.array_equal(got, want), threads


def test_check_table_refuses_accumulators_beyond_2_pow_24(bundle) -> None:
    state = {k: v.numpy().copy() for k, v in bundle.integer_generator.state.items()}
    generator.check_table(state)
    state["c1.w"] = state["c1.w"].astype(np.int64) * 100000
    with pytest.raises(ValueError, match="2\\*\\*24"):
        generator.check_table(state)


def test_parts_round_trip_and_are_found_by_hash(bundle, tmp_path, monkeypatch) -> None:
    path = zoo.write_decoder_parts(bundle, tmp_path, "2026-12-01")
    assert path.name == f"tiny-{bundle.hash[:8]}.npz"
    got = parts.load_parts(path)
    want = zoo.decoder_parts(bundle)
    assert (got.name, got.hash, got.released, got.levels) == (
        "tiny",
        bundle.hash,
        "2026-12-01",
        bundle.levels,
    )
    assert np.array_equal(got.compact_table, want.compact_table)
    for k, v in want.generator.items():
        assert np.array_equal(got.generator[k], v), k
    monkeypatch.setattr(parts, "parts_dir", lambda: tmp_path)
    monkeypatch.setattr(parts, "_CACHE", {})
    assert parts.find_parts(bundle.hash).hash == bundle.hash
    assert parts.find_parts("0" * 16) is None
    assert parts.release_meta(bundle.hash)["name"] == "tiny"


def test_malformed_parts_files_are_refused(bundle, tmp_path) -> None:
    path = zoo.write_decoder_parts(bundle, tmp_path, "2026-12-01")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    bad = dict(arrays)
    bad["gen.weights_zst"] = bad["gen.weights_zst"][:-7]  # a truncated weight block
    np.savez(tmp_path / "bad.npz", **bad)
    with pytest.raises(ModelError, match="bad.npz"):
        parts.load_parts(tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelError):
        parts.load_parts(tmp_path / "junk.npz")
