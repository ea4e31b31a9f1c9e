"""SSIMULACRA 2 against its published anchor scale, Butteraugli's output parser and absence,
and the optional metrics in ``semcodec bench rd``."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageFilter

from semcodec import metrics
from semcodec.bench import quality, rd

needs_s2 = pytest.mark.skipif(
    metrics.ssimulacra2_unavailable_reason() is not None,
    reason=str(metrics.ssimulacra2_unavailable_reason()),
)


def natural_scene(h: int = 256, w: int = 384, seed: int = 0) -> np.ndarray:
    """Smooth colour gradients, 1/f ("pink") texture like natural photos, two flat-ish discs
    with sharp edges: distortions then behave as on photos, without any downloaded data."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w] / np.array([h, w])[:, None, None]
    img = np.stack([0.25 + 0.5 * x, 0.3 + 0.4 * y, 0.7 - 0.5 * x * y], axis=-1)
    f = np.hypot(np.fft.fftfreq(w)[None, :], np.fft.fftfreq(h)[:, None])
    f[0, 0] = 1.0
    spectrum = (rng.normal(size=(h, w)) + 1j * rng.normal(size=(h, w))) / f
    spectrum[0, 0] = 0.0
    tex = np.fft.ifft2(spectrum).real
    img = img + 0.08 * (tex / tex.std())[..., None] * np.array([1.0, 0.9, 0.8])
    for cx, cy, r, col in [(0.3, 0.4, 0.15, (0.85, 0.3, 0.2)), (0.7, 0.6, 0.2, (0.2, 0.35, 0.75))]:
        disc = (x - cx) ** 2 + ((y - cy) * h / w) ** 2 < r * r
        img[disc] = 0.4 * img[disc] + 0.6 * np.array(col)
    return (img.clip(0.0, 1.0) * 255.0).round().astype(np.uint8)


def jpeg(rgb: np.ndarray, q: int) -> np.ndarray:
    """A JPEG round trip at quality q (Pillow, 4:2:0)."""
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=q)
    buf.seek(0)
    with Image.open(buf) as im:
        return np.asarray(im.convert("RGB"))


def blur(rgb: np.ndarray, radius: float) -> np.ndarray:
    """Gaussian blur of the given radius (Pillow's σ)."""
    return np.asarray(Image.fromarray(rgb).filter(ImageFilter.GaussianBlur(radius)))


def anchor_scores() -> dict[str, float]:
    """The distortions of the anchor check and their SSIMULACRA 2 (docs/benchmarks.md)."""
    ref = natural_scene()
    cases = {
        "identical": ref,
        "jpeg q90": jpeg(ref, 90),
        "jpeg q50": jpeg(ref, 50),
        "jpeg q5": jpeg(ref, 5),
        "blur 0.5": blur(ref, 0.5),
        "blur 1": blur(ref, 1.0),
        "blur 4": blur(ref, 4.0),
    }
    return {k: metrics.ssimulacra2(ref, v) for k, v in cases.items()}


@pytest.mark.slow
@needs_s2
def test_ssimulacra2_follows_the_anchor_scale() -> None:
    s = anchor_scores()
    assert s["identical"] == pytest.approx(100.0, abs=0.5)
    # orderings: stronger distortion, lower score
    assert s["jpeg q90"] > s["jpeg q50"] > s["jpeg q5"]
    assert s["blur 0.5"] > s["blur 1"] > s["blur 4"]
    # loose ranges around the measured values (docs/benchmarks.md): JPEG q90 of a natural
    # image is "high" to "very high" (70-90), q50 "medium" (about 50), q5 and a 4 px blur far
    # below "low" (30)
    assert 75.0 < s["jpeg q90"] < 90.0
    assert 45.0 < s["jpeg q50"] < 70.0
    assert s["jpeg q5"] < 30.0 and s["blur 4"] < 30.0
    assert s["blur 0.5"] > 70.0


@needs_s2
def test_ssimulacra2_takes_arrays_and_checks_them() -> None:
    ref = natural_scene(32, 48)
    assert metrics.ssimulacra2(ref, ref) == pytest.approx(100.0, abs=0.5)
    with pytest.raises(ValueError, match="shapes differ"):
        metrics.ssimulacra2(ref, ref[:16])
    with pytest.raises(ValueError, match="too small"):
        metrics.ssimulacra2(ref[:7], ref[:7])


def test_ssimulacra2_without_the_extra_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ssimulacra2", None)  # import fails
    why = metrics.ssimulacra2_unavailable_reason()
    assert why is not None and "pip install 'semcodec[bench]'" in why and "\n" not in why
    ref = natural_scene(32, 48)
    with pytest.raises(metrics.MetricUnavailable, match="semcodec\\[bench\\]"):
        metrics.ssimulacra2(ref, ref)
    plan = quality.plan_metrics(quality.parse_metrics("ssimulacra2"))
    assert plan.extras == () and plan.info["ssimulacra2"]["status"] == "skipped"


