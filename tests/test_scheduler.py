"""--cluster tcp:// against a real Dask scheduler: a scheduler and two workers started as separate
processes on the loopback address with docs/batch.md's own recipe. A worker killed with SIGKILL
mid-run costs nothing (encode and decode: every output once, byte-identical to a local run,
with a complete report); a scheduler killed mid-run ends the command with one line and no
partial file, and a rerun against a new scheduler finishes with --skip-existing.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from childproc import child_env
from click.testing import CliRunner
from PIL import Image

from semcodec.cli import cli

psutil = pytest.importorskip("psutil")
pytest.importorskip("distributed")

DOCS = Path(__file__).resolve().parents[1] / "docs" / "batch.md"
TINY = ["--model", "tiny", "--residual", "native", "--no-gating", "-q", "30"]
N_FILES = 12
DOCS_PORT = "8786"

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def recipe() -> tuple[list[str], list[str]]:
    """The `dask scheduler` and `dask worker` command lines of docs/batch.md's loopback recipe."""
    text = DOCS.read_text()
    lines = [ln.rstrip(" &") for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
             for ln in block.splitlines() if "127.0.0.1" in ln]  # fmt: skip
    scheduler = [shlex.split(ln) for ln in lines if ln.startswith("dask scheduler")]
    workers = [shlex.split(ln) for ln in lines if ln.startswith("dask worker")]
    assert len(scheduler) == 1 and len(workers) == 2, "docs/batch.md: the loopback recipe"
    return scheduler[0], workers[0]


def _free_port() -> str:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def _write_images(folder: Path) -> list[str]:
    """N_FILES images of 192x144 (about 0.1 s each with tiny)."""
    names = [f"f{i:02d}.png" for i in range(N_FILES)]
    for seed, name in enumerate(names):
        rng = np.random.default_rng(seed)
        y, x = np.mgrid[0:144, 0:192]
        a = np.stack([x + seed * 9, y * 2, x + y], -1) % 256 + rng.integers(-8, 9, (144, 192, 3))
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(folder / name)
    return names


def _files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder``, hidden temporary files included."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _wait_for(predicate: Callable[[], bool], what: str, seconds: float = 60) -> None:
    """Poll until ``predicate`` holds."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Cluster:
    """A scheduler and its workers, as docs/batch.md starts them, on a free loopback port."""

    def __init__(self, folder: Path, workers: int) -> None:
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.folder, self.procs = folder, []
        scheduler, worker = recipe()
        self.scheduler = self._start(scheduler, "scheduler")
        self.workers = [self._start(worker, f"worker{k}") for k in range(workers)]
        for k in range(workers):
            log = folder / f"worker{k}.log"
            _wait_for(lambda log=log: "Registered to:" in log.read_text(), "a worker to join")

    def _start(self, argv: list[str], name: str) -> subprocess.Popen:
        """One `dask …` command of the recipe, on this cluster's port, logging to a file."""
        args = [a.replace(DOCS_PORT, self.port) for a in argv[1:]]
        with open(self.folder / f"{name}.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=log,
                                    stderr=subprocess.STDOUT, env=child_env())  # fmt: skip
        self.procs.append(proc)
        return proc

    def worker_process(self, k: int) -> psutil.Process:
        """The worker process that `dask worker` number ``k`` (its nanny) started."""
        children = psutil.Process(self.workers[k].pid).children()
        found = [c for c in children if "spawn_main" in " ".join(c.cmdline())]
        assert len(found) == 1, children
        return found[0]

    def stop(self) -> None:
        """SIGKILL every process started here and the workers their nannies started."""
        for proc in self.procs:
            with _gone():
                for child in psutil.Process(proc.pid).children(recursive=True):
                    with _gone():
                        child.kill()
            proc.kill()
            proc.wait(timeout=30)


class _gone:
    """Ignore a process that ended meanwhile."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, _value, _tb) -> bool:
        return kind is not None and issubclass(kind, psutil.Error)


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Callable[[int], Cluster]]:
    """Start clusters on demand; every process is stopped at the end."""
    started: list[Cluster] = []

    def start(workers: int) -> Cluster:
        folder = tmp_path / f"cluster{len(started)}"  # its processes' logs
        folder.mkdir()
        started.append(Cluster(folder, workers))
        return started[-1]

    yield start
    for cluster in started:
        cluster.stop()


def _batch(*args: str) -> subprocess.Popen:
    """``semcodec ARGS…`` as a separate process, as a user runs it."""
    cmd = [sys.executable, "-m", "semcodec.cli", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())


def _report(path: str) -> tuple[list[dict], dict]:
    """A report's per-file records and its summary."""
    *per_file, summary = [json.loads(x) for x in Path(path).read_text().splitlines()]
    return per_file, summary


