"""Shared fixtures."""

from __future__ import annotations

import pytest
import torch


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
