"""A release's decoder parts: everything decoding a file needs of its model, without torch.

A `.sem` file records its model's name and weights hash. Decoding needs only the compact
layer's integer table, the integer generator table and three numbers; these live, per release,
in ``models/decoders/<name>-<hash8>.npz`` (about 2 MB, numpy only, no pickles). They stay
installed when a newer release replaces the bundle of that name, so every file a release wrote
keeps decoding to the same pixels; ``info`` names the release from them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from semcodec.errors import ModelError
from semcodec.format.compact import validate_table
from semcodec.intgrid import enhancer as intenhance
from semcodec.intgrid.generator import IntegerGenerator, check_table, unpack_table

PARTS_FORMAT = 1
PARTS_DIR = "decoders"


@dataclass(frozen=True)
class DecoderParts:
    """What a decoder needs of one release, found by the hash its files record."""

    name: str  # the model name its files record
    hash: str  # 16 hex digits: the bundle hash its files record
    released: str  # the release date (ISO), "" for a bundle that never shipped
    levels: int  # quantisation levels of the compact layer
    channels: int  # compact channels
    num_classes: int
    compact_table: np.ndarray  # int32 counts (format/compact.py)
    # the integer generator's table (intgrid/generator.py)
    generator: dict[str, np.ndarray] | None = field(default=None, repr=False)
    enhancer: dict[str, np.ndarray] | None = field(
        default=None, repr=False
    )  # intgrid/enhancer.py's table

    @property
    def release(self) -> str:
        """The release's name as users see it: '<name>-<hash8>'."""
        return f"{self.name}-{self.hash[:8]}"

    def integer_generator(self) -> IntegerGenerator:
        """The numpy integer generator (ModelError if this release has none)."""
        if self.generator is None:
            raise ModelError(f"model {self.release} has no integer generator table")
        return IntegerGenerator(self.generator)

    def int_enhancer(self) -> intenhance.IntEnhancer | None:
        """The integer enhancement network, or None for a release without one."""
        if self.enhancer is None:
            return None
        return intenhance.IntEnhancer(self.enhancer)


def parts_dir() -> Path:
    """Folder of the installed decoder parts (models/decoders in the source tree)."""
    return Path(str(resources.files("semcodec._weights"))) / PARTS_DIR


def save_parts(path: Path, parts: DecoderParts, packed_generator: dict[str, np.ndarray]) -> Path:
    """Write a parts file; the generator goes in its packed form (one zstandard block)."""
    meta = {
        "format": PARTS_FORMAT,
        "name": parts.name,
        "hash": parts.hash,
        "released": parts.released,
        "levels": parts.levels,
        "channels": parts.channels,
        "num_classes": parts.num_classes,
    }
    arrays = {
        "meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8),
        "compact_table": parts.compact_table.astype(np.int32),
        **{f"gen.{k}": np.asarray(v) for k, v in packed_generator.items()},
        **{f"enh.{k}": np.asarray(v) for k, v in (parts.enhancer or {}).items()},
    }
    path = Path(path)
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)
    return path


def load_parts(path: Path) -> DecoderParts:
    """Read and check a parts file (no pickles); ModelError if it is malformed."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays["meta"].tobytes().decode())
        if meta.get("format") != PARTS_FORMAT:
            raise ValueError(f"unsupported format {meta.get('format')!r}")
        packed = {k[4:]: v for k, v in arrays.items() if k.startswith("gen.")}
        generator = unpack_table(packed) if packed else None
        if generator is not None:
            check_table(generator)
        enhancer = {k[4:]: v for k, v in arrays.items() if k.startswith("enh.")} or None
        if enhancer is not None:
            intenhance.check_enh_table(enhancer)
        table = arrays["compact_table"]
        validate_table(table, int(meta["channels"]), int(meta["levels"]))
        return DecoderParts(
            name=str(meta["name"]),
            hash=str(meta["hash"]),
            released=str(meta.get("released", "")),
            levels=int(meta["levels"]),
            channels=int(meta["channels"]),
            num_classes=int(meta["num_classes"]),
            compact_table=table,
            generator=generator,
            enhancer=enhancer,
        )
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise ModelError(f"decoder parts {Path(path).name}: {exc}") from None


_CACHE: dict[str, DecoderParts | None] = {}
_LOCK = threading.Lock()


def find_parts(model_hash: str) -> DecoderParts | None:
    """The installed parts of the release whose files record `model_hash`, or None."""
    with _LOCK:
        if model_hash in _CACHE:
            return _CACHE[model_hash]
        found = None
        folder = parts_dir()
        for path in sorted(folder.glob(f"*-{model_hash[:8]}.npz")) if folder.is_dir() else []:
            parts = load_parts(path)
            if parts.hash == model_hash:
                found = parts
                break
        _CACHE[model_hash] = found
        return found


def _meta(path: Path) -> dict | None:
    """A parts file's name, hash and date, reading only its small header array."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode())
        return {k: meta[k] for k in ("name", "hash", "released")}
    except (OSError, KeyError, ValueError, TypeError):
        return None


def release_meta(model_hash: str) -> dict | None:
    """Name, hash and date of the installed release with this hash (its header only)."""
    folder = parts_dir()
    for path in sorted(folder.glob(f"*-{model_hash[:8]}.npz")) if folder.is_dir() else []:
        meta = _meta(path)
        if meta is not None and meta["hash"] == model_hash:
            return meta
    return None


def installed_release_meta() -> list[dict]:
    """Name, hash and date of every installed release, oldest first (headers only)."""
    folder = parts_dir()
    found = [m for p in sorted(folder.glob("*.npz")) if (m := _meta(p))] if folder.is_dir() else []
    return sorted(found, key=lambda m: (m["released"], m["name"]))
