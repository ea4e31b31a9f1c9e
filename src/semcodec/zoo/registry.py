"""The model registry: bundle names → configurations and weights files (no torch needed).

`semcodec models` and the decoder's lookups read it without loading any network; zoo/bundles.py builds
and loads the bundles it names.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path

import numpy as np

from semcodec.defaults import DEFAULT_MODEL


@dataclass(frozen=True)
class BundleSpec:
    """Configuration names of a bundle and where its weights live (None: seeded random init)."""

    name: str
    seg: str = "default"
    compnet: str = "default"
    generator: str = "default"
    weights: str | None = None  # file name inside the package's weights folder, '<name>-<sha8>.pt'
    seed: int = 0
    enhance: str = ""  # the enhancement network's configuration ("": the bundle has none)

    def to_json(self) -> str:
        """The spec a weights file records; bundles without enhancement record what they did
        before it existed, so their hashes stay."""
        d = asdict(self)
        if not d["enhance"]:
            del d["enhance"]
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> BundleSpec:
        """The spec a weights file records (fields this release no longer has are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in json.loads(text).items() if k in known})


REGISTRY: dict[str, BundleSpec] = {
    # The shipped default: integer generator table, 3-neighbour compact table, the map with
    # UNKNOWN and the enhancement network (models/README.md).
    DEFAULT_MODEL: BundleSpec(
        DEFAULT_MODEL, seg="lite0-oe", weights="default-6822cb1f.pt", enhance="s4-w64-l4"
    ),
    # default's segmentation net, CompNet and compact table with a generator fine-tuned for
    # SSIMULACRA 2 and the adversarial terms: the same bytes, another picture (models/perceptual.md)
    "perceptual": BundleSpec("perceptual", weights="perceptual-aad29cfb.pt"),
    # the random test bundles (tiny, tiny-enh) are the tests' own: tests/testbundles.py
}


def register(spec: BundleSpec) -> None:
    """Add or replace a bundle in the registry."""
    REGISTRY[spec.name] = spec


def weights_dir() -> Path:
    """Folder of the shipped weights (models/ in the source tree, semcodec._weights when installed)."""
    return Path(str(resources.files("semcodec._weights")))


def weights_path(name: str) -> Path | None:
    """A registered model's weights file, so no caller spells a release's file name (None: random init)."""
    weights = REGISTRY[name].weights
    return None if weights is None else weights_dir() / weights


def state_hash(payload: bytes) -> str:
    """16 hex digits of SHA-256: the weights hash recorded in every file."""
    return hashlib.sha256(payload).hexdigest()[:16]


PACKED_MAGIC = b"SEMW1\n"  # a weights file stored as two zstandard frames (pack_weights)
_PACKED_HEAD = struct.Struct("<QQ32s")  # payload length, first frame's length, payload SHA-256
MAX_WEIGHTS = 1 << 30  # bytes a packed weights file may unpack to


def pack_weights(payload: bytes) -> bytes:
    """The stored form of a weights file: its even and its odd bytes (the low and the high
    bytes of fp16 weights) as two zstandard frames, after the payload's SHA-256;
    default-27c822af 22.9 → 18.9 MB. The hash is the payload's, so packing changes no release."""
    import zstandard

    a = np.frombuffer(payload, np.uint8)
    zc = zstandard.ZstdCompressor(level=19)
    even, odd = zc.compress(a[0::2].tobytes()), zc.compress(a[1::2].tobytes())
    digest = hashlib.sha256(payload).digest()
    return PACKED_MAGIC + _PACKED_HEAD.pack(len(payload), len(even), digest) + even + odd


def _packed_head(data: bytes) -> tuple[int, int, bytes]:
    """Payload length, first frame's length and payload SHA-256 of packed weights."""
    if len(data) < len(PACKED_MAGIC) + _PACKED_HEAD.size:
        raise ValueError("truncated packed weights")
    n, first, digest = _PACKED_HEAD.unpack_from(data, len(PACKED_MAGIC))
    if n > MAX_WEIGHTS or len(PACKED_MAGIC) + _PACKED_HEAD.size + first > len(data):
        raise ValueError("bad packed weights header")
    return n, first, digest


def unpack_weights(data: bytes) -> bytes:
    """The payload of a weights file, packed or not (ValueError if a packed one is damaged:
    its payload must match the SHA-256 it records)."""
    if not data.startswith(PACKED_MAGIC):
        return data
    import zstandard

    n, first, digest = _packed_head(data)
    head = len(PACKED_MAGIC) + _PACKED_HEAD.size
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
    payload = out.tobytes()
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("packed weights do not match their recorded SHA-256")
    return payload


def read_weights(path: Path) -> bytes:
    """A weights file's payload: what torch.load reads and state_hash covers."""
    return unpack_weights(Path(path).read_bytes())


def weights_hash(path: Path) -> str:
    """state_hash of a weights file's payload: a packed file's recorded one (checked when it
    loads), without unpacking it."""
    with open(path, "rb") as f:
        head = f.read(len(PACKED_MAGIC) + _PACKED_HEAD.size)
    if not head.startswith(PACKED_MAGIC):
        return state_hash(Path(path).read_bytes())
    if len(head) < len(PACKED_MAGIC) + _PACKED_HEAD.size:
        raise ValueError("truncated packed weights")
    return _PACKED_HEAD.unpack_from(head, len(PACKED_MAGIC))[2].hex()[:16]
