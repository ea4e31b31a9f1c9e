"""Pillow plugin for ``.sem`` files: ``Image.open("x.sem")`` and ``img.save("x.sem")``.

Opening reads only the header (size and mode are known before any pixel work, and torch is not
imported); the learned decoder runs in ``load()``. Saving encodes as ``semcodec.encode`` with
the same settings as save parameters (``quality``, ``effort``, ``chroma``, ``roi``, ...).
"""

from __future__ import annotations

from typing import IO

from PIL import Image, ImageFile

from semcodec.defaults import DEFAULT_MODEL
from semcodec.errors import CorruptData, SemcodecError
from semcodec.format import container

__all__ = ["FORMAT", "MIME", "SemImageFile"]

FORMAT = "SEM"
MIME = "image/x-sem"
EXTENSION = ".sem"
_MAX_HEADER = container.MAX_HEADER_SIZE  # any version's longest header: the prefix to read


def _accept(prefix: bytes) -> bool:
    """Pillow's format sniffing: the 8 magic bytes."""
    return container.sniff(prefix)


class SemImageFile(ImageFile.ImageFile):
    """A .sem file: header parsed on open, decoded by semcodec on ``load()``."""

    format = FORMAT
    format_description = "semcodec learned semantic image codec"

    def _open(self) -> None:
        assert self.fp is not None
        prefix = self.fp.read(_MAX_HEADER)
        try:
            header = container.read_header(prefix)
        except CorruptData as exc:
            raise SyntaxError(f"not a valid .sem file: {exc}") from None
        self._size = (header.width, header.height)
        self._mode = header.mode
        self._sem_header = header
        self.info.update(
            model=header.model_name,
            model_hash=header.model_hash,
            quality=header.quality,
            residual=container.ResidualKind.label_of(header.residual_backend),
        )
        self._sem_data = prefix + self.fp.read()  # read once: metadata now, pixels on load()
        self._read_metadata()
        self.tile = []

    def _read_metadata(self) -> None:
        """Expose the file's ICC profile, EXIF and XMP in ``info`` (so ``getexif()`` works)."""
        from semcodec.format.metadata import decode_metadata

        try:
            _header, layers = container.unpack(self._sem_data)
            raw = layers.get(container.LayerKind.METADATA)
            meta = decode_metadata(raw) if raw is not None else None
        except CorruptData:
            return  # load() reports the damage
        if meta is not None:
            for key, value in (("icc_profile", meta.icc), ("exif", meta.exif), ("xmp", meta.xmp)):
                if value:
                    self.info[key] = value

    def load(self) -> Image.core.PixelAccess | None:
        """Decode the whole file with the model named in its header (imports the codec)."""
        if self._im is None:
            if self.fp is None:
                raise OSError("cannot load this image: file already closed")
            data = self._sem_data
            from semcodec.api import decoder_of

            try:
                decoded = decoder_of(data).decode(data).image
            except SemcodecError as exc:  # Pillow callers expect OSError from load()
                raise OSError(f"cannot decode .sem file: {exc}") from exc
            decoded.load()
            if decoded.mode != self.mode or decoded.size != self.size:
                raise OSError("decoded image does not match the .sem header")
            self.im = decoded.im
            self.readonly = 0
            if self._exclusive_fp and self._close_exclusive_fp_after_loading:
                self.fp.close()
            self.fp = None
            self._sem_data = b""
        return Image.Image.load(self)

    def verify(self) -> None:
        """Check the whole file's structure and CRCs without decoding pixels."""
        assert self.fp is not None
        try:
            container.unpack(self._sem_data)
        except CorruptData as exc:
            raise SyntaxError(f"broken .sem file: {exc}") from None
        super().verify()


def _save(im: Image.Image, fp: IO[bytes], filename: str | bytes) -> None:
    """Encode with semcodec; save params: model (bundle name), every setting of
    ``semcodec.encode`` (quality or target_size / target_bpp, effort, residual, chroma,
    metadata, gating, refine, roi, roi_strength; EncodeOptions.from_kwargs checks them),
    icc_profile / exif / xmp (else the image's); other params are Pillow's and ignored."""
    from semcodec.api import encode
    from semcodec.encoder.options import SETTINGS

    params = im.encoderinfo
    given = {k: params[k] for k in ("icc_profile", "exif", "xmp") if params.get(k)}
    if given:
        im = im.copy()
        im.info.update(given)
    settings = {k: params[k] for k in (*SETTINGS, "target_size", "target_bpp") if k in params}
    fp.write(encode(im, model=params.get("model", DEFAULT_MODEL), **settings))


def register() -> None:
    """Make Pillow open, save and name .sem files (idempotent)."""
    Image.register_open(FORMAT, SemImageFile, _accept)
    Image.register_save(FORMAT, _save)
    Image.register_extension(FORMAT, EXTENSION)
    Image.register_mime(FORMAT, MIME)


register()
