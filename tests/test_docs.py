"""The docs run: every ```sh and ```python block of README.md and docs/*.md that can run offline
runs here, on small photos the test makes under the names the docs use.

Each shell command (and each Python block) runs alone in a fresh folder holding the test's files
whose names it mentions, so examples that each start from the same photo do not collide (``encode
photo.png`` and ``decode photo.sem`` both write ``photo.*``). A plain ``semcodec ...`` command runs
in this process through the command line's own entry point (the arguments split as a shell does,
globs expanded); a command with a pipe or a redirection runs in bash with ``semcodec`` on PATH.
What cannot run here is skipped by a visible rule: a ``<!-- docs-test: skip (why) -->`` line
just before a block, or one of SKIP_RULES below for a command. The summary line at the end of
the test run says how many ran and why the rest did not.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from childproc import child_env
from click.testing import CliRunner
from PIL import Image

import semcodec
from semcodec.cli import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"sh", "bash", "shell"}
SKIP_MARK = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<why>[^)]+)\)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.S | re.M)
# commands that cannot run here, each with the reason the summary gives
SKIP_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\.\./shared/"), "reads the data sets in ../shared"),
    (
        re.compile(r"^(semcodec (train|eval|bench)|torchrun) "),
        "training, evaluation or benchmarks (hours, the data sets)",
    ),
    (re.compile(r"tcp://|^dask "), "needs a Dask scheduler and workers"),
    (re.compile(r"--cluster local:"), "starts a Dask cluster (tests/test_cluster.py runs one)"),
    (re.compile(r"^make "), "sets up a virtual environment ('make test' is this suite)"),
    (re.compile(r"^git "), "needs the network"),
]
SHELL_SYNTAX = re.compile(r"[|<>;&$`]")  # a command bash must run (so must any but semcodec)
ARROW = re.compile(r"# → (?P<name>[\w./-]+?)[:,]?(\s|$)")  # '# → photo.sem': what it writes

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


@dataclass(frozen=True)
class Block:
    """One fenced block of a document."""

    doc: Path
    line: int  # of its opening fence
    lang: str
    body: str
    skip: str | None  # the reason of a skip marker just above it

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks_of(doc: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the skip marker on the line above each."""
    text = doc.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = SKIP_MARK.search(before)
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(doc, line, m["lang"], m["body"], mark["why"] if mark else None))
    return out


def commands_of(body: str) -> list[str]:
    """A shell block's commands: continuation lines joined (a trailing '\\', '|' or '&&')."""
    commands, current = [], ""
    for raw in body.splitlines():
        line = raw.rstrip()
        if not current and (not line or line.lstrip().startswith("#")):
            continue
        current += line.lstrip() if current else line
        if current.endswith("\\"):
            current = current[:-1].rstrip() + " "
        elif current.endswith(("|", "&&")):
            current += " "
        else:
            commands.append(current)
            current = ""
    assert not current, f"a block ends inside a command: {current!r}"
    return commands


def skip_reason(command: str) -> str | None:
    """The SKIP_RULES reason that applies to a command, if any."""
    for pattern, why in SKIP_RULES:
        if pattern.search(command):
            return why
    return None


#: commands the docs pipe into that need not be installed where the tests run
PIPE_COMMANDS = {"semcodec", "dask", "torchrun", "nvidia-smi", "jq"}


def not_piped_commands(command: str) -> list[str]:
    """The words after a '|' that are no command: alternatives written as `a | b` (``train seg
    | train codec``) that, pasted, would pipe one command into a name that does not exist."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    words = list(lexer)
    bad = []
    for pipe, word in zip(words, words[1:], strict=False):
        if pipe in ("|", "|&") and word not in PIPE_COMMANDS and shutil.which(word) is None:
            bad.append(word)
    return bad


# ----- the files the docs name ------------------------------------------------------------------
def _photo(seed: int, h: int = 48, w: int = 64) -> Image.Image:
    """A small photo-like picture: gradients, a block and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 3 + 40, y * 4 + seed * 20, (x + y) * 2], -1).astype(np.int16)
    a[12:30, 18:40] = rng.integers(0, 256, 3)
    a += rng.integers(-8, 9, a.shape).astype(np.int16)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def make_fixtures(folder: Path) -> Path:
    """Every input the docs' examples name, made here (tests never read ../shared)."""
    folder.mkdir()
    photo, street = _photo(0), _photo(1)
    photo.save(folder / "photo.png")
    photo.save(folder / "photo.jpg", quality=90)
    _photo(2).save(folder / "in.png")
    street.save(folder / "street.png")
    for sub, seed in (("a", 3), ("b", 4)):
        (folder / "frames" / sub).mkdir(parents=True)
        _photo(seed, 32, 40).save(folder / "frames" / sub / "0001.png")
    (folder / "frames.txt").write_text("frames/a/0001.png\nframes/b/0001.png\n")
    (folder / "photo.sem").write_bytes(semcodec.encode(photo))
    (folder / "street.sem").write_bytes(semcodec.encode(street, roi="pedestrian"))
    return folder


