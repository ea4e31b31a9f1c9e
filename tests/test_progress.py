"""The one progress bar (semcodec.progress) and its users: drawn on a terminal only, plain
training log lines elsewhere, and no torch behind ``semcodec --help``."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from semcodec.progress import Progress


class _Tty(io.StringIO):
    """A captured stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_bar_messages_and_close() -> None:
    tty, pipe = _Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress(3, file=stream)
        bar.advance(1, "first")
        bar.message("a warning")
        bar.advance(2)
        bar.close(keep=False)
    out = tty.getvalue()
    assert "1/3" in out and "first" in out and "3/3" in out and "a warning\n" in out
    assert out.endswith("\r\x1b[K")  # erased, not left behind
    assert pipe.getvalue() == "a warning\n"  # messages only, no bar


def test_training_log_lines_off_a_terminal(monkeypatch, capsys) -> None:
    from semcodec.progress import StepProgress

    prog = StepProgress(30, start=10, every=10)
    prog.update(15, 8, loss=0.5)  # not a reporting step
    prog.update(20, 8, loss=0.25, nan=float("nan"))
    prog.update(30, 16, loss=0.125)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[20/30] loss=0.25 ") and lines[0].endswith(" img/s")
    assert lines[1].startswith("[30/30] loss=0.125 ")


@pytest.mark.subprocess
def test_help_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from semcodec.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "bench" in r.stdout and "encode" in r.stdout


@pytest.mark.slow
def test_one_file_encode_says_its_stages_on_a_terminal_only(tmp_path, monkeypatch) -> None:
    """A single-file encode on a terminal shows which stage runs (the model's loading, the
    segmentation, the residual, ...) and erases the line at the end; in a pipe stderr stays
    empty."""
    import numpy as np
    from click.testing import CliRunner
    from PIL import Image

    import semcodec.progress
    from semcodec.cli import cli

    monkeypatch.chdir(tmp_path)
    Image.fromarray(np.full((48, 64, 3), 90, np.uint8)).save("a.png")
    args = ["encode", "a.png", "--model", "tiny", "--residual", "native", "--no-gating"]
    piped = CliRunner().invoke(cli, [*args, "-o", "piped.sem"])
    assert piped.exit_code == 0 and piped.stderr == ""
    monkeypatch.setattr(semcodec.progress, "is_terminal", lambda _stream: True)
    shown = CliRunner().invoke(cli, [*args, "-o", "shown.sem"])
    assert shown.exit_code == 0, shown.output
    err = shown.stderr
    for stage in ("loading the model", "segment", "compnet", "generator", "residual"):
        assert stage in err, (stage, err)
    assert err.index("loading the model") < err.index("segment") < err.index("residual")
    assert err.endswith("\r")  # erased (click drops the escape code off a real terminal)
    assert (tmp_path / "piped.sem").read_bytes() == (tmp_path / "shown.sem").read_bytes()
