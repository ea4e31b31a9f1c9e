"""--effort 1..9: encoder time for bytes, never a change to how files decode."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from semcodec.cli import cli
from semcodec.encoder.codec import Codec
from semcodec.encoder.options import EncodeOptions
from semcodec.format.residual_avif import speed_for

pytestmark = pytest.mark.usefixtures("one_thread")


def _image() -> np.ndarray:
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:48, 0:64]
    rgb = np.stack([x * 4, y * 5, (x * y) % 256], -1) + rng.integers(0, 30, (48, 64, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def test_effort_maps_to_libaom_speed():
    assert [speed_for(e) for e in range(1, 10)] == [8, 7, 6, 6, 6, 4, 3, 1, 0]
    for bad in (0, 10):
        with pytest.raises(ValueError, match="effort must be 1..9"):
            speed_for(bad)
    with pytest.raises(ValueError, match="effort must be 1..9"):
        EncodeOptions(effort=0)


@pytest.mark.slow
def test_every_effort_is_one_av1_encode_and_the_closed_form_fit(monkeypatch):
    """From quality 10 no effort runs CompNet, a second AV1 encode or the adaptation: each is
    the AV1 encode at its speed, the map and the enhancement's least-squares fit."""
    from semcodec.encoder import adapt
    from semcodec.format import residual_avif

    def refuse(*args, **kwargs):
        raise AssertionError("adapted")

    monkeypatch.setattr(adapt, "fit_update", refuse)
    codec = Codec("tiny-enh")
    monkeypatch.setattr(codec, "reconstruct", lambda *a: pytest.fail("generator ran"))
    encodes = []
    real = residual_avif.AvifBackend.encode

    def counted(self, *args, **kwargs):
        encodes.append(args[2] if len(args) > 2 else kwargs.get("effort"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(residual_avif.AvifBackend, "encode", counted)
    for effort in range(1, 10):
        encodes.clear()
        _, stats = codec.encode_with_stats(_image(), EncodeOptions(quality=40, effort=effort))
        assert encodes == [effort] and "compnet" not in stats.times.cpu, effort


@pytest.mark.slow
def test_effort_changes_the_avif_residual_not_the_decoder():
    img = _image()
    codec = Codec("tiny")
    files = {e: codec.encode(img, quality=60, residual="avif", effort=e) for e in (1, 5, 9)}
    assert len(set(files.values())) == 3  # the residual coder really ran at three speeds
    decoder = Codec("tiny")  # any effort: decoding does not read it
    base = {e: decoder.decode(d, layer="base").image.tobytes() for e, d in files.items()}
    assert len(set(base.values())) == 1  # the base layer is the same at every effort
    base_err = np.abs(np.asarray(decoder.decode(files[5], layer="base").image).astype(int) - img)
    for data in files.values():  # and every residual improves on it
        out = np.asarray(decoder.decode(data).image).astype(int)
        assert out.shape == img.shape and np.abs(out - img).mean() < 0.7 * base_err.mean()


@pytest.mark.slow
def test_native_residual_ignores_effort():
    img = _image()
    codec = Codec("tiny")
    fast = codec.encode(img, quality=60, residual="native", effort=1)
    assert fast == codec.encode(img, quality=60, residual="native", effort=9)


@pytest.mark.slow
def test_cli_effort(tmp_path):
    from PIL import Image

    Image.fromarray(_image()).save(tmp_path / "a.png")
    run = CliRunner().invoke
    r = run(
        cli,
        [
            "encode",
            str(tmp_path / "a.png"),
            "--model",
            "tiny",
            "-e",
            "9",
            "-o",
            str(tmp_path / "e9.sem"),
        ],
    )
    assert r.exit_code == 0, r.output
    r = run(
        cli, ["encode", str(tmp_path / "a.png"), "--model", "tiny", "-o", str(tmp_path / "e5.sem")]
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "e9.sem").read_bytes() != (tmp_path / "e5.sem").read_bytes()
    want = Codec("tiny").encode(str(tmp_path / "a.png"), quality=50, residual="avif", effort=9)
    assert (tmp_path / "e9.sem").read_bytes() == want
    r = run(cli, ["encode", str(tmp_path / "a.png"), "--model", "tiny", "--effort", "0"])
    assert r.exit_code == 2 and "effort" in r.output.lower()


def test_residual_passes_its_efforts_libaom_options(monkeypatch):
    """An effort's AOM_OPTIONS reach libaom (the payload changes with them, an effort without
    any is libavif's defaults) and the decoder reads either payload, which carries what it
    needs."""
    from semcodec.format import residual_avif
    from semcodec.format.residual_avif import AvifBackend

    res = _image().astype(np.int16) - 128
    backend = AvifBackend()
    monkeypatch.setattr(residual_avif, "AOM_OPTIONS", {5: {"deltaq-mode": "0", "sharpness": "1"}})
    with_options = backend.encode(res, 80, 5)
    assert backend.encode(res, 80, 4) == backend.encode(res, 80, 3)  # same speed, no options
    monkeypatch.setattr(residual_avif, "AOM_OPTIONS", {})
    without = backend.encode(res, 80, 5)
    assert with_options != without
    for data in (with_options, without):
        out = backend.decode(data, *res.shape[:2]).astype(int)
        assert np.abs(out - res).mean() < 8


def test_slow_efforts_skip_4x4_partitions(monkeypatch):
    """Efforts 6 and 7 encode without 4x4 partitions (chosen on the front: docs/benchmarks.md),
    also under an ROI guide, whose delta-q options join them; the others keep libaom's."""
    from PIL import Image

    from semcodec.format import residual_avif

    if not residual_avif._aom_encodes():
        pytest.skip("Pillow's libavif encodes with another AV1 encoder")
    assert [e for e in range(1, 10) if residual_avif.aom_options(e)] == [6, 7]
    assert residual_avif.aom_options(7) == {"min-partition-size": "8"}
    seen: list[dict[str, str]] = []
    save = Image.Image.save

    def spy(self, fp, format=None, **params):
        seen.append(dict(params.get("advanced") or {}))
        return save(self, fp, format, **params)

    monkeypatch.setattr(Image.Image, "save", spy)
    res = _image().astype(np.int16) - 128
    guide = np.ones((3, 4))  # one rate per 16-pixel block of the 48 x 64 picture
    backend = residual_avif.AvifBackend()
    backend.encode(res, 60, 7)
    backend.encode(res, 60, 7, guide=guide)
    backend.encode(res, 60, 5, guide=guide)
    assert seen[0] == {"min-partition-size": "8"}
    assert seen[1]["min-partition-size"] == "8" and seen[1]["deltaq-mode"] == "3"
    assert "min-partition-size" not in seen[2] and seen[2]["deltaq-mode"] == "3"
