"""The batch engine without the command line: one frozen configuration, a sink that records
what a front end would show, outputs written and reported as the CLI's are."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from semcodec.batch.outcome import Outcome, guarded
from semcodec.batch.plan import WriteRules
from semcodec.batch.run import BatchConfig, run_batch


@dataclass
class Recorder:
    """A front end that keeps every call instead of drawing anything."""

    failed: list[tuple[str, str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    steps: int = 0

    def fail(self, name: str, message: str, trace: str = "") -> None:
        self.failed.append((name, message))

    def warn(self, name: str, message: str) -> None:
        self.lines.append(f"warning {name}: {message}")

    def line(self, text: str) -> None:
        self.lines.append(text)

    def step(self) -> None:
        self.steps += 1

    def tiles(self, stage: str, done: int, total: int) -> None:
        pass


def _upper(path: str) -> Outcome:
    """The work per input: its bytes upper-cased; a name with 'bad' fails."""
    if "bad" in path:
        raise ValueError("cannot read this one")
    return Outcome(True, Path(path).read_bytes().upper(), info={"width": 2, "height": 2})


def _config(tmp_path: Path, names: list[str], **kwargs) -> BatchConfig:
    """A batch over ``names`` in tmp_path, outputs beside them as .out."""
    inputs = tuple(str(tmp_path / n) for n in names)
    return BatchConfig(
        inputs,
        tuple(str(Path(i).with_suffix(".out")) for i in inputs),
        lambda inp, _stdin: inp,
        lambda task: guarded(_upper, task),
        lambda name, out, o: f"{name} -> {out}: {len(o.data)} bytes",
        report=str(tmp_path / "report.jsonl"),
        command="upper",
        **kwargs,
    )


def test_the_engine_writes_reports_and_refuses_without_click(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt", "bad.txt"):
        (tmp_path / name).write_bytes(b"abcd")
    (tmp_path / "b.out").write_bytes(b"someone's")  # exists: refused without --force
    sink = Recorder()
    run_batch(_config(tmp_path, ["a.txt", "b.txt", "bad.txt"]), sink)
    assert (tmp_path / "a.out").read_bytes() == b"ABCD"
    assert (tmp_path / "b.out").read_bytes() == b"someone's"
    assert not (tmp_path / "bad.out").exists()
    assert sink.steps == 3
    assert sink.lines == [f"{tmp_path / 'a.txt'} -> {tmp_path / 'a.out'}: 4 bytes"]
    assert [m for _, m in sink.failed] == [
        f"cannot write {str(tmp_path / 'b.out')!r}: file exists; name another output with -o, "
        "or a folder with -d",
        "cannot read this one",
    ]
    records = [json.loads(x) for x in (tmp_path / "report.jsonl").read_text().splitlines()]
    assert [(r["type"], r.get("status")) for r in records] == [
        ("file", "failed"),  # planning refuses b before any work
        ("file", "ok"),
        ("file", "failed"),
        ("summary", None),
    ]
    assert records[1]["bytes"] == 4 and records[1]["bpp"] == 8.0
    assert records[-1]["ok"] == 1 and records[-1]["failed"] == 2
    assert records[-1]["interrupted"] is False


def test_force_replaces_what_it_refused(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_bytes(b"xy")
    (tmp_path / "b.out").write_bytes(b"old")
    sink = Recorder()
    run_batch(_config(tmp_path, ["b.txt"], rules=WriteRules(force=True)), sink)
    assert (tmp_path / "b.out").read_bytes() == b"XY" and not sink.failed
