"""The semantic map as data: `decode --layer map`, `semcodec.decode_map`, `info`'s classes.

The map is read from the header and the map layer alone: no model, no generator, no torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import semcodec
from semcodec.cli import cli
from semcodec.errors import CorruptData
from semcodec.format import container
from semcodec.format.container import LayerKind

HERE = Path(__file__).resolve().parent
DEFAULT_FILE = HERE / "conformance" / "default-04618992" / "rgb-q50-avif.sem"
W, H = 70, 45  # not multiples of 8: the full-size map is cropped

pytestmark = pytest.mark.usefixtures("one_thread")


def _image(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    rgb = np.stack([x * 3, y * 5, (x + y) * 2], -1) + rng.integers(0, 30, (H, W, 3))
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, bytes]:
    from semcodec.encoder.codec import Codec
    from semcodec.encoder.gating import GatingConfig

    codec = Codec("tiny")
    off = GatingConfig(enabled=False)  # all layers present
    return {
        "q0": codec.encode(_image(0), quality=0, gating=off),
        "q60": codec.encode(_image(1), quality=60, residual="native", gating=off),
    }


def _stored_map(data: bytes) -> np.ndarray:
    """The map the full decoder sees (the reference for the map-only reader)."""
    from semcodec.encoder.codec import Codec

    return Codec("tiny").decode(data).semantic_map


def test_decode_map_gives_the_decoders_ids_at_both_sizes(files) -> None:
    data = files["q60"]
    stored = semcodec.decode_map(data, size="stored")
    assert stored.dtype == np.uint8 and stored.shape == (-(-H // 8), -(-W // 8))
    assert np.array_equal(stored, _stored_map(data))
    full = semcodec.decode_map(data)
    assert full.shape == (H, W)
    want = np.repeat(np.repeat(stored, 8, 0), 8, 1)[:H, :W]
    assert np.array_equal(full, want)
    assert full.max() < len(semcodec.CLASSES) == 11
    assert semcodec.CLASSES[0] == "sky" and semcodec.CLASSES[10] == "bicyclist"
    with pytest.raises(ValueError):
        semcodec.decode_map(data, size="half")


def _damage(data: bytes, kind: LayerKind) -> bytes:
    """Flip one byte inside a layer's payload (its CRC then fails)."""
    sizes = container.layer_sizes(data)  # from the header alone: works on damaged files
    offset = len(data) - sum(sizes.values())
    for k in sorted(sizes):
        if k == kind:
            buf = bytearray(data)
            buf[offset + sizes[k] // 2] ^= 0xFF
            return bytes(buf)
        offset += sizes[k]
    raise KeyError(kind)


def test_map_decodes_from_a_file_whose_compact_and_residual_layers_are_damaged(files) -> None:
    """The map reader never touches the compact layer, the generator or the residual."""
    data = files["q60"]
    want = semcodec.decode_map(data)
    bad = _damage(_damage(data, LayerKind.COMPACT), LayerKind.RESIDUAL)
    with pytest.raises(CorruptData, match="COMPACT"):
        semcodec.decode(bad)  # the full decoder checks every layer
    assert np.array_equal(semcodec.decode_map(bad), want)
    with pytest.raises(CorruptData, match="SEMANTIC_MAP"):  # its own layer is checked
        semcodec.decode_map(_damage(data, LayerKind.SEMANTIC_MAP))
    with pytest.raises(CorruptData, match="truncated"):  # and the lengths of all
        semcodec.decode_map(data[:-3])


def test_reading_only_some_layers_still_checks_the_header() -> None:
    data = DEFAULT_FILE.read_bytes()
    bad = bytearray(data)
    bad[20] ^= 1  # inside the fixed header
    with pytest.raises(CorruptData, match="header CRC"):
        container.unpack_layers(bytes(bad), (LayerKind.SEMANTIC_MAP,))
    header, layers = container.unpack_layers(data, (LayerKind.SEMANTIC_MAP,))
    assert list(layers) == [LayerKind.SEMANTIC_MAP]
    assert zlib.crc32(layers[LayerKind.SEMANTIC_MAP]) == zlib.crc32(
        container.unpack(data)[1][LayerKind.SEMANTIC_MAP]
    )


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.sem").write_bytes(files["q0"])
    (tmp_path / "b.sem").write_bytes(files["q60"])
    return tmp_path


def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_layer_map_writes_ids_palette_and_stored_size(work: Path) -> None:
    r = _run("decode", "b.sem", "--layer", "map", "-o", "ids.png")
    assert r.exit_code == 0, r.output
    ids = Image.open("ids.png")
    assert ids.mode == "L" and ids.size == (W, H)
    assert np.array_equal(np.asarray(ids), semcodec.decode_map(work.joinpath("b.sem").read_bytes()))
    r = _run("decode", "b.sem", "--layer", "map", "--color", "-o", "col.png")
    assert r.exit_code == 0, r.output
    col = Image.open("col.png")
    assert col.mode == "P" and np.array_equal(np.asarray(col), np.asarray(ids))
    r = _run("decode", "b.sem", "--layer", "map", "--map-size", "stored", "-o", "small.png")
    assert r.exit_code == 0, r.output
    assert Image.open("small.png").size == (-(-W // 8), -(-H // 8))
    assert _run("decode", "b.sem", "--layer", "map", "-o", "ids.png").exit_code == 1  # no clobber
    r = _run("decode", "b.sem", "--layer", "map", "--segmentation", "m.png", "-o", "x.png")
    assert r.exit_code == 2


@pytest.mark.subprocess
def test_cli_layer_map_batch_with_workers(work: Path) -> None:
    (work / "maps").mkdir()
    r = _run("decode", "a.sem", "b.sem", "--layer", "map", "-d", "maps", "-j", "2")
    assert r.exit_code == 0, r.output
    for name in ("a", "b"):
        got = np.asarray(Image.open(work / "maps" / f"{name}.map.png"))
        assert np.array_equal(got, semcodec.decode_map((work / f"{name}.sem").read_bytes()))


def test_layer_outputs_default_to_their_own_names_beside_the_picture(work: Path) -> None:
    """Without -o a layer never takes the picture's name: --force must not replace a photo."""
    Image.new("RGB", (W, H), (1, 2, 3)).save("b.png")  # the original photo beside its .sem
    before = Path("b.png").read_bytes()
    assert _run("decode", "b.sem", "--layer", "map", "--force").exit_code == 0
    assert _run("decode", "b.sem", "--layer", "base", "--force").exit_code == 0
    assert Path("b.png").read_bytes() == before
    ids = np.asarray(Image.open("b.map.png"))
    assert np.array_equal(ids, semcodec.decode_map(work.joinpath("b.sem").read_bytes()))
    assert Image.open("b.base.png").size == (W, H)


def test_info_lists_the_classes_with_their_pixel_shares(work: Path) -> None:
    r = _run("info", "--json", "b.sem")
    assert r.exit_code == 0, r.output
    (d,) = json.loads(r.stdout)
    ids = semcodec.decode_map((work / "b.sem").read_bytes())
    counts = np.bincount(ids.ravel(), minlength=11)
    want = {semcodec.CLASSES[i]: counts[i] / ids.size for i in range(11) if counts[i]}
    assert d["classes"].keys() == want.keys()
    for k, v in want.items():
        assert abs(d["classes"][k] - v) < 1e-12
    assert abs(sum(d["classes"].values()) - 1) < 1e-9
    assert "classes" in _run("info", "b.sem").stdout


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@pytest.mark.subprocess
def test_map_and_full_decode_of_an_installed_release_do_not_import_torch() -> None:
    """A shell decode of a small file does not pay torch's import (decoder/pipeline.py, intgrid/generator.py)."""
    code = f"""
import sys
import semcodec
data = open({str(DEFAULT_FILE)!r}, "rb").read()
ids = semcodec.decode_map(data)
assert "torch" not in sys.modules, "decode_map imported torch"
img = semcodec.decode(data)
assert "torch" not in sys.modules, "decode imported torch"
import hashlib, numpy as np
a = np.asarray(img)
print(hashlib.sha256(f"{{img.mode}} {{img.width}}x{{img.height}}\\n".encode() + a.tobytes()).hexdigest())
"""
    r = _python(code)
    assert r.returncode == 0, r.stderr[-2000:]
    record = json.loads((DEFAULT_FILE.parent / "hashes.json").read_text())
    assert r.stdout.strip() == record["files"][DEFAULT_FILE.name]["full"]