def named_files(text: str, fixtures: Path) -> list[str]:
    """The fixture files and folders a command or block mentions (globs included)."""
    names = sorted(p.name for p in fixtures.iterdir())
    words = set(re.findall(r"[\w*?./-]+", text))
    found = set()
    for word in words:
        word = word.rstrip("/")
        if any(c in word for c in "*?"):
            found.update(fnmatch.filter(names, word))
        elif word in names:
            found.add(word)
    return sorted(found)


#: the user's own pictures: in every folder a command runs in, named or not, and never changed
ORIGINALS = ("photo.png", "photo.jpg", "in.png", "street.png")


def changed_originals(folder: Path, fixtures: Path) -> list[str]:
    """The originals a command replaced, changed or removed."""
    return [
        name
        for name in ORIGINALS
        if not (folder / name).is_file()
        or (folder / name).read_bytes() != (fixtures / name).read_bytes()
    ]


def fresh_folder(base: Path, n: int, text: str, fixtures: Path) -> Path:
    """A new folder holding the originals, as a user's folder does (``decode photo.sem`` runs
    beside ``photo.png``), and the other fixture files ``text`` names."""
    folder = base / f"run{n:03d}"
    folder.mkdir()
    for name in sorted({*ORIGINALS, *named_files(text, fixtures)}):
        src = fixtures / name
        if src.is_dir():
            shutil.copytree(src, folder / name)
        else:
            shutil.copy2(src, folder / name)
    return folder


