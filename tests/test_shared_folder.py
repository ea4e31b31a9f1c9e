"""Several runs, one folder: the same `--skip-existing` command started twice at once over the
same inputs and output folder. Every output is written once, by one of them; the other counts
it as skipped ("written by another process"); both exit 0, and the folder holds exactly the
files of a single run.

Both commands read their file list from a FIFO that the test fills only once both have started,
so they plan and work through the same list at the same moment: the race is the normal case.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from childproc import child_env
from click.testing import CliRunner
from PIL import Image

from semcodec.cli import cli

TINY = ["--model", "tiny", "--residual", "native", "--no-gating", "-q", "30"]
N_FILES = 24
RUNS = 2

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _write_images(folder: Path) -> list[str]:
    """N_FILES small structured images, different for every seed."""
    names = [f"f{i:02d}.png" for i in range(N_FILES)]
    for seed, name in enumerate(names):
        rng = np.random.default_rng(seed)
        y, x = np.mgrid[0:72, 0:96]
        a = np.stack([x * 2 + seed * 9, y * 3, x + y], -1) % 256 + rng.integers(-8, 9, (72, 96, 3))
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(folder / name)
    return names


def _files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder``, hidden temporary files included."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _feed(fifo: Path, names: list[str], proc: subprocess.Popen, seconds: float = 60) -> None:
    """Write the file list into ``fifo`` once ``proc`` has opened it for reading."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:  # ENXIO: no reader yet
            assert exc.errno == errno.ENXIO, exc
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never read its list"
            time.sleep(0.005)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as fp:
        fp.write("".join(f"{n}\n" for n in names).encode())


def _concurrent(command: str, names: list[str], *extra: str) -> list[tuple[int, str, list]]:
    """RUNS copies of ``semcodec COMMAND --from-list FIFO -d out --skip-existing`` at once:
    each one's exit status, stderr and report records."""
    procs = []
    for k in range(RUNS):
        os.mkfifo(f"list{k}")
        cmd = [sys.executable, "-m", "semcodec.cli", command, "--from-list", f"list{k}",
               "-d", "out", "--skip-existing", "--report", f"rep{k}.jsonl", *extra]  # fmt: skip
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=child_env()))  # fmt: skip
    try:
        for k, proc in enumerate(procs):
            _feed(Path(f"list{k}"), names, proc)
        ended = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    return [
        (proc.returncode, err.decode(),
         [json.loads(x) for x in Path(f"rep{k}.jsonl").read_text().splitlines()])
        for k, (proc, (_out, err)) in enumerate(zip(procs, ended, strict=True))
    ]  # fmt: skip


def _check_runs(runs: list[tuple[int, str, list]], names: list[str]) -> None:
    """Both exit 0 with complete reports, and every output was written by exactly one run."""
    writers: dict[str, int] = dict.fromkeys(names, 0)
    others = 0
    for code, err, recs in runs:
        assert code == 0, err
        assert "error" not in err, err
        *per_file, summary = recs
        assert sorted(x["input"] for x in per_file) == sorted(names)
        assert (summary["failed"], summary["ok"] + summary["skipped"]) == (0, N_FILES)
        for x in per_file:
            assert x["status"] in ("ok", "skipped"), x
            if x["status"] == "ok":
                writers[x["input"]] += 1
                assert x["reason"] is None
            else:
                assert x["reason"] in ("exists", "written by another process"), x
                assert x["bytes"] and x["width"], x  # the file found, described
                others += x["reason"] == "written by another process"
    assert writers == dict.fromkeys(names, 1), "each output written by exactly one run"
    assert others > 0, "the runs never raced: the test proves nothing"


