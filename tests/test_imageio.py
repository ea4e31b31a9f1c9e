"""Tests for input reading (modes, EXIF, 16-bit, alpha, hostile files) and atomic output."""

from __future__ import annotations

import errno
import io
import os
import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from semcodec.errors import SemcodecError, UnsupportedInput
from semcodec.format.container import Limits
from semcodec.imageio import OutputExists, atomic_write_bytes, load_image


def rand_rgb(h: int, w: int, seed: int = 0) -> np.ndarray:
    """Seeded noise, so any channel or axis mix-up shows as a mismatch."""
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk with its CRC, for hand-built and patched PNGs."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_rgb16(values: np.ndarray) -> bytes:
    """Encode a (H, W, 3) uint16 array as a 16-bit RGB PNG by hand (Pillow cannot write one)."""
    h, w, _ = values.shape
    raw = b"".join(b"\x00" + values[y].astype(">u2").tobytes() for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(raw))
        + png_chunk(b"IEND", b"")
    )


def reason(exc: pytest.ExceptionInfo[UnsupportedInput]) -> str:
    """Check the one-line "cannot read" shape every read error must have, and return it."""
    message = str(exc.value)
    assert message.startswith("cannot read ") and "\n" not in message, message
    return message


@pytest.mark.parametrize(("w", "h"), [(1, 1), (7, 13), (1, 4000), (4000, 1)])
def test_rgb_sizes(tmp_path: Path, w: int, h: int) -> None:
    pixels = rand_rgb(h, w)
    path = tmp_path / "in.png"
    Image.fromarray(pixels).save(path)
    loaded = load_image(path)
    assert loaded.mode == "RGB" and loaded.alpha is None and loaded.warnings == []
    assert loaded.rgb.dtype == np.uint8 and loaded.rgb.shape == (h, w, 3)
    np.testing.assert_array_equal(loaded.rgb, pixels)
    assert (loaded.width, loaded.height) == (w, h)


def test_sources_bytes_stream_and_str(tmp_path: Path) -> None:
    pixels = rand_rgb(5, 6)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "PNG")
    (tmp_path / "a.png").write_bytes(buf.getvalue())
    for source in (buf.getvalue(), io.BytesIO(buf.getvalue()), str(tmp_path / "a.png")):
        np.testing.assert_array_equal(load_image(source).rgb, pixels)


def test_16bit_gray_png(tmp_path: Path) -> None:
    values = np.array([[0, 1, 128, 129, 257, 385], [386, 32767, 65280, 65407, 65408, 65535]])
    path = tmp_path / "g16.png"
    Image.fromarray(values.astype(np.uint16)).save(path)
    loaded = load_image(path)
    assert loaded.mode == "L"
    expected = np.round(values / 257).astype(np.uint8)
    np.testing.assert_array_equal(loaded.rgb[..., 0], expected)
    np.testing.assert_array_equal(loaded.rgb[..., 2], expected)
    assert any("16-bit" in w for w in loaded.warnings)


def test_16bit_rgb_png(tmp_path: Path) -> None:
    values = np.random.default_rng(3).integers(0, 65536, (4, 5, 3)).astype(np.uint16)
    path = tmp_path / "rgb16.png"
    path.write_bytes(png_rgb16(values))
    loaded = load_image(path)
    assert loaded.mode == "RGB"
    diff = np.abs(loaded.rgb.astype(int) - np.round(values / 257))
    assert diff.max() <= 1
    assert any("16-bit" in w for w in loaded.warnings)


def test_grayscale(tmp_path: Path) -> None:
    gray = rand_rgb(9, 4)[..., 0]
    path = tmp_path / "g.png"
    Image.fromarray(gray, "L").save(path)
    loaded = load_image(path)
    assert loaded.mode == "L" and loaded.alpha is None
    for c in range(3):
        np.testing.assert_array_equal(loaded.rgb[..., c], gray)
    bilevel = tmp_path / "b.png"
    Image.fromarray(gray > 128).convert("1").save(bilevel)
    loaded = load_image(bilevel)
    assert loaded.mode == "L" and set(np.unique(loaded.rgb)) <= {0, 255}


