"""Reading input images into the codec's canonical form, and writing outputs atomically.

Every input is reduced to 8-bit RGB (plus an optional 8-bit alpha plane) and the mode the
decoder must give back ("L", "RGB" or "RGBA"). Sizes are checked against ``Limits`` from the
lazily parsed header, before any pixel buffer exists. Any failure to read is reported as a
one-line ``UnsupportedInput``; any failure to write as a one-line ``SemcodecError``.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import secrets
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from semcodec.errors import SemcodecError, UnsupportedInput
from semcodec.format.container import Limits, pil_pixel_limit
from semcodec.format.metadata import Metadata, metadata_of

__all__ = [
    "IMAGE_SUFFIXES",
    "LoadedImage",
    "OutputExists",
    "atomic_write_bytes",
    "list_images",
    "load_image",
]

#: File suffixes taken as images when a folder is read (benchmarks, training, table fitting).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff", ".ppm")


def list_images(directory: Path | str, limit: int | None = None) -> list[Path]:
    """Image files in a directory, sorted by name, optionally the first ``limit``."""
    d = Path(directory)
    files = sorted(p for p in d.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    return files[:limit] if limit else files


_ORIENTATION_TAG = 0x0112
_SWAPPING_ORIENTATIONS = (5, 6, 7, 8)
_GRAY_16_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
_RGB_LIKE = {
    "RGB": None,
    "RGBX": None,
    "CMYK": "CMYK image converted to RGB without colour management",
    "YCbCr": None,
    "LAB": "LAB image converted to RGB without colour management",
    "HSV": None,
}
# What Pillow raises for malformed, truncated or oversized data (it is not consistent).
_DECODE_ERRORS = (
    Image.DecompressionBombError,
    OSError,
    SyntaxError,
    ValueError,
    EOFError,
    TypeError,
    IndexError,
    KeyError,
    MemoryError,
)


class OutputExists(SemcodecError, FileExistsError):
    """The output path exists and overwriting was not requested (the CLI's --force)."""


def exists_message(path: str) -> str:
    """The refusal to write over a file: what to do instead, never a destructive flag."""
    return f"cannot write {path!r}: file exists; name another output with -o, or a folder with -d"


@dataclass
class LoadedImage:
    """An input image in canonical form: what the encoder consumes and the decoder must restore."""

    rgb: np.ndarray  # uint8 (H, W, 3); gray images are replicated into three channels
    mode: str  # "L", "RGB" or "RGBA"
    alpha: np.ndarray | None = None  # uint8 (H, W) when mode == "RGBA"
    warnings: list[str] = field(default_factory=list)
    metadata: Metadata = field(default_factory=Metadata)  # ICC, EXIF (orientation 1), XMP

    @property
    def width(self) -> int:
        """Image width in pixels, for callers that do not want to index shapes."""
        return int(self.rgb.shape[1])

    @property
    def height(self) -> int:
        """Image height in pixels, for callers that do not want to index shapes."""
        return int(self.rgb.shape[0])


def _display_name(source: object) -> str:
    """Return a short name for error messages, since sources can be paths, bytes or streams."""
    if isinstance(source, (str, Path)):
        return str(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return "<bytes>"
    name = getattr(source, "name", None)
    return str(name) if isinstance(name, (str, Path)) else "<stream>"


def _fail(name: str, reason: str) -> UnsupportedInput:
    """Build the one-line error every read failure becomes, so messages stay uniform."""
    return UnsupportedInput(f"cannot read {name!r}: {reason}")


def _reason(exc: BaseException) -> str:
    """Turn a Pillow/OS exception into a short human reason without tracebacks or paths."""
    if isinstance(exc, UnidentifiedImageError):
        return "not a recognised image format"
    if isinstance(exc, Image.DecompressionBombError):
        return f"image too large (decompression bomb check: {exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, MemoryError):
        return "out of memory while decoding"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "truncated" in text.lower() or isinstance(exc, EOFError):
        return "truncated image file"
    return text


_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"BM", "BMP"),
)


def _known_format(prefix: bytes) -> str | None:
    """Name the format a prefix claims, so a damaged known file is not called 'not an image'."""
    if prefix[:4] == b"RIFF" and prefix[8:12] == b"WEBP":
        return "WebP"
    for signature, fmt in _SIGNATURES:
        if prefix.startswith(signature):
            return fmt
    return None


def _check_size(name: str, width: int, height: int, limits: Limits) -> None:
    """Reject images over the limits from the declared size, before pixels are decoded."""
    problem = limits.check(width, height)
    if problem is not None:
        raise _fail(name, problem)


