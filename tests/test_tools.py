"""The scripts in tools/ keep working against today's library: each imports, parses its
options, and its measuring function runs on a small picture with the test bundle."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from PIL import Image

TOOLS = Path(__file__).resolve().parent.parent / "tools"
SCRIPTS = sorted(TOOLS.glob("*.py"))

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def load(path: Path) -> ModuleType:
    """A script as a module, without running its main (guarded by ``__name__``)."""
    spec = importlib.util.spec_from_file_location(f"tools_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def picture(width: int = 96, height: int = 64) -> np.ndarray:
    """A small textured RGB picture."""
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 2 % 256, y * 3 % 256, (x + y) * 5 % 256], -1)
    return rgb.astype(np.uint8)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_a_tool_imports_and_shows_its_help(path: Path, capsys: pytest.CaptureFixture) -> None:
    """Every script: a docstring, a main taking argv, ``--help`` exits 0 with the first line."""
    module = load(path)
    assert module.__doc__, f"{path.name} has no docstring"
    with pytest.raises(SystemExit) as stop:
        module.main(["--help"])
    assert stop.value.code == 0
    assert module.__doc__.splitlines()[0].split()[0] in capsys.readouterr().out


def test_every_tool_is_described_in_the_tools_readme() -> None:
    """tools/README.md names exactly the scripts there are."""
    named = set(re.findall(r"`(\w+\.py)`", (TOOLS / "README.md").read_text()))
    assert named == {p.name for p in SCRIPTS}


@pytest.mark.slow
def test_roi_crops_one_photo(tmp_path: Path) -> None:
    """roi_crops: the ROI file and the uniform one of no more bytes, a crop, a table row."""
    from semcodec.encoder.codec import Codec

    module = load(TOOLS / "roi_crops.py")
    rgb = picture(*module.CROP)  # the crop is fixed; the photo at least as large
    row = module.one(Codec("tiny", bf16=False), rgb, 40, "p", tmp_path)
    assert row.startswith("| p |") and (tmp_path / "roi-p.png").is_file()


def test_structure_photos_measure() -> None:
    """structure_photos: a BD-rate entry and one excess per quality against AVIF."""
    from semcodec.bench.codecs import AvifAdapter
    from semcodec.encoder.codec import Codec

    module = load(TOOLS / "structure_photos.py")
    r = module.measure(picture(), Codec("tiny", bf16=False), AvifAdapter())
    assert len(r["excess_pct"]) == len(module.QUALITIES) and r["side_bytes"] > 0


def test_people_maps_writes_a_panel(tmp_path: Path) -> None:
    """people_maps: the photo beside a bundle's map, one PNG."""
    module = load(TOOLS / "people_maps.py")
    Image.fromarray(picture()).save(tmp_path / "photo.png")
    args = ["--images", str(tmp_path), "--names", "photo", "--model", "tiny", "--out"]
    module.main([*args, str(tmp_path / "out")])
    assert (tmp_path / "out" / "map-photo.png").is_file()


@pytest.mark.slow
def test_seg_throughput_measures_both_modes(capsys: pytest.CaptureFixture) -> None:
    """seg_throughput: a plain and a frozen-backbone step on synthetic frames, CPU per crop."""
    import json

    module = load(TOOLS / "seg_throughput.py")
    small = ["--crop", "32x32", "--batch", "2", "--steps", "1", "--warmup", "1"]
    rest = ["--cache-batches", "1", "--model", "lite0-tiny", "--weights", "", "--synthetic"]
    for mode in ("plain", "frozen"):
        module.main(["--mode", mode, *small, *rest])
        out = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert out["mode"] == mode and out["crops_per_cpu_hour"] > 0
        assert np.isfinite(out["losses"]).all()
        assert ("cache_cpu_s_per_crop" in out) == (mode == "frozen")


@pytest.mark.slow
def test_enhance_adapt_measure() -> None:
    """enhance_adapt: both files of one picture scored, and a table row of their differences."""
    from semcodec.encoder import adapt
    from semcodec.encoder.codec import Codec

    module = load(TOOLS / "enhance_adapt.py")
    shipped = adapt.ADAPT_CONFIGS
    row = {"image": "p"} | module.measure(Codec("tiny-enh", bf16=False), picture(), 0, 9)
    assert adapt.ADAPT_CONFIGS is shipped  # switched back after the adapted file
    for kind in module.KINDS:
        assert row[kind]["bytes"] > 0 and np.isfinite(row[kind]["psnr"])
    assert "| 9 | 0 |" in module.table([row])


