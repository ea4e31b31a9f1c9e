"""Whether a file that already exists is a complete, valid file of its kind: a batch that
resumes skips only outputs it can trust, and redoes or refuses the rest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from semcodec.errors import CorruptData
from semcodec.format import container


@dataclass(frozen=True)
class Existing:
    """What a valid existing output holds, for the batch's report."""

    bytes: int
    width: int
    height: int
    layers: dict[str, int] = field(default_factory=dict)


def sem_layer_bytes(data: bytes) -> dict[str, int]:
    """Bytes per layer of a .sem file, named as the encoder's statistics name them."""
    return {kind.name.lower(): size for kind, size in container.layer_sizes(data).items()}


def check_sem(path: str | Path) -> Existing:
    """A .sem file whose header and every layer's CRC check; raises CorruptData or OSError."""
    data = Path(path).read_bytes()
    header, layers = container.unpack(data)
    sizes = {kind.name.lower(): len(payload) for kind, payload in layers.items()}
    return Existing(len(data), header.width, header.height, sizes)


def check_image(path: str | Path, pil_format: str) -> Existing:
    """An image of ``pil_format`` that decodes in full (PNG: every chunk's CRC through IEND
    as well); raises CorruptData or OSError."""
    from PIL import Image

    target = Path(path)
    size = target.stat().st_size
    try:
        with Image.open(target) as im:
            if im.format != pil_format:
                raise CorruptData(
                    f"{str(target)!r} is {im.format or 'not an image'}, not {pil_format}"
                )
            im.verify()  # chunk structure and CRCs (PNG); no pixels
        with Image.open(target) as im:
            im.load()  # every pixel: a truncated file fails here
            width, height = im.size
    except CorruptData:
        raise
    except (OSError, ValueError, SyntaxError) as exc:  # Pillow's ways of saying "broken"
        raise CorruptData(f"{str(target)!r} is not a complete {pil_format} file: {exc}") from None
    return Existing(size, width, height)
