"""--chroma 420: the AVIF residual with half-size colour planes, decoded without a flag."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from semcodec.cli import cli
from semcodec.decoder.info import file_info
from semcodec.encoder import enhance, gating
from semcodec.encoder.codec import Codec
from semcodec.encoder.options import EncodeOptions
from semcodec.format import container
from semcodec.format.container import LayerKind
from semcodec.format.gating import NONE
from semcodec.format.residual import get_backend
from semcodec.format.residual_avif import chroma_layout

pytestmark = pytest.mark.usefixtures("one_thread")

FLAT = 128  # the prediction of a tile coded without one


def _image(h: int = 48, w: int = 64) -> np.ndarray:
    """Colourful texture: 4:2:0 and 4:4:4 code it differently."""
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 4, y * 5, (x * y) % 256], -1) + rng.integers(0, 30, (h, w, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def _residual(data: bytes) -> bytes:
    return container.unpack(data)[1][LayerKind.RESIDUAL]


def test_options_refuse_unknown_chroma_and_other_coders() -> None:
    assert EncodeOptions().chroma == "444" and EncodeOptions().layout() is None
    assert EncodeOptions(chroma="420").layout() == "4:2:0"
    with pytest.raises(ValueError, match="chroma must be one of 444, 420"):
        EncodeOptions(chroma="422")
    with pytest.raises(ValueError, match="needs the avif residual"):
        EncodeOptions(chroma="420", residual="native")


@pytest.mark.slow
@pytest.mark.parametrize("effort", [3, 5, 9])
def test_420_codes_the_residual_in_420_at_every_effort(effort: int) -> None:
    """Below VERIFY_EFFORT one candidate, from it two: with chroma 420 every one of them is
    4:2:0, and the default keeps 4:4:4 residuals."""
    codec = Codec("tiny")
    img = _image()
    sub = codec.encode(img, quality=60, effort=effort, chroma="420")
    full = codec.encode(img, quality=60, effort=effort)
    assert chroma_layout(_residual(sub)) == "4:2:0"
    assert sub != full and len(sub) < len(full)
    assert file_info(sub)["residual_chroma"] == "4:2:0"
    assert codec.encode(img, quality=60, effort=effort, chroma="444") == full


def test_default_bytes_are_the_444_coder_on_the_image() -> None:
    """The default (444) file's residual is the coder's default layout, as before the option."""
    codec = Codec("tiny")
    img = _image()
    none_only = EncodeOptions(quality=60, gating=gating.GatingConfig(modes=(NONE,)))
    avif = get_backend("avif")
    res = img.astype(np.int16) - FLAT
    assert _residual(codec.encode(img, none_only)) == avif.encode(res, 60)
    sub = codec.encode(img, none_only.but(chroma="420"))
    assert _residual(sub) == avif.encode(res, 60, layout="4:2:0")


def test_420_file_decodes_to_the_residual_coders_picture() -> None:
    """Without enhancement the decoded picture is the prediction plus the 4:2:0 residual."""
    codec = Codec("tiny")
    img = _image()
    opts = EncodeOptions(quality=60, chroma="420", gating=gating.GatingConfig(modes=(NONE,)))
    data = codec.encode(img, opts)
    h, w = img.shape[:2]
    want = np.clip(get_backend("avif").decode(_residual(data), h, w) + FLAT, 0, 255)
    assert np.array_equal(np.asarray(codec.decode(data).image), want.astype(np.uint8))


def test_420_file_decodes_to_the_encoders_reconstruction(monkeypatch) -> None:
    """With the enhancement network, what the encoder fitted and kept is what every decoder
    (the encoder's and the torch-free one) returns for a 4:2:0 file."""
    import semcodec

    seen = []
    choose = enhance.choose

    def spy(*args, **kwargs):
        choice = choose(*args, **kwargs)
        seen.append((args[2].copy(), choice.picture.copy()))
        return choice

    monkeypatch.setattr(enhance, "choose", spy)
    codec = Codec("tiny-enh")
    img = _image(72, 88)
    for q, forced in ((20, True), (60, False)):  # the test network's layer never pays by itself
        monkeypatch.setattr(enhance, "pays", lambda *_, keep=forced: keep)
        # where forced, the cheapest of the files the encoder compares is the longest: one with
        # a layer (the encoder keeps the least costly of the plain, closed-form, adapted files)
        monkeypatch.setattr(enhance, "cost", lambda _mse, size, _q: -size)
        data = codec.encode(img, quality=q, chroma="420")
        assert chroma_layout(_residual(data)) == "4:2:0"
        plain, enhanced = seen[-1]
        assert (LayerKind.ENHANCE in container.unpack(data)[1]) == forced
        assert not forced or not np.array_equal(plain, enhanced)  # the layer changes pixels
        want = enhanced if forced else plain
        assert np.array_equal(np.asarray(codec.decode(data).image), want)
        assert np.array_equal(np.asarray(semcodec.decode(data)), want)
    assert len(seen) == 2


def test_cli_chroma_and_info(tmp_path) -> None:
    from PIL import Image

    src = tmp_path / "a.png"
    Image.fromarray(_image()).save(src)
    run = CliRunner().invoke
    out = tmp_path / "a420.sem"
    r = run(cli, ["encode", str(src), "--model", "tiny", "--chroma", "420", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes() == Codec("tiny").encode(str(src), quality=50, chroma="420")
    r = run(cli, ["info", str(out)])
    assert r.exit_code == 0 and "residual avif 4:2:0" in r.output, r.output
    default = tmp_path / "a.sem"
    r = run(cli, ["encode", str(src), "--model", "tiny", "-o", str(default)])
    assert r.exit_code == 0, r.output
    assert default.read_bytes() == Codec("tiny").encode(str(src), quality=50)
    r = run(cli, ["info", str(default)])
    assert "residual avif 4:4:4" in r.output, r.output
    for bad in (["--chroma", "422"], ["--chroma", "420", "--residual", "native"]):
        r = run(cli, ["encode", str(src), "--model", "tiny", "-o", str(tmp_path / "b.sem"), *bad])
        assert r.exit_code == 2, r.output
        assert not (tmp_path / "b.sem").exists()
    assert "needs the avif residual" in r.output


@pytest.mark.slow
def test_enhance_data_maker_decodes_420(tmp_path) -> None:
    """The training pairs of the data maker come from files coded in the chroma asked for."""
    from PIL import Image

    from semcodec.train.enhance import write_shard

    src = tmp_path / "p.png"
    Image.fromarray(_image(64, 80)).save(src)
    codec = Codec("tiny")
    shards = {}
    for chroma in ("444", "420"):
        out = tmp_path / chroma
        out.mkdir()
        with np.load(write_shard(codec, src, 0, 2, "avif", out, chroma)) as z:
            shards[chroma] = {k: z[k] for k in z.files}
        assert str(shards[chroma]["chroma"]) == chroma
    q = int(shards["420"]["quality"][0])
    data = codec.encode(str(src), quality=q, chroma="420", enhance=False)
    assert np.array_equal(shards["420"]["decoded"][0], np.asarray(codec.decode(data).image))
    assert not np.array_equal(shards["420"]["decoded"], shards["444"]["decoded"])
    with np.load(write_shard(codec, src, 1, 1, "native", tmp_path / "420", "420")) as z:
        assert str(z["chroma"]) == "444"  # the native coder has no chroma layout


def test_bench_adapter_codes_420() -> None:
    """`bench rd --codecs semcodec-420` measures the 4:2:0 files beside the default's."""
    from semcodec.bench.codecs import make_adapter

    img = _image()
    sub = make_adapter("semcodec-420", model="tiny")
    full = make_adapter("semcodec", model="tiny")
    assert sub.name == "semcodec-420" and sub.info()["chroma"] == "420"
    assert full.info()["chroma"] == "444"
    data = sub.encode(img, 60)
    assert chroma_layout(_residual(data)) == "4:2:0"
    assert data == Codec("tiny").encode(img, quality=60, chroma="420")
    assert chroma_layout(_residual(full.encode(img, 60))) == "4:4:4"
