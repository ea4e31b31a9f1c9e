"""Robustness (docs/robustness.md): hostile .sem files, unusual and bad inputs, tiled processing.

Everything uses the seeded random "tiny" bundle and small images. The fuzz helpers (mutation
operators, CRC fixing, the seed files) are shared with the long fuzzing run in fuzz/.
"""

from __future__ import annotations

import copy
import importlib.util
import io
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

import semcodec
from semcodec.cli import cli
from semcodec.encoder.codec import DEFAULT_TILING, Codec, Tiling, get_codec
from semcodec.encoder.gating import GatingConfig
from semcodec.encoder.options import EncodeOptions
from semcodec.errors import CorruptData, ModelError, SemcodecError
from semcodec.format import container
from semcodec.format.tiling import pad_rgb as _pad_rgb
from semcodec.imageio import load_image
from semcodec.zoo import bundles as zoo

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--model", "tiny", "--residual", "native"]
CASE_LIMIT_S = 10.0


def _load_fuzz_module():
    """fuzz/fuzz_decoders.py, whose mutation helpers this file shares (not a package)."""
    spec = importlib.util.spec_from_file_location(
        "fuzz_decoders", ROOT / "fuzz" / "fuzz_decoders.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


FUZZ = _load_fuzz_module()


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


class ByModel:
    """The tiny codec a seed's header names ('tiny', or 'tiny-enh' for the ENHANCE seed)."""

    def __init__(self) -> None:
        self.codecs = {name: get_codec(name) for name in ("tiny", "tiny-enh")}

    def decode(self, data: bytes, *args, **kwargs):
        from semcodec.format import container

        try:
            name = container.read_header(data).model_name
        except Exception:  # noqa: BLE001 - a damaged header: the tiny codec reports it
            name = "tiny"
        return self.codecs.get(name, self.codecs["tiny"]).decode(data, *args, **kwargs)

    def __getattr__(self, attr: str):
        return getattr(self.codecs["tiny"], attr)


@pytest.fixture(scope="module")
def codec() -> ByModel:
    return ByModel()


@pytest.fixture(scope="module")
def seeds() -> dict[str, bytes]:
    """Small valid files: RGB/native, gray/avif, RGBA/native, RGB without residual."""
    return FUZZ.seed_files()


def photo(w: int, h: int) -> np.ndarray:
    """A real photograph (matplotlib's sample data) resized to w x h."""
    import matplotlib

    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    return np.asarray(Image.open(path).convert("RGB").resize((w, h), Image.LANCZOS))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.fixture
def alarm():
    """Fail a case that runs longer than CASE_LIMIT_S instead of hanging the suite."""

    def expired(_signum, _frame):
        raise TimeoutError(f"case ran longer than {CASE_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    yield lambda: signal.setitimer(signal.ITIMER_REAL, CASE_LIMIT_S)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----- hostile and damaged .sem files ------------------------------------------------------------
@pytest.mark.slow
def test_every_byte_and_every_length_is_checked_by_the_decoder(codec: Codec, seeds):
    """Any changed byte (header included), truncation or trailing byte: rejected, never decoded."""
    for data in seeds.values():
        assert codec.decode(data).image.size  # the seed itself is valid
        for pos in range(len(data)):
            bad = bytearray(data)
            bad[pos] ^= 0x10
            with pytest.raises(CorruptData):
                codec.decode(bytes(bad))
        for n in range(len(data)):
            with pytest.raises(CorruptData):
                codec.decode(data[:n])
        for tail in (b"\x00", b"\x00" * 3, data[:100]):
            with pytest.raises(CorruptData, match="trailing garbage"):
                codec.decode(data + tail)


@pytest.mark.slow
def test_fuzz_in_process(codec: Codec, seeds, alarm):
    """1,200 seeded mutations through the full decoder: SemcodecError or a correct image, fast.

    Mutations without CRC repair must all be rejected. With CRCs recomputed (huge lengths and
    dimensions, header fields, payload edits) the payload decoders see hostile content; they may
    then decode some image, which must have the declared size and mode.
    """
    rng = random.Random(20240607)
    names = sorted(seeds)
    peak_before = _peak_rss_mib()
    outcomes: Counter[str] = Counter()
    messages: Counter[str] = Counter()
    slowest = 0.0
    for i in range(1200):
        original = seeds[names[i % len(names)]]
        data, op, fixed = FUZZ.mutate(rng, original)
        if data == original:
            continue
        start = time.monotonic()
        alarm()
        try:
            result = codec.decode(data)
        except SemcodecError as exc:
            text = str(exc)
            assert text and "\n" not in text, (op, text)
            outcomes[f"{op}:rejected"] += 1
            messages[text.split(":")[0].split(" (")[0][:40]] += 1
        else:
            assert fixed, f"case {i} ({op}): a damaged file was decoded"
            header = container.read_header(data)
            assert result.image.size == (header.width, header.height)
            assert result.image.mode == header.mode
            outcomes[f"{op}:decoded"] += 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        slowest = max(slowest, time.monotonic() - start)
    total = sum(outcomes.values())
    print(
        f"\nfuzz: {total} cases, slowest {slowest:.3f} s, outcomes {dict(sorted(outcomes.items()))}"
    )
    print(f"fuzz: rejection reasons {messages.most_common(12)}")
    assert total >= 1000
    assert _peak_rss_mib() - peak_before < 1024
    # the CRC-fixed cases really reached the payload decoders
    assert any(k.startswith(("semantic map", "compact layer", "native residual")) for k in messages)
    assert any(k.endswith(":decoded") for k in outcomes)


@pytest.mark.subprocess
@pytest.mark.slow
def test_fuzz_through_the_cli(codec: Codec, seeds, tmp_path: Path):
    """A handful of hostile files through real processes: exit 1, one line each, no output."""
    rng = random.Random(99)
    bad: list[Path] = []
    while len(bad) < 8:
        data, op, _ = FUZZ.mutate(rng, seeds[rng.choice(sorted(seeds))])
        try:
            codec.decode(data)
        except SemcodecError:
            path = tmp_path / f"bad{len(bad)}-{op}.sem"
            path.write_bytes(data)
            bad.append(path)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "semcodec.cli", "decode"]
    r = subprocess.run(
        [*cmd, *map(str, bad), "-d", str(out)], capture_output=True, text=True, env=env, timeout=120
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 9, r.stderr
    assert all(line.startswith("semcodec: error: ") for line in lines)
    assert lines[-1] == "semcodec: error: 8 of 8 files failed"
    assert "Traceback" not in r.stderr and list(out.iterdir()) == []


def _forge(data: bytes, **fields: int) -> bytes:
    """The file with header fields (and ``length0``, the first layer's declared length)
    replaced, its CRCs recomputed, in its own format version."""
    lengths = {0: fields.pop("length0")} if "length0" in fields else None
    return FUZZ.reheader(data, lengths=lengths, **fields)


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"width": 0xFFFFFFFF}, "exceed the limit"),
        ({"width": 70000, "height": 1}, "exceed the limit"),
        ({"width": 20000, "height": 20000}, "exceeds the limit of 268435456 pixels"),
        ({"width": 16384, "height": 16384}, "compact layer of|semantic map"),  # 2**28: allowed
        ({"width": 4000, "height": 3000}, "compact layer of|semantic map"),
        ({"length0": 0xFFFFFFFF}, "truncated file"),
    ],
)
@pytest.mark.parametrize("seed", ["rgb-native", "rgb-avif-v5"])
def test_huge_fields_are_refused_before_allocation(codec: Codec, seeds, fields, fragment, seed):
    """Limits and payload sizes are checked before any buffer or per-symbol loop: fast, small;
    in the fixed header (version 1) and the compact one (version 5)."""
    data = _forge(seeds[seed], **fields)
    start, peak = time.monotonic(), _peak_rss_mib()
    with pytest.raises(CorruptData, match=fragment):
        codec.decode(data)
    assert time.monotonic() - start < 1.0 and _peak_rss_mib() - peak < 64


