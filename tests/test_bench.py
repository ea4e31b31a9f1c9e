"""Tests for the rate–distortion benchmark: BD-rate maths, metrics, adapters, runner, CLI."""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from childproc import child_env
from click.testing import CliRunner
from PIL import Image

from semcodec.bench import rd
from semcodec.bench.bdrate import (
    BDRateWarning,
    Pchip,
    bd_dist,
    bd_dist_result,
    bd_rate,
    bd_rate_result,
    msssim_to_db,
)
from semcodec.bench.codecs import make_adapter
from semcodec.cli.bench import bench, parse_qualities
from semcodec.encoder.options import EncodeOptions
from semcodec.metrics import (
    _to_tensor,
    ms_ssim,
    msssim_scales,
    psnr,
    ssimulacra2_unavailable_reason,
)
from semcodec.models.losses import ms_ssim_scales
from semcodec.progress import Progress

METHODS = ("cubic", "pchip")


def _curve(d: np.ndarray) -> np.ndarray:
    """A realistic, non-polynomial RD curve: rate grows exponentially with PSNR."""
    return 0.02 * np.exp(0.23 * d) * (1.0 + 0.05 * np.sin(d))


# --- BD-rate ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("k", [0.8, 0.5, 1.25])
def test_bd_rate_constant_factor_is_exact(method: str, k: float) -> None:
    d = np.array([28.0, 30.5, 32.0, 34.5, 36.0, 38.0])
    r = _curve(d)
    got = bd_rate(r, d, k * r, d, method=method)
    assert got == pytest.approx((k - 1.0) * 100.0, abs=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_bd_rate_log_linear_curve_with_different_points(method: str) -> None:
    # log-rate linear in distortion: both fits reproduce it exactly wherever it is sampled
    da = np.array([26.0, 29.0, 31.0, 35.0, 37.0])
    dt = np.array([27.0, 28.5, 33.0, 36.0, 39.0])
    rate = lambda d, k: k * np.exp(0.2 * d)  # noqa: E731
    r = bd_rate_result(rate(da, 1.0), da, rate(dt, 0.8), dt, method=method)
    assert r.ok and r.value == pytest.approx(-20.0, abs=1e-9)
    assert r.interval == pytest.approx((27.0, 37.0))
    # at equal rate the test curve is log(1/0.8)/0.2 dB better
    g = bd_dist(rate(da, 1.0), da, rate(dt, 0.8), dt, method=method)
    assert g == pytest.approx(math.log(1 / 0.8) / 0.2, abs=1e-9)


def test_bd_rate_order_and_duplicates_do_not_matter() -> None:
    d = np.array([30.0, 34.0, 28.0, 36.0, 32.0])
    r = _curve(d)
    perm = np.array([3, 0, 4, 1, 2])
    for m in METHODS:
        a = bd_rate(r, d, 0.7 * r, d, method=m)
        b = bd_rate(r[perm], d[perm], 0.7 * r, d, method=m)
        assert a == pytest.approx(b) == pytest.approx(-30.0)
    # a repeated point (same file twice) is merged, not a singular fit
    d2, r2 = np.append(d, d[0]), np.append(r, r[0])
    assert bd_rate(r2, d2, 0.7 * r2, d2, method="pchip") == pytest.approx(-30.0)


def test_bd_rate_too_few_points_gives_nan_with_reason() -> None:
    d = np.array([30.0, 32.0, 34.0])
    res = bd_rate_result(_curve(d), d, _curve(d), d)
    assert math.isnan(res.value) and "need >= 4" in (res.reason or "")
    with pytest.warns(BDRateWarning, match="need >= 4"):
        assert math.isnan(bd_rate(_curve(d), d, _curve(d), d, method="cubic"))
    # non-finite and non-positive points are dropped before counting
    d4 = np.array([30.0, 32.0, 34.0, np.inf])
    r4 = np.array([0.1, 0.2, 0.0, 0.5])
    assert "dropped" in (bd_rate_result(r4, d4, r4, d4).reason or "")


def test_bd_rate_non_overlapping_ranges() -> None:
    da, dt = np.array([25.0, 26, 27, 28]), np.array([30.0, 31, 32, 33])
    for m in METHODS:
        res = bd_rate_result(_curve(da), da, _curve(dt), dt, method=m)
        assert math.isnan(res.value) and "do not overlap" in (res.reason or "")
        assert not res.ok
        assert "do not overlap" in (bd_dist_result(da, da, dt, dt, method=m).reason or "")
    with pytest.raises(ValueError):
        bd_rate(_curve(da), da, _curve(da), da, method="linear")  # type: ignore[arg-type]


def test_bd_methods_agree_on_smooth_data() -> None:
    d = np.linspace(26, 40, 8)
    r = _curve(d)
    rt = _curve(d - 1.0)  # test reaches d with the bits the anchor spends on d − 1: ≈ −20 %
    c = bd_rate(r, d, rt, d, method="cubic")
    p = bd_rate(r, d, rt, d, method="pchip")
    assert -25 < c < -15 and abs(c - p) < 1.0


def test_msssim_db() -> None:
    assert msssim_to_db(0.9) == pytest.approx(10.0)
    assert msssim_to_db(0.99) == pytest.approx(20.0)
    assert math.isinf(msssim_to_db(1.0))


# --- PCHIP ------------------------------------------------------------------------------------


def test_pchip_is_monotone_and_interpolates() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = np.cumsum(rng.uniform(0.1, 3.0, 7))
        y = np.cumsum(rng.exponential(1.0, 7) * (rng.uniform(size=7) > 0.3))  # with flat runs
        p = Pchip(x, y)
        assert np.allclose(p(x), y)
        xs = np.linspace(x[0], x[-1], 2000)
        ys = p(xs)
        assert np.all(np.diff(ys) >= -1e-12)  # monotone where the data are
        assert ys.min() >= y.min() - 1e-12 and ys.max() <= y.max() + 1e-12  # no overshoot
        # exact integral agrees with a fine trapezoid rule
        a, b = x[0] + 0.3, x[-1] - 0.2
        xs2 = np.linspace(a, b, 20001)
        trap = float(np.sum((p(xs2)[1:] + p(xs2)[:-1]) * np.diff(xs2)) / 2)
        assert p.integrate(a, b) == pytest.approx(trap, rel=1e-6)


def test_pchip_matches_reference_slopes() -> None:
    # Fritsch–Carlson by hand (what scipy's PchipInterpolator computes): secants 1, 3, 5;
    # interior 6 / (3/1 + 3/3) = 1.5 and 6 / (3/3 + 3/5) = 3.75; ends (3·1 − 3)/2 = 0 and
    # (3·5 − 3)/2 = 6
    p = Pchip([0, 1, 2, 3], [0, 1, 4, 9])
    assert p.d == pytest.approx([0.0, 1.5, 3.75, 6.0])
    # a local maximum gets a zero slope, a step stays flat
    assert Pchip([0, 1, 2], [0, 1, 0]).d[1] == 0.0
    step = Pchip([0, 1, 2, 3], [0, 0, 1, 1])
    assert np.allclose(step(np.linspace(0, 1, 11)), 0.0)
    with pytest.raises(ValueError):
        Pchip([0, 0, 1], [1, 2, 3])


# --- metrics ----------------------------------------------------------------------------------


def _test_image(seed: int, size: int = 192) -> np.ndarray:
    """Gradient plus noise: compressible but not trivial, like a photo."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    base = np.stack([x / size * 200, y / size * 200, (x + y) / (2 * size) * 255], axis=-1)
    blobs = 40 * np.sin(x / 9.0 + seed) * np.cos(y / 13.0)
    img = base + blobs[..., None] + rng.normal(0, 12, base.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def test_psnr() -> None:
    a = np.zeros((8, 8, 3), np.uint8)
    b = a.copy()
    assert math.isinf(psnr(a, b))
    b[0, 0, 0] = 255  # MSE over all 192 samples = 255² / 192
    assert psnr(a, b) == pytest.approx(10 * math.log10(192))
    with pytest.raises(ValueError):
        psnr(a, b[:4])


@pytest.mark.slow
def test_ms_ssim_small_image_uses_fewer_scales() -> None:
    assert msssim_scales(512, 768) == 5
    assert msssim_scales(161, 400) == 5 and msssim_scales(160, 400) == 4
    assert msssim_scales(64, 64) == 3 and msssim_scales(10, 10) == 0
    img = _test_image(1, 64)
    noisy = np.clip(img.astype(int) + np.random.default_rng(2).integers(-20, 21, img.shape), 0, 255)
    r = ms_ssim(img, noisy.astype(np.uint8))
    assert r.scales == 3 and 0.5 < r.value < 1.0 and r.db > 3
    assert ms_ssim(img, img).value == pytest.approx(1.0)
    with pytest.raises(ValueError):
        ms_ssim(img[:10, :10], img[:10, :10])


@pytest.mark.slow
def test_ms_ssim_own_loop_matches_library_at_five_scales() -> None:
    """The loop that serves fewer scales (and the training loss) is the library's at five."""
    a = _test_image(3)
    b = np.clip(a.astype(int) + np.random.default_rng(4).integers(-25, 26, a.shape), 0, 255)
    b = b.astype(np.uint8)
    lib = ms_ssim(a, b)
    assert lib.scales == 5
    own = float(ms_ssim_scales(_to_tensor(a), _to_tensor(b), data_range=255, scales=5).mean())
    assert own == pytest.approx(lib.value, abs=1e-6)


# --- codecs and bpp ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["jpeg", "webp", "jpeg2000", "avif"])
def test_adapters_round_trip_whole_files(name: str) -> None:
    img = _test_image(5, 96)
    c = make_adapter(name)
    if c.unavailable_reason():
        pytest.skip(c.unavailable_reason())
    data = c.encode(img, c.default_settings[len(c.default_settings) // 2])
    # the bytes are a complete file: Pillow opens them without any extra header
    with Image.open(io.BytesIO(data)) as im:
        assert im.size == (96, 96)
    out = c.decode(data)
    assert out.shape == img.shape and out.dtype == np.uint8
    assert psnr(img, out) > 20


def test_bpp_counts_whole_file() -> None:
    img = _test_image(6, 96)
    data = make_adapter("jpeg").encode(img, 50)
    assert data[:2] == b"\xff\xd8" and data[-2:] == b"\xff\xd9"  # SOI … EOI: all of it
    assert rd.bpp(len(data), 96, 96) == 8 * len(data) / (96 * 96)
    assert rd.bpp(1000, 100, 80) == pytest.approx(1.0)


def test_semcodec_adapter_uses_codec_api(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple] = []

    class FakeCodec:
        def __init__(self, model: str) -> None:
            calls.append(("init", model))

        def encode(self, image: np.ndarray, options: EncodeOptions) -> bytes:
            assert options.effort == 5  # the adapter passes its effort (default 5)
            calls.append(("encode", image.shape, options.quality, options.residual))
            buf = io.BytesIO()
            Image.fromarray(image).save(buf, "PNG")
            return buf.getvalue()

        def decode(self, data: bytes, layer: str | None = None) -> types.SimpleNamespace:
            calls.append(("decode", layer))
            return types.SimpleNamespace(image=Image.open(io.BytesIO(data)))

    fake = types.ModuleType("semcodec.encoder.codec")
    fake.Codec = FakeCodec  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "semcodec.encoder.codec", fake)
    img = _test_image(7, 32)
    full = make_adapter("semcodec", model="m1", residual="native")
    base = make_adapter("semcodec-base", model="m1", residual="native")
    assert full.unavailable_reason() is None
    assert np.array_equal(full.decode(full.encode(img, 40)), img)
    assert np.array_equal(base.decode(base.encode(img, 0)), img)
    assert ("init", "m1") in calls and ("encode", img.shape, 40, "native") in calls
    assert ("encode", img.shape, 0, "native") in calls  # base layer alone: quality 0
    assert ("decode", None) in calls and ("decode", "base") in calls
    # no encode_with_stats and not a .sem file: no layer split, but no failure either
    assert full.layer_bytes(full.encode(img, 40)) is None
    assert base.default_settings == (0,)
    with pytest.raises(ValueError, match="single setting 0"):
        base.encode(img, 40)


def test_unknown_and_unavailable_codecs_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "semcodec.encoder.codec", None)  # import fails
    paths = _write_images(tmp_path, n=1, size=48)
    res = rd.run_benchmark(paths, ["jpeg", "nope", "semcodec"], {"jpeg": [50]}, progress=False)
    assert res["codecs"]["nope"]["status"] == "skipped"
    assert res["codecs"]["semcodec"]["status"] == "skipped"
    assert "semcodec.encoder.codec" in res["codecs"]["semcodec"]["reason"]
    assert len(res["records"]) == 1


# --- end to end -------------------------------------------------------------------------------


def _write_images(d: Path, n: int = 2, size: int = 192) -> list[Path]:
    paths = []
    for i in range(n):
        p = d / f"img{i}.png"
        Image.fromarray(_test_image(10 + i, size)).save(p)
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = tmp_path_factory.mktemp("imgs")
    paths = _write_images(d)
    return rd.run_benchmark(
        paths, ["jpeg", "webp"], {"jpeg": [20, 80], "webp": [20, 80]}, progress=False
    )


TOP_KEYS = {"schema", "created", "environment", "config", "codecs", "metrics", "images",
            "records", "aggregate", "bd", "tile_modes", "prediction", "enhancement"}  # fmt: skip
RECORD_KEYS = {"image", "codec", "setting", "bytes", "bpp", "psnr", "msssim", "msssim_db",
               "msssim_scales", "encode_s", "decode_s", "layer_bytes", "tiles", "mean_shift", "error"}  # fmt: skip
AGG_KEYS = {"setting", "n", "bpp", "psnr", "msssim", "msssim_db", "encode_s", "decode_s",
            "layer_bpp"}  # fmt: skip
#: SSIMULACRA 2 joins records and aggregates by default where the [bench] extra is installed.
S2 = {"ssimulacra2"} if ssimulacra2_unavailable_reason() is None else set()
BD_KEYS = {"bd_rate", "reason", "interval", "bd_dist", "bd_dist_reason"}


def test_end_to_end_json_schema(tiny_run: dict, tmp_path: Path) -> None:
    res = tiny_run
    assert set(res) == TOP_KEYS and res["schema"] == rd.SCHEMA
    assert len(res["records"]) == 2 * 2 * 2
    for r in res["records"]:
        assert set(r) == RECORD_KEYS | S2 and r["error"] is None
        assert r["bpp"] == pytest.approx(8 * r["bytes"] / (192 * 192))
        assert r["msssim_scales"] == 5 and 0 < r["msssim"] <= 1
        assert len(r["mean_shift"]) == 3 and max(map(abs, r["mean_shift"])) < 20
        assert r["encode_s"] >= 0 and r["decode_s"] >= 0
    assert {i["name"] for i in res["images"]} == {"img0", "img1"}
    for codec in ("jpeg", "webp"):
        rows = res["aggregate"][codec]
        assert [r["setting"] for r in rows] == [20, 80]
        assert all(set(r) == AGG_KEYS | S2 and r["n"] == 2 for r in rows)
        assert rows[0]["bpp"] < rows[1]["bpp"] and rows[0]["psnr"] < rows[1]["psnr"]
        recs = [r["bpp"] for r in res["records"] if r["codec"] == codec and r["setting"] == 20]
        assert rows[0]["bpp"] == pytest.approx(np.mean(recs))
    bd = res["bd"]
    assert bd["anchor"] == "jpeg" and set(bd["codecs"]) == {"jpeg", "webp"}
    w = bd["codecs"]["webp"]
    for metric in ("psnr", "msssim_db", *S2):
        for m in METHODS:
            assert set(w[metric][m]) == BD_KEYS
            assert w[metric][m]["bd_rate"] is None and "need >= 4" in w[metric][m]["reason"]
    # strict JSON round trip, documented schema
    out = tmp_path / "r.json"
    rd.write_json(res, out)
    assert rd.read_json(out) == json.loads(out.read_text())
    doc = (Path(__file__).parents[1] / "docs" / "benchmarks.md").read_text()
    assert "## JSON schema" in doc and rd.SCHEMA in doc
    for key in TOP_KEYS | RECORD_KEYS | AGG_KEYS | BD_KEYS | {"ssimulacra2", "butteraugli"}:
        assert f'"{key}"' in doc, key


@pytest.mark.slow
def test_end_to_end_outputs(tiny_run: dict, tmp_path: Path) -> None:
    table = rd.format_table(tiny_run)
    assert "BD-rate vs jpeg" in table and "webp" in table
    rd.write_csv(tiny_run, tmp_path / "r.csv")
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert len(lines) == 1 + 8 and lines[0].startswith("image,width,height,codec,setting,bytes")
    rd.plot_rd(tiny_run, tmp_path / "rd.png")
    with Image.open(tmp_path / "rd.png") as im:
        assert im.width > 500
    paths = rd.crops(tiny_run, tmp_path / "crops", reference="webp", size=64)
    assert len(paths) == 2 * 2  # images × reference settings
    with Image.open(paths[0]) as im:
        assert im.width == 3 * 64  # original | webp | jpeg


def _synthetic(scale: float) -> dict:
    d = np.array([28.0, 30.0, 32.0, 34.0, 36.0])
    rows = [
        {"setting": i, "n": 1, "bpp": float(scale * b), "psnr": float(p), "msssim": 0.9,
         "msssim_db": float(p) - 18.0, "encode_s": 0.0, "decode_s": 0.0}
        for i, (b, p) in enumerate(zip(_curve(d), d, strict=True))
    ]  # fmt: skip
    return {"schema": rd.SCHEMA, "aggregate": {"x": rows}}


def test_compare_two_runs(capsys: pytest.CaptureFixture[str]) -> None:
    out = rd.compare(_synthetic(1.0), _synthetic(0.9))
    for metric in ("psnr", "msssim_db"):
        for m in METHODS:
            assert out["x"][metric][m]["bd_rate"] == pytest.approx(-10.0)
    assert "-10.00" in capsys.readouterr().out


def test_progress_bar_only_on_a_tty() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress(2, file=stream)
        bar.advance(1, "a")
        bar.advance(1, "b")
        bar.close()
    assert "\r[" in tty.getvalue() and "2/2" in tty.getvalue() and tty.getvalue().endswith("\n")
    assert pipe.getvalue() == ""
    assert Progress(2, enabled=False, file=Tty()).enabled is False


def test_cli(tmp_path: Path) -> None:
    assert parse_qualities("jpeg:10,50; jpeg2000:24,19.2;x:a") == {
        "jpeg": [10, 50],
        "jpeg2000": [24, 19.2],
        "x": ["a"],
    }
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    _write_images(imgs, n=2, size=48)
    out = tmp_path / "r.json"
    runner = CliRunner()
    res = runner.invoke(
        bench,
        ["rd", "--images", str(imgs), "--limit", "1", "--codecs", "jpeg", "--qualities",
         "jpeg:10,30,60,90", "--out", str(out), "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert len(data["images"]) == 1 and len(data["records"]) == 4
    res = runner.invoke(bench, ["compare", str(out), str(out)])
    assert res.exit_code == 0 and "+0.00" in res.output
    assert runner.invoke(bench, ["rd", "--codecs", "jpeg"]).exit_code != 0  # no --images
    bad = runner.invoke(bench, ["rd", "--images", str(imgs), "--codecs", "bogus"])
    assert bad.exit_code != 0 and "bogus" in bad.output


# --- semcodec adapters against the real codec (tiny random model) ---------------------------


def test_semcodec_adapters_build_options_as_every_entry_point_does() -> None:
    """The adapters' settings take the one checked path (EncodeOptions.from_kwargs): gating off is
    a GatingConfig, None keeps the codec's default, a bad value is refused with its message."""
    from semcodec.encoder.gating import GatingConfig

    ungated = make_adapter("semcodec-ungated", model="tiny", residual="avif")._options(30)
    assert ungated == EncodeOptions.from_kwargs(quality=30, residual="avif", gating=False)
    assert ungated.gating == GatingConfig(enabled=False)
    plain = make_adapter("semcodec", model="tiny", residual="native")._options(50)
    assert plain == EncodeOptions(quality=50, residual="native")
    odd = make_adapter("semcodec", model="tiny")
    odd.gating = "off"
    with pytest.raises(ValueError, match="gating must be True, False or a GatingConfig"):
        odd._options(50)


def test_semcodec_adapters_with_tiny_model() -> None:
    from semcodec.format import container

    img = _test_image(21, 48)[:40]  # 40x48: not a multiple of 8, exercises padding
    full = make_adapter("semcodec-ungated", model="tiny", residual="avif")  # every layer
    base = make_adapter("semcodec-base", model="tiny")
    for c in (full, base):
        if c.unavailable_reason():
            pytest.skip(c.unavailable_reason())
    data = full.encode(img, 50)
    lb = full.layer_bytes(data)
    assert lb is not None and set(lb) == set(rd.LAYERS) and sum(lb.values()) == len(data)
    assert lb["residual"] > 0 and lb["map"] > 0 and lb["compact"] > 0
    # the encoder's stats and the container agree on the split
    _, layers = container.unpack(data)
    assert lb["map"] == len(layers[container.LayerKind.SEMANTIC_MAP])
    assert full.layer_bytes(bytes(bytearray(data))) == lb
    # the base layer alone: quality 0, no residual layer at all, decoded layer=base
    bdata = base.encode(img, 0)
    header, blayers = container.unpack(bdata)
    assert header.quality == 0 and container.LayerKind.RESIDUAL not in blayers
    blb = base.layer_bytes(bdata)
    assert blb is not None and blb["residual"] == 0 and sum(blb.values()) == len(bdata)
    assert blb["map"] == lb["map"] and blb["compact"] == lb["compact"]  # same base layer
    out = base.decode(bdata)
    assert out.shape == img.shape and out.dtype == np.uint8
    # the full decode of the q=50 file without its residual is exactly that base image
    assert np.array_equal(full._get().decode(data, layer="base").image, Image.fromarray(out))
    assert base.info()["layer"] == "base" and base.info()["default_settings"] == [0]
    assert "cannot be loaded" in (
        make_adapter("semcodec", model="no-such").unavailable_reason() or ""
    )


def test_run_benchmark_records_semcodec_layers(tmp_path: Path) -> None:
    paths = _write_images(tmp_path, n=1, size=48)
    res = rd.run_benchmark(
        paths,
        ["semcodec", "semcodec-base", "jpeg"],
        {"semcodec": [30], "jpeg": [50]},
        progress=False,
        model="tiny",
        threads=1,
    )
    if res["codecs"]["semcodec"]["status"] != "ok":
        pytest.skip(res["codecs"]["semcodec"]["reason"])
    assert res["config"]["qualities"]["semcodec-base"] == [0]
    assert res["config"]["threads"] == 1 and res["config"]["codec_threads"] == 1
    by = {r["codec"]: r for r in res["records"]}
    assert all(r["error"] is None for r in by.values())
    assert by["jpeg"]["layer_bytes"] is None
    for c in ("semcodec", "semcodec-base"):
        assert sum(by[c]["layer_bytes"].values()) == by[c]["bytes"]
    assert by["semcodec-base"]["layer_bytes"]["residual"] == 0
    agg = res["aggregate"]
    assert agg["jpeg"][0]["layer_bpp"] is None
    lbpp = agg["semcodec"][0]["layer_bpp"]
    assert sum(lbpp.values()) == pytest.approx(agg["semcodec"][0]["bpp"])
    table, md = rd.format_table(res), rd.format_markdown(res)
    assert "residual bpp" in table and "| semcodec-base | 0 |" in md
    assert "| codec | setting | total | map | compact | residual | container |" in md
    rd.write_csv(res, tmp_path / "r.csv")
    head, *rows = (tmp_path / "r.csv").read_text().splitlines()
    assert "map_bytes" in head and len(rows) == 3


@pytest.mark.slow
def test_markdown_and_report_cli(tiny_run: dict, tmp_path: Path) -> None:
    md = rd.format_markdown(tiny_run)
    assert "| jpeg |" in md and "anchor" in md and "| webp | 20 |" in md
    assert "need >= 4" in md  # why the BD-rate is missing is said, not hidden
    src = tmp_path / "run.json"
    rd.write_json(tiny_run, src)
    runner = CliRunner()
    out_md, out_png = tmp_path / "t.md", tmp_path / "t.png"
    res = runner.invoke(
        bench, ["report", str(src), "--markdown", str(out_md), "--plot", str(out_png)]
    )
    assert res.exit_code == 0, res.output
    assert out_md.read_text() == md and out_png.stat().st_size > 0
    assert "BD-rate vs jpeg" in res.output


def test_cli_defaults_run_every_codec_and_write_markdown(tmp_path: Path) -> None:
    from semcodec.cli.bench import DEFAULT_CODECS

    assert DEFAULT_CODECS.split(",") == [
        "semcodec", "semcodec-base", "jpeg", "webp", "jpeg2000", "avif", "jxl"
    ]  # fmt: skip
    opts = {p.name: p.default for p in bench.commands["rd"].params}
    assert opts["threads"] == 2 and opts["codec_threads"] == 1
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    _write_images(imgs, n=1, size=48)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(
        bench,
        ["rd", "--images", str(imgs), "--codecs", "jpeg", "--qualities", "jpeg:10,50",
         "--out", str(out), "--no-progress", "--threads", "1"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert out.with_suffix(".md").read_text().startswith("Mean over 1 image;")


def _lane(run: dict, codec: str) -> dict:
    """The part of a run that one codec lane would have produced."""
    lane = json.loads(json.dumps(run))
    lane["records"] = [r for r in lane["records"] if r["codec"] == codec]
    lane["codecs"] = {codec: lane["codecs"][codec]}
    lane["config"]["qualities"] = {codec: lane["config"]["qualities"][codec]}
    return lane


def test_merge_of_lanes_equals_the_whole_run(tiny_run: dict, tmp_path: Path) -> None:
    a, b = _lane(tiny_run, "webp"), _lane(tiny_run, "jpeg")
    merged = rd.merge([a, b])
    assert merged["aggregate"] == tiny_run["aggregate"]
    assert merged["bd"] == tiny_run["bd"]
    assert sorted(merged["config"]["codecs"]) == ["jpeg", "webp"]
    assert len(merged["config"]["merged_from"]) == 2
    with pytest.raises(ValueError, match="in two runs"):
        rd.merge([a, a])
    pa, pb, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "m.json"
    rd.write_json(a, pa)
    rd.write_json(b, pb)
    res = CliRunner().invoke(bench, ["merge", str(pa), str(pb), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert rd.read_json(out)["bd"] == tiny_run["bd"] and out.with_suffix(".md").exists()
    res = CliRunner().invoke(bench, ["merge", str(pa), str(pa)])
    assert res.exit_code != 0 and "in two runs" in res.output


# --- the enhancement network's kernels (semcodec bench kernels) ------------------------------

KERNEL_LINE = re.compile(
    r"^(?P<config>\S+) +[\d.]+ kMAC/px (?P<kernel>numpy|torch) +(?P<threads>\d+) thr +[\d.]+ s +"
    r"[\d.]+ GMAC/s \(CPU +[\d.]+ s\)$"
)


def test_bench_kernels_prints_one_line_per_configuration_kernel_and_thread_count() -> None:
    """`bench kernels` times each configuration, kernel and thread count asked for, in order;
    a bad list item is a usage error before anything runs."""
    args = ["kernels", "--configs", "tiny,small", "--kernels", "numpy", "--threads", "1,2"]
    r = CliRunner().invoke(bench, [*args, "--runs", "1"])
    assert r.exit_code == 0, r.output
    head, *lines = r.output.splitlines()
    assert head.startswith("load average ") and head.endswith("768x512, median of 1")
    rows = [KERNEL_LINE.match(line) for line in lines]
    assert all(rows), lines
    got = [(m["config"], m["kernel"], int(m["threads"])) for m in rows if m]
    assert got == [(c, "numpy", t) for c in ("tiny", "small") for t in (1, 2)]
    for bad, why in (("--configs=nope", "unknown 'nope'"), ("--threads=0", "'0' must be at least")):
        r = CliRunner().invoke(bench, ["kernels", bad])
        assert r.exit_code == 2 and why in r.output and "GMAC/s" not in r.output


@pytest.mark.subprocess
def test_bench_kernels_runs_as_a_module_too() -> None:
    """`python -m semcodec.bench.kernels` is the same click command (its options, its lines)."""
    args = ["--configs", "tiny", "--kernels", "numpy", "--threads", "1", "--runs", "1"]
    r = subprocess.run(
        [sys.executable, "-m", "semcodec.bench.kernels", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and (m := KERNEL_LINE.match(lines[1])) and m["config"] == "tiny"


def test_avif_at_an_effort_takes_its_speed_and_libaom_options():
    """`avif-effort` compares like with like: the speed and libaom options of semcodec's
    residual at that effort, which reach the encoder (the file differs without them)."""
    from semcodec.bench.codecs import make_adapter
    from semcodec.format import residual_avif

    if not residual_avif._aom_encodes():
        pytest.skip("Pillow's libavif encodes with another AV1 encoder")
    plain = make_adapter("avif-effort", effort=5)
    slow = make_adapter("avif-effort", effort=7)
    assert (plain.speed, plain.advanced) == (6, {})
    assert (slow.speed, slow.advanced) == (3, {"min-partition-size": "8"})
    assert slow.info()["advanced"] == {"min-partition-size": "8"}
    rng = np.random.default_rng(3)
    rgb = np.clip(rng.normal(128, 40, (64, 64, 3)), 0, 255).astype(np.uint8)
    bare = type(slow)(speed=3, threads=1)
    assert slow.encode(rgb, 60) != bare.encode(rgb, 60)
