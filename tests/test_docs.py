"""The README's Python example runs as written (on a photo the test makes)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

README = Path(__file__).resolve().parent.parent / "README.md"

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _python_blocks(text: str) -> list[str]:
    """The fenced ```python blocks of a Markdown text."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snippet that breaks (a name that moved, a class id past CLASSES) fails here."""
    blocks = _python_blocks(README.read_text())
    assert blocks, "README.md has no python block"
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save("photo.png")
    for block in blocks:
        scope: dict[str, object] = {}
        exec(compile(block, str(README), "exec"), scope)  # noqa: S102 - the README's own code
    assert isinstance(scope["names"], list) and scope["names"]
    assert scope["img"].size == (64, 48)
