"""One options path: every entry point (the command line, the batch task, ``semcodec.encode``,
Pillow's save) takes every setting, writes the command line's bytes for it, and refuses a bad
value with the same message (EncodeOptions.from_kwargs, ratecontrol.Target)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image, ImageCms

import semcodec
from semcodec.batch.tasks import EncodeTask, encode_worker
from semcodec.cli import cli
from semcodec.defaults import DEFAULT_MODEL
from semcodec.encoder.options import SETTINGS, EncodeOptions
from semcodec.encoder.ratecontrol import Target
from semcodec.encoder.refine_config import RefineConfig
from semcodec.format.roi import RoiConfig

W, H = 64, 48
BUDGET = 560  # bytes: below the default encode's file of the test image (577)

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py

# setting -> (the command line's flags, the keywords, the keywords without the setting): each
# with a value that changes the file, so a setting an entry point drops cannot pass
CASES = {
    "quality": (["-q", "70"], {"quality": 70}, {}),
    "effort": (["-e", "2"], {"effort": 2}, {}),
    "residual": (["--residual", "native"], {"residual": "native"}, {}),
    "chroma": (["--chroma", "420"], {"chroma": "420"}, {}),
    "metadata": (["--metadata", "none"], {"metadata": "none"}, {}),
    "gating": (["--no-gating"], {"gating": False}, {}),
    "roi": (["--roi", "car:2"], {"roi": "car:2"}, {}),
    "roi_strength": (
        ["--roi", "car", "--roi-strength", "2"],
        {"roi": "car", "roi_strength": 2},
        {"roi": "car"},
    ),
    "refine": (["-q", "0", "--refine-steps", "2"], {"quality": 0, "refine": 2}, {"quality": 0}),
    "target_size": (["--target-size", str(BUDGET)], {"target_size": BUDGET}, {}),
    "target_bpp": (
        ["--target-bpp", str(8 * BUDGET / (W * H))],
        {"target_bpp": 8 * BUDGET / (W * H)},
        {},
    ),
}


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small structured PNG with an ICC profile (so ``metadata`` changes the file)."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:H, 0:W]
    a = np.stack([x * 4, y * 5, (x + y) * 2], -1) + rng.integers(-8, 9, (H, W, 3))
    path = tmp_path_factory.mktemp("photo") / "a.png"
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(path, icc_profile=icc)
    return path


def _cli(path: Path, flags: list[str]) -> bytes:
    """The command line's file for these flags (the default model)."""
    out = path.with_name("cli.sem")
    r = CliRunner().invoke(cli, ["encode", str(path), "-o", str(out), "--force", *flags])
    assert r.exit_code == 0, r.output
    return out.read_bytes()


def _task(path: Path, settings: dict) -> bytes:
    """The batch task's file, built as any caller of the batch engine builds it."""
    settings = dict(settings)
    size, bpp = settings.pop("target_size", None), settings.pop("target_bpp", None)
    target = Target.of(settings.get("quality"), size, bpp)
    task = EncodeTask(str(path), None, DEFAULT_MODEL, EncodeOptions.from_kwargs(**settings), target)
    outcome = encode_worker(task)
    assert outcome.ok, outcome
    return outcome.data


def _pillow(path: Path, settings: dict) -> bytes:
    """Pillow's save of the opened image with the settings as save parameters."""
    buf = io.BytesIO()
    with Image.open(path) as im:
        im.save(buf, format="SEM", **settings)
    return buf.getvalue()


def _api(path: Path, settings: dict) -> bytes:
    """``semcodec.encode`` of the opened image."""
    with Image.open(path) as im:
        return semcodec.encode(im, **settings)


def test_every_setting_has_a_case() -> None:
    """A setting added to SETTINGS must be tested here (and so reach every entry point)."""
    assert set(SETTINGS) | {"target_size", "target_bpp"} == set(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_entry_point_writes_the_command_lines_bytes(photo: Path, name: str) -> None:
    """Each setting reaches the file from the API, Pillow and the batch task as from the CLI."""
    flags, settings, without = CASES[name]
    expected = _cli(photo, flags)
    assert expected != _api(photo, without), f"{name} does not change the file"
    assert _api(photo, settings) == expected
    assert _pillow(photo, settings) == expected
    assert _task(photo, settings) == expected


# a bad value -> (the command line's flags, the keywords, the one message every entry point gives)
BAD = {
    "chroma without avif": (
        ["--chroma", "420", "--residual", "native"],
        {"chroma": "420", "residual": "native"},
        "chroma 420 needs the avif residual, not native",
    ),
    "metadata kind": (
        ["--metadata", "icc,gps"],
        {"metadata": "icc,gps"},
        "unknown metadata kind(s) gps: use all, none, icc, exif, xmp",
    ),
    "roi class": (["--roi", "bus"], {"roi": "bus"}, "unknown ROI class 'bus'; valid classes: "),
    "roi strength alone": (
        ["--roi-strength", "2"],
        {"roi_strength": 2},
        "an ROI strength needs ROI classes",
    ),
    "quality and target": (
        ["-q", "20", "--target-size", "900"],
        {"quality": 20, "target_size": 900},
        "give quality or a target (target_size, target_bpp), not both",
    ),
    "two targets": (
        ["--target-size", "900", "--target-bpp", "1"],
        {"target_size": 900, "target_bpp": 1.0},
        "give target_size or target_bpp, not both",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_the_same_one_error_from_every_entry_point(
    photo: Path, tmp_path: Path, name: str
) -> None:
    """One check, one message: the library's ValueError, the CLI's one line and exit 2."""
    flags, settings, message = BAD[name]
    with pytest.raises(ValueError) as api:
        _api(photo, settings)
    assert str(api.value).startswith(message)
    with pytest.raises(ValueError) as pillow:
        _pillow(photo, settings)
    assert str(pillow.value) == str(api.value)
    out = tmp_path / "x.sem"
    r = CliRunner().invoke(cli, ["encode", str(photo), "-o", str(out), *flags])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert lines[0].startswith("semcodec: error: ") and lines[0].endswith(str(api.value))
    assert not out.exists()


def test_from_kwargs_builds_the_typed_options() -> None:
    """User forms become the typed values; None is the default; an unknown name is refused."""
    opts = EncodeOptions.from_kwargs(
        quality=None, metadata=["icc"], gating=False, roi={"car": 2}, roi_strength=1.5, refine=3
    )
    assert opts.quality == EncodeOptions().quality and opts.metadata == {"icc"}
    assert not opts.gating.enabled and opts.refine == RefineConfig(steps=3)
    assert isinstance(opts.roi, RoiConfig) and opts.roi.strength == 1.5
    assert EncodeOptions.from_kwargs() == EncodeOptions()
    assert EncodeOptions.from_kwargs(refine=0).refine is None
    with pytest.raises(ValueError, match="unknown encode setting 'qualty'; known: quality"):
        EncodeOptions.from_kwargs(qualty=60)
    with pytest.raises(ValueError, match="gating must be True, False or a GatingConfig"):
        EncodeOptions.from_kwargs(gating="maybe")
    with pytest.raises(ValueError, match="refine must be 0..1000 gradient steps"):
        EncodeOptions.from_kwargs(refine=-1)
    with pytest.raises(ValueError, match="target_size must be at least 1 byte"):
        Target(size=0)