def test_float_and_int32_tiff(tmp_path: Path) -> None:
    path = tmp_path / "f.tif"
    Image.fromarray(np.array([[0.0, 0.5, 1.0]], dtype=np.float32)).save(path)
    loaded = load_image(path)
    assert loaded.mode == "L" and loaded.rgb[0, :, 0].tolist() == [0, 128, 255]
    assert loaded.warnings
    path = tmp_path / "i.tif"
    Image.fromarray(np.array([[0, 257, 65535, 70000]], dtype=np.int32)).save(path)
    loaded = load_image(path)
    assert loaded.mode == "L" and loaded.rgb[0, :, 0].tolist() == [0, 1, 255, 255]


def test_palette(tmp_path: Path) -> None:
    im = Image.new("P", (4, 3))
    im.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255] + [0] * 759)
    im.putdata([0, 1, 2, 0] * 3)
    opaque = tmp_path / "p.png"
    im.save(opaque)
    loaded = load_image(opaque)
    assert loaded.mode == "RGB" and loaded.alpha is None
    assert loaded.rgb[0, 1].tolist() == [0, 255, 0]
    transparent = tmp_path / "pt.png"
    im.save(transparent, transparency=2)
    loaded = load_image(transparent)
    assert loaded.mode == "RGBA"
    assert loaded.alpha is not None and loaded.alpha[0].tolist() == [255, 255, 0, 255]
    assert loaded.rgb[0, 0].tolist() == [255, 0, 0]


def test_rgba_and_opaque_alpha(tmp_path: Path) -> None:
    rgba = np.dstack([rand_rgb(6, 5), np.arange(30, dtype=np.uint8).reshape(6, 5)])
    path = tmp_path / "a.png"
    Image.fromarray(rgba, "RGBA").save(path)
    loaded = load_image(path)
    assert loaded.mode == "RGBA"
    np.testing.assert_array_equal(loaded.rgb, rgba[..., :3])
    np.testing.assert_array_equal(loaded.alpha, rgba[..., 3])
    rgba[..., 3] = 255
    Image.fromarray(rgba, "RGBA").save(path)
    loaded = load_image(path)
    assert loaded.mode == "RGB" and loaded.alpha is None
    np.testing.assert_array_equal(loaded.rgb, rgba[..., :3])


def test_gray_alpha(tmp_path: Path) -> None:
    la = np.dstack([rand_rgb(3, 3)[..., 0], np.full((3, 3), 7, np.uint8)])
    path = tmp_path / "la.png"
    Image.fromarray(la, "LA").save(path)
    loaded = load_image(path)
    assert loaded.mode == "RGBA" and loaded.alpha is not None
    np.testing.assert_array_equal(loaded.rgb[..., 1], la[..., 0])
    la[..., 1] = 255
    Image.fromarray(la, "LA").save(path)
    assert load_image(path).mode == "L"


def test_cmyk_jpeg(tmp_path: Path) -> None:
    path = tmp_path / "c.jpg"
    Image.new("CMYK", (8, 8), (0, 255, 255, 0)).save(path, quality=95)
    loaded = load_image(path)
    assert loaded.mode == "RGB" and loaded.rgb.shape == (8, 8, 3)
    r, g, b = loaded.rgb[4, 4].tolist()
    assert r > 200 and g < 60 and b < 60
    assert any("CMYK" in w for w in loaded.warnings)


def test_exif_orientation(tmp_path: Path) -> None:
    pixels = np.zeros((16, 32, 3), np.uint8)
    pixels[:, :] = (0, 0, 255)
    pixels[:8, :8] = (255, 0, 0)  # red block at top-left of the stored image
    exif = Image.Exif()
    exif[0x0112] = 6  # display = stored rotated 90 degrees clockwise
    path = tmp_path / "r.jpg"
    Image.fromarray(pixels).save(path, exif=exif, quality=95)
    loaded = load_image(path)
    assert loaded.rgb.shape == (32, 16, 3)
    assert loaded.rgb[3, 12, 0] > 200 and loaded.rgb[3, 12, 2] < 60  # now top-right
    assert loaded.rgb[3, 3, 2] > 200