def test_limits_are_configurable(seeds):
    tight = Codec("tiny", limits=container.Limits(max_width=32))
    with pytest.raises(CorruptData, match="exceed the limit of 32x65535"):
        tight.decode(seeds["rgb-native"])  # 40 pixels wide
    assert tight.decode(seeds["rgb-base"]).image.size == (16, 16)


def test_the_fuzz_harness_takes_the_map_of_any_scale(seeds):
    """A file whose header says map scale 40 (any of 1..255 is valid, docs/format.md §1) has a
    map of the image over 40: the fuzzer's map target accepts it (it once asserted 8)."""
    import dataclasses

    from semcodec.format import container
    from semcodec.format.map import encode_map

    header, layers = container.unpack(seeds["rgb-base"])
    header = dataclasses.replace(header, map_scale=40)
    layers[container.LayerKind.SEMANTIC_MAP] = encode_map(np.zeros((1, 1), np.uint8), 12)
    data = container.pack(header, layers)
    hdr, labels = FUZZ.Harness().read_map(data)
    assert hdr.map_scale == 40 and labels.shape == (1, 1)
    FUZZ.Harness().run(b"\x08" + data)  # the mapfile target


def test_model_name_is_never_opened_as_a_path(seeds):
    """A forged model name such as '/proc/kcore' must not make the decoder read that file."""
    data = FUZZ.reheader(seeds["rgb-base"], model_name="/proc/kcore")
    assert container.read_header(data).model_name == "/proc/kcore"
    with pytest.raises(ModelError, match="unknown model '/proc/kcore'"):
        semcodec.decode(data)


