"""The quick tier's markers hold: conftest.py's guard makes a test that starts a Python child
without the ``subprocess`` marker error, and ``-m "not slow and not subprocess"`` (make
test-fast) leaves the marked ones out. Run on a small suite of its own (pytester)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.subprocess  # the small suite's tests start Python children

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

SUITE = f"""
import subprocess
import pytest

def test_unmarked_child():
    subprocess.run([{sys.executable!r}, "-c", "pass"], check=True)

@pytest.mark.subprocess
def test_marked_child():
    subprocess.run([{sys.executable!r}, "-c", "pass"], check=True)

@pytest.mark.slow
def test_slow():
    pass

def test_plain():
    subprocess.run(["true"], check=True)  # not Python: no marker needed
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """This suite's conftest and markers beside a test file of four cases."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini(
        "[pytest]\nmarkers =\n    slow: s\n    subprocess: p\naddopts = --strict-markers\n"
    )
    pytester.makepyfile(test_cases=SUITE)
    return pytester


def test_an_unmarked_test_that_starts_python_errors(suite: pytest.Pytester) -> None:
    """The child runs, the test passes, and its teardown errors naming the marker to add."""
    result = suite.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, errors=1)
    result.stdout.fnmatch_lines(["*test_unmarked_child*mark it @pytest.mark.subprocess*"])


def test_the_quick_tier_leaves_the_marked_tests_out(suite: pytest.Pytester) -> None:
    """``make test-fast``'s selection: the unmarked tests only (the guard still errors)."""
    result = suite.runpytest("-p", "no:cacheprovider", "-m", "not slow and not subprocess")
    result.assert_outcomes(passed=2, errors=1, deselected=2)