def _open_lazily(fp: BinaryIO, limits: Limits) -> Image.Image:
    """Open without decoding, with Pillow's bomb threshold raised to (never below) our limit."""
    with pil_pixel_limit(limits), warnings.catch_warnings():
        # Anything Pillow would merely warn about is over our limit and rejected below.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        return Image.open(fp)


def _source_is_16bit_color(im: Image.Image) -> bool:
    """Detect 16-bit colour sources that Pillow silently narrows to 8 bits, to warn about it."""
    for tile in getattr(im, "tile", None) or []:
        if ";16" in str(tile.args):
            return True
    return False


def _to_uint8_gray16(values: np.ndarray) -> np.ndarray:
    """Scale 0..65535 to 0..255 with correct rounding: round(v / 257) == (v + 128) // 257."""
    wide = np.clip(values.astype(np.int64), 0, 65535)
    return ((wide + 128) // 257).astype(np.uint8)


def _float_to_uint8(values: np.ndarray, warn: list[str]) -> np.ndarray:
    """Map float samples to 8 bits, treating [0, 1] data as normalised and anything else as 0..255."""
    data = np.nan_to_num(values.astype(np.float64), nan=0.0, posinf=255.0, neginf=0.0)
    if data.size and data.min() >= 0.0 and data.max() <= 1.0:
        warn.append("floating-point image in [0, 1] scaled to 8 bits")
        data = data * 255.0
    else:
        warn.append("floating-point image clipped to 0..255 and rounded to 8 bits")
    return np.clip(np.rint(data), 0, 255).astype(np.uint8)


def _canonicalise(im: Image.Image, warn: list[str]) -> tuple[np.ndarray, str, np.ndarray | None]:
    """Reduce any decoded Pillow image to (gray-or-rgb uint8, gray?, alpha-or-None)."""
    mode = im.mode
    transparency = im.info.get("transparency")
    if mode in _GRAY_16_MODES or mode == "I":
        raw = np.asarray(im)
        if mode == "I":
            warn.append("32-bit integer image clipped to 0..65535 and scaled to 8 bits")
        else:
            warn.append("16-bit image converted to 8 bits")
        alpha = None
        if isinstance(transparency, int):
            alpha = np.where(raw == transparency, 0, 255).astype(np.uint8)
        return _to_uint8_gray16(raw), "gray", alpha
    if mode == "F":
        return _float_to_uint8(np.asarray(im), warn), "gray", None
    if mode in ("1", "L") and transparency is None:
        return np.asarray(im.convert("L")), "gray", None
    if mode in ("1", "L", "LA", "La"):
        if mode == "LA":
            la = np.asarray(im)
        elif mode == "La":
            la = np.asarray(im.convert("LA"))
        else:  # gray with a transparent key colour (PNG tRNS)
            la = np.asarray(im.convert("RGBA").convert("LA"))
        return la[..., 0].copy(), "gray", la[..., 1].copy()
    if mode in ("P", "PA"):
        palette_mode = getattr(im.palette, "mode", "RGB")
        has_alpha = mode == "PA" or transparency is not None or palette_mode == "RGBA"
        if not has_alpha:
            return np.asarray(im.convert("RGB")), "rgb", None
        rgba = np.asarray(im.convert("RGBA"))
        return rgba[..., :3].copy(), "rgb", rgba[..., 3].copy()
    if mode in ("RGBA", "RGBa"):
        rgba = np.asarray(im.convert("RGBA") if mode != "RGBA" else im)
        return rgba[..., :3].copy(), "rgb", rgba[..., 3].copy()
    if mode in _RGB_LIKE:
        if _RGB_LIKE[mode]:
            warn.append(_RGB_LIKE[mode])
        if mode == "RGB" and transparency is not None:
            rgba = np.asarray(im.convert("RGBA"))
            return rgba[..., :3].copy(), "rgb", rgba[..., 3].copy()
        return np.asarray(im.convert("RGB")), "rgb", None
    try:
        rgba = np.asarray(im.convert("RGBA"))
    except (ValueError, OSError) as exc:
        raise ValueError(f"unsupported image mode {mode!r}") from exc
    warn.append(f"image mode {mode} converted to RGBA")
    return rgba[..., :3].copy(), "rgb", rgba[..., 3].copy()


_STDERR_LOCK = threading.Lock()
_NOTE_CHARS = 300  # of a reader's own messages, folded into semcodec's one line


@contextlib.contextmanager
def _reader_messages(notes: list[str]) -> Iterator[None]:
    """Collect image readers' chatter instead of letting it reach the terminal: Python
    warnings (Pillow's, with their source lines) and what C libraries (libtiff, libpng) write
    to file descriptor 2 while the input is read. Each becomes one short note."""
    with _STDERR_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ResourceWarning)
        saved = None
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
            saved = os.dup(2)
        with tempfile.TemporaryFile() as sink:
            if saved is not None:
                os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:  # also when the read failed: the notes explain the failure
                if saved is not None:
                    os.dup2(saved, 2)
                    os.close(saved)
                sink.seek(0)
                chatter = sink.read(64 << 10).decode("utf-8", "replace")
                notes += [" ".join(str(w.message).split()) for w in caught]
                notes += [" ".join(ln.split()) for ln in chatter.splitlines() if ln.strip()]