def test_map_ceiling_of_a_thin_class() -> None:
    """map_ceiling: a pole two pixels wide never holds a cell's largest share, so the 1/8 oracle
    misses it, until its share is scaled up; the road around it is always found."""
    import torch

    from semcodec.models.segmentation import CLASS_NAMES, NUM_CLASSES

    module = load(TOOLS / "map_ceiling.py")
    pole, road = CLASS_NAMES.index("pole"), CLASS_NAMES.index("road")
    lab = np.full((64, 64), road, np.uint8)
    lab[:, 19:21] = pole
    plain = module.ceiling([lab], torch.ones(NUM_CLASSES))
    assert plain["pole"] == 0.0 and plain["road"] > 0.95
    boost = torch.ones(NUM_CLASSES)
    boost[pole] = 4.0
    assert module.ceiling([lab], boost)["pole"] > 0.3


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under a folder, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_release_writes_parts_files_and_card_once(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """release: the test bundle's parts decode its new conformance files to their hashes, the
    card names them; a second release of it writes nothing and says so in one line."""
    from semcodec.decoder.parts import load_parts

    module = load(TOOLS / "release.py")
    module.main(["tiny", "--root", str(tmp_path), "--date", "2026-01-02"])
    (parts,) = (tmp_path / "models" / "decoders").glob("tiny-*.npz")
    release = parts.stem
    paths = module.paths_of(tmp_path, release)
    assert load_parts(paths.parts).released == "2026-01-02"
    record = json.loads((paths.conformance / "hashes.json").read_text())
    assert len(record["files"]) == 3 and record["model"] == "tiny"
    card = paths.card.read_text()
    assert f"`{release}`" in card and "3 conformance files" in card
    assert module.check_parts(paths.parts, paths.conformance) == 3
    before = _tree(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        module.main(["tiny", "--root", str(tmp_path)])
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"semcodec: error: release {release} exists already (models/")
    assert err.count("\n") == 1 and "--force" not in err
    assert _tree(tmp_path) == before


def test_release_refuses_beside_one_existing_part_and_takes_back_a_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """release: a card already there stops it before anything is written; a step that fails
    leaves no part of the release behind."""
    from semcodec.errors import SemcodecError
    from semcodec.zoo.bundles import load_bundle

    module = load(TOOLS / "release.py")
    bundle = load_bundle("tiny")
    paths = module.paths_of(tmp_path, f"{bundle.name}-{bundle.hash[:8]}")
    paths.card.parent.mkdir(parents=True)
    paths.card.write_text("an earlier card\n")
    with pytest.raises(SemcodecError, match="exists already"):
        module.release("tiny", tmp_path)
    assert _tree(tmp_path) == {paths.card.relative_to(tmp_path).as_posix(): b"an earlier card\n"}
    paths.card.unlink()

    def broken(parts_path: Path, folder: Path) -> int:
        raise SemcodecError("the parts decode to other pixels")

    monkeypatch.setattr(module, "check_parts", broken)
    with pytest.raises(SemcodecError, match="other pixels"):
        module.release("tiny", tmp_path)
    assert _tree(tmp_path) == {}


def test_aom_options_against_the_front(tmp_path: Path) -> None:
    """aom_options: a record per quality and configuration, the option reaching libaom (other
    bytes than its speed's preset), and a table row with its CPU, BD-rate change and place
    against the presets' front."""
    from semcodec.format import residual_avif

    if not residual_avif._aom_encodes():
        pytest.skip("Pillow's libavif encodes with another AV1 encoder")
    module = load(TOOLS / "aom_options.py")
    path = tmp_path / "pic.png"
    Image.fromarray(picture(128, 96)).save(path)
    qualities = [20, 40, 60, 80]
    configs = module.configurations([8, 9], ["8:enable-cdef=0;enable-rect-partitions=0"])
    name = "aom-s8-444-enable-cdef=0-enable-rect-partitions=0"
    assert {c.name for c in configs} == {"avif-s6-420", "avif-s8-444", "avif-s9-444", name}
    records = []
    for cfg in configs:
        records += module.measure_image(cfg, str(path), qualities, [])
    assert len(records) == 4 * len(qualities)
    by = {(r["codec"], r["setting"]): r["bytes"] for r in records}
    assert any(by[(name, q)] != by[("avif-s8-444", q)] for q in qualities)
    lines = module.table(records, configs)
    assert len(lines) == 3 and lines[2].startswith(f"| `{name}` | ")
    assert "%" in lines[2] and lines[2].count("/") == 4
    with pytest.raises(ValueError):
        module.parse_candidate("6")
