"""The model registry: bundle names → configurations and weights files (no torch needed).

`semcodec models` and the decoder's lookups read it without loading any network; zoo.py builds
and loads the bundles it names.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

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
