"""``semcodec bench matched``: semcodec against AVIF at the largest quality that fits its bytes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from semcodec.bench import matched
from semcodec.bench.codecs import make_adapter
from semcodec.cli.bench import bench


def test_search_finds_the_largest_quality_that_fits() -> None:
    sizes = [100 + 7 * q + (q * q) // 10 for q in range(101)]  # increasing in q
    for target in (99, 100, 150, 500, 1234, sizes[100], 10**6):
        m = matched.largest_fitting_quality(lambda q: sizes[q], target)
        if target < sizes[0]:
            assert m.quality is None and m.next_size == sizes[0]
            continue
        assert m.size == sizes[m.quality] <= target
        if m.quality == 100:
            assert m.next_size is None
        else:
            assert m.next_size == sizes[m.quality + 1] > target
        assert len(m.tried) <= 9  # a binary search, not a sweep


def _image(path: Path, h: int, w: int, seed: int) -> None:
    """A gradient with noise: AVIF's smallest file fits under semcodec's at this size."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 1.5, y * 2.0, (x + y) * 0.8], axis=-1) + rng.normal(0, 12, (h, w, 3))
    Image.fromarray(rgb.clip(0, 255).astype(np.uint8)).save(path)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("matched")
    for i in range(2):
        _image(d / f"m{i}.png", 128, 160, seed=i)
    return d


def _check_run(run: dict, images: Path) -> None:
    """Each AVIF file is not larger than semcodec's; one quality step up would be."""
    avif = make_adapter("avif")
    assert len(run["records"]) == 2
    for r in run["records"]:
        assert r["reason"] is None, r["reason"]
        sem, other, q = r["semcodec"], r["against"], r["against_quality"]
        assert other["bytes"] <= sem["bytes"]
        rgb = np.asarray(Image.open(images / f"{r['image']}.png").convert("RGB"))
        assert len(avif.encode(rgb, q)) == other["bytes"]
        if q < 100:
            assert r["next_bytes"] == len(avif.encode(rgb, q + 1)) > sem["bytes"]
        for side in (sem, other):
            assert side["psnr"] is not None and 0 < side["msssim"] <= 1
    mean = run["mean"]
    assert mean["n"] == 2
    want = np.mean([r["against"]["bytes"] for r in run["records"]])
    assert mean["against"]["bytes"] == pytest.approx(want)
    shifts = np.array([r["semcodec"]["mean_shift"] for r in run["records"]])
    assert mean["semcodec"]["mean_shift"] == pytest.approx(list(shifts.mean(0)))
    assert mean["semcodec"]["max_abs_shift"] == pytest.approx(np.abs(shifts).max())


@pytest.mark.slow
def test_matched_cli_base_layer_two_models(images: Path, tmp_path: Path) -> None:
    if make_adapter("semcodec-base", model="tiny").unavailable_reason():
        pytest.skip("tiny model unavailable")
    out = tmp_path / "matched.json"
    res = CliRunner().invoke(
        bench,
        ["matched", "--images", str(images), "--model", "tiny", "--model", "tiny",
         "--quality", "0", "--threads", "1", "--out", str(out),
         "--crops", str(tmp_path / "crops"), "--crop-images", "m1"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    sheets = sorted((tmp_path / "crops").iterdir())
    assert [p.name for p in sheets] == ["m1_q0.png"]
    with Image.open(sheets[0]) as sheet:  # original, two models, AVIF: four panels of 128 px
        assert sheet.size == (4 * 128, 128 + 18)
    data = json.loads(out.read_text())
    assert data["schema"] == matched.SCHEMA and data["config"]["against"] == "avif"
    assert [r["model"] for r in data["runs"]] == ["tiny", "tiny"]
    for run in data["runs"]:
        assert run["codec"] == "semcodec-base"
        _check_run(run, images)
    md = out.with_suffix(".md").read_text()
    assert "| tiny | m0 |" in md and "**mean of 2**" in md and "avif q" in md
    assert "| model | image | semcodec bytes |" in res.output
    assert "tiny: mean colour shift (decoded − original, 8-bit levels) R " in md
    if "ssimulacra2" in data["config"]["metrics"]:
        assert "SSIMULACRA2" in md
        assert all(r["against"]["ssimulacra2"] is not None for r in data["runs"][0]["records"])


@pytest.mark.slow
def test_matched_with_a_residual(images: Path) -> None:
    if make_adapter("semcodec", model="tiny").unavailable_reason():
        pytest.skip("tiny model unavailable")
    res = matched.run_matched(
        sorted(images.glob("*.png")), ["tiny"], setting=45, residual="native", threads=1,
        metrics=["psnr"],
    )  # fmt: skip
    run = res["runs"][0]
    assert run["codec"] == "semcodec" and res["config"]["metrics"] == ["psnr", "ms-ssim"]
    _check_run(run, images)
    assert all("ssimulacra2" not in r["semcodec"] for r in run["records"])


def test_matched_reports_when_nothing_fits(tmp_path: Path) -> None:
    """On a tiny image AVIF's smallest file is larger than semcodec's: no match, said why."""
    if make_adapter("semcodec-base", model="tiny").unavailable_reason():
        pytest.skip("tiny model unavailable")
    _image(tmp_path / "s.png", 48, 64, seed=3)
    res = matched.run_matched([tmp_path / "s.png"], ["tiny"], threads=1, metrics=["psnr"])
    rec = res["runs"][0]["records"][0]
    if rec["against"] is not None:
        pytest.skip("AVIF fits at this size with this libavif")
    assert "avif quality 0 is already" in rec["reason"] and res["runs"][0]["mean"]["n"] == 0
    assert "avif quality 0 is already" in matched.format_markdown(res)