#: butteraugli_main's stdout as its source prints it (printf "%.10f\n" then "%g-norm: %f\n").
BUTTERAUGLI_OUTPUT = "2.4356212616\n3-norm: 1.018524\n"


def test_colour_shift_is_the_mean_signed_error_per_channel() -> None:
    ref = natural_scene(64, 64)
    darker = np.clip(ref.astype(int) - np.array([6, 0, 3]), 0, 255).astype(np.uint8)
    got = metrics.colour_shift(ref, darker)
    want = (darker.astype(float) - ref).reshape(-1, 3).mean(0)
    assert got == pytest.approx(list(want)) and got[0] < -5 and got[1] == 0.0


def _t(rgb: np.ndarray, dtype=torch.float64) -> torch.Tensor:
    return torch.from_numpy(rgb.copy()).permute(2, 0, 1)[None].to(dtype) / 255.0


@pytest.mark.slow
@needs_s2
def test_ssimulacra2_loss_is_the_metric() -> None:
    """The torch SSIMULACRA 2 the generator trains on gives the port's scores (six scales)."""
    from semcodec.models.losses import ssimulacra2_torch

    ref = natural_scene(256, 264)
    for test in (jpeg(ref, 20), blur(ref, 2.0), jpeg(ref, 5)):
        want = metrics.ssimulacra2(ref, test)
        assert float(ssimulacra2_torch(_t(test), _t(ref))[0]) == pytest.approx(want, abs=1e-6)
        got32 = float(ssimulacra2_torch(_t(test, torch.float32), _t(ref, torch.float32))[0])
        assert got32 == pytest.approx(want, abs=0.05)


@pytest.mark.slow
@needs_s2
def test_ssimulacra2_loss_has_finite_gradients_that_improve_the_score() -> None:
    """Finite gradients even at the identical image (all-zero error maps), and a few gradient
    steps on a blurred image raise its score."""
    from semcodec.models.losses import ssimulacra2_loss

    ref = _t(natural_scene(96, 128), torch.float32)
    x = ref.clone().requires_grad_(True)
    loss = ssimulacra2_loss(x, ref)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(0.0, abs=1e-6) and torch.isfinite(x.grad).all()
    x = _t(blur(natural_scene(96, 128), 2.0), torch.float32).requires_grad_(True)
    opt = torch.optim.Adam([x], lr=0.01)
    first = None
    for _ in range(20):
        loss = ssimulacra2_loss(x, ref)
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        assert float(ssimulacra2_loss(x, ref)) < first - 0.1


def test_butteraugli_parser_takes_the_3_norm() -> None:
    assert metrics.parse_butteraugli(BUTTERAUGLI_OUTPUT) == pytest.approx(1.018524)
    with pytest.raises(ValueError, match="3-norm"):
        metrics.parse_butteraugli("2.4356212616\n")  # no 3-norm line: no number invented


def test_butteraugli_absent_when_the_tool_is_not_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(metrics.shutil, "which", lambda _name: None)
    why = metrics.butteraugli_unavailable_reason()
    assert why is not None and "butteraugli_main" in why and "libjxl-devtools" in why
    ref = natural_scene(32, 48)
    with pytest.raises(metrics.MetricUnavailable):
        metrics.butteraugli(ref, ref)
    Image.fromarray(natural_scene(48, 64)).save(tmp_path / "a.png")
    res = rd.run_benchmark(
        [tmp_path / "a.png"], ["jpeg"], {"jpeg": [50]}, progress=False,
        metrics=["psnr", "butteraugli"],
    )  # fmt: skip
    assert res["metrics"]["butteraugli"]["status"] == "skipped"
    assert "butteraugli" not in res["config"]["metrics"]
    assert all("butteraugli" not in r for r in res["records"])
    assert all("butteraugli" not in row for row in res["aggregate"]["jpeg"])
    assert "metric butteraugli left out" in rd.format_markdown(res)


def test_butteraugli_runs_the_tool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The call path with a stand-in executable that prints the tool's output format."""
    fake = tmp_path / "butteraugli_main"
    fake.write_text(f'#!/bin/sh\ntest -s "$1" && test -s "$2" && printf \'{BUTTERAUGLI_OUTPUT}\'\n')
    fake.chmod(0o755)
    ref = natural_scene(32, 48)
    assert metrics.butteraugli(ref, ref, tool=str(fake)) == pytest.approx(1.018524)


