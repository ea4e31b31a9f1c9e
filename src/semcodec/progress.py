"""One progress bar for the command line, the benchmarks and training: click's, drawn in place on
a terminal only, so pipes and log files stay clean; training's steps report through it
(``StepProgress``)."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

import click

_ERASE = "\x1b[K"  # erase to the end of the line


def is_terminal(stream: Any) -> bool:
    """Whether a stream is a terminal (a stream without isatty, or a closed one, is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """click.progressbar's bar, position, ETA and a detail text, redrawn in place on a terminal.

    Elsewhere (a pipe, a log file, ``enabled=False``) nothing is drawn; ``message`` lines are
    printed either way.
    """

    def __init__(
        self,
        total: int,
        *,
        enabled: bool = True,
        file: TextIO | None = None,
        show_eta: bool = True,
    ) -> None:
        self.file = file if file is not None else sys.stderr
        self.enabled = enabled and is_terminal(self.file)
        self.detail = ""
        self.shown = False
        self._bar = click.progressbar(
            length=max(1, total),
            file=self.file,
            show_pos=True,
            show_percent=True,
            show_eta=show_eta,
            item_show_func=lambda _item: self.detail or None,
            bar_template="[%(bar)s] %(info)s",
            fill_char="#",
            empty_char="-",
            width=30,
        )

    @property
    def done(self) -> int:
        """Steps done so far."""
        return self._bar.pos

    def draw(self) -> None:
        """Redraw the bar in place (on a terminal, when enabled)."""
        if self.enabled:
            line = self._bar.format_progress_line()
            click.echo(f"\r{line}{_ERASE}", file=self.file, nl=False)
            self.shown = True

    def advance(self, steps: int = 1, detail: str = "") -> None:
        """Count ``steps`` more done, show ``detail`` beside the bar, redraw."""
        self.detail = detail
        self._bar.make_step(steps)
        self.draw()

    def move_to(self, position: int, detail: str = "") -> None:
        """Set the position (e.g. a training step, which may start above 0), redraw."""
        self.advance(position - self._bar.pos, detail)

    def clear(self) -> None:
        """Erase the bar so a message can take its line; the next draw brings it back."""
        if self.shown:
            click.echo(f"\r{_ERASE}", file=self.file, nl=False)

    def message(self, text: str) -> None:
        """Print a line without garbling the bar (printed on a pipe too), then redraw."""
        self.clear()
        click.echo(text, file=self.file)
        if self.shown:
            self.draw()

    def close(self, keep: bool = True) -> None:
        """End the bar's line: keep the final bar (newline) or erase it."""
        if not self.shown:
            return
        if keep:
            click.echo(file=self.file)
        else:
            self.clear()
        self.shown = False


class StepProgress:
    """Training steps: the bar on a terminal, else one plain log line per report."""

    def __init__(self, total: int, start: int = 0, every: int = 10, enabled: bool = True):
        self.total, self.start, self.every, self.enabled = total, start, every, enabled
        self.t0 = time.time()
        self.bar = Progress(total, enabled=enabled, show_eta=False)
        self.tty = self.bar.enabled
        if self.tty:
            self.bar.move_to(start)

    def update(self, step: int, items: int, **fields: float) -> None:
        """Show step, fields and throughput (log lines read ``[step/total] k=v ... N img/s``)."""
        if not self.enabled or (step % self.every and step != self.total):
            return
        dt = max(1e-9, time.time() - self.t0)
        rate = items / dt
        txt = " ".join(f"{k}={v:.4g}" for k, v in fields.items() if not math.isnan(v))
        if self.tty:
            self.bar.move_to(step, f"{txt} {rate:.2f} img/s"[:160])
            if step == self.total:
                self.bar.close()
            return
        sys.stderr.write(f"[{step}/{self.total}] {txt} {rate:.2f} img/s\n")
        sys.stderr.flush()
