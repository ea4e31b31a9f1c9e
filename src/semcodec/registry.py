"""The model registry: bundle names → configurations and weights files (no torch needed).

`semcodec models` and the decoder's lookups read it without loading any network; zoo.py builds
and loads the bundles it names.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

import numpy as np

from .defaults import DEFAULT_MODEL


@dataclass(frozen=True)
class BundleSpec:
    """Configuration names of a bundle and where its weights live (None: seeded random init)."""

    name: str
    seg: str = "default"
    compnet: str = "default"
    generator: str = "default"
    weights: str | None = None  # file name inside the package's weights folder, '<name>-<sha8>.pt'
    seed: int = 0

    @classmethod
    def from_json(cls, text: str) -> BundleSpec:
        """The spec a weights file records (fields this release no longer has are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in json.loads(text).items() if k in known})


REGISTRY: dict[str, BundleSpec] = {
    # The shipped default: integer generator table, 3-neighbour compact table (models/README.md).
    DEFAULT_MODEL: BundleSpec(DEFAULT_MODEL, weights="default-27c822af.pt"),
    # default's segmentation net, CompNet and compact table with a generator fine-tuned for
    # SSIMULACRA 2 and the adversarial terms: the same bytes, another picture (models/perceptual.md)
    "perceptual": BundleSpec("perceptual", weights="perceptual-aad29cfb.pt"),
    # Tiny random-initialised bundle: for tests and for checking the pipeline without weights.
    "tiny": BundleSpec(
        "tiny", seg="tiny", compnet="tiny", generator="tiny", weights=None, seed=1234
    ),
}


def register(spec: BundleSpec) -> None:
    """Add or replace a bundle in the registry."""
    REGISTRY[spec.name] = spec


def weights_dir() -> Path:
    """Folder of the shipped weights (models/ in the source tree, semcodec._weights when installed)."""
    return Path(str(resources.files("semcodec._weights")))


def state_hash(payload: bytes) -> str:
    """16 hex digits of SHA-256: the weights hash recorded in every file."""
    return hashlib.sha256(payload).hexdigest()[:16]


PACKED_MAGIC = b"SEMW1\n"  # a weights file stored as two zstandard frames (pack_weights)
_PACKED_HEAD = struct.Struct("<QQ")  # payload length, length of the first frame
MAX_WEIGHTS = 1 << 30  # bytes a packed weights file may unpack to


def pack_weights(payload: bytes) -> bytes:
    """The stored form of a weights file: its even and its odd bytes (the low and the high
    bytes of fp16 weights) as two zstandard frames; default-27c822af 22.9 → 18.9 MB. The hash
    is the payload's, so packing changes no release."""
    import zstandard

    a = np.frombuffer(payload, np.uint8)
    zc = zstandard.ZstdCompressor(level=19, write_checksum=True)  # damage is an error
    even, odd = zc.compress(a[0::2].tobytes()), zc.compress(a[1::2].tobytes())
    return PACKED_MAGIC + _PACKED_HEAD.pack(len(payload), len(even)) + even + odd


def unpack_weights(data: bytes) -> bytes:
    """The payload of a weights file, packed or not (ValueError if a packed one is damaged)."""
    if not data.startswith(PACKED_MAGIC):
        return data
    import zstandard

    head = len(PACKED_MAGIC) + _PACKED_HEAD.size
    if len(data) < head:
        raise ValueError("truncated packed weights")
    n, first = _PACKED_HEAD.unpack_from(data, len(PACKED_MAGIC))
    if n > MAX_WEIGHTS or head + first > len(data):
        raise ValueError("bad packed weights header")
    zd = zstandard.ZstdDecompressor()
    try:
        even = zd.decompress(data[head : head + first], max_output_size=(n + 1) // 2)
        odd = zd.decompress(data[head + first :], max_output_size=n // 2)
    except zstandard.ZstdError as exc:
        raise ValueError(f"bad packed weights: {exc}") from None
    if (len(even), len(odd)) != ((n + 1) // 2, n // 2):
        raise ValueError("packed weights of the wrong length")
    out = np.empty(n, np.uint8)
    out[0::2] = np.frombuffer(even, np.uint8)
    out[1::2] = np.frombuffer(odd, np.uint8)
    return out.tobytes()


def read_weights(path: Path) -> bytes:
    """A weights file's payload: what torch.load reads and state_hash covers."""
    return unpack_weights(Path(path).read_bytes())
