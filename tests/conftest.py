"""Shared fixtures."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
import sys

import pytest
import torch
from testbundles import register_test_bundles

# the random test bundles ("tiny", "tiny-enh"): in this process, and through childsite's
# sitecustomize.py in every Python child the tests start (they inherit this PYTHONPATH)
register_test_bundles()
_CHILDSITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "childsite")
if _CHILDSITE not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (_CHILDSITE, os.environ.get("PYTHONPATH")) if p
    )


@pytest.fixture(scope="module")
def one_thread():
    """Two loaded cores: one torch thread is several times faster than two contending ones."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


_SUMMARY_LINES = pytest.StashKey[list]()


@pytest.fixture
def summary_line(request):
    """Adds a line to the end of the run's output (what a test did, e.g. how many doc blocks ran)."""

    def add(text: str) -> None:
        request.config.stash.setdefault(_SUMMARY_LINES, []).append(text)

    return add


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Print the lines tests added with ``summary_line``."""
    for line in config.stash.get(_SUMMARY_LINES, []):
        terminalreporter.write_line(line)


def _starts_python(args: object) -> bool:
    """Whether a command line runs Python (this interpreter, another one, or semcodec)."""
    first = args if isinstance(args, (str, bytes, os.PathLike)) else next(iter(args), "")
    program = (
        os.fsdecode(first).split()[0] if isinstance(first, (str, bytes)) else os.fsdecode(first)
    )
    name = os.path.basename(program)
    return os.path.realpath(program) == os.path.realpath(sys.executable) or (
        name.startswith("python") or name == "semcodec"
    )


@pytest.fixture(autouse=True)
def _children_only_where_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A test that starts Python children (a subprocess, a worker pool, a cluster) is marked
    ``subprocess``, so ``make test-fast``, which leaves those out, never pays their start-up:
    an unmarked test that starts one errors at its teardown (the test itself runs as is)."""
    if request.node.get_closest_marker("subprocess"):
        yield
        return
    started: list[str] = []
    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def popen(self, args, *rest, **kwargs):
        if _starts_python(args):
            started.append(f"a Python child ({args!r:.80})")
        return popen_init(self, args, *rest, **kwargs)

    def start(self) -> None:
        started.append(f"a worker process ({type(self).__name__})")
        return process_start(self)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    yield
    if started:
        pytest.fail(f"{request.node.nodeid} starts {started[0]}: mark it @pytest.mark.subprocess")
