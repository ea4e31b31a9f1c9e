"""The front benchmark's arithmetic with known inputs: the Pareto points, the lower hull in log
CPU, the front's value at a CPU, the distance to it, and a whole summary of made-up records."""

from __future__ import annotations

import math
import os

import pytest
from click.testing import CliRunner

from semcodec.bench.front import (
    ANCHOR,
    beyond,
    configurations,
    front_at,
    lower_hull,
    pareto,
    parse_ints,
)
from semcodec.bench.front.summary import summarise
from semcodec.cli.bench import bench


def test_pareto_keeps_only_points_nothing_beats_in_both() -> None:
    """A slower point that is not smaller is dropped; so are unusable ones."""
    pts = [(4.0, -5.0), (1.0, 0.0), (2.0, 1.0), (8.0, -5.0), (0.0, -9.0), (3.0, math.nan)]
    assert pareto(pts) == [(1.0, 0.0), (4.0, -5.0)]


def test_lower_hull_is_convex_in_log_cpu() -> None:
    """(3, −3.5) lies above the chord from (1, 0) to (9, −8) in log CPU (−4 there), though
    below it in linear CPU (−2): the front drops it; a point below the chord stays."""
    assert lower_hull([(1.0, 0.0), (3.0, -3.5), (9.0, -8.0)]) == [(1.0, 0.0), (9.0, -8.0)]
    kept = [(1.0, 0.0), (3.0, -4.5), (9.0, -8.0)]
    assert lower_hull(kept) == kept


def test_front_interpolates_linearly_in_log_cpu() -> None:
    """Half-way in log CPU between (1, 0) and (4, −6) is CPU 2 at −3 (linear CPU: −2)."""
    hull = [(1.0, 0.0), (4.0, -6.0)]
    assert front_at(hull, 2.0) == pytest.approx(-3.0)
    assert front_at(hull, 1.0) == pytest.approx(0.0)
    assert front_at(hull, 16.0) == pytest.approx(-6.0)  # past the slowest: its value
    assert front_at(hull, 0.5) is None  # faster than any front point: no value


def test_beyond_is_positive_in_front_of_the_front() -> None:
    """A BD-rate 2 points below the front's is 2 points beyond it; unknowns give None."""
    assert beyond(-5.0, -3.0) == pytest.approx(2.0)
    assert beyond(1.0, -3.0) == pytest.approx(-4.0)
    assert beyond(None, -3.0) is None
    assert beyond(-5.0, None) is None


def _records(name: str, scale: float, cpu: float, map_cpu: float | None = None) -> list[dict]:
    """One image's records of a codec whose rates are ``scale`` times the anchor's at equal
    quality (so its BD-rate is (scale − 1) · 100 % in every metric)."""
    out = []
    for i, (b, q) in enumerate(zip((0.2, 0.4, 0.8, 1.6), (30.0, 33.0, 36.0, 39.0), strict=True)):
        out.append(
            {
                "image": "a",
                "codec": name,
                "setting": i,
                "bpp": b * scale,
                "psnr": q,
                "msssim": 0.9,
                "msssim_db": q / 2,
                "ssimulacra2": q + 20,
                "encode_cpu_s": cpu,
                "decode_cpu_s": 0.01,
                "map_cpu_s": map_cpu,
            }  # fmt: skip
        )
    return out


def test_summary_places_a_codec_against_the_interpolated_front() -> None:
    """Anchor (CPU 1, 0 %) and a slower AVIF (CPU 4, −10 %) make the front; a codec at CPU 2
    and −15 % lies 10 points beyond its −5 %, and with its 0.5 s of map left out (CPU 1.5,
    front −10·log 1.5/log 4 %) 12.08 points."""
    recs = _records(ANCHOR, 1.0, 1.0) + _records("avif-s2-444", 0.9, 4.0)
    recs += _records("semcodec-e5", 0.85, 2.0, map_cpu=0.5)
    order = {n: [0, 1, 2, 3] for n in (ANCHOR, "avif-s2-444", "semcodec-e5")}
    s = summarise(recs, order, ANCHOR, [ANCHOR, "avif-s2-444"])
    row = s["configurations"]["semcodec-e5"]
    for m in ("psnr", "msssim_db", "ssimulacra2"):
        assert row["bd_rate"][m] == pytest.approx(-15.0, abs=1e-6)
        assert s["fronts"][m] == [pytest.approx((1.0, 0.0)), pytest.approx((4.0, -10.0))]
        assert row["front"][m] == pytest.approx(-5.0, abs=1e-6)
        assert row["beyond"][m] == pytest.approx(10.0, abs=1e-6)
        no_map = -10.0 * math.log(1.5) / math.log(4.0)
        assert row["front_no_map"][m] == pytest.approx(no_map, abs=1e-6)
        assert row["beyond_no_map"][m] == pytest.approx(no_map + 15.0, abs=1e-6)


