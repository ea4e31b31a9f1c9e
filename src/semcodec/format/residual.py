"""Registry of residual backends (design element A5): ``native`` (DCT) and ``avif`` (Pillow).

Why a registry: the file stores a small integer backend code, so the decoder must map that code
back to an implementation, and the encoder's ``--residual`` option maps a name to one. Backends
are imported lazily so that a missing optional dependency (e.g. AVIF support in Pillow) only
matters when that backend is used.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod

import numpy as np

from semcodec.defaults import DEFAULT_EFFORT, EFFORTS
from semcodec.errors import CorruptData
from semcodec.format.container import ResidualKind

__all__ = [
    "BACKENDS",
    "DEFAULT_EFFORT",
    "EFFORTS",
    "MAX_PIXELS",
    "ResidualBackend",
    "backend_by_code",
    "check_quality",
    "check_residual",
    "check_size",
    "get_backend",
    "plus_prediction",
]

MAX_PIXELS = 1 << 28
"""Largest residual (H*W) a decoder accepts, so a bogus size cannot exhaust memory."""


RESIDUAL_MIN = -255
RESIDUAL_MAX = 255


class ResidualBackend(ABC):
    """A lossy coder of the signed residual image; ``code`` is the id stored in the file."""

    name: str
    code: int

    @abstractmethod
    def encode(
        self,
        residual: np.ndarray,
        quality: int,
        effort: int = DEFAULT_EFFORT,
        layout: str | None = None,
        guide: np.ndarray | None = None,
    ) -> bytes:
        """Code an int16 (H, W, 3) residual in [-255, 255]; higher quality → more bytes,
        higher effort → more encoder time for fewer bytes (the decoder is the same).
        ``layout``: a payload layout the backend offers (None: its default); the payload says
        which it is.
        ``guide``: relative rates per 16-pixel block (roi.rate_guide) for a backend that can
        steer its quantiser spatially; the others ignore it, and decoding never needs it."""

    @abstractmethod
    def decode(self, data: bytes, height: int, width: int) -> np.ndarray:
        """Decode to int16 (H, W, 3) in [-255, 255]; CorruptData on a malformed payload."""

    def picture(
        self, data: bytes, height: int, width: int, prediction: np.ndarray | int
    ) -> np.ndarray:
        """uint8 (H, W, 3): the prediction (an array, or one value everywhere) plus the decoded
        residual, clipped to 8 bits: what the decoder shows before the enhancement."""
        return plus_prediction(self.decode(data, height, width), prediction)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r} code={self.code}>"


def plus_prediction(residual: np.ndarray, prediction: np.ndarray | int) -> np.ndarray:
    """uint8 (H, W, 3): a decoded int16 residual (added to in place) plus its prediction,
    clipped to 8 bits."""
    residual += prediction
    return np.clip(residual, 0, 255).astype(np.uint8)


# name -> (file code, module, class); the codes are container.ResidualKind's.
_REGISTRY: dict[str, tuple[int, str, str]] = {
    ResidualKind.NATIVE.label: (
        ResidualKind.NATIVE,
        "semcodec.format.residual_native",
        "NativeBackend",
    ),
    ResidualKind.AVIF.label: (ResidualKind.AVIF, "semcodec.format.residual_avif", "AvifBackend"),
}

BACKENDS: tuple[str, ...] = tuple(_REGISTRY)

_instances: dict[str, ResidualBackend] = {}


def get_backend(name: str) -> ResidualBackend:
    """Return the backend called ``name``; ValueError if there is none."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown residual backend {name!r}; choose one of {', '.join(BACKENDS)}")
    inst = _instances.get(name)
    if inst is None:
        code, module, cls = _REGISTRY[name]
        inst = getattr(importlib.import_module(module), cls)()
        if inst.name != name or inst.code != code:
            raise RuntimeError(f"backend {cls} does not match its registry entry")
        _instances[name] = inst
    return inst


def backend_by_code(code: int) -> ResidualBackend:
    """Return the backend whose file code is ``code``; CorruptData if unknown (read from a file)."""
    for name, (c, _, _) in _REGISTRY.items():
        if c == code:
            return get_backend(name)
    raise CorruptData(f"unknown residual backend code {code!r}")


def check_quality(quality: int) -> int:
    """Validate a 0..100 quality setting (encoder side)."""
    if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)):
        raise TypeError(f"quality must be an int, got {type(quality).__name__}")
    if not 0 <= quality <= 100:
        raise ValueError(f"quality must be in 0..100, got {quality}")
    return int(quality)


def check_residual(residual: np.ndarray) -> None:
    """Validate an encoder input: int16 (H, W, 3) within [-255, 255]."""
    if not isinstance(residual, np.ndarray):
        raise TypeError("residual must be a numpy array")
    if residual.ndim != 3 or residual.shape[2] != 3:
        raise ValueError(f"residual must have shape (H, W, 3), got {residual.shape}")
    if residual.dtype != np.int16:
        raise ValueError(f"residual must be int16, got {residual.dtype}")
    check_size(residual.shape[0], residual.shape[1])
    if residual.min() < RESIDUAL_MIN or residual.max() > RESIDUAL_MAX:
        raise ValueError("residual values must lie in [-255, 255]")


def check_size(height: int, width: int) -> None:
    """Validate a residual size (both sides), bounding what a decoder may allocate."""
    for label, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{label} must be an int, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{label} must be >= 1, got {v}")
    if height * width > MAX_PIXELS:
        raise ValueError(f"residual of {height}x{width} exceeds {MAX_PIXELS} pixels")
