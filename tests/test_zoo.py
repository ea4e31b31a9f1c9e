"""Model zoo: weights files round trip, carry their content hash, and files refuse other weights."""

from __future__ import annotations

import copy
import io
from dataclasses import replace

import numpy as np
import pytest
import torch

from semcodec.encoder.codec import Codec
from semcodec.errors import ModelError
from semcodec.zoo import bundles as zoo
from semcodec.zoo import registry


def _tiny_parts():
    b = zoo.load_bundle("tiny")
    return b.seg, b.comp, b.gen, b.compact_table


def test_bundle_round_trip_and_hash_in_name(tmp_path) -> None:
    seg, comp, gen, table = _tiny_parts()
    spec = registry.BundleSpec("roundtrip", seg="tiny", compnet="tiny", generator="tiny")
    path = zoo.save_bundle(tmp_path, spec, seg, comp, gen, table, {"note": "test"})
    assert path.name.startswith("roundtrip-") and path.suffix == ".pt"
    assert path.read_bytes().startswith(registry.PACKED_MAGIC)  # stored packed
    digest = registry.state_hash(registry.read_weights(path))  # the hash is the payload's
    assert path.stem.endswith(digest[:8])
    loaded = zoo.load_bundle(str(path))
    assert loaded.hash == digest and loaded.info == {"note": "test"}
    assert np.array_equal(loaded.compact_table, table)
    for a, b in ((seg, loaded.seg), (comp, loaded.comp), (gen, loaded.gen)):
        for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
            assert ka == kb
            if va.is_floating_point():  # stored in fp16
                assert torch.allclose(va.half().float(), vb)


def test_a_bundles_class_offsets_are_typed_and_applied(tmp_path) -> None:
    """The one behaviour a weights file's info carries is read through the bundle's typed
    accessor, and it is what the map network runs with."""
    from semcodec.models.segmentation import CLASS_NAMES

    seg, comp, gen, table = _tiny_parts()
    spec = registry.BundleSpec("biased", seg="tiny", compnet="tiny", generator="tiny")
    info = {zoo.SEG_CLASS_BIAS: {"pole": 0.5}, "note": "test"}
    loaded = zoo.load_bundle(str(zoo.save_bundle(tmp_path, spec, seg, comp, gen, table, info)))
    assert loaded.seg_class_bias == {"pole": 0.5}
    assert loaded.seg.cfg.class_bias[CLASS_NAMES.index("pole")] == 0.5
    assert zoo.load_bundle("tiny").seg_class_bias == {}


def _payload_that_creates(marker) -> bytes:
    """A torch.save'd file whose unpickling would call open(marker, "w") (creating the file)."""

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    buf = io.BytesIO()
    torch.save({"format": 1, "x": Evil()}, buf)
    return buf.getvalue()


def test_packed_weights_unpack_to_their_payload_and_refuse_damage(tmp_path) -> None:
    """pack_weights is lossless, an unpacked (older) file loads as before, and a damaged
    packed file is a ModelError, not a crash or a wrong network."""
    seg, comp, gen, table = _tiny_parts()
    spec = registry.BundleSpec("packed", seg="tiny", compnet="tiny", generator="tiny")
    payload = zoo.serialize_bundle(spec, seg, comp, gen, table)
    packed = registry.pack_weights(payload)
    assert packed.startswith(registry.PACKED_MAGIC) and len(packed) < len(payload)
    assert registry.unpack_weights(packed) == payload
    assert registry.unpack_weights(payload) == payload  # not packed: as it is
    raw = tmp_path / "raw.pt"
    raw.write_bytes(payload)
    assert zoo.load_bundle(str(raw)).hash == registry.state_hash(payload)
    assert registry.weights_hash(raw) == registry.state_hash(payload)
    (tmp_path / "packed.pt").write_bytes(packed)
    assert registry.weights_hash(tmp_path / "packed.pt") == registry.state_hash(payload)
    at = len(registry.PACKED_MAGIC) + 16  # the recorded SHA-256
    wrong_digest = packed[:at] + bytes(32) + packed[at + 32 :]
    for i, damaged in enumerate(
        (packed[:-10], packed[:20], packed[:-1] + bytes([packed[-1] ^ 0xFF]), wrong_digest)
    ):
        path = tmp_path / f"damaged{i}.pt"
        path.write_bytes(damaged)
        with pytest.raises(ModelError, match="cannot load model weights"):
            zoo.load_bundle(str(path))


