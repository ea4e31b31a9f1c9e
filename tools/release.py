"""Release a bundle: its decoder parts, its conformance files and a model-card stub.

Writes, for the release '<name>-<hash8>' of a bundle (a registry name or a weights file):
``models/decoders/<release>.npz`` (what decoding its files needs, torch-free),
``tests/conformance/<release>/`` (small files and the hashes they decode to,
tests/conformance/make_files.py) and ``docs/releases/<release>.md`` (a card to complete), then
decodes the new conformance files with the new parts alone and checks their hashes. A
release's files are append-only (tests/conformance/README.md): if any of the three exists, it
writes nothing; if a step fails, it removes what it wrote.

    .venv/bin/python tools/release.py default [--date 2026-12-07] [--root .]
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from semcodec.errors import SemcodecError, describe_error, error_line

ROOT = Path(__file__).resolve().parent.parent


class ReleasePaths(NamedTuple):
    """The three things a release adds to the tree, in the order they are written."""

    parts: Path  # models/decoders/<release>.npz
    conformance: Path  # tests/conformance/<release>/
    card: Path  # docs/releases/<release>.md


def paths_of(root: Path, release: str) -> ReleasePaths:
    """Where a release's parts, conformance files and card go under a repository root."""
    return ReleasePaths(
        parts=root / "models" / "decoders" / f"{release}.npz",
        conformance=root / "tests" / "conformance" / release,
        card=root / "docs" / "releases" / f"{release}.md",
    )


def _make_files():
    """tests/conformance/make_files.py, which writes a release's conformance files."""
    sys.path.insert(0, str(ROOT / "tests" / "conformance"))
    try:
        import make_files
    finally:
        sys.path.pop(0)
    return make_files


def check_parts(parts_path: Path, folder: Path) -> int:
    """Decode every conformance file with the release's parts alone (no bundle) and compare
    the pixels with the recorded hashes; the number of files checked."""
    from semcodec.decoder.parts import load_parts
    from semcodec.decoder.pipeline import Decoder

    pixel_hash = _make_files().pixel_hash
    decoder = Decoder(load_parts(parts_path))
    record = json.loads((folder / "hashes.json").read_text())
    for name, want in record["files"].items():
        got = pixel_hash(decoder.decode((folder / name).read_bytes()).image)
        if got != want["full"]:
            raise SemcodecError(f"{name}: the decoder parts decode it to other pixels")
    return len(record["files"])


def card_stub(bundle, release: str, date: str, parts_path: Path, files: int) -> str:
    """A model card's facts the release knows, and headings for what its author adds."""
    spec = bundle.spec
    nets = f"segmentation `{spec.seg}`, CompNet `{spec.compnet}`, generator `{spec.generator}`"
    nets += f", enhancement `{spec.enhance}`" if bundle.enh_table is not None else ""
    return (
        f"# Release card: `{release}` (released {date})\n\n"
        f"Files this release writes keep decoding to the same pixels from its decoder parts "
        f"(`models/decoders/{release}.npz`, {parts_path.stat().st_size:,} bytes), checked by "
        f"its {files} conformance files (`tests/conformance/{release}/`); neither is ever "
        f"rewritten (tests/conformance/README.md).\n\n"
        f"## Model card: `{bundle.name}` (hash `{bundle.hash}`)\n\n"
        f"- Networks: {nets}; {bundle.levels} compact levels, {bundle.channels} channels, "
        f"{bundle.map_symbols} map symbols.\n"
        "- What changed against the previous release: (to write)\n"
        "- Training (data, steps, machine): (to write)\n"
        "- Measurements (docs/benchmarks.md): (to write)\n"
        "- Outside inputs and their licences: (to write)\n"
    )


def _remove(path: Path) -> None:
    """Take back one thing this run wrote."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def release(model: str, root: Path = ROOT, date: str | None = None) -> ReleasePaths:
    """Write a new release's parts, conformance files and card stub; nothing if any exists."""
    from semcodec.zoo.bundles import load_bundle, write_decoder_parts

    date = date or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    bundle = load_bundle(model)
    name = f"{bundle.name}-{bundle.hash[:8]}"
    paths = paths_of(root, name)
    there = [str(p.relative_to(root)) for p in paths if p.exists()]
    if there:
        raise SemcodecError(
            f"release {name} exists already ({', '.join(there)}): a release's files are "
            "never rewritten"
        )
    written: list[Path] = []
    try:
        written.append(paths.parts)
        write_decoder_parts(bundle, paths.parts.parent, date)
        written.append(paths.conformance)
        paths.conformance.parent.mkdir(parents=True, exist_ok=True)
        _make_files().main(model, root=paths.conformance.parent)
        files = check_parts(paths.parts, paths.conformance)
        paths.card.parent.mkdir(parents=True, exist_ok=True)
        written.append(paths.card)
        with open(paths.card, "x", encoding="utf-8") as f:
            f.write(card_stub(bundle, name, date, paths.parts, files))
    except BaseException:
        for path in reversed(written):
            _remove(path)
        raise
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    """Release the bundle named on the command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a registry name (e.g. default) or a weights file")
    ap.add_argument("--date", help="the release date, YYYY-MM-DD (default: today, UTC)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository to write into")
    args = ap.parse_args(argv)
    try:
        paths = release(args.model, args.root, args.date)
    except (SemcodecError, OSError, ValueError) as exc:
        print(error_line(describe_error(exc)), file=sys.stderr)
        sys.exit(1)
    for path in paths:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