def test_configurations_always_hold_the_anchor() -> None:
    """The anchor runs whatever speeds are asked for; names are one per configuration."""
    names = [c.name for c in configurations([5], [2], ["444"], ungated=[7])]
    assert names == ["avif-s2-444", ANCHOR, "semcodec-e5", "semcodec-e7-ungated"]
    with pytest.raises(ValueError, match="chroma"):
        configurations([5], [2], ["422"])


def test_avif_with_libaom_options_is_named_apart_and_not_part_of_the_front() -> None:
    """An AVIF configuration with libaom options is measured against the presets' front,
    never a point of it, under a name no preset or earlier run's front row shares."""
    from semcodec.bench.front.configs import Config

    preset = Config("avif", 3, "444")
    tuned = Config("avif", 3, "444", aom=(("min-partition-size", "8"),))
    assert preset.is_avif and not tuned.is_avif
    assert tuned.name == "aom-s3-444-min-partition-size=8"
    assert not tuned.name.startswith("avif-")  # join_earlier's front rows


def test_parse_ints_names_the_bad_value() -> None:
    """A list outside its range or not numbers is refused with the value in the message."""
    assert parse_ints("1, 3,3,5", 1, 9, "--efforts") == [1, 3, 5]
    with pytest.raises(ValueError, match="0 is outside 1..9"):
        parse_ints("0,5", 1, 9, "--efforts")
    with pytest.raises(ValueError, match="'x'"):
        parse_ints("x", 1, 9, "--efforts")


def test_cli_refuses_bad_lists_and_existing_outputs(tmp_path) -> None:
    """Usage errors come before any encode: an effort out of range, an existing --out (kept
    as it was), an image name the folder lacks."""
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(b"")
    out = tmp_path / "r.json"
    out.write_text("keep")
    runner = CliRunner()
    base = ["front", "--images", str(tmp_path / "img")]
    res = runner.invoke(bench, [*base, "--efforts", "0"])
    assert res.exit_code == 2 and "0 is outside 1..9" in res.output
    res = runner.invoke(bench, [*base, "--out", str(out)])
    assert res.exit_code == 2 and "exists" in res.output and "--force" not in res.output
    assert out.read_text() == "keep"
    res = runner.invoke(bench, [*base, "--names", "b"])
    assert res.exit_code == 2 and "no image named b" in res.output


def test_join_earlier_takes_the_configurations_this_run_lacks() -> None:
    """New semcodec records joined with an earlier run's AVIF: the front comes from the
    earlier records and the new effort is placed against it; other qualities are refused."""
    from semcodec.bench.front import join_earlier

    config = {"images": ["a.png"], "qualities": [0, 1, 2, 3], "anchor": ANCHOR}
    earlier = {
        "config": config,
        "records": _records(ANCHOR, 1.0, 1.0)
        + _records("avif-s2-444", 0.9, 4.0)
        + _records("semcodec-e5", 2.0, 2.0),  # the old effort: replaced by the new one
    }
    new = {"config": dict(config), "records": _records("semcodec-e5", 0.85, 2.0, 0.5)}
    joined = join_earlier(new, earlier)
    row = joined["configurations"]["semcodec-e5"]
    assert row["bd_rate"]["psnr"] == pytest.approx(-15.0, abs=1e-6)
    assert row["beyond"]["psnr"] == pytest.approx(10.0, abs=1e-6)
    assert joined["config"]["joined"] == ["avif-s2-444", ANCHOR]
    with pytest.raises(ValueError, match="qualities"):
        join_earlier({**new, "config": {**config, "qualities": [1, 2, 3, 4]}}, earlier)


def test_avx2_check_caps_every_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """ONEDNN_MAX_CPU_ISA=AVX2 also caps OpenBLAS and ATen in the workers, unless set."""
    from semcodec.bench.front import run

    for var in ("ONEDNN_MAX_CPU_ISA", *run.AVX2_CAPS):
        monkeypatch.setenv(var, "")  # recorded, so the test leaves the environment as it was
        monkeypatch.delenv(var)
    assert not run.avx2_capped()
    assert all(var not in os.environ for var in run.AVX2_CAPS)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert run.avx2_capped()
    assert os.environ["OPENBLAS_CORETYPE"] == "Haswell"
    assert os.environ["ATEN_CPU_CAPABILITY"] == "default"  # the user's own setting stays