def test_shipped_weights_are_packed_under_20_mb() -> None:
    """Tracked files stay small: every shipped bundle is stored packed, below 20 MiB (the map
    network trained from ImageNet packs 110 KB larger than the fine-tuned one before it:
    20.008 MB, past the 20,000,000 bytes this once said)."""
    for spec in registry.REGISTRY.values():
        if spec.weights:
            data = registry.weights_path(spec.name).read_bytes()
            assert data.startswith(registry.PACKED_MAGIC) and len(data) < 20 << 20, spec.name


def test_weights_load_without_code_execution(tmp_path) -> None:
    # The payload is a valid torch file: a loader that unpickles arbitrary objects runs it.
    control = tmp_path / "control-ran"
    torch.load(io.BytesIO(_payload_that_creates(control)), weights_only=False)["x"].close()
    assert control.exists(), "the payload must be able to execute when unpickling is unrestricted"
    marker = tmp_path / "payload-ran"
    bad = tmp_path / "evil-00000000.pt"
    bad.write_bytes(_payload_that_creates(marker))
    raised: BaseException | None = None
    try:
        zoo.load_bundle(str(bad))
    except BaseException as exc:  # noqa: BLE001 - checked below, after the side effect
        raised = exc
    assert not marker.exists(), "loading the weights file executed code from it"
    assert isinstance(raised, ModelError), raised


def test_registered_model_without_its_file_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A registry entry whose weights file is gone: ModelError naming the file, not a crash."""
    spec = registry.BundleSpec(
        "gone", seg="tiny", compnet="tiny", generator="tiny", weights="gone-0.pt"
    )
    monkeypatch.setitem(registry.REGISTRY, "gone", spec)
    with pytest.raises(ModelError, match="weights file gone-0.pt of model 'gone' is missing"):
        zoo.load_bundle("gone")


def test_tampered_weights_rejected(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A validly serialised bundle with other weights under the recorded-hash name: the hash
    check (not a decoding error) rejects it."""
    seg, comp, gen, table = _tiny_parts()
    spec = registry.BundleSpec("tamper", seg="tiny", compnet="tiny", generator="tiny")
    path = zoo.save_bundle(tmp_path, spec, seg, comp, gen, table)
    registry.register(
        registry.BundleSpec(
            "tamper", seg="tiny", compnet="tiny", generator="tiny", weights=path.name
        )
    )
    other = tmp_path / "copy"
    other.mkdir()
    gen2 = copy.deepcopy(gen)
    with torch.no_grad():
        next(gen2.parameters()).add_(0.25)  # other weights, same architecture
    forged = zoo.serialize_bundle(spec, seg, comp, gen2, table)
    assert forged != registry.read_weights(path)
    (other / path.name).write_bytes(forged)
    assert torch.load(other / path.name, weights_only=True)["format"] == zoo.FORMAT
    try:
        monkeypatch.setattr(registry, "weights_dir", lambda: other)  # where load_bundle looks
        zoo._CACHE.pop("tamper", None)
        digest = registry.state_hash(forged)[:8]
        with pytest.raises(ModelError, match=f"do not match their recorded hash {digest}"):
            zoo.load_bundle("tamper")
        monkeypatch.setattr(registry, "weights_dir", lambda: tmp_path)
        assert zoo.load_bundle("tamper").hash.startswith(path.stem[-8:])  # the original loads
    finally:
        registry.REGISTRY.pop("tamper", None)
        zoo._CACHE.pop("tamper", None)