def _with_notes(text: str, notes: list[str]) -> str:
    """A message with the readers' notes appended, on one line and bounded in length."""
    if not notes:
        return text
    joined = "; ".join(dict.fromkeys(notes))
    if len(joined) > _NOTE_CHARS:
        joined = joined[: _NOTE_CHARS - 1] + "…"
    return f"{text} ({joined})"


def _read_pixels(fp: BinaryIO, name: str, limits: Limits) -> LoadedImage:
    """Read one image with the readers' messages folded into semcodec's own one line."""
    notes: list[str] = []
    try:
        with _reader_messages(notes):
            loaded = _decode_image(fp, name, limits)
    except UnsupportedInput as exc:
        raise UnsupportedInput(_with_notes(str(exc), notes)) from None
    if notes:
        loaded.warnings.append(_with_notes("the image reader reported problems", notes))
    return loaded


def _decode_image(fp: BinaryIO, name: str, limits: Limits) -> LoadedImage:
    """Open, size-check, decode and canonicalise one image from an open binary stream."""
    warn: list[str] = []
    prefix = fp.read(16)
    fp.seek(0)
    try:
        im = _open_lazily(fp, limits)
    except UnidentifiedImageError:
        fmt = _known_format(prefix)
        reason = f"damaged or truncated {fmt} file" if fmt else "not a recognised image format"
        raise _fail(name, reason) from None
    except _DECODE_ERRORS as exc:
        raise _fail(name, _reason(exc)) from None
    with im:
        width, height = im.size
        # EXIF may swap the axes later; either orientation fitting bounds the allocation.
        if limits.check(height, width) is not None:
            _check_size(name, width, height, limits)
        wide_color = im.mode not in _GRAY_16_MODES and _source_is_16bit_color(im)
        frames = getattr(im, "n_frames", 1) if getattr(im, "is_animated", False) else 1
        if frames > 1:
            warn.append(f"animated image with {frames} frames: only the first frame is encoded")
            im.seek(0)
        try:
            im.load()
        except _DECODE_ERRORS as exc:
            raise _fail(name, _reason(exc)) from None
        if wide_color:
            warn.append("16-bit image converted to 8 bits")
        # Read after load: some plugins (PNG) decode the whole image to find their EXIF.
        try:
            orientation = int(im.getexif().get(_ORIENTATION_TAG, 1) or 1)
        except Exception:  # malformed EXIF must not make a readable image unreadable
            orientation = 1
            warn.append("EXIF data unreadable; orientation ignored")
        # before exif_transpose rewrites it: the pixels are turned upright, the EXIF says so
        meta = metadata_of(im, upright=orientation != 1)
        if orientation in _SWAPPING_ORIENTATIONS:
            width, height = height, width
        _check_size(name, width, height, limits)
        try:
            ImageOps.exif_transpose(im, in_place=True)
        except Exception:  # same rationale as above: orientation is best effort
            warn.append("EXIF orientation could not be applied")
        try:
            pixels, kind, alpha = _canonicalise(im, warn)
        except (OSError, ValueError) as exc:
            raise _fail(name, _reason(exc)) from None
    return _loaded(pixels, kind, alpha, warn, meta)


def _loaded(pixels: np.ndarray, kind: str, alpha, warn: list[str], meta) -> LoadedImage:
    """The canonical form: RGB pixels, the input's mode, alpha only where it is not opaque."""
    if alpha is not None and bool(np.all(alpha == 255)):
        alpha = None
    if kind == "gray":
        rgb = np.repeat(pixels[:, :, None], 3, axis=2)
        mode = "L" if alpha is None else "RGBA"
    else:
        rgb = np.ascontiguousarray(pixels, dtype=np.uint8)
        mode = "RGB" if alpha is None else "RGBA"
    return LoadedImage(rgb=rgb, mode=mode, alpha=alpha, warnings=warn, metadata=meta)


