"""Start-up: a command builds only the networks it runs, and the torch-free commands stay so.

From the shell most of a small encode's time is torch's import; what is left is the model, so
the bundle builds each network on its first use (zoo.ModelBundle) and the decoder makes its
integer generator on the first tile that needs it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from semcodec.decoder import pipeline as decoder
from semcodec.decoder.parts import find_parts
from semcodec.encoder.codec import Codec
from semcodec.format import container
from semcodec.zoo import bundles as zoo
from semcodec.zoo import registry

NETS = ("seg", "comp", "gen", "integer_generator", "enhancer")

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _photo() -> np.ndarray:
    """A 64x48 picture with some structure."""
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:48, 0:64]
    a = np.stack([x * 3 + 20, y * 4 + 10, (x + y) * 2], -1) + rng.integers(-9, 10, (48, 64, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


def _fresh_default() -> zoo.ModelBundle:
    """The shipped default bundle, loaded anew (nothing built yet)."""
    spec = zoo.REGISTRY["default"]
    return zoo._load_file(registry.weights_path("default"), spec)


def _built(bundle: zoo.ModelBundle) -> list[str]:
    return [k for k in NETS if bundle.is_built(k)]


@pytest.mark.slow
def test_an_encode_builds_only_the_networks_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """At quality 50 (the image coded itself) only the segmentation network is built; the base
    layer alone adds CompNet and the integer generator, never the float generator. The bytes
    are those of a bundle with every network built up front."""
    lazy = _fresh_default()
    monkeypatch.setitem(zoo._CACHE, "default", lazy)
    codec = Codec("default")
    assert _built(lazy) == []
    q50 = codec.encode(_photo(), quality=50)
    assert _built(lazy) == ["seg"]
    q0 = codec.encode(_photo(), quality=0)
    assert _built(lazy) == ["seg", "comp", "integer_generator"]
    eager = _fresh_default()
    for key in NETS:
        getattr(eager, key)
    monkeypatch.setitem(zoo._CACHE, "default", eager)
    other = Codec("default")
    assert other.encode(_photo(), quality=50) == q50
    assert other.encode(_photo(), quality=0) == q0


@pytest.mark.slow
def test_the_decoder_makes_its_generator_only_for_a_file_that_uses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flat = Codec("default").encode(_photo(), quality=50)
    base = Codec("default").encode(_photo(), quality=0)
    parts = find_parts(container.read_header(flat).model_hash)
    assert parts is not None
    made: list[int] = []
    real = decoder.auto_generator

    def counting(p):  # noqa: ANN001, ANN202 - the decoder's own signature
        made.append(1)
        return real(p)

    monkeypatch.setattr(decoder, "auto_generator", counting)
    dec = decoder.Decoder(parts)
    dec.decode(flat)
    assert made == []
    dec.decode(base)
    dec.decode(base)
    assert made == [1]


@pytest.mark.subprocess
@pytest.mark.slow
def test_info_models_and_decode_do_not_import_torch(tmp_path: Path) -> None:
    """The commands that need no network start without torch's 1-2 s import."""
    sem = tmp_path / "p.sem"
    sem.write_bytes(Codec("default").encode(_photo(), quality=50))
    code = (
        "import sys\n"
        "from semcodec.cli import main\n"
        "for args in (['info', sys.argv[1]], ['models'], ['decode', sys.argv[1], '-o', sys.argv[2]]):\n"
        "    try:\n        main(args)\n    except SystemExit as e:\n"
        "        assert not e.code, (args, e.code)\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    out = tmp_path / "p.png"
    r = subprocess.run(
        [sys.executable, "-c", code, str(sem), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert out.is_file() and "default-28b3a382" in r.stdout


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_command_line_imports_torch_frozen_out_of_collections() -> None:
    """import_torch leaves the collector on and torch's objects frozen (no full collection
    rescans them); with torch already imported it does nothing."""
    code = (
        "import gc, sys\n"
        "from semcodec.cli.common import import_torch\n"
        "assert 'torch' not in sys.modules\n"
        "import_torch()\n"
        "assert 'torch' in sys.modules and gc.isenabled()\n"
        "frozen = gc.get_freeze_count()\n"
        "assert frozen > 100_000, frozen\n"
        "import_torch()\n"
        "assert gc.get_freeze_count() == frozen\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