def test_animated_gif(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (4, 4), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=50, loop=0)
    loaded = load_image(path)
    assert loaded.mode == "RGB" and loaded.rgb[0, 0].tolist() == [255, 0, 0]
    assert any("3 frames" in w and "first frame" in w for w in loaded.warnings)


def test_truncated_png(tmp_path: Path) -> None:
    buf = io.BytesIO()
    Image.fromarray(rand_rgb(64, 64)).save(buf, "PNG")
    path = tmp_path / "t.png"
    path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    with pytest.raises(UnsupportedInput) as info:
        load_image(path)
    assert reason(info) == f"cannot read {str(path)!r}: truncated image file"
    with pytest.raises(UnsupportedInput, match="damaged or truncated PNG file"):
        load_image(buf.getvalue()[:40])  # cut inside the header chunks


def test_not_an_image(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("definitely not pixels\n")
    with pytest.raises(UnsupportedInput) as info:
        load_image(path)
    assert "not a recognised image format" in reason(info)
    with pytest.raises(UnsupportedInput, match="not a recognised"):
        load_image(b"\x00" * 100)
    with pytest.raises(UnsupportedInput, match="damaged or truncated GIF file"):
        load_image(b"GIF89a")


def test_empty_inputs(tmp_path: Path) -> None:
    path = tmp_path / "empty.png"
    path.write_bytes(b"")
    with pytest.raises(UnsupportedInput) as info:
        load_image(path)
    assert reason(info) == f"cannot read {str(path)!r}: empty file"
    with pytest.raises(UnsupportedInput, match="empty input"):
        load_image(b"")
    with pytest.raises(UnsupportedInput, match="empty input"):
        load_image(io.BytesIO())


def test_directory_and_missing(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedInput) as info:
        load_image(tmp_path)
    assert "is a directory" in reason(info)
    with pytest.raises(UnsupportedInput) as info:
        load_image(tmp_path / "nope.png")
    assert "No such file or directory" in reason(info)


def _load_in_child(folder: Path, names: list[str]) -> list[str]:
    """Load each file from a forked child that, when it is root, first becomes 'nobody' (root
    reads any file, so this is how the tests, run as root, meet a real EACCES): one result each."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.close(read_end)
            os.chdir(folder)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            lines = []
            for name in names:
                try:
                    lines.append(f"ok {load_image(name).mode}")
                except UnsupportedInput as exc:
                    lines.append(str(exc))
            os.write(write_end, "\n".join(lines).encode())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails
            os.write(write_end, f"child failed: {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fp:
        out = fp.read().decode()
    os.waitpid(pid, 0)
    return out.split("\n")


def test_unreadable_path(tmp_path: Path) -> None:
    """A file its mode bits make unreadable: one line, ``Permission denied``."""
    Image.new("RGB", (2, 2)).save(tmp_path / "secret.png")
    Image.new("RGB", (2, 2)).save(tmp_path / "public.png")
    load_image(tmp_path / "public.png")  # the PNG plugin is imported before the fork
    (tmp_path / "secret.png").chmod(0)
    tmp_path.chmod(0o711)  # searchable by the unprivileged child: the file's mode is the cause
    try:
        results = _load_in_child(tmp_path, ["public.png", "secret.png"])
    finally:
        (tmp_path / "secret.png").chmod(0o644)
        tmp_path.chmod(0o700)
    assert results == ["ok RGB", "cannot read 'secret.png': Permission denied"]


def test_unreadable_path_simulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same as above but independent of privileges: open() itself is denied."""
    import semcodec.imageio as imageio

    path = tmp_path / "secret.png"
    Image.new("RGB", (2, 2)).save(path)

    def denied(file, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))

    monkeypatch.setattr(imageio, "open", denied, raising=False)
    with pytest.raises(UnsupportedInput) as info:
        load_image(path)
    assert reason(info) == f"cannot read {str(path)!r}: Permission denied"


