"""What the benchmarks share: the library versions a report must name, and the default
architecture with seeded random weights (speed and memory do not depend on weight values).

Light imports only: the speed benchmark's parent process must not load torch or numpy.
"""

from __future__ import annotations

import contextlib
import os
import platform
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

__all__ = ["DEFAULT_ARCH", "default_arch_model", "known_everywhere", "library_versions"]

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


# A sitecustomize for the whole commands a benchmark starts: a process that imports semcodec's
# registry gets default-arch registered in it (its pool's and cluster's workers too); one that
# never imports the registry (``--help``) loads nothing more. It then runs the sitecustomize it
# hides on the path, if any (a system's, or the test suite's).
_SITE = """\
import importlib.abc, importlib.machinery, importlib.util, os, sys

_HERE = os.path.dirname(os.path.abspath(__file__))


class _AfterRegistry(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "semcodec.zoo.registry":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            from semcodec.bench.common import default_arch_model

            default_arch_model()

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterRegistry())
_rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
_next = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _next is not None and _next.loader is not None:
    _next.loader.exec_module(importlib.util.module_from_spec(_next))
"""


@contextlib.contextmanager
def known_everywhere(model: str, env: dict[str, str]) -> Iterator[dict[str, str]]:
    """``env`` for whole ``semcodec`` commands of ``model``: for default-arch (known to no
    command), with a sitecustomize on PYTHONPATH that registers it in every Python process
    started with it; any other model: ``env`` itself."""
    if model != DEFAULT_ARCH:
        yield env
        return
    with tempfile.TemporaryDirectory(prefix="semcodec-default-arch-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(_SITE)
        path = env.get("PYTHONPATH")
        yield {**env, "PYTHONPATH": tmp + (os.pathsep + path if path else "")}
