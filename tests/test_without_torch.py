"""The decoder installs alone: with torch unimportable (as after ``pip install semcodec``
without extras), a release's files decode to their recorded pixels through the API, the
command line (``decode``, ``decode --layer map``, ``info``) and the Pillow plugin, and a
command that needs torch says in one line which extra to install.

The child blocks torch with a meta-path hook, so no network and no second environment are
needed; tests/test_imports.py checks the same from the source.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from childproc import child_env

pytestmark = pytest.mark.subprocess

CONFORMANCE = Path(__file__).resolve().parent / "conformance"
#: the shipped default's release (one is enough: test_conformance.py checks them all)
(RELEASE,) = (
    CONFORMANCE / p.stem for p in (CONFORMANCE.parents[1] / "models").glob("default-*.pt")
)
BLOCKED = ("torch", "pytorch_msssim")
#: the files also read through the command line and the Pillow plugin (every file: the API)
EVERY_WAY = ("rgb-q40-mixed.sem", "rgba-q70.sem")

CHILD = r"""
import contextlib, io, json, sys
from importlib.abc import MetaPathFinder
from pathlib import Path

class Blocked(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

BLOCKED = json.loads(sys.argv[1])
sys.meta_path.insert(0, Blocked())
folder, out, every_way = Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
sys.path.insert(0, str(folder.parent))
from make_files import pixel_hash
from PIL import Image
import semcodec
from semcodec.cli import main
from semcodec.decoder.info import file_info

def cli(*args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(list(args))
        except SystemExit as e:
            return e.code, err.getvalue()
    return 0, err.getvalue()

got = {"files": {}}
for path in sorted(folder.glob("*.sem")):
    data = path.read_bytes()
    seen = got["files"][path.name] = {
        "api": pixel_hash(semcodec.decode(data)),
        "map": semcodec.decode_map(data).shape, "info": file_info(data)["width"],
    }
    if path.name not in every_way:
        continue
    with Image.open(path) as im:
        im.load()
        seen["plugin"] = pixel_hash(im)
    png = out / (path.stem + ".png")
    code, _ = cli("decode", str(path), "-o", str(png))
    with Image.open(png) as im:
        seen["cli"] = pixel_hash(im)
    map_code, _ = cli("decode", "--layer", "map", str(path), "-o", str(out / f"{path.stem}-map.png"))
    seen["codes"] = [code, map_code, cli("info", str(path))[0]]
got["encode"] = cli("encode", str(png), "-o", str(out / "again.sem"))
got["torch"] = [m for m in sys.modules if m.split(".")[0] in BLOCKED]
print(json.dumps(got))
"""


def test_a_release_decodes_without_torch(tmp_path: Path) -> None:
    """Every way of reading a file works without torch; encoding says what to install."""
    r = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(BLOCKED), str(RELEASE), str(tmp_path), *EVERY_WAY],
        capture_output=True, text=True, timeout=300, env=child_env(), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    want = json.loads((RELEASE / "hashes.json").read_text())["files"]
    assert sorted(got["files"]) == sorted(want)
    for name, seen in got["files"].items():
        assert seen["api"] == want[name]["full"], name
        assert seen["info"] > 0 and len(seen["map"]) == 2, name
    for name in EVERY_WAY:
        seen = got["files"][name]
        assert seen["plugin"] == seen["cli"] == want[name]["full"], name
        assert seen["codes"] == [0, 0, 0], name
    code, err = got["encode"]
    assert code == 1
    assert err.endswith(": torch is not installed: pip install 'semcodec[encode]'\n"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "again.sem").exists()
    assert got["torch"] == []