def bomb_png(width: int, height: int) -> bytes:
    """A real 8x8 PNG whose IHDR is patched (CRC fixed) to declare a huge size."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, "PNG")
    data = bytearray(buf.getvalue())
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)


@pytest.mark.parametrize(
    ("width", "height", "fragment"),
    [
        (100_000, 100_000, "decompression bomb"),  # Pillow's own check fires in Image.open
        (65_535, 65_535, "decompression bomb"),
        (20_000, 20_000, "exceeds the limit of 268435456 pixels"),  # ours, before load
        (70_000, 1, "exceed the limit of 65535x65535"),
    ],
)
def test_decompression_bomb(tmp_path: Path, width: int, height: int, fragment: str) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb_png(width, height))
    before = Image.MAX_IMAGE_PIXELS
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnsupportedInput) as info:
            load_image(path)
    assert fragment in reason(info)
    assert Image.MAX_IMAGE_PIXELS == before


def test_custom_limits(tmp_path: Path) -> None:
    path = tmp_path / "wide.png"
    Image.new("RGB", (30, 10)).save(path)
    with pytest.raises(UnsupportedInput, match="exceed the limit of 20x100"):
        load_image(path, Limits(max_width=20, max_height=100))
    assert load_image(path, Limits(max_width=30, max_height=10, max_pixels=300)).mode == "RGB"
    with pytest.raises(UnsupportedInput, match="exceeds the limit of 299 pixels"):
        load_image(path, Limits(max_pixels=299))
    exif = Image.Exif()
    exif[0x0112] = 6
    rotated = tmp_path / "rot.jpg"
    Image.new("RGB", (30, 10)).save(rotated, exif=exif)
    with pytest.raises(UnsupportedInput, match="exceed the limit"):
        load_image(rotated, Limits(max_width=30, max_height=10))
    assert load_image(rotated, Limits(max_width=10, max_height=30)).rgb.shape == (30, 10, 3)


def listing(directory: Path) -> list[str]:
    """Directory contents, to prove no temporary or partial file was left behind."""
    return sorted(p.name for p in directory.iterdir())


def test_atomic_write_round_trip(tmp_path: Path) -> None:
    """The bytes arrive whole, with the umask's permissions; no clobbering unless forced."""
    path = tmp_path / "out.bin"
    atomic_write_bytes(path, b"first", force=False)
    assert path.read_bytes() == b"first" and listing(tmp_path) == ["out.bin"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(OutputExists):
        atomic_write_bytes(path, b"second", force=False)
    atomic_write_bytes(path, b"second", force=True)
    assert path.read_bytes() == b"second" and listing(tmp_path) == ["out.bin"]


def test_atomic_write_disk_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails part-way (as on /dev/full) leaves neither partial output nor a temp
    file, and the file it was to replace as it was."""
    path = tmp_path / "out.png"
    path.write_bytes(b"previous contents")

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(SemcodecError) as info:
        atomic_write_bytes(path, b"\x89PNG partial", force=True)
    assert str(info.value) == f"cannot write {str(path)!r}: No space left on device"
    assert path.read_bytes() == b"previous contents"
    with pytest.raises(SemcodecError, match="No space left"):
        atomic_write_bytes(tmp_path / "new.png", b"data", force=False)
    assert listing(tmp_path) == ["out.png"]


def test_atomic_write_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.sem"
    atomic_write_bytes(path, b"one", force=False)
    assert path.read_bytes() == b"one"
    with pytest.raises(OutputExists) as info:
        atomic_write_bytes(path, b"two", force=False)
    assert isinstance(info.value, FileExistsError) and isinstance(info.value, SemcodecError)
    assert "file exists" in str(info.value)
    assert path.read_bytes() == b"one"
    atomic_write_bytes(path, b"two", force=True)
    assert path.read_bytes() == b"two"

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(SemcodecError, match="No space left on device"):
        atomic_write_bytes(path, b"three", force=True)
    with pytest.raises(SemcodecError, match="No space left on device"):
        atomic_write_bytes(tmp_path / "y.sem", b"three", force=False)
    assert path.read_bytes() == b"two"
    assert listing(tmp_path) == ["x.sem"]


def test_write_into_missing_directory_or_directory(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "out.sem"
    with pytest.raises(SemcodecError) as info:
        atomic_write_bytes(target, b"data", force=False)
    assert str(info.value) == f"cannot write {str(target)!r}: No such file or directory"
    with pytest.raises(SemcodecError, match="No such file or directory"):
        atomic_write_bytes(tmp_path / "missing" / "out.png", b"data", force=True)
    with pytest.raises(SemcodecError, match="is a directory"):
        atomic_write_bytes(tmp_path, b"data", force=True)
    assert listing(tmp_path) == []


@pytest.mark.parametrize(
    ("fmt", "ext", "params"),
    [("WEBP", "webp", {"lossless": True}), ("TIFF", "tif", {}), ("BMP", "bmp", {})],
)
def test_other_formats(tmp_path: Path, fmt: str, ext: str, params: dict) -> None:
    pixels = rand_rgb(6, 9)
    path = tmp_path / f"in.{ext}"
    Image.fromarray(pixels).save(path, fmt, **params)
    loaded = load_image(path)
    assert loaded.mode == "RGB"
    np.testing.assert_array_equal(loaded.rgb, pixels)


def test_animated_webp(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (4, 4), c) for c in ((255, 0, 0), (0, 0, 255))]
    path = tmp_path / "anim.webp"
    frames[0].save(path, save_all=True, append_images=frames[1:], lossless=True, duration=50)
    loaded = load_image(path)
    assert loaded.rgb[0, 0].tolist() == [255, 0, 0]
    assert any("2 frames" in w for w in loaded.warnings)


# ----- readers' chatter folded into one line ------------------------------------------------------
def _damaged_inputs(folder: Path) -> dict[str, Path]:
    """A TIFF whose LZW strip is zeroed (libtiff prints to fd 2) and an APNG with a broken
    second frame control chunk (Pillow refuses it), both made here."""
    import io

    img = Image.fromarray((np.arange(48 * 64 * 3) % 251).astype(np.uint8).reshape(48, 64, 3))
    buf = io.BytesIO()
    img.save(buf, "TIFF", compression="tiff_lzw")
    tiff = bytearray(buf.getvalue())
    tiff[100:400] = bytes(300)
    buf = io.BytesIO()
    img.save(buf, "PNG", save_all=True, append_images=[img.transpose(Image.FLIP_LEFT_RIGHT)])
    png = bytearray(buf.getvalue())
    at = png.find(b"fcTL", 40)
    png[at + 8] ^= 0xFF
    paths = {"tiff": folder / "strip.tiff", "apng": folder / "frame.png"}
    paths["tiff"].write_bytes(bytes(tiff))
    paths["apng"].write_bytes(bytes(png))
    return paths


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["tiff", "apng"])
def test_damaged_inputs_give_one_line_on_the_real_stderr(tmp_path, kind):
    """C libraries write to file descriptor 2 directly: only a subprocess sees what a user sees."""
    import subprocess
    import sys

    src = _damaged_inputs(tmp_path)[kind]
    r = subprocess.run(
        [sys.executable, "-m", "semcodec.cli", "encode", str(src), "--model", "tiny"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert lines[0].startswith("semcodec: error: cannot read")
    if kind == "tiff":
        assert "LZWDecode" in lines[0]  # libtiff's own words, folded into the line
    assert not list(tmp_path.glob("*.sem"))


def test_reader_warnings_become_one_warning(tmp_path):
    """A Python warning raised while an image is read is a warning of the LoadedImage."""
    import warnings as w

    from semcodec import imageio

    path = tmp_path / "a.png"
    Image.new("RGB", (8, 8)).save(path)
    real = imageio._decode_image

    def noisy(*args):
        w.warn("something odd\n  in two lines", UserWarning, stacklevel=1)
        return real(*args)

    import pytest as _pytest

    with _pytest.MonkeyPatch.context() as mp:
        mp.setattr(imageio, "_decode_image", noisy)
        loaded = load_image(path)
    assert loaded.warnings == ["the image reader reported problems (something odd in two lines)"]