def test_parse_metrics() -> None:
    assert quality.parse_metrics("ssimulacra2") == ["psnr", "ms-ssim", "ssimulacra2"]
    assert quality.parse_metrics(None) == ["psnr", "ms-ssim", "ssimulacra2"]
    assert quality.parse_metrics("butteraugli,psnr") == ["psnr", "ms-ssim", "butteraugli"]
    with pytest.raises(ValueError, match="lpips"):
        quality.parse_metrics("psnr,lpips")


def _curve_images(tmp_path: Path) -> list[Path]:
    paths = []
    for i in range(2):
        p = tmp_path / f"s{i}.png"
        Image.fromarray(natural_scene(64, 96, seed=i)).save(p)
        paths.append(p)
    return paths


@pytest.mark.slow
@needs_s2
def test_bench_rd_reports_ssimulacra2_and_its_bd_rate(tmp_path: Path) -> None:
    q = [20, 40, 60, 80, 90]
    res = rd.run_benchmark(
        _curve_images(tmp_path), ["jpeg", "webp"], {"jpeg": q, "webp": q}, progress=False
    )
    assert res["config"]["metrics"] == ["psnr", "ms-ssim", "ssimulacra2"]
    assert res["metrics"]["ssimulacra2"]["version"] == metrics.SSIMULACRA2_VERSION
    rows = res["aggregate"]["jpeg"]
    s2 = [r["ssimulacra2"] for r in rows]
    assert s2 == sorted(s2) and all(v is not None for v in s2)  # higher quality, higher score
    recs = [r["ssimulacra2"] for r in res["records"] if r["codec"] == "jpeg" and r["setting"] == 20]
    assert rows[0]["ssimulacra2"] == pytest.approx(np.mean(recs))
    bd = res["bd"]["codecs"]["webp"]["ssimulacra2"]
    assert bd["pchip"]["bd_rate"] is not None, bd["pchip"]["reason"]
    table, md = rd.format_table(res), rd.format_markdown(res)
    assert "SSIMULACRA2 cubic" in table and "SSIMULACRA2" in table.splitlines()[0]
    assert "| SSIMULACRA2 cubic | SSIMULACRA2 pchip |" in md and "| SSIMULACRA2 |" in md
    rd.write_csv(res, tmp_path / "r.csv")
    head = (tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert "ssimulacra2" in head and "butteraugli" in head
    out = rd.compare(res, res, stream=io.StringIO())
    assert out["webp"]["ssimulacra2"]["pchip"]["bd_rate"] == pytest.approx(0.0, abs=1e-9)
    rd.plot_rd(res, tmp_path / "rd.png")
    with Image.open(tmp_path / "rd.png") as im:
        assert im.width > 1000  # three panels


def test_bench_rd_metrics_option(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from semcodec.cli.bench import bench

    imgs = tmp_path / "imgs"
    imgs.mkdir()
    Image.fromarray(natural_scene(48, 64)).save(imgs / "a.png")
    out = tmp_path / "r.json"
    args = ["rd", "--images", str(imgs), "--codecs", "jpeg", "--qualities", "jpeg:50",
            "--no-progress", "--threads", "1"]  # fmt: skip
    res = CliRunner().invoke(bench, [*args, "--metrics", "psnr", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = rd.read_json(out)
    assert data["config"]["metrics"] == ["psnr", "ms-ssim"] and data["metrics"] == {}
    assert "ssimulacra2" not in data["records"][0]
    bad = CliRunner().invoke(bench, [*args, "--metrics", "psnr,lpips"])
    assert bad.exit_code != 0 and "lpips" in bad.output


@pytest.mark.slow
def test_results_without_the_optional_metrics_still_report(tmp_path: Path) -> None:
    """Result files written before the perceptual metrics existed: same tables as before."""
    res = rd.run_benchmark(
        _curve_images(tmp_path), ["jpeg", "webp"], {"jpeg": [20, 50, 80, 90]} | {"webp": [20, 50, 80, 90]},
        progress=False, metrics=["psnr"],
    )  # fmt: skip
    del res["metrics"], res["config"]["metrics"]
    table, md = rd.format_table(res), rd.format_markdown(res)
    assert "SSIMULACRA2" not in table and "SSIMULACRA2" not in md
    assert (
        "| codec | bpp range | PSNR cubic | PSNR pchip | MS-SSIM dB cubic | MS-SSIM dB pchip " in md
    )
    merged = rd.merge([res, res | {"records": []}])
    assert merged["config"]["metrics"] == ["psnr", "ms-ssim"] and merged["metrics"] == {}
    assert set(rd.compare(res, res, stream=io.StringIO())["webp"]) == {"psnr", "msssim_db"}
    rd.plot_rd(res, tmp_path / "rd.png")
