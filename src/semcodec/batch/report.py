"""The batch report: one JSON object per input and a summary, as JSON Lines (docs/batch.md).

Each line is written and flushed as its file is settled, so an interrupted batch leaves a
report of what it did, ended by a summary that says it was interrupted.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from semcodec.batch.outcome import Outcome
from semcodec.batch.stdio import STDIO
from semcodec.batch.verify import Existing

SCHEMA = "semcodec-batch/1"
STATUSES = ("ok", "skipped", "failed")


@dataclass
class FileRecord:
    """What the batch did with one input."""

    input: str
    output: str | None
    status: str
    reason: str | None = None  # of "skipped": "exists" or "written by another process"
    bytes: int | None = None
    width: int | None = None
    height: int | None = None
    bpp: float | None = None
    layers: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None

    def line(self) -> dict[str, Any]:
        """The JSON object of this record."""
        return {"type": "file", **asdict(self)}


def bits_per_pixel(size: int | None, width: int | None, height: int | None) -> float | None:
    """Bits per pixel of a file of ``size`` bytes for a width x height image, if known."""
    if size is None or not width or not height:
        return None
    return round(8 * size / (width * height), 6)


def file_record(name: str, out: str, outcome: Outcome) -> FileRecord:
    """The record of a processed input."""
    if not outcome.ok:
        return FileRecord(
            name, out, "failed", seconds=round(outcome.seconds, 6), error=outcome.error
        )
    w, h = outcome.info.get("width"), outcome.info.get("height")
    size = len(outcome.data)
    return FileRecord(
        name,
        out,
        "ok",
        bytes=size,
        width=w,
        height=h,
        bpp=bits_per_pixel(size, w, h),
        layers=dict(outcome.info.get("layers", {})),
        seconds=round(outcome.seconds, 6),
    )


def skipped_record(name: str, out: str, found: Existing, seconds: float, reason: str) -> FileRecord:
    """The record of an input whose output ``out`` was found valid (``found``)."""
    return FileRecord(
        name,
        out,
        "skipped",
        reason=reason,
        bytes=found.bytes,
        width=found.width,
        height=found.height,
        bpp=bits_per_pixel(found.bytes, found.width, found.height),
        layers=dict(found.layers),
        seconds=round(seconds, 6),
    )


class Report:
    """Counts every input's status and, when asked, writes the JSON Lines report."""

    def __init__(self, target: str | None, command: str, total: int) -> None:
        self.command = command
        self.total = total
        self.counts = dict.fromkeys(STATUSES, 0)
        self.bytes = 0
        self.started = time.perf_counter()
        self.stream: TextIO | None = None
        self.owned = False
        if target == STDIO:
            self.stream = sys.stdout
        elif target is not None:
            self.stream = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self.owned = True

    def add(self, record: FileRecord) -> None:
        """Count one settled input and write its line."""
        self.counts[record.status] += 1
        if record.status != "failed" and record.bytes is not None:
            self.bytes += record.bytes
        self._write(record.line())

    def close(self, interrupted: bool = False, error: str | None = None) -> None:
        """Write the summary (``error``: the one line that ended the batch) and close the file."""
        seconds = time.perf_counter() - self.started
        done = self.counts["ok"]
        self._write(
            {
                "type": "summary",
                "schema": SCHEMA,
                "command": self.command,
                "inputs": self.total,
                **self.counts,
                "bytes": self.bytes,
                "seconds": round(seconds, 3),
                "images_per_second": round(done / seconds, 3) if seconds > 0 else None,
                "interrupted": interrupted,
                "error": error,
            }
        )
        if self.owned and self.stream is not None:
            self.stream.close()
        self.stream = None

    def _write(self, obj: dict[str, Any]) -> None:
        """One line, flushed at once."""
        if self.stream is not None:
            self.stream.write(json.dumps(obj, separators=(",", ":")) + "\n")
            self.stream.flush()