@pytest.mark.subprocess
@pytest.mark.slow
def test_two_encode_runs_share_one_folder(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = _write_images(tmp_path)
    (tmp_path / "ref").mkdir()
    (tmp_path / "out").mkdir()
    r = CliRunner().invoke(cli, ["encode", *names, "-d", "ref", *TINY])
    assert r.exit_code == 0, r.output
    runs = _concurrent("encode", names, *TINY)
    _check_runs(runs, names)
    assert _files(tmp_path / "out") == _files(tmp_path / "ref")  # no temporary file either


@pytest.mark.subprocess
@pytest.mark.slow
def test_two_decode_runs_share_one_folder(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    images = _write_images(tmp_path)
    for folder in ("sem", "ref", "out"):
        (tmp_path / folder).mkdir()
    assert CliRunner().invoke(cli, ["encode", *images, "-d", "sem", *TINY]).exit_code == 0
    names = [f"sem/{Path(n).stem}.sem" for n in images]
    r = CliRunner().invoke(cli, ["decode", *names, "-d", "ref"])
    assert r.exit_code == 0, r.output
    runs = _concurrent("decode", names)
    _check_runs(runs, names)
    assert _files(tmp_path / "out") == _files(tmp_path / "ref")


# ----- in one process: a file that appears between planning and writing --------------------------
def _with_appearing(monkeypatch, before: dict[str, bytes], after: dict[str, bytes]) -> list:
    """Make files appear in out/ as another run would write them: ``before`` once the batch is
    planned, ``after`` each right after its input was computed. Returns the computed tasks."""
    from semcodec.batch import run as batch

    computed: list = []
    original = batch.processed

    def computing(fn):
        def run(task):
            outcome = fn(task)
            computed.append(task.source)
            name = Path(task.source).with_suffix(".sem").name
            if name in after:
                Path("out", name).write_bytes(after[name])
            return outcome

        return run

    def processed(fn, tasks, *args, **kwargs):
        for name, data in before.items():
            Path("out", name).write_bytes(data)
        return original(computing(fn), tasks, *args, **kwargs)

    monkeypatch.setattr(batch, "processed", processed)
    return computed


@pytest.fixture
def small(tmp_path: Path, monkeypatch) -> tuple[list[str], dict[str, bytes]]:
    """Four inputs and the .sem files of a single run."""
    monkeypatch.chdir(tmp_path)
    names = _write_images(tmp_path)[:4]
    for folder in ("ref", "out"):
        (tmp_path / folder).mkdir()
    assert CliRunner().invoke(cli, ["encode", *names, "-d", "ref", *TINY]).exit_code == 0
    return names, _files(tmp_path / "ref")


def test_outputs_completed_elsewhere_are_not_computed_again(small, monkeypatch):
    names, ref = small
    computed = _with_appearing(monkeypatch, {"f01.sem": ref["f01.sem"]}, {})
    r = CliRunner().invoke(cli, ["encode", *names, "-d", "out", "--skip-existing",
                                 "--report", "-", *TINY])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert computed == ["f00.png", "f02.png", "f03.png"]
    *per_file, summary = [json.loads(x) for x in r.stdout.splitlines()]
    by_input = {x["input"]: x for x in per_file}
    assert by_input["f01.png"]["status"] == "skipped"
    assert by_input["f01.png"]["reason"] == "written by another process"
    assert by_input["f01.png"]["bytes"] == len(ref["f01.sem"])
    assert (summary["ok"], summary["skipped"], summary["failed"]) == (3, 1, 0)
    assert _files(Path("out")) == ref


def test_a_file_written_first_elsewhere_is_kept_or_refused(small, monkeypatch):
    names, ref = small
    damaged = ref["f03.sem"][:-5]
    _with_appearing(monkeypatch, {}, {"f02.sem": ref["f02.sem"], "f03.sem": damaged})
    r = CliRunner().invoke(cli, ["encode", *names, "-d", "out", "--skip-existing",
                                 "--report", "rep.jsonl", *TINY])  # fmt: skip
    assert r.exit_code == 1
    assert "f02" not in r.stderr
    assert "f03.png: cannot skip 'out/f03.sem'" in r.stderr  # not valid: left as it is
    *per_file, summary = [json.loads(x) for x in Path("rep.jsonl").read_text().splitlines()]
    statuses = {x["input"]: (x["status"], x["reason"]) for x in per_file}
    assert statuses == {"f00.png": ("ok", None), "f01.png": ("ok", None),
                        "f02.png": ("skipped", "written by another process"),
                        "f03.png": ("failed", None)}  # fmt: skip
    assert _files(Path("out")) == {**ref, "f03.sem": damaged}
