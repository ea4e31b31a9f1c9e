"""The map layer alone: class ids of a file from its header and map layer (A1 as data).

Needs no model and no torch: every model's map codes the 11 CamVid classes (classes.py), from
the releases of 2026-12 with UNKNOWN (11) where the network was not sure, and
only the header's and the map layer's checks run (container.unpack_layers), so a file whose
other layers are damaged still gives its map.
"""

from __future__ import annotations

import numpy as np

from semcodec.format import container
from semcodec.format.classes import MAP_NAMES, MAP_SYMBOLS
from semcodec.format.container import Header, LayerKind, Limits
from semcodec.format.map import check_payload_size as check_map_size
from semcodec.format.map import decode_map as _decode_map_payload

MAP_SIZES = ("full", "stored")


def map_shape(header: Header) -> tuple[int, int]:
    """The stored map's rows and columns: the image size over the map scale, rounded up."""
    s = header.map_scale
    return -(-header.height // s), -(-header.width // s)


def read_map(data: bytes, limits: Limits | None = None) -> tuple[Header, np.ndarray]:
    """The header and the stored class ids (uint8, 1/map_scale size), reading nothing else.

    Only the header and the map layer are checked and decoded; the compact, residual and
    alpha layers may be damaged without stopping it (their lengths must still add up).
    """
    header, layers = container.unpack_layers(data, (LayerKind.SEMANTIC_MAP,), limits or Limits())
    mh, mw = map_shape(header)
    payload = layers[LayerKind.SEMANTIC_MAP]
    check_map_size(payload, mh, mw, f"a {header.width}x{header.height} image")
    return header, _decode_map_payload(payload, mh, mw, MAP_SYMBOLS)


def full_size_map(labels: np.ndarray, header: Header) -> np.ndarray:
    """Stored ids at image size (nearest: each stored id covers map_scale² pixels)."""
    s = header.map_scale
    full = np.repeat(np.repeat(labels, s, axis=0), s, axis=1)
    return np.ascontiguousarray(full[: header.height, : header.width])


def decode_map(data: bytes, size: str = "full") -> np.ndarray:
    """The class ids (uint8, indices into MAP_NAMES: CLASSES, then unknown) of a .sem file."""
    if size not in MAP_SIZES:
        raise ValueError(f"size must be one of {MAP_SIZES}, got {size!r}")
    header, labels = read_map(data)
    return full_size_map(labels, header) if size == "full" else labels


def class_shares(labels: np.ndarray) -> dict[str, float]:
    """Share of the map's positions per class present, largest first."""
    counts = np.bincount(labels.ravel(), minlength=MAP_SYMBOLS)[:MAP_SYMBOLS]
    total = max(1, int(counts.sum()))
    order = np.argsort(-counts, kind="stable")
    return {MAP_NAMES[i]: float(counts[i]) / total for i in order if counts[i]}
