"""The Python API (``semcodec.encode``/``decode``) and the Pillow plugin, with the "tiny" bundle."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import semcodec
from semcodec.encoder.codec import get_codec
from semcodec.encoder.roi_spec import parse_roi
from semcodec.format import container

W, H = 64, 48
TINY = {"model": "tiny", "residual": "native"}


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _rgb(seed: int = 0) -> Image.Image:
    """A small structured test image."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    a = np.stack([x * 4, y * 5, (x + y) * 2], -1).astype(np.int16)
    a[8:28, 16:40] = rng.integers(0, 256, 3)
    a += rng.integers(-4, 5, a.shape).astype(np.int16)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def _diff(a: Image.Image, b: Image.Image) -> float:
    return float(np.abs(np.asarray(a).astype(np.int16) - np.asarray(b).astype(np.int16)).mean())


@pytest.fixture(autouse=True)
def _real_package():
    """Fail clearly (not with AttributeErrors) when semcodec/__init__.py was never executed."""
    if getattr(semcodec, "__file__", None) is None:
        pytest.fail(
            "semcodec was imported as a namespace package: the editable install predates "
            "src/semcodec/__init__.py; reinstall it with `pip install -e . --no-deps`"
        )


@pytest.mark.subprocess
def test_package_import_registers_plugin_without_torch():
    """`import semcodec` must register the plugin, and must not import torch for that."""
    code = "import sys, semcodec; from PIL import Image; "
    code += (
        "assert Image.registered_extensions()['.sem'] == 'SEM'; assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert Image.registered_extensions()[".sem"] == "SEM"
    assert Image.MIME["SEM"] == "image/x-sem"
    assert "SEM" in Image.OPEN and "SEM" in Image.SAVE


def test_encode_decode_rgb():
    img = _rgb()
    data = semcodec.encode(img, quality=95, **TINY)
    assert isinstance(data, bytes) and data.startswith(container.MAGIC)
    out = semcodec.decode(data)
    assert out.size == img.size and out.mode == "RGB"
    assert _diff(out, img) < 3
    base = semcodec.decode(data, layer="base")
    assert base.size == img.size and _diff(base, img) > _diff(out, img)
    # quality 0: base layer only
    assert container.read_header(semcodec.encode(img, quality=0, **TINY)).residual_backend == 0


def test_default_residual_backend():
    """The API's default residual backend (avif) works end to end: decoded pixels close to the
    input (27.0 dB when written; the untrained tiny network's base alone gives about 10 dB)."""
    img = _rgb(1)
    data = semcodec.encode(img, quality=80, model="tiny")
    header = container.read_header(data)
    assert header.residual_backend == container.RESIDUAL_AVIF
    out = semcodec.decode(data)
    assert out.size == (W, H) and out.mode == "RGB"
    err = np.asarray(out).astype(np.float64) - np.asarray(img).astype(np.float64)
    psnr = 10 * np.log10(255**2 / max(float(np.mean(err**2)), 1e-12))
    assert psnr > 24, psnr


def test_gray_in_gray_out():
    gray = _rgb().convert("L")
    out = semcodec.decode(semcodec.encode(gray, quality=90, **TINY))
    assert out.mode == "L" and out.size == gray.size
    assert _diff(out, gray) < 4


def test_rgba_alpha_is_exact():
    img = _rgb().convert("RGBA")
    alpha = np.zeros((H, W), np.uint8)
    alpha[:, W // 2 :] = 255
    alpha[10:20, 5:15] = 128
    img.putalpha(Image.fromarray(alpha))
    data = semcodec.encode(img, quality=50, **TINY)
    assert container.read_header(data).mode == "RGBA"
    out = semcodec.decode(data)
    assert out.mode == "RGBA" and out.size == img.size
    assert np.array_equal(np.asarray(out)[..., 3], alpha)


def test_plugin_open_header_first_then_pixels(tmp_path: Path):
    img = _rgb(2)
    data = semcodec.encode(img, quality=90, **TINY)
    path = tmp_path / "x.sem"
    path.write_bytes(data)
    with Image.open(path) as im:
        assert im.format == "SEM" and im.get_format_mimetype() == "image/x-sem"
        assert im.size == (W, H) and im.mode == "RGB"
        assert im._im is None  # nothing decoded yet
        assert im.info["model"] == "tiny" and im.info["quality"] == 90
        im.load()
        assert np.array_equal(np.asarray(im), np.asarray(semcodec.decode(data)))
    # from a stream, and the gray mode is known before loading
    gray = semcodec.encode(img.convert("L"), quality=60, **TINY)
    im = Image.open(io.BytesIO(gray))
    assert im.mode == "L"
    assert np.asarray(im.convert("RGB")).shape == (H, W, 3)


def test_plugin_save(tmp_path: Path):
    img = _rgb(3)
    path = tmp_path / "saved.sem"
    img.save(path, quality=90, **TINY)  # format from the extension
    header = container.read_header(path.read_bytes())
    assert (header.model_name, header.quality, header.width) == ("tiny", 90, W)
    with Image.open(path) as im:
        assert _diff(im, img) < 4
    buf = io.BytesIO()
    img.convert("L").save(buf, format="SEM", quality=0, model="tiny")
    assert container.read_header(buf.getvalue()).mode == "L"


def test_plugin_corrupt_files(tmp_path: Path):
    data = bytearray(semcodec.encode(_rgb(), quality=20, **TINY))
    data[-3] ^= 0xFF  # payload damage: header still fine
    path = tmp_path / "bad.sem"
    path.write_bytes(bytes(data))
    with Image.open(path) as im:
        assert im.size == (W, H)
        with pytest.raises(OSError, match="CRC mismatch"):
            im.load()
    with Image.open(path) as im, pytest.raises(SyntaxError):
        im.verify()
    path.write_bytes(bytes(data[:20]))  # truncated header: not identified
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(path)


def test_decode_refuses_wrong_model():
    data = semcodec.encode(_rgb(), quality=0, **TINY)
    with pytest.raises(semcodec.errors.SemcodecError):
        semcodec.decode(data, model="no-such-model")


def test_analyse_once_then_finish_equals_plain_encodes():
    """Rate control reuses one analysis: every quality must give the file a full encode gives."""
    codec = get_codec("tiny")
    img = _rgb(2).convert("RGBA")
    analysis = codec.analyse(img)
    for q in (0, 30, 0, 90):  # base only, residual, and again after the generator ran
        data, stats = codec.finish(analysis, quality=q, residual="native")
        assert data == codec.encode(img, quality=q, residual="native")
        assert stats.total_bytes == len(data) and {"segment", "pack"} <= set(stats.times.wall)
    with pytest.raises(ValueError, match="quality must be 0..100"):
        codec.finish(analysis, quality=101)
    with pytest.raises(ValueError, match="analysed with"):  # the ROI is fixed by the analysis
        codec.finish(analysis, roi=parse_roi("car"))


def test_plugin_opens_the_longest_header(tmp_path: Path):
    """A format-4 file with every layer kind and a 64-character model name is identified."""
    from dataclasses import replace

    from semcodec.format.container import LayerKind
    from semcodec.format.metadata import Metadata, encode_metadata

    header, layers = container.unpack(semcodec.encode(_rgb(4), quality=50, **TINY))
    layers[LayerKind.METADATA] = encode_metadata(Metadata(xmp=b"<x/>"))
    for kind in LayerKind:
        layers.setdefault(kind, b"\x00")
    header = replace(header, mode="RGBA", model_name="m" * container.MAX_MODEL_NAME)
    data = container.pack(header, layers)
    assert len(layers) == 8 and len(data) > container.MAX_HEADER_SIZE
    path = tmp_path / "long.sem"
    path.write_bytes(data)
    with Image.open(path) as im:
        assert im.format == "SEM" and im.size == (W, H) and im.info["xmp"] == b"<x/>"


def test_a_codec_call_takes_options_or_keywords_never_a_positional_quality():
    from semcodec.encoder.options import EncodeOptions

    codec = get_codec("tiny")
    with pytest.raises(TypeError, match="by keyword"):
        codec.encode(_rgb(), 60)
    with pytest.raises(ValueError, match="effort must be 1..9"):
        EncodeOptions(effort=10)
    with pytest.raises(ValueError, match="unknown residual backend"):
        codec.encode(_rgb(), residual="jpeg")
    opts = EncodeOptions(quality=20, residual="native")
    assert codec.encode(_rgb(), opts, quality=30) == codec.encode(_rgb(), opts.but(quality=30))
    assert opts.quality == 20  # frozen: a call's changes make new options


def test_encode_takes_a_size_target_like_the_command_line(tmp_path: Path, monkeypatch):
    """target_size/target_bpp: the highest quality's file that fits, the file --target-size
    writes."""
    from click.testing import CliRunner

    from semcodec.cli import cli
    from semcodec.encoder.ratecontrol import TargetNotMet

    img = _rgb(3)
    budget = len(semcodec.encode(img, quality=40, **TINY)) - 1
    data = semcodec.encode(img, target_size=budget, **TINY)
    quality = container.read_header(data).quality
    assert quality > 0 and len(data) <= budget
    assert data == semcodec.encode(img, quality=quality, **TINY)
    assert semcodec.encode(img, target_bpp=8 * budget / (W * H), **TINY) == data
    monkeypatch.chdir(tmp_path)
    img.save("a.png")
    args = ["encode", "a.png", "--target-size", str(budget), "--model", "tiny"]
    r = CliRunner().invoke(cli, [*args, "--residual", "native"])
    assert r.exit_code == 0 and (tmp_path / "a.sem").read_bytes() == data, r.output
    with pytest.raises(TargetNotMet, match="smallest file is"):
        semcodec.encode(img, target_size=10, **TINY)
    with pytest.raises(ValueError, match="not both"):
        semcodec.encode(img, quality=20, target_size=5000, **TINY)