def test_decoder_refuses_file_from_other_weights(tmp_path) -> None:
    seg, comp, gen, table = _tiny_parts()
    spec = registry.BundleSpec("tiny", seg="tiny", compnet="tiny", generator="tiny")
    with torch.no_grad():
        gen.body[-2].bias.add_(0.0)  # same weights, different file: the hash still differs by info
    path = zoo.save_bundle(tmp_path / "t.pt", spec, seg, comp, gen, table, {"other": True})
    data = Codec("tiny").encode(np.full((16, 16, 3), 128, np.uint8), quality=0)
    with pytest.raises(ModelError, match="hash"):
        Codec(str(path)).decode(data)


def test_unknown_model_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="unknown model"):
        zoo.load_bundle("no-such-model")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(registry.REGISTRY))
def test_every_registered_bundle_loads_with_the_networks_its_file_records(name: str) -> None:
    """The registry names each shipped file explicitly; the networks come from the file's spec."""
    spec = registry.REGISTRY[name]
    bundle = zoo.load_bundle(name)
    assert bundle.name == name and bundle.spec.weights == spec.weights
    if spec.weights is not None:
        assert registry.weights_path(name).is_file()
        assert spec.weights.removesuffix(".pt").endswith(bundle.hash[:8])
    assert bundle.comp.cfg.out_channels == bundle.compact_table.shape[0]
    assert bundle.gen.cfg.compact_channels == bundle.comp.cfg.out_channels


def test_shipped_files_are_all_registered() -> None:
    """A weights file in models/ that no registry entry names would never be used."""
    named = {s.weights for s in registry.REGISTRY.values()}
    assert {p.name for p in registry.weights_dir().glob("*.pt")} <= named


@pytest.mark.slow
def test_perceptual_codes_the_base_layer_in_its_source_releases_bytes() -> None:
    """`perceptual` is `default-04618992` with another generator: the same compact table as
    that release's installed parts, so its map and compact payloads decode as that release's
    file too, to another picture (the generator is the only difference)."""
    from semcodec.decoder.parts import find_parts, installed_release_meta
    from semcodec.decoder.pipeline import Decoder
    from semcodec.format import container

    (meta,) = (m for m in installed_release_meta() if m["hash"].startswith("04618992"))
    source = find_parts(meta["hash"])
    assert source is not None and source.release == "default-04618992"
    perceptual = Codec("perceptual")
    assert np.array_equal(perceptual.bundle.compact_table, source.compact_table)
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:96, 0:128]
    rgb = np.stack([x * 2, y * 2, (x + y) % 256], -1) + rng.integers(0, 30, (96, 128, 3))
    rgb = rgb.clip(0, 255).astype(np.uint8)
    data = perceptual.encode(rgb, quality=0)
    header, layers = container.unpack(data)
    as_source = container.pack(
        replace(header, model_name=source.name, model_hash=source.hash), layers
    )
    mine = np.asarray(perceptual.decode(data).image).astype(int)
    theirs = np.asarray(Decoder(source).decode(as_source).image)
    assert np.abs(mine - theirs).mean() > 0.1


def test_the_registry_states_each_shipped_bundles_real_networks():
    """A registered bundle with a weights file names the networks its file records (the file's
    spec wins at load, so a stale registry entry would only mislead `semcodec models`)."""
    from dataclasses import replace

    from semcodec.zoo.bundles import load_bundle
    from semcodec.zoo.registry import REGISTRY

    for name, spec in REGISTRY.items():
        if spec.weights is None:
            continue
        loaded = load_bundle(name).spec
        assert replace(spec, seed=loaded.seed) == loaded, name


def test_the_product_registry_offers_shipped_bundles_only(monkeypatch) -> None:
    """The registry as the product loads it (a fresh copy of its module: this process also has
    the tests' bundles) names bundles with a weights file, never the random test bundles."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("fresh_registry", registry.__file__)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fresh_registry", fresh)  # its dataclasses look it up
    spec.loader.exec_module(fresh)
    assert "default" in fresh.REGISTRY and "tiny" in registry.REGISTRY
    assert all(s.weights for s in fresh.REGISTRY.values()), sorted(fresh.REGISTRY)
    assert not set(fresh.REGISTRY) & {"tiny", "tiny-enh"}