def from_pil(im: Image.Image, limits: Limits = Limits()) -> LoadedImage:
    """Canonicalise an in-memory PIL image as the caller holds it (no EXIF rotation)."""
    name = "image"
    _check_size(name, im.width, im.height, limits)
    warn: list[str] = []
    try:
        pixels, kind, alpha = _canonicalise(im, warn)
    except (OSError, ValueError) as exc:
        raise _fail(name, _reason(exc)) from None
    return _loaded(pixels, kind, alpha, warn, metadata_of(im))


def load_image(source: str | Path | bytes | BinaryIO, limits: Limits = Limits()) -> LoadedImage:
    """Read any Pillow-readable image into canonical form; raises UnsupportedInput on failure."""
    name = _display_name(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        if len(source) == 0:
            raise _fail(name, "empty input")
        return _read_pixels(io.BytesIO(bytes(source)), name, limits)
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            if path.is_dir():
                raise _fail(name, "is a directory")
            with open(path, "rb") as fp:
                if os.fstat(fp.fileno()).st_size == 0:
                    raise _fail(name, "empty file")
                return _read_pixels(fp, name, limits)
        except OSError as exc:
            raise _fail(name, _reason(exc)) from None
    try:
        data = source.read()
    except (OSError, ValueError) as exc:
        raise _fail(name, _reason(exc)) from None
    if not data:
        raise _fail(name, "empty input")
    return _read_pixels(io.BytesIO(data), name, limits)


_TEMP_NAME = re.compile(r"\.(?P<name>.+)\.[0-9a-f]{12}\.tmp")
#: a temporary file unmodified this long belongs to a write whose process was killed outright
STALE_TEMP_S = 60.0


def remove_stale_temps(outputs: Iterable[str | Path], older_than: float = STALE_TEMP_S) -> int:
    """Remove the temporary files that atomic writes of ``outputs`` left when their process was
    killed outright (SIGKILL, power loss): a resumed batch leaves no debris. Returns how many."""
    by_folder: dict[Path, set[str]] = {}
    for out in outputs:
        path = Path(out)
        by_folder.setdefault(path.parent, set()).add(path.name)
    now, removed = time.time(), 0
    for folder, names in by_folder.items():
        try:
            entries = list(os.scandir(folder))
        except OSError:  # a folder still to be made, or unreadable: nothing of ours there
            continue
        for entry in entries:
            match = _TEMP_NAME.fullmatch(entry.name)
            if match is None or match["name"] not in names:
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if entry.is_file(follow_symlinks=False) and now - info.st_mtime > older_than:
                    os.unlink(entry.path)
                    removed += 1
    return removed


def _temp_path(target: Path) -> tuple[Path, int]:
    """Create a fresh temporary file next to ``target`` (same filesystem, so rename is atomic)."""
    for _ in range(16):
        candidate = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        return candidate, fd
    raise FileExistsError(errno.EEXIST, "could not create a temporary file", str(target))


def _write_error(path: Path, exc: OSError) -> SemcodecError:
    """Build the one-line error every write failure becomes."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return SemcodecError(f"cannot write {str(path)!r}: {reason}")


def _atomic_write(path: str | Path, force: bool, write: Callable[[BinaryIO], None]) -> None:
    """Write via a sibling temp file, fsync and rename: never a partial output. The temp file
    is removed on any error and on KeyboardInterrupt (Ctrl-C; SIGTERM in the CLI); a process
    killed outright (SIGKILL, power loss) can leave it: ``.<name>.<12 hex digits>.tmp``."""
    target = Path(path)
    if target.is_dir():
        raise SemcodecError(f"cannot write {str(target)!r}: is a directory")
    if not force and os.path.lexists(target):
        raise OutputExists(exists_message(str(target)))
    try:
        tmp, fd = _temp_path(target)
    except OSError as exc:
        raise _write_error(target, exc) from None
    try:
        with os.fdopen(fd, "wb") as fp:
            write(fp)
            fp.flush()
            os.fsync(fp.fileno())
        if force:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # fails if target appeared meanwhile: no clobbering
            except FileExistsError:
                raise OutputExists(exists_message(str(target))) from None
            except OSError:  # filesystems without hard links
                if os.path.lexists(target):
                    raise OutputExists(exists_message(str(target))) from None
                os.replace(tmp, target)
            else:
                os.unlink(tmp)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:  # already gone (linked and unlinked) or undeletable: keep the real error
            pass
        if isinstance(exc, OSError) and not isinstance(exc, SemcodecError):
            raise _write_error(target, exc) from None
        raise


def atomic_write_bytes(path: str | Path, data: bytes, force: bool) -> None:
    """Write ``data`` to ``path`` atomically; refuse to replace an existing file unless forced."""
    _atomic_write(path, force, lambda fp: fp.write(data))
