"""The one progress bar (semcodec.progress) and its users: drawn on a terminal only, plain
training log lines elsewhere, and no torch behind ``semcodec --help``."""

from __future__ import annotations

import io
import subprocess
import sys

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
    from semcodec.train.common import Progress as TrainProgress

    prog = TrainProgress(30, start=10, every=10)
    prog.update(15, 8, loss=0.5)  # not a reporting step
    prog.update(20, 8, loss=0.25, nan=float("nan"))
    prog.update(30, 16, loss=0.125)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[20/30] loss=0.25 ") and lines[0].endswith(" img/s")
    assert lines[1].startswith("[30/30] loss=0.125 ")


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
