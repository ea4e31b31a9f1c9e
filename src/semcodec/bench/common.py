"""What the benchmarks share: the library versions a report must name, and the default
architecture with seeded random weights (speed and memory do not depend on weight values).

Light imports only: the speed benchmark's parent process must not load torch or numpy.
"""

from __future__ import annotations

import platform
from importlib import metadata

__all__ = ["DEFAULT_ARCH", "default_arch_model", "library_versions"]

#: Model name of the default architecture with seeded random weights.
DEFAULT_ARCH = "default-arch"


def _dist_version(name: str) -> str | None:
    """An installed distribution's version without importing it (keeps a parent light)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _pillow_feature(name: str) -> str | None:
    """Version of a library Pillow was built with (None when absent)."""
    from PIL import features

    try:
        return features.version(name)
    except Exception:  # noqa: BLE001 - informative only
        return None


def _avif_codecs() -> str | None:
    """libavif's AV1 encoder/decoder (aom, dav1d, ...): they change AVIF bytes and speed."""
    try:
        from PIL import _avif

        return _avif.codec_versions()
    except Exception:  # noqa: BLE001 - Pillow without AVIF
        return None


def _libjxl() -> str | None:
    """libjxl's version through imagecodecs (imports numpy: asked for only where that is fine)."""
    try:
        import imagecodecs

        return imagecodecs.jpegxl_version()
    except Exception:  # noqa: BLE001 - optional dependency, informative only
        return None


def library_versions(*, jxl: bool = False) -> dict[str, str | None]:
    """Python, platform and every library whose version changes codec output or speed.

    Read from the installed distributions and Pillow's build, without importing torch or numpy;
    ``jxl=True`` also asks imagecodecs for libjxl's version (which imports numpy).
    """
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": _dist_version("torch"),
        "numpy": _dist_version("numpy"),
        "pillow": _dist_version("pillow"),
        "pytorch_msssim": _dist_version("pytorch-msssim"),
        "imagecodecs": _dist_version("imagecodecs"),
        "constriction": _dist_version("constriction"),
        "libjpeg": _pillow_feature("jpg"),
        "libwebp": _pillow_feature("webp"),
        "openjpeg": _pillow_feature("jpg_2000"),
        "libavif": _pillow_feature("avif"),
        "libjpeg_turbo": _pillow_feature("libjpeg_turbo"),
        "avif_codecs": _avif_codecs(),
        "libjxl": _libjxl() if jxl else None,
    }


def default_arch_model() -> str:
    """Register the default architecture with seeded random weights (once) and return its
    model name: the compute and memory of a trained default model, without its weights."""
    from semcodec.zoo import registry

    if DEFAULT_ARCH not in registry.REGISTRY:
        registry.register(
            registry.BundleSpec(
                DEFAULT_ARCH, seg="default", compnet="default", generator="default", seed=0
            )
        )
    return DEFAULT_ARCH
