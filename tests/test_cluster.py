"""encode --cluster on a local Dask cluster of two worker processes: one worker is killed
mid-run, and every file is still produced once, identical to a one-machine run, with a complete
report. And an address that is no scheduler (loopback only: a refused port, a local HTTP
server) ends the command within --cluster-timeout, in one line."""

from __future__ import annotations

import contextlib
import http.server
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from childproc import child_env
from click.testing import CliRunner
from PIL import Image

from semcodec.cli import cli

psutil = pytest.importorskip("psutil")
pytest.importorskip("distributed")

TINY = ["--model", "tiny", "--residual", "native", "--no-gating", "-q", "30"]
N_FILES = 16

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _write_images(folder: Path) -> list[str]:
    """N_FILES images of 192x144 (about 0.1 s each with tiny) in two sub-folders."""
    names = [f"{d}/f{i:02d}.png" for d in "pq" for i in range(N_FILES // 2)]
    for seed, name in enumerate(names):
        rng = np.random.default_rng(seed)
        y, x = np.mgrid[0:144, 0:192]
        a = np.stack([x + seed * 9, y * 2, x + y], -1) % 256 + rng.integers(-8, 9, (144, 192, 3))
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(folder / name)
    return names


def _files(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder``, hidden temporary files included."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _workers(pid: int) -> list[psutil.Process]:
    """The Dask worker processes a command started: spawned children, or the children of its
    fork server."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            line = " ".join(child.cmdline())
            forked = "forkserver" in line and child.ppid() != pid
            if "spawn_main" in line or forked:
                found.append(child)
        except psutil.Error:  # ended meanwhile
            pass
    return found


@pytest.mark.subprocess
@pytest.mark.slow
def test_killed_cluster_worker_loses_and_duplicates_nothing(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = _write_images(tmp_path)
    for folder in ("ref", "out"):
        (tmp_path / folder).mkdir()
    r = CliRunner().invoke(cli, ["encode", *names, "-d", "ref", "--keep-tree", *TINY])
    assert r.exit_code == 0, r.output
    reference = _files(tmp_path / "ref")
    cmd = [sys.executable, "-m", "semcodec.cli", "encode", *names, "-d", "out", "--keep-tree",
           "--cluster", "local:2", "--report", "rep.jsonl", *TINY]  # fmt: skip
    env = child_env(threads=None)  # the workers thread as the command sets them
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "out").rglob("*.sem")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no output in time"
            time.sleep(0.01)
        workers = _workers(proc.pid)
        assert len(workers) == 2
        workers[0].send_signal(signal.SIGKILL)
        done_at_kill = len(list((tmp_path / "out").rglob("*.sem")))
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert done_at_kill < N_FILES, "the worker must be killed mid-run"
    assert proc.returncode == 0, err.decode()
    assert _files(tmp_path / "out") == reference  # every file once, as one machine wrote it
    lines = [json.loads(x) for x in (tmp_path / "rep.jsonl").read_text().splitlines()]
    *per_file, summary = lines
    assert sorted(x["input"] for x in per_file) == sorted(names)
    assert all(x["status"] == "ok" for x in per_file)
    assert (summary["ok"], summary["failed"], summary["inputs"]) == (N_FILES, 0, N_FILES)
    assert len(out.decode().splitlines()) == N_FILES


@contextlib.contextmanager
def _refused_port() -> Iterator[int]:
    """A loopback port that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield port


@contextlib.contextmanager
def _silent_port() -> Iterator[int]:
    """A loopback port that takes the connection and never says a word."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        yield s.getsockname()[1]


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        """No request lines in the test's output."""


@contextlib.contextmanager
def _http_server() -> Iterator[int]:
    """A loopback HTTP server: something that answers, but not as a Dask scheduler."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize(
    "peer", [_refused_port, _silent_port, _http_server], ids=["refused", "silent", "http"]
)
def test_an_address_that_is_no_scheduler_fails_fast_in_one_line(tmp_path: Path, peer):
    """Refused, silent, or answered by something else: one error line, exit 1, within the timeout,
    no traceback, no output, and the report's summary says why (a hang fails here)."""
    Image.fromarray(np.zeros((32, 48, 3), np.uint8)).save(tmp_path / "a.png")
    with peer() as port:
        address = f"tcp://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "semcodec.cli", "encode", "a.png", *TINY, "--cluster",
               address, "--cluster-timeout", "2", "--report", "rep.jsonl"]  # fmt: skip
        started = time.monotonic()
        r = subprocess.run(
            cmd, cwd=tmp_path, capture_output=True, text=True, env=child_env(), timeout=60
        )
        seconds = time.monotonic() - started
    lines = r.stderr.splitlines()
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"semcodec: error: cannot reach the scheduler at {address}: ")
    assert seconds < 40, seconds  # Python and Dask's imports, then at most about 2 + 1 s
    assert not (tmp_path / "a.sem").exists()
    summary = json.loads((tmp_path / "rep.jsonl").read_text().splitlines()[-1])
    assert summary["type"] == "summary" and summary["interrupted"]
    assert summary["error"] == lines[0].removeprefix("semcodec: error: ")