def _kill_mid_run(proc: subprocess.Popen, out: Path, suffix: str, kill: Callable[[], None]):
    """Once the first output is there, ``kill``; the command's end and outputs then."""
    try:
        _wait_for(lambda: proc.poll() is not None or any(out.glob(f"*{suffix}")), "an output")
        assert proc.poll() is None, proc.communicate()
        kill()
        done_at_kill = len(list(out.glob(f"*{suffix}")))
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert done_at_kill < N_FILES, "the kill must come mid-run"
    return proc.returncode, stdout.decode(), stderr.decode()


@pytest.mark.subprocess
@pytest.mark.slow
def test_tcp_scheduler_survives_a_killed_worker_and_reports_a_lost_scheduler(
    tmp_path: Path, monkeypatch, clusters
):
    monkeypatch.chdir(tmp_path)
    names = _write_images(tmp_path)
    for folder in ("ref", "refdec", "sem", "dec", "again"):
        (tmp_path / folder).mkdir()
    assert CliRunner().invoke(cli, ["encode", *names, "-d", "ref", *TINY]).exit_code == 0
    reference = _files(tmp_path / "ref")
    sems = [f"ref/{Path(n).stem}.sem" for n in names]
    assert CliRunner().invoke(cli, ["decode", *sems, "-d", "refdec"]).exit_code == 0
    cluster = clusters(2)

    # encode: one of the two workers is killed mid-run
    proc = _batch("encode", *names, "-d", "sem", *TINY, "--report", "enc.jsonl",
                  "--cluster", cluster.address)  # fmt: skip
    code, stdout, stderr = _kill_mid_run(
        proc, tmp_path / "sem", ".sem", lambda: cluster.worker_process(0).kill()
    )
    assert code == 0, stderr
    assert _files(tmp_path / "sem") == reference  # every file once, as one machine wrote it
    per_file, summary = _report("enc.jsonl")
    assert sorted(x["input"] for x in per_file) == names
    assert all(x["status"] == "ok" for x in per_file)
    assert (summary["ok"], summary["failed"], summary["interrupted"]) == (N_FILES, 0, False)
    assert len(stdout.splitlines()) == N_FILES

    # decode: the other worker is killed mid-run (the first one's nanny has restarted it)
    proc = _batch("decode", *sems, "-d", "dec", "--report", "dec.jsonl",
                  "--cluster", cluster.address)  # fmt: skip
    code, _, stderr = _kill_mid_run(
        proc, tmp_path / "dec", ".png", lambda: cluster.worker_process(1).kill()
    )
    assert code == 0, stderr
    assert _files(tmp_path / "dec") == _files(tmp_path / "refdec")
    per_file, summary = _report("dec.jsonl")
    assert sorted(x["input"] for x in per_file) == sems
    assert (summary["ok"], summary["failed"]) == (N_FILES, 0)

    # the scheduler dies mid-run: one line, no partial file
    args = ["encode", *names, "-d", "again", *TINY, "--skip-existing", "--report", "again.jsonl"]
    proc = _batch(*args, "--cluster", cluster.address)
    code, _, stderr = _kill_mid_run(
        proc, tmp_path / "again", ".sem", lambda: cluster.scheduler.send_signal(signal.SIGKILL)
    )
    assert code == 1
    assert stderr.splitlines() == [
        f"semcodec: error: lost the connection to the scheduler at {cluster.address}; the files "
        "written so far are complete: rerun with --skip-existing to finish"
    ]
    partial = _files(tmp_path / "again")
    assert partial and all(reference[k] == v for k, v in partial.items())  # no temporary file
    per_file, summary = _report("again.jsonl")
    assert summary["interrupted"] and all(x["status"] == "ok" for x in per_file)

    # a new scheduler: the rerun finishes the rest
    fresh = clusters(1)
    proc = _batch(*args, "--cluster", fresh.address)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr.decode()
    assert _files(tmp_path / "again") == reference
    per_file, summary = _report("again.jsonl")
    assert (summary["skipped"], summary["ok"]) == (len(partial), N_FILES - len(partial))