# ----- unusual and bad input images --------------------------------------------------------------
def _round_trip(codec: Codec, source, quality: int = 90) -> tuple[Image.Image, np.ndarray]:
    """Encode a path/image through the API, decode, and return (decoded, canonical input)."""
    data = codec.encode(source, quality=quality, residual="native")
    out = codec.decode(data).image
    loaded = load_image(source) if not isinstance(source, Image.Image) else None
    return out, (loaded.rgb if loaded is not None else np.asarray(source.convert("RGB")))


@pytest.mark.parametrize(("w", "h"), [(1, 1), (7, 13), (1, 4000)])
def test_tiny_and_thin_images(codec: Codec, tmp_path: Path, w: int, h: int):
    """Smaller than the networks' 32 px minimum: grown by edge replication, cropped back."""
    pixels = np.random.default_rng(w * h).integers(0, 256, (h, w, 3), dtype=np.uint8)
    path = tmp_path / "in.png"
    Image.fromarray(pixels).save(path)
    out, rgb = _round_trip(codec, path, quality=95)
    assert out.size == (w, h) and out.mode == "RGB"
    assert np.abs(np.asarray(out).astype(int) - rgb).mean() < 6


def _png16(values: np.ndarray) -> bytes:
    """16-bit RGB PNG written by hand (Pillow cannot write one)."""
    h, w, _ = values.shape
    raw = b"".join(b"\x00" + values[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _write_cases(tmp: Path) -> dict[str, tuple[Path, str, tuple[int, int]]]:
    """Unusual but valid inputs: name -> (path, decoded mode, decoded size)."""
    base = photo(48, 40)
    cases = {}
    p = tmp / "gray16.png"
    g16 = (base[..., 1].astype(np.uint16) * 257).astype(np.uint16)
    Image.fromarray(g16).save(p)
    cases["16-bit gray PNG"] = (p, "L", (48, 40))
    p = tmp / "rgb16.png"
    p.write_bytes(_png16(base.astype(np.uint16) * 257))
    cases["16-bit RGB PNG"] = (p, "RGB", (48, 40))
    p = tmp / "palette.png"
    pal = Image.fromarray(base).quantize(16)
    pal.info["transparency"] = 0
    pal.save(p, transparency=0)
    cases["palette PNG with transparency"] = (p, "RGBA", (48, 40))
    p = tmp / "gray.png"
    Image.fromarray(base).convert("L").save(p)
    cases["grayscale"] = (p, "L", (48, 40))
    p = tmp / "rgba.png"
    rgba = Image.fromarray(base).convert("RGBA")
    a = np.full((40, 48), 255, np.uint8)
    a[5:20, 10:30] = 0
    a[25:35, :] = 128
    rgba.putalpha(Image.fromarray(a))
    rgba.save(p)
    cases["RGBA"] = (p, "RGBA", (48, 40))
    p = tmp / "cmyk.jpg"
    Image.fromarray(base).convert("CMYK").save(p, quality=95)
    cases["CMYK JPEG"] = (p, "RGB", (48, 40))
    p = tmp / "rotated.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(base).save(p, exif=exif, quality=95)
    cases["EXIF-rotated JPEG"] = (p, "RGB", (40, 48))
    frames = [Image.fromarray(base), Image.fromarray(255 - base)]
    p = tmp / "anim.gif"
    frames[0].save(p, save_all=True, append_images=frames[1:], duration=50, loop=0)
    cases["animated GIF"] = (p, "RGB", (48, 40))
    p = tmp / "animw.webp"
    frames[0].save(p, save_all=True, append_images=frames[1:], lossless=True, duration=50)
    cases["animated WebP"] = (p, "RGB", (48, 40))
    return cases


@pytest.mark.slow
def test_unusual_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Encoded by the CLI with one warning per lossy conversion; each decodes to the documented
    mode and size, pixels close to the canonical input, alpha exact."""
    cases = _write_cases(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sem").mkdir()
    names = [str(p.name) for p, _, _ in cases.values()]
    r = CliRunner().invoke(cli, ["encode", *names, "-d", "sem", "-q", "95", *TINY])
    assert r.exit_code == 0, r.output
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    lossy = {  # the lossy conversions; the other cases convert nothing lossily
        "gray16.png": "16-bit image converted to 8 bits",
        "rgb16.png": "16-bit image converted to 8 bits",
        "cmyk.jpg": "CMYK image converted to RGB without colour management",
        "anim.gif": "animated image with 2 frames: only the first frame is encoded",
        "animw.webp": "animated image with 2 frames: only the first frame is encoded",
    }
    per_file = Counter(w.split(": ")[2] for w in warnings)
    assert per_file == Counter({name: 1 for name in lossy}), warnings
    for name, text in lossy.items():
        assert f"semcodec: warning: {name}: {text}" in warnings, warnings
    codec = get_codec("tiny")
    for name, (path, mode, size) in cases.items():
        out = codec.decode((tmp_path / "sem" / path.with_suffix(".sem").name).read_bytes()).image
        assert (out.mode, out.size) == (mode, size), name
        loaded = load_image(path)
        rgb = np.asarray(out.convert("RGB")).astype(int)
        assert np.abs(rgb - loaded.rgb).mean() < 6, name
        if mode == "RGBA":
            assert np.array_equal(np.asarray(out)[..., 3], loaded.alpha), name


def _bomb_png(width: int, height: int) -> bytes:
    """A real 8x8 PNG whose IHDR declares a huge size (CRC fixed)."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, "PNG")
    data = bytearray(buf.getvalue())
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


def test_bad_inputs_fail_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Truncated, not an image, empty, directory, unreadable, bombs: exit 1, one line, no output."""
    monkeypatch.chdir(tmp_path)
    buf = io.BytesIO()
    Image.fromarray(photo(64, 64)).save(buf, "PNG")
    Path("truncated.png").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    Path("notes.png").write_text("not an image\n")
    Path("empty.png").write_bytes(b"")
    Path("folder.png").mkdir()
    Path("secret.png").write_bytes(buf.getvalue())
    Path("bomb.png").write_bytes(_bomb_png(65535, 65535))
    Path("bomb2.png").write_bytes(_bomb_png(20000, 20000))
    import semcodec.imageio as imageio

    real_open = open

    def denied(file, *args, **kwargs):
        if str(file).endswith("secret.png"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(imageio, "open", denied, raising=False)
    Path("out").mkdir()
    expected = {
        "truncated.png": "truncated image file",
        "notes.png": "not a recognised image format",
        "empty.png": "empty file",
        "folder.png": "is a directory",
        "secret.png": "Permission denied",
        "bomb.png": "decompression bomb",
        "bomb2.png": "exceeds the limit of 268435456 pixels",
        "missing.png": "No such file or directory",
    }
    r = CliRunner().invoke(cli, ["encode", *expected, "-d", "out", *TINY])
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == len(expected) + 1 and "Traceback" not in r.output
    for line, (name, fragment) in zip(lines, expected.items(), strict=False):
        assert line.startswith("semcodec: error: ") and name in line and fragment in line, line
    assert list(Path("out").iterdir()) == []


@pytest.mark.subprocess
@pytest.mark.slow
def test_full_disk_on_stdout(tmp_path: Path):
    """`-o -` into /dev/full: exit 1 and one error line (subprocess: a real full device)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    Image.fromarray(photo(24, 16)).save(tmp_path / "a.png")
    with open("/dev/full", "wb") as full:
        r = subprocess.run(
            [sys.executable, "-m", "semcodec.cli", "encode", "a.png", "-o", "-", *TINY],
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            timeout=120,
        )
    assert r.returncode == 1
    assert r.stderr.splitlines() == ["semcodec: error: a.png: No space left on device"]


# ----- tiled processing --------------------------------------------------------------------------
@pytest.mark.parametrize(("h", "w"), [(8, 8), (4000, 6000), (1448, 1448), (1456, 1448), (8, 65536)])
def test_tile_grid_is_a_function_of_size(h: int, w: int):
    """Cores partition the image on the 8-pixel grid; contexts add the margin, clipped."""
    regions = DEFAULT_TILING.regions(h, w)
    assert regions == DEFAULT_TILING.regions(h, w)
    cover = np.zeros((h // 8, w // 8), np.int8)
    for r in regions:
        y0, y1, x0, x1 = r.core
        assert all(v % 8 == 0 for v in r.core + r.ctx)
        cover[y0 // 8 : y1 // 8, x0 // 8 : x1 // 8] += 1
        if len(regions) > 1:
            assert y1 - y0 <= DEFAULT_TILING.core and x1 - x0 <= DEFAULT_TILING.core
            m = DEFAULT_TILING.margin
            assert r.ctx == (max(0, y0 - m), min(h, y1 + m), max(0, x0 - m), min(w, x1 + m))
    assert (cover == 1).all()
    if h * w <= DEFAULT_TILING.threshold:
        assert len(regions) == 1
    if (h, w) == (4000, 6000):
        assert len(regions) == 24 and regions[0].core == (0, 1000, 0, 1000)


def test_tiled_generator_is_exact(codec: Codec):
    """With the margin beyond the generator's reach, tiles stitch to the untiled output exactly.

    The tiny generator's last layer starts at zero (it would be the identity on the base), so it
    is randomised here to make the test meaningful; without margin the seams do show.
    """
    bundle = copy.deepcopy(codec.bundle)
    torch.manual_seed(3)
    last = bundle.gen.body[-2]
    torch.nn.init.normal_(last.weight, 0, 0.05)
    torch.nn.init.normal_(last.bias, 0, 0.05)
    bundle.integer_generator = zoo.random_integer_generator(
        bundle.gen, bundle.levels, bundle.spec.seed
    )
    rng = np.random.default_rng(1)
    symbols = rng.integers(0, bundle.levels, (3, 19, 25))
    labels = rng.integers(0, bundle.num_classes, (19, 25)).astype(np.uint8)

    def run(tiling: Tiling | None) -> np.ndarray:
        c = Codec("tiny", tiling=tiling)
        c.bundle = bundle
        return c.reconstruct(symbols, labels, (150, 197))

    whole = run(None)
    assert np.array_equal(run(Tiling(64, 64, 0)), whole)
    assert np.abs(run(Tiling(64, 0, 0)).astype(int) - whole).max() > 10


@pytest.mark.parametrize("bf16", [False, True])
def test_split_segmentation_equals_the_network(codec: Codec, bf16: bool):
    """Backbones, then heads, then fusion (the codec's parallel path) compute SegNet.logits_lowres."""
    seg = codec.bundle.seg
    x = torch.rand(1, 3, 48, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        rgb, gray = seg.branch_inputs(x)
        split = seg.fuse(
            seg.rgb.head(seg.rgb.backbone(rgb)), seg.gray.head(seg.gray.backbone(gray))
        )
        assert torch.equal(split, seg.logits_lowres(x))


@pytest.mark.slow
def test_tiled_pipeline_agrees_with_untiled(codec: Codec):
    """Small tiles on a small photo: no seams, and close to the untiled result (numbers printed).

    CompNet's reach is < 64 px, so tiled symbols are the untiled ones up to float rounding:
    the kernels of a tile and of the whole image may add in another order (they do on AVX2),
    which moves a value that lies on a rounding boundary by one level. The segmentation net's
    recurrent head runs on the whole stitched map, so only its tiled backbones differ a little.
    """
    img = photo(200, 152)
    off = GatingConfig(enabled=False)  # the generator's prediction everywhere: its seams show
    tiled = Codec("tiny", tiling=Tiling(64, 64, 0))
    codec = Codec("tiny")
    rgb = _pad_rgb(img)
    labels = codec.semantic_map(rgb)
    diff = np.abs(tiled.compact(rgb, labels) - codec.compact(rgb, labels))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.005
    label_agreement = float((tiled.semantic_map(rgb) == labels).mean())
    opts = EncodeOptions(quality=60, residual="native", gating=off)
    du, dt = codec.encode(img, opts), tiled.encode(img, opts)
    base_u = np.asarray(codec.decode(du, "base").image)
    base_t = np.asarray(tiled.decode(dt, "base").image)
    full_u, full_t = np.asarray(codec.decode(du).image), np.asarray(tiled.decode(dt).image)
    seam = np.zeros(img.shape[:2], bool)
    rows, cols = [], []  # the first row/column of every core that is not the image's first
    for r in Tiling(64, 64, 0).regions(*rgb.shape[:2]):
        y0, _, x0, _ = r.core
        rows += [y0] if y0 else []
        cols += [x0] if x0 else []
    for v in set(rows):
        seam[v - 4 : v + 4] = True
    for v in set(cols):
        seam[:, v - 4 : v + 4] = True

    def jump(a: np.ndarray) -> float:
        """Mean step between neighbours across the core borders (a seam shows as a larger step)."""
        a = a.astype(np.float64)
        steps = [np.abs(a[v] - a[v - 1]).mean() for v in set(rows)]
        steps += [np.abs(a[:, v] - a[:, v - 1]).mean() for v in set(cols)]
        return float(np.mean(steps))

    figures = {
        "label agreement": label_agreement,
        "base tiled vs untiled PSNR": psnr(base_t, base_u),
        "base step across core borders, tiled": jump(base_t),
        "base step across core borders, untiled": jump(base_u),
        "full tiled vs untiled PSNR": psnr(full_t, full_u),
        "full PSNR seams, tiled": psnr(full_t[seam], img[seam]),
        "full PSNR seams, untiled": psnr(full_u[seam], img[seam]),
        "full PSNR interior, tiled": psnr(full_t[~seam], img[~seam]),
        "full PSNR interior, untiled": psnr(full_u[~seam], img[~seam]),
        "bytes tiled/untiled": len(dt) / len(du),
    }
    print("\ntiling:", {k: round(float(v), 3) for k, v in figures.items()})
    assert label_agreement > 0.98
    assert figures["base tiled vs untiled PSNR"] > 30
    assert figures["full tiled vs untiled PSNR"] > 35
    for where in ("seams", "interior"):
        tiled_db, untiled_db = (figures[f"full PSNR {where}, {k}"] for k in ("tiled", "untiled"))
        assert abs(tiled_db - untiled_db) < 0.5, where
    steps = figures["base step across core borders, tiled"]
    assert steps < 1.25 * figures["base step across core borders, untiled"]
    assert 0.9 < figures["bytes tiled/untiled"] < 1.1
