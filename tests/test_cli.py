"""The command line: naming, batches, pipes, clobbering, atomicity, errors and exit codes.

Everything runs with the seeded random "tiny" bundle on 64x48 images; the residual makes full
decodes accurate regardless of the untrained networks.
"""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from childproc import child_env, ctrl_c_as_at_a_terminal
from click.testing import CliRunner
from PIL import Image

from semcodec.cli import cli
from semcodec.encoder.ratecontrol import TargetNotMet, bytes_for_bpp, fit_budget, search_quality
from semcodec.format import container

TINY = ["--model", "tiny", "--residual", "native", "--no-gating"]  # every layer present
W, H = 64, 48
LINE_RE = re.compile(
    r"^(?P<src>\S+) -> (?P<dst>\S+): (?P<bytes>\d+) bytes, (?P<bpp>[\d.]+) bpp "
    r"\(map [\d.]+, compact [\d.]+(, residual [\d.]+)?\)"
)


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _image(seed: int = 0, mode: str = "RGB") -> Image.Image:
    """A small structured test image (gradients, a block, mild noise)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    a = np.stack([x * 4 + seed * 10, y * 5, (x + y) * 2], -1).astype(np.int16)
    a[10:30, 20 + seed : 40 + seed] = rng.integers(0, 256, 3)
    a += rng.integers(-6, 7, a.shape).astype(np.int16)
    img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
    return img.convert(mode)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a.png, b.png, g.png (gray) and bad.png (not an image)."""
    _image(0).save(tmp_path / "a.png")
    _image(1).save(tmp_path / "b.png")
    _image(2, "L").save(tmp_path / "g.png")
    (tmp_path / "bad.png").write_bytes(b"this is not an image")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str, input: bytes | None = None):
    """Invoke the CLI in-process (the commands' own error handling is what is tested)."""
    result = CliRunner().invoke(cli, list(args), input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def error_lines(result) -> list[str]:
    """Non-empty stderr lines."""
    return [line for line in result.stderr.splitlines() if line.strip()]


def pixels(path_or_img) -> np.ndarray:
    img = path_or_img if isinstance(path_or_img, Image.Image) else Image.open(path_or_img)
    return np.asarray(img).astype(np.int16)


def no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


# ----- encode / decode ---------------------------------------------------------------------------
def test_round_trip_default_naming_and_layers(work: Path):
    r = run("encode", "a.png", "-q", "95", *TINY)
    assert r.exit_code == 0, r.output
    m = LINE_RE.match(r.stdout.strip())
    assert m and m["src"] == "a.png" and m["dst"] == "a.sem", r.stdout
    size = (work / "a.sem").stat().st_size
    assert int(m["bytes"]) == size
    assert float(m["bpp"]) == pytest.approx(8 * size / (W * H), abs=1e-3)

    # beside the original, decode never takes its name: a.dec.png, the original untouched
    before = (work / "a.png").read_bytes()
    r = run("decode", "a.sem")
    assert r.exit_code == 0 and "a.sem -> a.dec.png" in r.stdout, r.output
    assert (work / "a.png").read_bytes() == before
    assert Image.open(work / "a.dec.png").size == (W, H)
    # again: refused, and the way out named is -o or -d, never --force
    r = run("decode", "a.sem")
    assert r.exit_code == 1 and error_lines(r) == [
        "semcodec: error: a.sem: cannot write 'a.dec.png': file exists; name another output "
        "with -o, or a folder with -d"
    ]
    assert (work / "a.png").read_bytes() == before

    r = run("decode", "a.sem", "-o", "full.png")
    assert r.exit_code == 0, r.output
    assert "a.sem -> full.png: 64x48 RGB (full layer)" in r.stdout
    full = pixels("full.png")
    assert full.shape == (H, W, 3)
    assert np.abs(full - pixels("a.png")).mean() < 3.0

    r = run("decode", "a.sem", "-o", "base.png", "--layer", "base")
    assert r.exit_code == 0, r.output
    base = pixels("base.png")
    assert base.shape == full.shape
    assert np.abs(base - pixels("a.png")).mean() > np.abs(full - pixels("a.png")).mean()


@pytest.mark.slow
def test_refine_steps_write_a_standard_file_with_a_better_base(work: Path):
    """--refine-steps changes only the encoder: the file decodes with the plain decoder."""
    assert run("encode", "a.png", "-q", "0", "-o", "plain.sem", *TINY).exit_code == 0
    r = run("encode", "a.png", "-q", "0", "-o", "ref.sem", "--refine-steps", "20", *TINY)
    assert r.exit_code == 0, r.output
    for name in ("plain", "ref"):
        assert run("decode", f"{name}.sem", "-o", f"{name}.png").exit_code == 0
    orig = pixels("a.png")
    err = {n: float(((pixels(f"{n}.png") - orig) ** 2).mean()) for n in ("plain", "ref")}
    assert err["ref"] < err["plain"]
    assert run("encode", "a.png", "--refine-steps", "-1", "-o", "x.sem", *TINY).exit_code == 2


def test_gray_input_decodes_to_gray_and_other_formats(work: Path):
    assert run("encode", "g.png", *TINY).exit_code == 0
    r = run("decode", "g.sem", "--format", "tiff")
    assert r.exit_code == 0, r.output
    out = Image.open("g.dec.tiff")
    assert out.mode == "L" and out.size == (W, H)
    # format from -o's extension; an unknown one is a usage error
    assert run("decode", "g.sem", "-o", "g.bmp").exit_code == 0
    assert Image.open("g.bmp").format == "BMP"
    assert run("decode", "g.sem", "-o", "g.xyz").exit_code == 2


def test_output_options(work: Path):
    (work / "out").mkdir()
    r = run("encode", "a.png", "b.png", "-d", "out", "-q", "10", *TINY)
    assert r.exit_code == 0, r.output
    assert (work / "out" / "a.sem").exists() and (work / "out" / "b.sem").exists()
    assert not (work / "a.sem").exists()
    r = run("encode", "a.png", "-o", "named.sem", "-q", "10", *TINY)
    assert r.exit_code == 0 and (work / "named.sem").exists()
    r = run("decode", "out/a.sem", "out/b.sem", "-d", "out")
    assert r.exit_code == 0, r.output
    assert (work / "out" / "a.dec.png").exists() and (work / "out" / "b.dec.png").exists()
    # usage errors: -o with several inputs, -o with -d
    assert run("encode", "a.png", "b.png", "-o", "x.sem", *TINY).exit_code == 2
    assert run("encode", "a.png", "-o", "x.sem", "-d", "out", *TINY).exit_code == 2


def test_in_out_form_like_avifenc(work: Path):
    """``encode IN OUT.sem`` and ``decode IN.sem OUT.png`` name the output; nothing lands beside IN."""
    r = run("encode", "a.png", "out.sem", "-q", "10", *TINY)
    assert r.exit_code == 0, r.output
    assert (work / "out.sem").exists() and not (work / "a.sem").exists()
    r = run("decode", "out.sem", "pic.png")
    assert r.exit_code == 0, r.output
    assert Image.open("pic.png").size == (W, H) and not (work / "out.png").exists()
    # two images stay a batch of two; an existing output is still not clobbered
    r = run("encode", "a.png", "b.png", "-q", "10", *TINY)
    assert r.exit_code == 0 and (work / "a.sem").exists() and (work / "b.sem").exists()
    assert run("encode", "a.png", "out.sem", "-q", "10", *TINY).exit_code == 1


def test_batch_with_bad_file(work: Path):
    (work / "out").mkdir()
    r = run("encode", "a.png", "bad.png", "g.png", "missing.png", "-d", "out", "-q", "5", *TINY)
    assert r.exit_code == 1
    errs = error_lines(r)
    assert errs[-1] == "semcodec: error: 2 of 4 files failed"
    assert len(errs) == 3 and all(e.startswith("semcodec: error: ") for e in errs)
    assert "bad.png" in errs[0] and "missing.png" in errs[1]
    assert sorted(p.name for p in (work / "out").iterdir()) == ["a.sem", "g.sem"]
    assert len(r.stdout.splitlines()) == 2


@pytest.mark.subprocess
def test_jobs_gives_identical_files(work: Path):
    for d in ("seq", "par"):
        (work / d).mkdir()
    names = ["a.png", "b.png", "g.png"]
    assert run("encode", *names, "-d", "seq", "-q", "40", *TINY).exit_code == 0
    r = run("encode", *names, "bad.png", "-d", "par", "-q", "40", "--jobs", "2", *TINY)
    assert r.exit_code == 1 and "1 of 4 files failed" in r.stderr
    for n in names:
        sem = Path(n).with_suffix(".sem").name
        assert (work / "seq" / sem).read_bytes() == (work / "par" / sem).read_bytes()
    # per-file lines come in input order
    assert [LINE_RE.match(x)["src"] for x in r.stdout.splitlines()] == names
    r = run("decode", "par/a.sem", "par/g.sem", "-d", "par", "--jobs", "2")
    assert r.exit_code == 0, r.output
    assert Image.open(work / "par" / "g.dec.png").mode == "L"


def test_stdin_stdout(work: Path):
    r = run("encode", "-", "-q", "60", *TINY, input=(work / "a.png").read_bytes())
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes.startswith(container.MAGIC)
    assert "<stdin> -> <stdout>" in r.stderr  # the report moves to stderr
    sem = r.stdout_bytes
    r = run("decode", "-", "-o", "-", input=sem)
    assert r.exit_code == 0
    out = Image.open(__import__("io").BytesIO(r.stdout_bytes))
    assert out.format == "PNG" and out.size == (W, H)
    r = run("encode", "a.png", "-o", "-", "-q", "60", "--quiet", *TINY)
    assert r.stdout_bytes == sem and r.stderr == ""
    assert run("encode", "-", "a.png", *TINY).exit_code == 2  # '-' only alone


def test_no_clobber_and_force(work: Path):
    assert run("encode", "a.png", "-q", "5", *TINY).exit_code == 0
    first = (work / "a.sem").read_bytes()
    r = run("encode", "a.png", "-q", "80", *TINY)
    assert r.exit_code == 1
    assert error_lines(r) == [
        "semcodec: error: a.png: cannot write 'a.sem': file exists; name another output with -o, "
        "or a folder with -d"
    ]
    assert (work / "a.sem").read_bytes() == first
    r = run("encode", "a.png", "-q", "80", "--force", *TINY)
    assert r.exit_code == 0
    assert (work / "a.sem").read_bytes() != first
    assert no_temp_files(work)


def test_refuses_to_write_over_input(work: Path):
    before = (work / "a.png").read_bytes()
    r = run("encode", "a.png", "-o", "a.png", "--force", *TINY)
    assert r.exit_code == 2 and "name the output '.sem'" in r.stderr  # an image's name
    (work / "pic").write_bytes(before)  # no suffix: the input check itself
    r = run("encode", "pic", "-o", "pic", "--force", *TINY)
    assert r.exit_code == 1 and "is the input file" in r.stderr
    assert (work / "a.png").read_bytes() == before == (work / "pic").read_bytes()


def test_refuses_sem_input_and_image_named_output(work: Path):
    """Re-encoding a .sem (generation loss) and a .sem named .jpg are usage errors, no file."""
    assert run("encode", "a.png", "-q", "20", *TINY).exit_code == 0
    r = run("encode", "a.sem", "-o", "again.sem", *TINY)
    assert r.exit_code == 2 and "'a.sem' is a .sem file: decode it first" in r.stderr
    r = run("encode", "a.png", "-o", "z.jpg", *TINY)
    assert r.exit_code == 2 and "not .jpg" in r.stderr
    assert not (work / "again.sem").exists() and not (work / "z.jpg").exists()
    r = run(
        "encode", "a.png", "-o", "z.bin", "-q", "20", *TINY
    )  # another name is the user's choice
    assert r.exit_code == 0 and container.unpack((work / "z.bin").read_bytes())


def test_roi_at_quality_zero_is_one_warning(work: Path):
    r = run("encode", "a.png", "-q", "0", "--roi", "car", "-o", "r.sem", *TINY)
    assert r.exit_code == 0, r.output
    assert r.stderr.count("semcodec: warning: --roi has no effect at -q 0") == 1


def test_corrupt_file_one_line_error_and_no_output(work: Path):
    assert run("encode", "a.png", "-q", "20", *TINY).exit_code == 0
    data = bytearray((work / "a.sem").read_bytes())
    data[len(data) // 2] ^= 0x40
    (work / "bad.sem").write_bytes(bytes(data))
    for args in (["decode", "bad.sem", "-o", "bad-out.png"], ["info", "bad.sem"]):
        r = run(*args)
        assert r.exit_code == 1
        assert len(error_lines(r)) == 1, r.stderr
        assert r.stderr.startswith("semcodec: error: bad.sem: ") and "CRC mismatch" in r.stderr
        assert "Traceback" not in r.output
    assert not (work / "bad-out.png").exists() and no_temp_files(work)
    r = run("decode", "bad.sem", "-o", "bad-out.png", "--debug")
    assert r.exit_code == 1 and "Traceback" in r.stderr and "CorruptData" in r.stderr
    r = run("--debug", "info", "bad.sem")
    assert r.exit_code == 1 and "Traceback" in r.stderr


def test_missing_output_directory(work: Path):
    r = run("encode", "a.png", "-o", "nowhere/a.sem", *TINY)
    assert r.exit_code == 1 and len(error_lines(r)) == 1
    assert "does not exist" in r.stderr
    r = run("encode", "a.png", "-d", "nowhere", *TINY)
    assert r.exit_code == 1 and error_lines(r) == [
        "semcodec: error: output directory 'nowhere' does not exist"
    ]
    assert not (work / "nowhere").exists()
    (work / "afile").write_bytes(b"x")  # a -d that is a file: the same exit status, one line
    r = run("decode", "a.sem", "-d", "afile")
    assert r.exit_code == 1 and error_lines(r) == [
        "semcodec: error: output directory 'afile' is not a directory"
    ]


def test_empty_stdin_and_a_result_file_that_is_not_json(work: Path):
    """Each message says what was read: stdin, or the file by its name."""
    r = run("encode", "-", "-o", "x.sem", *TINY, input=b"")
    assert r.exit_code == 1 and error_lines(r) == [
        "semcodec: error: <stdin>: empty input (nothing was read from stdin)"
    ]
    (work / "notjson").write_text("nope")
    (work / "a.json").write_text("{}")
    r = run("bench", "compare", "a.json", "notjson")
    assert r.exit_code == 2 and "'notjson' is not a result JSON (Expecting value" in r.stderr


def test_usage_errors_exit_2(work: Path):
    assert run("encode", "a.png", "--bogus").exit_code == 2
    assert run("encode", "a.png", "-q", "101").exit_code == 2
    assert run("encode").exit_code == 2
    assert run("encode", "a.png", "-q", "5", "--target-size", "100").exit_code == 2
    assert run("encode", "a.png", "--target-bpp", "1", "--target-size", "100").exit_code == 2
    assert run("nosuchcommand").exit_code == 2
    r = run("--version")
    assert r.exit_code == 0 and r.stdout.startswith("semcodec ")


def test_unknown_model_is_a_processing_error(work: Path):
    r = run("encode", "a.png", "--model", "no-such-model")
    assert r.exit_code == 1 and len(error_lines(r)) == 1
    assert r.stderr.startswith("semcodec: error: a.png: unknown model 'no-such-model' (known: ")


def test_info_json(work: Path):
    assert run("encode", "a.png", "g.png", "-q", "30", *TINY).exit_code == 0
    r = run("info", "a.sem", "--json")
    assert r.exit_code == 0, r.output
    (d,) = json.loads(r.stdout)  # a list for one file as for several: `jq '.[]'` always works
    size = (work / "a.sem").stat().st_size
    assert d["file"] == "a.sem" and d["bytes"] == size
    assert (d["width"], d["height"], d["mode"]) == (W, H, "RGB")
    assert d["model"] == "tiny" and re.fullmatch(r"[0-9a-f]{16}", d["model_hash"])
    assert d["quality"] == 30 and d["residual"] == "native"
    assert set(d["layers"]) == {"semantic_map", "compact", "residual"}
    assert d["header_bytes"] + sum(v["bytes"] for v in d["layers"].values()) == size
    for v in d["layers"].values():
        assert v["bpp"] == pytest.approx(8 * v["bytes"] / (W * H))
    assert d["bpp"] == pytest.approx(8 * size / (W * H))
    r = run("info", "a.sem", "g.sem", "--json")
    both = json.loads(r.stdout)
    assert [x["file"] for x in both] == ["a.sem", "g.sem"] and both[1]["mode"] == "L"
    (work / "broken.sem").write_bytes((work / "a.sem").read_bytes()[:40])
    r = run("info", "a.sem", "broken.sem", "--json")
    assert r.exit_code == 1
    good, broken = json.loads(r.stdout)  # one object per input, failures included
    assert good["file"] == "a.sem" and good["bytes"] == size
    assert broken["file"] == "broken.sem" and broken["error"] and "width" not in broken
    r = run("info", "a.sem")
    assert r.stdout.startswith(f"a.sem: {size} bytes, 64x48 RGB")
    assert (
        d["learned_base"] == 1.0 and "  holds      the map, the learned base on 100 %" in r.stdout
    )
    r = run("info", "-", "--json", input=(work / "a.sem").read_bytes())
    assert [x["file"] for x in json.loads(r.stdout)] == ["<stdin>"]


def test_info_says_when_no_tile_uses_the_learned_base(work: Path):
    """A file whose residual codes the image itself says so, and what --layer base gives."""
    from semcodec.decoder.info import holds_text

    d = {"layers": {"semantic_map": {}, "residual": {}}, "learned_base": 0.0}
    assert holds_text(d).startswith("the map and a residual that codes the image itself; no tile")
    assert "flat grey" in holds_text(d)
    assert holds_text({"layers": {"compact": {}}, "learned_base": 1.0}).startswith(
        "the base layer alone"
    )
    assert run("encode", "a.png", "-q", "0", "-o", "q0.sem", *TINY).exit_code == 0
    r = run("info", "q0.sem")
    assert "  holds      the base layer alone" in r.stdout, r.stdout


@pytest.mark.slow
def test_target_size_real(work: Path):
    sizes = {}
    for q in (0, 100):
        assert run("encode", "a.png", "-q", str(q), "-o", f"q{q}.sem", *TINY).exit_code == 0
        sizes[q] = (work / f"q{q}.sem").stat().st_size
    target = (sizes[0] + sizes[100]) // 2
    r = run("encode", "a.png", "--target-size", str(target), *TINY)
    assert r.exit_code == 0, r.output
    got = (work / "a.sem").stat().st_size
    assert sizes[0] <= got <= target
    assert re.search(r", quality \d+$", r.stdout.strip())
    # infeasible: no file over the budget, one error line, exit 1
    r = run("encode", "a.png", "--target-size", "10", "-o", "small.sem", *TINY)
    assert r.exit_code == 1
    assert "semcodec: error: a.png: target of 10 bytes cannot be met" in r.stderr
    assert f"the smallest file is {sizes[0]} bytes (quality 0)" in r.stderr
    assert not (work / "small.sem").exists()
    # bpp target: within the budget
    r = run("encode", "a.png", "--target-bpp", "3", "-o", "bpp.sem", *TINY)
    assert r.exit_code == 0
    assert (work / "bpp.sem").stat().st_size <= bytes_for_bpp(3, W, H)


def test_decode_segmentation_map(work: Path):
    assert run("encode", "a.png", "-q", "0", *TINY).exit_code == 0
    r = run("decode", "a.sem", "-o", "d.png", "--segmentation", "map.png")
    assert r.exit_code == 0, r.output
    seg = Image.open("map.png")  # class ids, as `semcodec segment` writes them
    assert seg.mode == "L" and seg.size == (W, H) and np.asarray(seg).max() < 11
    r = run("decode", "a.sem", "-o", "d2.png", "--segmentation", "col.png", "--color")
    assert r.exit_code == 0, r.output
    col = Image.open("col.png")
    assert col.mode == "P" and np.array_equal(np.asarray(col), np.asarray(seg))
    assert run("decode", "a.sem", "a.sem", "--segmentation", "m.png").exit_code == 2


def test_segment(work: Path):
    r = run("segment", "a.png", "-o", "labels.png", "--model", "tiny")
    assert r.exit_code == 0, r.output
    lab = Image.open("labels.png")
    assert lab.mode == "L" and lab.size == (W, H)
    assert np.asarray(lab).max() < 11
    r = run("segment", "a.png", "-o", "color.png", "--color", "--model", "tiny")
    assert r.exit_code == 0
    col = Image.open("color.png")
    assert col.mode == "P" and np.array_equal(np.asarray(col), np.asarray(lab))
    r = run("segment", "a.png", "-o", "labels.png", "--model", "tiny")
    assert r.exit_code == 1 and "--force" not in r.stderr and "-o" in r.stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_segment_is_a_batch_command(work: Path):
    """Many images, beside them or in -d, from a list, resumed, reported, with workers."""
    r = run("segment", "a.png", "b.png", "--model", "tiny")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "a.png -> a.map.png: 64x48 map (class ids)"
    beside = {n: (work / f"{n}.map.png").read_bytes() for n in "ab"}
    assert Image.open(work / "b.map.png").size == (W, H)
    (work / "maps").mkdir()
    (work / "list.txt").write_text("a.png\nb.png\ng.png\n")
    args = ["segment", "--from-list", "list.txt", "-d", "maps", "--model", "tiny"]
    r = run(*args, "-j", "2", "--report", "rep.jsonl")
    assert r.exit_code == 0, r.output
    assert {n: (work / "maps" / f"{n}.map.png").read_bytes() for n in "ab"} == beside
    *per_file, summary = [json.loads(x) for x in (work / "rep.jsonl").read_text().splitlines()]
    assert [x["status"] for x in per_file] == ["ok"] * 3 and summary["command"] == "segment"
    assert per_file[2]["output"] == "maps/g.map.png" and per_file[2]["width"] == W
    (work / "maps" / "b.map.png").write_bytes(beside["b"][:-20])  # cut short: not valid
    r = run(*args, "--skip-existing", "--color", "--report", "-")
    assert r.exit_code == 1
    status = [x.get("status") for x in map(json.loads, r.stdout.splitlines())]
    assert status == ["skipped", "failed", "skipped", None]
    assert "cannot skip 'maps/b.map.png'" in r.stderr and "--force" not in r.stderr
    r = run(
        "segment", "-", "-o", "-", "--color", "--model", "tiny", input=(work / "a.png").read_bytes()
    )
    assert r.exit_code == 0 and Image.open(io.BytesIO(r.stdout_bytes)).mode == "P"


def test_eval_seg_models_and_groups(work: Path):
    data = work / "camvid"
    (data / "img").mkdir(parents=True)
    lines = []
    for i in range(2):
        _image(i).save(data / "img" / f"{i}.png")
        lab = (np.arange(H * W).reshape(H, W) % 12).astype(np.uint8)  # 11 is void
        Image.fromarray(lab).save(data / "img" / f"{i}_L.png")
        lines.append(f"img/{i}.png img/{i}_L.png")
    (data / "test.txt").write_text("\n".join(lines) + "\n")
    r = run("eval", "seg", "--data", str(data), "--model", "tiny", "--limit", "1", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["images"] == 1 and 0 <= d["miou"] <= 1 and len(d["per_class_iou"]) == 11
    r = run("eval", "seg", "--data", str(data), "--split", "val", "--model", "tiny")
    assert r.exit_code == 1 and len(error_lines(r)) == 1  # no val.txt
    (work / "photos").mkdir()
    for i in range(2):
        _image(i + 5).save(work / "photos" / f"{i}.png")
    ph = ["--photos", str(work / "photos"), "--json"]
    d = json.loads(run("eval", "seg", "--data", str(data), "--model", "tiny", *ph).stdout)["photos"]
    assert d["photos"] == 2 and abs(d["unknown_share"] + sum(d["class_share"].values()) - 1) < 1e-9
    sure = ["--unknown-below", "1.0"]  # no class is ever this sure: every position is UNKNOWN
    d = json.loads(run("eval", "seg", "--data", str(data), "--model", "tiny", *sure, *ph).stdout)
    assert d["photos"]["unknown_share"] == 1.0
    from semcodec.zoo.bundles import load_bundle

    assert load_bundle("tiny").seg.cfg.unknown_below != 1.0  # the process's network untouched
    base = ["eval", "seg", "--data", str(data), "--model", "tiny", "--json"]
    d = json.loads(run(*base, "--class-bias", "pole=50").stdout)
    assert d["class_bias"] == {"pole": 50.0} and d["per_class_recall"]["pole"] == 1.0
    assert load_bundle("tiny").seg.cfg.class_bias == ()
    d = json.loads(run(*base, "--fit-bias").stdout)
    assert [h["fitted_on"] for h in d["fitted_halves"]] == ["first half", "second half"]
    assert d["miou"] >= d["miou_without_bias"] - 1e-9  # fitted on these frames: never worse
    assert set(d["class_bias"]) <= set(d["per_class_iou"])
    r = run(*base, "--class-bias", "lamp=1")
    assert r.exit_code == 2 and "unknown class 'lamp'" in r.output

    r = run("models")
    assert r.exit_code == 0 and re.search(r"^default\s+[0-9a-f]{16}\s", r.stdout, re.M)
    assert re.search(r"^tiny\s+-\s", r.stdout, re.M) and "decodes files of: default-" in r.stdout
    d = json.loads(run("models", "--json").stdout)
    assert {m["name"] for m in d["models"]} >= {"default", "tiny"} and d["decodes"]
    r = run("train", "--help")
    assert r.exit_code == 0 and "seg" in r.stdout and "codec" in r.stdout
    assert run("--help").exit_code == 0


# ----- rate control (fake encoder) ---------------------------------------------------------------
def _fake(sizes):
    calls = []

    def encode(q: int) -> bytes:
        calls.append(q)
        return b"x" * sizes(q)

    return encode, calls


@pytest.mark.parametrize("target", [100, 101, 150, 499, 500, 777, 1099, 1100])
def test_search_quality_picks_highest_fitting(target: int):
    encode, calls = _fake(lambda q: 100 + 10 * q)  # 100 .. 1100 bytes
    q, data, met = search_quality(encode, target)
    assert met and len(data) <= target
    assert q == min(100, (target - 100) // 10)
    assert len(calls) == len(set(calls)) <= 10


def test_search_quality_infeasible_and_edges():
    encode, calls = _fake(lambda q: 100 + q)
    q, data, met = search_quality(encode, 99)  # quality 1 does not fit, nor does 0
    assert (q, len(data), met) == (0, 100, False) and calls == [1, 0]
    encode, calls = _fake(lambda q: 100 + q)
    q, data, met = search_quality(encode, 10**6)
    assert (q, len(data), met) == (100, 200, True) and calls == [1, 100]
    with pytest.raises(ValueError):
        search_quality(encode, -1)


# kodim23's curve as measured: quality 0 (the base layer alone) is larger than qualities 1..5
REAL_CURVE = {0: 4090, 1: 3464, 2: 3530, 3: 3610, 4: 3690, 5: 3751, 6: 3830, 7: 3900}


def _real(q: int) -> int:
    """A size curve whose quality 0 is not its smallest file."""
    return REAL_CURVE.get(q, 3900 + 120 * (q - 7))


def test_search_quality_searches_below_quality_0s_size():
    """--target-size 3800 fits quality 5 (3751 bytes) though quality 0's file is 4090 bytes."""
    encode, calls = _fake(_real)
    q, data, met = search_quality(encode, 3800)
    assert (q, len(data), met) == (5, 3751, True)
    assert 0 not in calls  # quality 1 fits: the base layer's size never mattered
    q, data, met = search_quality(encode, 3400)  # nothing fits: the true smallest is named
    assert (q, len(data), met) == (1, 3464, False)
    encode, calls = _fake(lambda q: 500 if q == 0 else 600 + q)  # only quality 0 fits
    assert search_quality(encode, 550)[::2] == (0, True)


def test_fit_budget_names_the_smallest_file():
    encode, _ = _fake(_real)
    assert fit_budget(encode, 4000)[0] == 7
    with pytest.raises(TargetNotMet, match=r"smallest file is 3464 bytes \(quality 1\)"):
        fit_budget(encode, 3400)


def test_search_quality_never_exceeds_with_steps_and_noise():
    rng = np.random.default_rng(0)
    steps = np.cumsum(rng.integers(0, 40, 101)) + 50  # monotone with plateaus

    for target in rng.integers(40, int(steps[-1]) + 50, 50):
        encode, _ = _fake(lambda q: int(steps[q]))
        q, data, met = search_quality(encode, int(target))
        if met:
            assert len(data) <= target
            assert q == 100 or steps[q + 1] > target
        else:
            assert q == 0 and steps[0] > target
    # a non-monotone encoder still never yields a file over the target when met
    encode, _ = _fake(lambda q: 1000 - q if q % 7 else 10 * q)
    q, data, met = search_quality(encode, 600)
    assert met and len(data) <= 600


def test_bytes_for_bpp():
    assert bytes_for_bpp(1.0, 64, 48) == 384
    assert bytes_for_bpp(0.26, 10, 10) == 3  # rounded down


# ----- real processes: pipes and exit codes ------------------------------------------------------
def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "semcodec.cli", *args]


@pytest.mark.subprocess
@pytest.mark.slow
def test_subprocess_pipe_and_exit_codes(work: Path):
    enc = subprocess.Popen(
        _cmd("encode", "-", "-o", "-", "-q", "95", *TINY),
        stdin=open(work / "a.png", "rb"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    )
    dec = subprocess.run(
        _cmd("decode", "-", "-o", "-"), stdin=enc.stdout, capture_output=True, env=child_env()
    )
    enc.stdout.close()
    assert enc.wait(timeout=120) == 0, enc.stderr.read()
    assert dec.returncode == 0, dec.stderr
    img = Image.open(__import__("io").BytesIO(dec.stdout))
    assert img.size == (W, H) and img.mode == "RGB"
    assert np.abs(pixels(img) - pixels(work / "a.png")).mean() < 3

    usage = subprocess.run(_cmd("info"), capture_output=True, text=True, env=child_env())
    assert usage.returncode == 2 and "Usage:" not in usage.stderr
    assert usage.stderr.splitlines() == [
        "semcodec: error: Missing argument 'FILE...'; see 'semcodec info --help'"
    ]
    for args in (("encode", "a.png", "-q", "101"), ("encode", "--bogus"), ("nosuchcommand",)):
        bad_usage = subprocess.run(_cmd(*args), capture_output=True, text=True, env=child_env())
        assert bad_usage.returncode == 2, args
        lines = bad_usage.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("semcodec: error: "), (args, lines)
    helped = subprocess.run(
        _cmd("encode", "--help"), capture_output=True, text=True, env=child_env()
    )
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: semcodec encode")
    (work / "junk.sem").write_bytes(b"\x89SEM\r\n\x1a\n\x01")
    bad = subprocess.run(_cmd("info", "junk.sem"), capture_output=True, text=True, env=child_env())
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        "semcodec: error: junk.sem: truncated header: 9 bytes, the fixed header alone is 34"
    ]


def _feed(pipe, data: bytes, chunk: int = 1000) -> None:
    """Write ``data`` into a pipe in small chunks with pauses, then close it (EOF)."""
    try:
        for i in range(0, len(data), chunk):
            pipe.write(data[i : i + chunk])
            pipe.flush()
            time.sleep(0.002)
    finally:
        pipe.close()


@pytest.mark.subprocess
@pytest.mark.slow
def test_real_pipes_in_chunks(work: Path):
    """encode | decode with both ends real pipes: stdin arrives in chunks, stdout is a pipe."""
    png = (work / "a.png").read_bytes()
    assert len(png) > 3000  # several chunks
    enc = subprocess.Popen(
        _cmd("encode", "-", "-o", "-", "-q", "95", *TINY),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
    )  # fmt: skip
    dec = subprocess.Popen(
        _cmd("decode", "-", "-o", "-"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
    )  # fmt: skip
    try:
        png_feeder = threading.Thread(target=_feed, args=(enc.stdin, png))
        png_feeder.start()
        sem = enc.stdout.read()  # from the pipe, until the encoder closes it
        sem_feeder = threading.Thread(target=_feed, args=(dec.stdin, sem, 97))
        sem_feeder.start()
        out = dec.stdout.read()
        png_feeder.join()
        sem_feeder.join()
        assert enc.wait(timeout=120) == 0, enc.stderr.read()
        assert dec.wait(timeout=120) == 0, dec.stderr.read()
    finally:
        for proc in (enc, dec):
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                stream.close()
    assert sem == run("encode", "a.png", "-o", "-", "-q", "95", "--quiet", *TINY).stdout_bytes
    assert out == run("decode", "-", "-o", "-", input=sem).stdout_bytes
    img = Image.open(io.BytesIO(out))
    assert img.format == "PNG" and img.size == (W, H)
    assert np.abs(pixels(img) - pixels(work / "a.png")).mean() < 3


@pytest.mark.slow
def test_target_size_with_the_default_avif_residual(tmp_path: Path, monkeypatch):
    """--target-size without --residual (AVIF): a photo, three targets, never over."""
    monkeypatch.chdir(tmp_path)
    photo = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    Image.open(photo).convert("RGB").resize((128, 150)).save("grace.png")
    tiny = ["--model", "tiny"]
    sizes = {}
    for q in (0, 100):
        assert run("encode", "grace.png", "-q", str(q), "-o", f"q{q}.sem", *tiny).exit_code == 0
        sizes[q] = (tmp_path / f"q{q}.sem").stat().st_size
    assert container.read_header((tmp_path / "q100.sem").read_bytes()).residual_backend == (
        container.RESIDUAL_AVIF
    )  # quality 0 is base-only; any higher quality carries the default AVIF residual
    got = []
    for k in (1, 2, 3):
        target = int(sizes[0] * (sizes[100] / sizes[0]) ** (k / 4))  # spread over qualities
        r = run("encode", "grace.png", "--target-size", str(target), "-o", f"t{k}.sem", *tiny)
        assert r.exit_code == 0 and "warning" not in r.stderr, r.output
        data = (tmp_path / f"t{k}.sem").read_bytes()
        assert container.read_header(data).residual_backend == container.RESIDUAL_AVIF
        assert len(data) <= target, (k, len(data), target)
        got.append(len(data))
    assert got == sorted(got) and got[0] < got[-1], (sizes, got)


_STALLED_WRITE = """
import os, signal, sys, time
from pathlib import Path
import semcodec.cli

def stalled_fsync(fd):  # the output's temporary file exists and is being written
    Path(sys.argv[1]).touch()
    time.sleep(60)

os.fsync = stalled_fsync
semcodec.cli.main(sys.argv[2:])
"""


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_while_writing_removes_the_temporary_file(work: Path, sig: signal.Signals):
    """SIGTERM, like Ctrl-C, arriving while an output is written: no output, no temporary
    file, "interrupted", exit 130."""
    assert run("encode", "a.png", "-q", "50", *TINY).exit_code == 0
    (work / "out").mkdir()
    ready = work / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STALLED_WRITE, str(ready), "decode", "a.sem", "-o", "out/a.png"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
        preexec_fn=ctrl_c_as_at_a_terminal,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.exists(), proc.communicate(timeout=5)
        assert [p.name for p in (work / "out").iterdir()][0].endswith(".tmp")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert list((work / "out").iterdir()) == [], err
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "semcodec: error: interrupted"


def test_binary_to_a_terminal_is_a_usage_error(work: Path, monkeypatch: pytest.MonkeyPatch):
    """Like cwebp and avifenc: a usage problem, exit 2, before any work."""
    from semcodec.batch import stdio

    class Tty(io.BytesIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(stdio, "stdout_binary", lambda: Tty())
    r = run("encode", "a.png", "-o", "-", *TINY)
    assert r.exit_code == 2 and "refusing to write binary data to a terminal" in r.stderr
    r = run("decode", "-", input=b"\x89SEM")
    assert r.exit_code == 2 and "refusing to write binary data to a terminal" in r.stderr


def test_a_missing_input_reads_the_same_in_every_command(work: Path):
    for command in ("encode", "decode", "info"):
        r = run(command, "nope.x", *(TINY if command == "encode" else ()))
        assert r.exit_code == 1, command
        assert r.stderr.splitlines() == [
            "semcodec: error: cannot read 'nope.x': No such file or directory"
        ], command
