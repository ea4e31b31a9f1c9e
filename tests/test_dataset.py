"""Batches of datasets: --skip-existing (resume), --report, --from-list and --keep-tree, and an
interrupted or worker-killed batch that a rerun completes byte for byte.

The seeded random "tiny" bundle on 64x48 images keeps every run fast.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from childproc import child_env, ctrl_c_as_at_a_terminal
from click.testing import CliRunner
from PIL import Image

from semcodec.cli import cli

TINY = ["--model", "tiny", "--residual", "native", "--no-gating", "-q", "30"]

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _image(seed: int, w: int = 64, h: int = 48) -> Image.Image:
    """A small structured test image, different for every seed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 3 + seed * 7, y * 5, (x + y) * 2], -1) % 256
    a = a + rng.integers(-8, 9, a.shape)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def _images(folder: Path, names: list[str], w: int = 64, h: int = 48) -> list[str]:
    """Write one image per name (sub-folders made) and return the paths as given."""
    for seed, name in enumerate(names):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        _image(seed, w, h).save(folder / name)
    return names


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with out/."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    return tmp_path


def run(*args: str, input: bytes | None = None):
    """Invoke the CLI in-process."""
    result = CliRunner().invoke(cli, list(args), input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def records(text: str) -> list[dict]:
    """The report's objects, every line JSON."""
    return [json.loads(line) for line in text.splitlines()]


def files(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` (relative path → bytes), temporary files included."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# ----- --skip-existing ---------------------------------------------------------------------------
@pytest.mark.slow
def test_skip_existing_checks_every_output_and_resumes(work: Path):
    names = _images(work, ["a.png", "b.png", "c.png", "d.png", "e.png"])
    assert run("encode", *names, "-d", "out", *TINY).exit_code == 0
    first = files(work / "out")
    kept = os.stat(work / "out" / "a.sem")
    (work / "out" / "c.sem").unlink()  # never written: encoded now
    bad = bytearray(first["b.sem"])
    bad[-3] ^= 0x10  # the last layer's payload: the header still parses
    (work / "out" / "b.sem").write_bytes(bytes(bad))
    (work / "out" / "d.sem").write_bytes(first["d.sem"][:-5])  # truncated
    (work / "out" / "e.sem").write_bytes(b"")  # empty
    r = run("encode", *names, "-d", "out", "--skip-existing", *TINY)
    assert r.exit_code == 1
    errors = r.stderr.splitlines()
    assert len(errors) == 4 and errors[-1] == "semcodec: error: 3 of 5 files failed"
    assert "b.png: cannot skip 'out/b.sem'" in errors[0] and "CRC mismatch" in errors[0]
    assert errors[0].endswith("; move it away, or write to another folder with -d")
    assert "--force" not in r.stderr  # a refusal never advises the destructive flag
    assert "d.png" in errors[1] and "truncated" in errors[1] and "e.png" in errors[2]
    lines = r.stdout.splitlines()
    assert lines[0] == "a.png -> out/a.sem: skipped (exists, valid)"
    assert len(lines) == 2 and lines[1].startswith("c.png -> out/c.sem: ")
    assert (work / "out" / "b.sem").read_bytes() == bytes(bad)  # an error, left as it was
    assert (work / "out" / "c.sem").read_bytes() == first["c.sem"]
    r = run("encode", *names, "-d", "out", "--skip-existing", "--force", *TINY)
    assert r.exit_code == 0, r.output
    assert files(work / "out") == first
    assert os.stat(work / "out" / "a.sem").st_mtime_ns == kept.st_mtime_ns  # never rewritten
    assert os.stat(work / "out" / "a.sem").st_ino == kept.st_ino


def test_without_skip_existing_an_existing_output_is_still_refused(work: Path):
    names = _images(work, ["a.png"])
    assert run("encode", *names, "-d", "out", *TINY).exit_code == 0
    r = run("encode", *names, "-d", "out", *TINY)
    assert r.exit_code == 1 and "file exists; name another output with -o, or a folder" in r.stderr


@pytest.mark.parametrize("layer", ["full", "map"])
def test_decode_skip_existing_decodes_images_in_full(work: Path, layer: str):
    names = _images(work, ["a.png", "b.png", "c.png"])
    assert run("encode", *names, "-d", "out", *TINY).exit_code == 0
    sems = [f"out/{Path(n).stem}.sem" for n in names]
    (work / "dec").mkdir()
    args = ["decode", *sems, "-d", "dec", "--layer", layer]
    assert run(*args).exit_code == 0
    first = files(work / "dec")
    ext = ".map.png" if layer == "map" else ".dec.png"  # never the original's name
    png = first[f"b{ext}"]
    (work / "dec" / f"b{ext}").write_bytes(png[: len(png) - 20])  # pixels cut short, no IEND
    (work / "dec" / f"c{ext}").write_bytes(first[f"a{ext}"][:-12])  # all pixels, no IEND
    r = run(*args, "--skip-existing", "--report", "-")
    assert r.exit_code == 1
    status = [x.get("status") for x in records(r.stdout)]
    assert status == ["skipped", "failed", "failed", None]
    assert f"cannot skip 'dec/b{ext}'" in r.stderr and f"cannot skip 'dec/c{ext}'" in r.stderr
    assert run(*args, "--skip-existing", "--force").exit_code == 0
    assert files(work / "dec") == first


def test_resume_removes_the_temporary_files_of_a_killed_run(work: Path):
    names = _images(work, ["a.png", "b.png"])
    assert run("encode", *names, "-d", "out", *TINY).exit_code == 0
    long_ago = time.time() - 3600
    stale = work / "out" / ".b.sem.0123456789ab.tmp"  # SIGKILL between create and rename
    other = work / "out" / ".c.sem.0123456789ab.tmp"  # not an output of this batch
    fresh = work / "out" / ".a.sem.abcdef012345.tmp"  # a write in progress elsewhere
    for path in (stale, other, fresh):
        path.write_bytes(b"half")
    for path in (stale, other):
        os.utime(path, (long_ago, long_ago))
    r = run("encode", *names, "-d", "out", "--skip-existing", *TINY)
    assert r.exit_code == 0 and "removed 1 temporary file(s) left by a killed run" in r.stderr
    assert not stale.exists() and other.exists() and fresh.exists()


# ----- --report ----------------------------------------------------------------------------------
def test_report_has_one_line_per_input_and_a_summary(work: Path):
    _images(work, ["a.png", "b.png", "g.png"])
    (work / "bad.png").write_bytes(b"not an image")
    assert run("encode", "a.png", "-d", "out", *TINY).exit_code == 0  # a is skipped below
    inputs = ["a.png", "bad.png", "b.png", "missing.png", "g.png", "b.png"]
    r = run("encode", *inputs, "-d", "out", "--skip-existing", "--report", "rep.jsonl", *TINY)
    assert r.exit_code == 1
    lines = records((work / "rep.jsonl").read_text())
    *per_file, summary = lines
    # settled before any work (skipped, refused) first, then processed in input order
    assert [x["input"] for x in per_file] == [inputs[i] for i in (0, 5, 1, 2, 3, 4)]
    status = [x["status"] for x in per_file]
    assert status == ["skipped", "failed", "failed", "ok", "failed", "ok"]
    assert all(x["type"] == "file" for x in per_file)
    assert "written twice" in per_file[1]["error"] and "missing.png" in per_file[4]["error"]
    ok = [x for x in per_file if x["status"] in ("ok", "skipped")]
    for x in ok:
        data = (work / x["output"]).read_bytes()
        assert x["bytes"] == len(data) and (x["width"], x["height"]) == (64, 48)
        assert x["bpp"] == pytest.approx(8 * len(data) / (64 * 48), abs=1e-5)
        assert set(x["layers"]) >= {"semantic_map", "compact", "residual"}
        assert sum(x["layers"].values()) < x["bytes"] and x["error"] is None
        assert x["seconds"] >= 0
    failed = [x for x in per_file if x["status"] == "failed"]
    assert all(x["error"] and x["bytes"] is None for x in failed)
    assert summary["type"] == "summary" and summary["schema"] == "semcodec-batch/1"
    assert summary["command"] == "encode" and summary["inputs"] == len(inputs)
    assert (summary["ok"], summary["skipped"], summary["failed"]) == (2, 1, 3)
    assert summary["bytes"] == sum(x["bytes"] for x in ok) and not summary["interrupted"]
    assert len(per_file) == summary["inputs"]


def test_report_on_stdout_keeps_stdout_json(work: Path):
    names = _images(work, ["a.png", "b.png"])
    r = run("encode", *names, "-d", "out", "--report", "-", *TINY)
    assert r.exit_code == 0
    lines = records(r.stdout)  # every stdout line is JSON: the text lines went to stderr
    assert [x.get("status") for x in lines] == ["ok", "ok", None]
    assert "a.png -> out/a.sem" in r.stderr
    assert run("encode", "a.png", "-o", "-", "--report", "-", *TINY).exit_code == 2
    sems = ["out/a.sem", "out/b.sem"]
    r = run("decode", *sems, "--report", "-", "--quiet")
    assert r.exit_code == 0 and r.stderr == ""
    *per_file, summary = records(r.stdout)
    for x, sem in zip(per_file, sems, strict=True):
        assert x["output"] == sem.replace(".sem", ".dec.png")
        assert x["bytes"] == (work / x["output"]).stat().st_size
        assert sum(x["layers"].values()) < (work / sem).stat().st_size
    assert summary["command"] == "decode" and summary["ok"] == 2


# ----- --from-list and --keep-tree ---------------------------------------------------------------
def test_from_list_newlines_nul_and_arguments(work: Path):
    names = _images(work, ["x/a.png", "y/a.png", "y/b c.png", "z.png"])
    listing = "\n".join(names[1:3]) + "\n\n"
    (work / "list.txt").write_text(listing)
    r = run("encode", names[0], "--from-list", "list.txt", "--keep-tree", "-d", "out", *TINY)
    assert r.exit_code == 0, r.output
    assert sorted(files(work / "out")) == ["x/a.sem", "y/a.sem", "y/b c.sem"]
    nul = "\0".join(names).encode() + b"\0"
    (work / "tree").mkdir()
    r = run("encode", "--from-list", "-", "-0", "--keep-tree", "-d", "tree", "--root", ".",
            "--report", "rep.jsonl", *TINY, input=nul)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert sorted(files(work / "tree")) == ["x/a.sem", "y/a.sem", "y/b c.sem", "z.sem"]
    assert [x["input"] for x in records((work / "rep.jsonl").read_text())[:-1]] == names
    for rel, data in files(work / "out").items():
        assert (work / "tree" / rel).read_bytes() == data


def test_list_and_tree_usage_errors(work: Path):
    _images(work, ["x/a.png", "y/a.png"])
    assert run("encode", *TINY).exit_code == 2  # no inputs at all
    assert run("encode", "x/a.png", "-0", *TINY).exit_code == 2  # -0 without --from-list
    assert run("encode", "--from-list", "nope.txt", *TINY).exit_code == 2
    assert run("encode", "x/a.png", "--keep-tree", *TINY).exit_code == 2  # needs -d
    assert run("encode", "x/a.png", "--root", "x", "-d", "out", *TINY).exit_code == 2
    r = run("encode", "y/a.png", "--keep-tree", "--root", "x", "-d", "out", *TINY)
    assert r.exit_code == 2 and "not below" in r.stderr
    r = run("encode", "-", "--from-list", "-", *TINY, input=b"x/a.png\n")
    assert r.exit_code == 2
    r = run("encode", "x/a.png", "y/a.png", "-d", "out", *TINY)  # flat: the names collide
    assert r.exit_code == 1 and "written twice" in r.stderr
    assert run("encode", "x/a.png", "--cluster", "nowhere", "-d", "out", *TINY).exit_code == 2


# ----- interrupted batches and killed workers ----------------------------------------------------
def _pool_workers(pid: int) -> list[int]:
    """The forked pool workers of a process (its children running its own command line)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    own = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [int(x) for x in text.split() if Path(f"/proc/{x}/cmdline").read_bytes() == own]


def _wait_for(predicate, proc: subprocess.Popen, seconds: float = 60) -> None:
    """Poll until ``predicate`` holds (fail if the process ends first or time runs out)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


N_FILES = 12


@pytest.fixture
def dataset(work: Path) -> tuple[list[str], dict[str, bytes]]:
    """N_FILES inputs in two folders and the files of an uninterrupted one-process run."""
    names = [f"{d}/f{i:02d}.png" for d in "pq" for i in range(N_FILES // 2)]
    _images(work, names, 192, 144)  # about 0.1 s each: a batch long enough to interrupt
    (work / "ref").mkdir()
    assert run("encode", *names, "-d", "ref", "--keep-tree", *TINY).exit_code == 0
    return names, files(work / "ref")


def _encode_process(names: list[str], *extra: str) -> subprocess.Popen:
    """The batch as a separate process, as a user starts it."""
    cmd = [sys.executable, "-m", "semcodec.cli", "encode", *names, "-d", "out", "--keep-tree"]
    return subprocess.Popen(
        [*cmd, *TINY, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
        preexec_fn=ctrl_c_as_at_a_terminal,
    )  # fmt: skip


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupted_batch_resumes_byte_for_byte(work: Path, dataset, sig: signal.Signals):
    names, reference = dataset
    proc = _encode_process(names, "-j", "2", "--report", "rep.jsonl")
    try:
        _wait_for(lambda: len(list((work / "out").rglob("*.sem"))) >= 2, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    partial = files(work / "out")
    assert 2 <= len(partial) < N_FILES, "the batch must be interrupted mid-run"
    assert all(reference[k] == v for k, v in partial.items())  # no temporary or partial file
    *per_file, summary = records((work / "rep.jsonl").read_text())
    assert summary["interrupted"] and all(x["status"] == "ok" for x in per_file)
    # every reported file was written; a signal between a write and its line can leave one out
    assert {x["output"] for x in per_file} <= {f"out/{k}" for k in partial}
    assert len(per_file) >= len(partial) - 1
    r = run("encode", *names, "-d", "out", "--keep-tree", "--skip-existing", "--report", "-",
            *TINY)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert files(work / "out") == reference
    *per_file, summary = records(r.stdout)
    assert (summary["skipped"], summary["ok"]) == (len(partial), N_FILES - len(partial))


@pytest.mark.subprocess
@pytest.mark.slow
def test_killed_pool_worker_loses_and_duplicates_nothing(work: Path, dataset):
    names, reference = dataset
    proc = _encode_process(names, "-j", "2", "--report", "rep.jsonl")
    try:
        _wait_for(lambda: len(list((work / "out").rglob("*.sem"))) >= 1, proc)
        victim = _pool_workers(proc.pid)[0]
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert files(work / "out") == reference
    *per_file, summary = records((work / "rep.jsonl").read_text())
    assert sorted(x["input"] for x in per_file) == sorted(names)
    assert summary["ok"] == N_FILES and len(out.decode().splitlines()) == N_FILES
