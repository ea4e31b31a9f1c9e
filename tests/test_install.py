"""`pip install .` (not editable): the wheel carries the shipped weights and encodes an image.

The wheel is built and installed into a folder; a fresh interpreter without site processing
(so the editable install of this checkout cannot answer the import) takes semcodec from that
folder and the other dependencies from this environment.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from semcodec.errors import EXTRAS, missing_extra

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys
target, deps = sys.argv[1], sys.argv[2]
sys.path[:0] = [target, deps]
import numpy as np
import semcodec
from semcodec.zoo import registry
from semcodec.encoder.codec import Codec
img = np.zeros((40, 56, 3), np.uint8)
img[..., 0] = np.arange(56, dtype=np.uint8)[None] * 4
img[10:30, 20:40] = (200, 120, 40)
codec = Codec("default")
data = codec.encode(img, quality=50)
out = np.asarray(codec.decode(data).image)
from semcodec.decoder.parts import installed_release_meta
releases = sorted(f"{m['name']}-{m['hash'][:8]}" for m in installed_release_meta())
print(json.dumps({"package": semcodec.__file__, "weights": str(registry.weights_dir()),
                  "releases": releases,
                  "model": codec.bundle.name + "-" + codec.bundle.hash[:8],
                  "bytes": len(data), "shape": list(out.shape),
                  "max_error": int(np.abs(out.astype(int) - img).max())}))
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_wheel_carries_the_weights_and_encodes(tmp_path: Path) -> None:
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = wheels.glob("semcodec-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    deps = sysconfig.get_paths()["purelib"]
    r = subprocess.run(
        [sys.executable, "-S", "-c", CHILD, str(target), deps],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["package"].startswith(str(target)), got  # not this checkout
    assert got["weights"].startswith(str(target))
    shipped = sorted(p.stem for p in (ROOT / "models").glob("default-*.pt"))
    assert [got["model"]] == shipped
    # every release's decoder parts travel in the wheel: old files decode after an upgrade
    assert got["releases"] == sorted(p.stem for p in (ROOT / "models" / "decoders").glob("*.npz"))
    assert got["shape"] == [40, 56, 3] and got["bytes"] > 100 and got["max_error"] < 80


def _requirements(project: dict, extra: str | None = None) -> set[str]:
    """The distributions the core (or an extra, with the extras it names) installs."""
    reqs = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    out = set()
    for req in reqs:
        if m := re.fullmatch(r"semcodec\[([\w,]+)\]", req):
            out |= {d for e in m.group(1).split(",") for d in _requirements(project, e)}
        else:
            out.add(re.split(r"[<>=~ \[]", req)[0].lower())
    return out


def test_the_core_install_is_the_decoder() -> None:
    """`pip install semcodec` brings what a decode needs, never torch; each extra brings what
    the line for its missing module names, and dev (make's venv) brings every extra."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _requirements(project) == {
        "numpy", "pillow", "click", "zstandard", "constriction", "threadpoolctl",
    }  # fmt: skip
    for module, extra in EXTRAS.items():
        assert module.replace("_", "-") in _requirements(project, extra), (module, extra)
        line = missing_extra(ModuleNotFoundError(f"No module named {module!r}", name=module))
        assert line == f"{module} is not installed: pip install 'semcodec[{extra}]'"
    everything = set().union(*(_requirements(project, e) for e in project["optional-dependencies"]))
    assert _requirements(project, "dev") >= everything - _requirements(project, "jxl")