# ----- running ----------------------------------------------------------------------------------
def run_in_process(command: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """A plain ``semcodec ARGS`` command through the CLI's entry point, globs expanded."""
    monkeypatch.chdir(folder)
    args = []
    for word in shlex.split(command, comments=True)[1:]:
        matches = sorted(glob.glob(word)) if any(c in word for c in "*?[") else []
        args.extend(matches or [word])
    result = CliRunner().invoke(cli, args, prog_name="semcodec", catch_exceptions=False)
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def semcodec_on_path(bin_dir: Path) -> dict[str, str]:
    """An environment whose ``semcodec`` is this Python's, with this checkout's package."""
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "semcodec"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m semcodec.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = child_env()  # one thread: two loaded cores
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_in_bash(command: str, folder: Path, env: dict[str, str]) -> tuple[int, str]:
    """A command with shell syntax (pipes, redirections) as bash runs it."""
    r = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return r.returncode, r.stdout[-2000:] + r.stderr[-2000:]


def run_python(block: Block, folder: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """A Python block as written, in its own namespace; what went wrong, or None."""
    monkeypatch.chdir(folder)
    scope: dict[str, object] = {"__name__": "__docs__"}
    try:
        exec(compile(block.body, block.where, "exec"), scope)  # noqa: S102 - the docs' own code
    except Exception as exc:  # noqa: BLE001 - reported with the block's place
        return f"{type(exc).__name__}: {exc}"
    return None


def missing_outputs(command: str, folder: Path) -> list[str]:
    """What a command's comment says it writes ('# → photo.sem') and is not there."""
    return [m["name"] for m in ARROW.finditer(command) if not (folder / m["name"]).exists()]


# ----- the tests --------------------------------------------------------------------------------
def test_blocks_commands_markers_and_rules(tmp_path: Path) -> None:
    """The parser the docs test relies on: fences, skip markers, continuations, comments, rules."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "x\n<!-- docs-test: skip (signatures) -->\n```python\nf(x) -> y\n```\n\n"
        "```sh\n# a comment\nfind x -print0 |\n  semcodec encode a \\\n    -q 5   # note\n"
        "semcodec info a.sem\n```\n```json\n{}\n```\n"
    )
    python, shell, json_block = blocks_of(doc)
    assert (python.lang, python.skip, python.line) == ("python", "signatures", 3)
    assert (shell.lang, shell.skip, json_block.lang) == ("sh", None, "json")
    assert commands_of(shell.body) == [
        "find x -print0 | semcodec encode a -q 5   # note",
        "semcodec info a.sem",
    ]
    assert skip_reason("semcodec bench rd --images ../shared/data/kodak") == SKIP_RULES[0][1]
    assert skip_reason("semcodec train seg --out runs/x") == SKIP_RULES[1][1]
    assert skip_reason("semcodec encode photo.png") is None


def test_a_pipe_joins_commands_not_alternatives() -> None:
    """Every '|' in the docs' shell lines, skipped ones included, pipes into a command: a line
    of alternatives (``bench compare … | merge …``) is refused."""
    assert not_piped_commands("find . -print0 | semcodec encode --from-list - -0") == []
    assert not_piped_commands("semcodec train seg | train codec | train export") == [
        "train",
        "train",
    ]
    assert not_piped_commands("semcodec bench speed | bench large  # a | b") == ["bench"]
    assert not_piped_commands("a || b && c") == []
    found = []
    for doc in DOCS:
        for block in blocks_of(doc):
            if block.lang in SHELLS:
                found += [
                    f"{block.where}: {command!r} pipes into {word!r}"
                    for command in commands_of(block.body)
                    for word in not_piped_commands(command)
                ]
    assert not found, "\n".join(found)


@pytest.mark.slow
def test_the_readme_quick_commands_keep_the_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's first encode and decode, one after the other in the original's folder,
    both succeed and leave the original as it was (decode never writes photo.png)."""
    commands = [
        c for b in blocks_of(ROOT / "README.md") if b.lang in SHELLS for c in commands_of(b.body)
    ]
    encode = next(c for c in commands if c.startswith("semcodec encode photo.png "))
    decode = next(c for c in commands if c.startswith("semcodec decode photo.sem "))
    fixtures = make_fixtures(tmp_path / "fixtures")
    folder = tmp_path / "photos"
    folder.mkdir()
    shutil.copy2(fixtures / "photo.png", folder / "photo.png")
    for command in (encode, decode):
        code, output = run_in_process(command, folder, monkeypatch)
        assert code == 0, f"{command!r}: {output}"
        assert not missing_outputs(command, folder), command
    assert (folder / "photo.png").read_bytes() == (fixtures / "photo.png").read_bytes()
    monkeypatch.chdir(tmp_path)


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_docs_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, summary_line: Callable[[str], None]
) -> None:
    """Every runnable block of README.md and docs/*.md runs and succeeds; a snippet that breaks
    (a renamed option, a class id past CLASSES, a file it no longer writes) fails here."""
    fixtures = make_fixtures(tmp_path / "fixtures")
    env = semcodec_on_path(tmp_path / "bin")
    ran: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    failures: list[str] = []
    n = 0
    for doc in DOCS:
        for block in blocks_of(doc):
            if block.lang not in SHELLS and block.lang != "python":
                continue
            if block.skip:
                skipped[block.skip] += 1
                continue
            if block.lang == "python":
                n += 1
                folder = fresh_folder(tmp_path, n, block.body, fixtures)
                problem = run_python(block, folder, monkeypatch)
                if problem:
                    failures.append(f"{block.where}: python block raised {problem}")
                for name in changed_originals(folder, fixtures):
                    failures.append(f"{block.where}: a python block changed the original {name}")
                ran["python blocks"] += 1
                continue
            for command in commands_of(block.body):
                why = skip_reason(command)
                if why:
                    skipped[why] += 1
                    continue
                n += 1
                folder = fresh_folder(tmp_path, n, command.split("#", 1)[0], fixtures)
                plain = command.startswith("semcodec ")
                if not plain or SHELL_SYNTAX.search(command.split("#", 1)[0]):
                    code, output = run_in_bash(command, folder, env)
                    ran["commands in bash"] += 1
                else:
                    code, output = run_in_process(command, folder, monkeypatch)
                    ran["commands in process"] += 1
                if code != 0:
                    failures.append(f"{block.where}: {command!r} exited {code}: {output.strip()}")
                for name in changed_originals(folder, fixtures):
                    failures.append(f"{block.where}: {command!r} changed the original {name}")
                for name in missing_outputs(command, folder) if code == 0 else []:
                    failures.append(f"{block.where}: {command!r} did not write {name}")
    monkeypatch.chdir(tmp_path)
    assert not failures, "\n".join(failures)
    total_skipped = sum(skipped.values())
    why = "; ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))
    done = ", ".join(f"{v} {k}" for k, v in sorted(ran.items()))
    summary_line(f"docs: ran {done}; skipped {total_skipped} ({why})")
    assert ran["python blocks"] >= 2 and ran["commands in process"] >= 15, ran
    assert ran["commands in bash"] >= 3, ran
