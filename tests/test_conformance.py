"""Conformance: stored .sem files of every shipped model decode to recorded pixel hashes.

Each file is decoded in fresh processes with oneDNN's and ATen's kernels at their best, capped
at AVX2 and at SSE4.1 (ATen without vector extensions), with 1 and 2 threads (the shipped
default's 2-megapixel file with 2 threads only; every release's in this process): the decoder's
arithmetic is exact (integer generator, integer entropy coders, AV1's integer decoder), so
every run must reproduce the hashes that were recorded when the files were written
(tests/conformance/make_files.py). docs/format.md says what a conforming decoder reproduces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

HERE = Path(__file__).resolve().parent / "conformance"
#: every release's folder of files and its record ('<model>-<hash8>/')
FOLDERS = sorted(p.parent for p in HERE.glob("*/hashes.json"))
RECORDS = {d: json.loads((d / "hashes.json").read_text()) for d in FOLDERS}

SCRIPT = r"""
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(int(sys.argv[1]))
sys.path.insert(0, sys.argv[2])
from make_files import pixel_hash
from semcodec.format import container
from semcodec.decoder.pipeline import Decoder
from semcodec.decoder.parts import find_parts
decoders = {}
out = {"isa": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
       "files": {}}
for path in sorted(Path(sys.argv[2]).glob("**/*.sem")):
    name = path.relative_to(sys.argv[2]).as_posix()
    if name in sys.argv[3:]:
        continue
    data = path.read_bytes()
    h = container.read_header(data).model_hash
    if h not in decoders:  # one decoder per release, found by the hash the file records
        decoders[h] = Decoder(find_parts(h))  # torch is imported: torch's integer generator
    res = decoders[h].decode(data, keep_base=True)  # one decode, both layers
    # the base layer before the residual and the enhancement (even at quality 0, where a
    # file may carry an ENHANCE layer for its base)
    from PIL import Image
    base = Image.fromarray(res.base, "RGB")
    if res.header.mode == "L":
        base = base.convert("L")
    elif res.header.mode == "RGBA":
        base.putalpha(res.image.getchannel("A"))
    out["files"][name] = {"full": pixel_hash(res.image), "base": pixel_hash(base)}
print(json.dumps(out))
"""

#: the 2-megapixel tiled file of each release: every release's is decoded in this process (both
#: layers, torch's kernel), the shipped default's also by the 2-thread run of every ISA; the
#: 1-thread runs decode the small files only. The kernels and the tiling are one code path for
#: every release, and one large file costs 20-40 s at SSE4.1 (the suite has 10 minutes on a
#: 2-core machine: with all of them, the 2-thread SSE4.1 run alone took 3 minutes)
LARGE = ("tiled-base.sem",)


def default_folder() -> Path:
    """The shipped default's folder of files (its weights file's name without '.pt')."""
    from semcodec.defaults import DEFAULT_MODEL
    from semcodec.zoo.registry import REGISTRY

    return HERE / Path(REGISTRY[DEFAULT_MODEL].weights).stem


def large_files_left_out(threads: int) -> tuple[str, ...]:
    """Paths under HERE of the large files a run leaves out: all of them on one thread, all
    but the default's on two."""
    keep = default_folder() if threads == 2 else None
    return tuple(
        (d / name).relative_to(HERE).as_posix()
        for d in FOLDERS
        for name in LARGE
        if (d / name).exists() and d != keep
    )


RUNS = [  # threads, environment
    (1, {}),
    (2, {}),
    (1, {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}),
    (2, {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}),
    (1, {"ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"}),
    (2, {"ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"}),
]


def all_recorded(leave_out: tuple[str, ...] = ()) -> dict[str, dict]:
    """Every recorded file by its path under HERE, with its hashes (less the paths named)."""
    every = {
        (d / name).relative_to(HERE).as_posix(): want
        for d, record in RECORDS.items()
        for name, want in record["files"].items()
    }
    return {path: want for path, want in every.items() if path not in leave_out}


def test_every_shipped_model_has_conformance_files_of_its_weights():
    """A model change that alters decoding must come with a new model name/hash and new files."""
    from semcodec.zoo.bundles import REGISTRY, load_bundle

    recorded = {(r["model"], r["model_hash"]) for r in RECORDS.values()}
    for name, spec in REGISTRY.items():
        if spec.weights is None:
            continue
        b = load_bundle(name)
        assert (b.name, b.hash) in recorded, (
            f"the shipped model {b.name!r} changed: write new conformance files "
            f"(python tests/conformance/make_files.py {b.name}) for the new model hash"
        )
    for d, record in RECORDS.items():
        assert d.name == f"{record['model']}-{record['model_hash'][:8]}"
        assert sorted(p.name for p in d.glob("*.sem")) == sorted(record["files"])


def test_the_default_releases_files_hold_every_avif_residual_version_it_writes():
    """Every form the encoder may write of the AVIF residual (versions 2 to 4: bare, compact,
    terse) is in a conformance file, so none can stop decoding unnoticed."""
    from semcodec.format import container

    versions = set()
    for path in default_folder().glob("*.sem"):
        header, layers = container.unpack(path.read_bytes())
        residual = layers.get(container.LayerKind.RESIDUAL, b"")
        if header.residual_backend == 2 and residual:
            versions.add(residual[0])
    assert {2, 3, 4} <= versions, sorted(versions)


@pytest.mark.slow
def test_every_release_with_files_keeps_its_decoder_parts_installed():
    """Files written by any release decode after newer releases ship: its parts stay."""
    from semcodec.decoder.parts import find_parts, installed_release_meta

    for record in RECORDS.values():
        parts = find_parts(record["model_hash"])
        assert parts is not None, f"decoder parts of {record['model']} {record['model_hash']}"
        assert parts.name == record["model"] and parts.generator is not None
        assert parts.released, "an installed release has a date"
    installed = {m["hash"] for m in installed_release_meta()}
    assert installed >= {r["model_hash"] for r in RECORDS.values()}


def test_installed_parts_equal_the_shipped_bundles_they_came_from():
    """A bundle and its parts file cannot drift apart: same table, same integer generator."""
    import numpy as np

    from semcodec.decoder.parts import find_parts
    from semcodec.zoo.bundles import REGISTRY, decoder_parts, load_bundle

    for name, spec in REGISTRY.items():
        if spec.weights is None:
            continue
        b = load_bundle(name)
        installed, derived = find_parts(b.hash), decoder_parts(b)
        assert installed is not None, f"no decoder parts installed for {name} {b.hash}"
        assert (installed.levels, installed.channels, installed.num_classes) == (
            derived.levels,
            derived.channels,
            derived.num_classes,
        )
        assert np.array_equal(installed.compact_table, derived.compact_table)
        assert sorted(installed.generator) == sorted(derived.generator)
        for k, v in derived.generator.items():
            assert np.array_equal(installed.generator[k], v), k
        assert (installed.enhancer is None) == (derived.enhancer is None)
        for k, v in (derived.enhancer or {}).items():
            assert np.array_equal(installed.enhancer[k], v), k


@pytest.mark.slow
@pytest.mark.parametrize("generator", ["numpy", "torch"])
def test_conformance_files_decode_to_their_hashes_in_this_process(generator):
    """Both integer generators, numpy's (the CLI without torch) and torch's, give the pixels."""
    sys.path.insert(0, str(HERE))
    from make_files import pixel_hash  # the hash function of the record

    from semcodec.decoder.parts import find_parts
    from semcodec.decoder.pipeline import Decoder, numpy_generator
    from semcodec.intgrid.generator_torch import from_table

    for d, record in RECORDS.items():
        parts = find_parts(record["model_hash"])
        if generator == "numpy":
            dec = Decoder(parts, numpy_generator(parts))
        else:
            dec = Decoder(parts, from_table(parts.generator).forward_numpy)
        for name, want in record["files"].items():
            data = (d / name).read_bytes()
            if (
                name in LARGE
            ):  # numpy's generator is the same sums; torch's: one decode, both layers
                if generator == "torch":
                    res = dec.decode(data, keep_base=True)
                    assert pixel_hash(res.image) == want["full"], name
                    assert pixel_hash(Image.fromarray(res.base, "RGB")) == want["base"], name
                continue
            assert pixel_hash(dec.decode(data).image) == want["full"], name
            assert pixel_hash(dec.decode(data, layer="base").image) == want["base"], name


@pytest.mark.slow
def test_codec_decodes_its_own_models_conformance_files():
    """The encoder-side Codec's decode (the bench and API path) agrees with the record."""
    sys.path.insert(0, str(HERE))
    from make_files import pixel_hash

    from semcodec.encoder.codec import Codec
    from semcodec.zoo.bundles import load_bundle

    for d, record in RECORDS.items():
        if load_bundle(record["model"]).hash != record["model_hash"]:
            continue  # an earlier release of this name: decoded through its parts above
        codec = Codec(record["model"])
        for name, want in record["files"].items():
            if name == "tiled-base.sem":
                continue
            data = (d / name).read_bytes()
            assert pixel_hash(codec.decode(data).image) == want["full"], name


def test_the_isa_runs_decode_the_default_releases_large_file():
    """The 2-thread runs keep one large file, the shipped default's; the 1-thread runs none."""
    two, one = large_files_left_out(2), large_files_left_out(1)
    from semcodec.defaults import DEFAULT_MODEL
    from semcodec.zoo.bundles import load_bundle

    default = default_folder()
    assert default in FOLDERS and (default / LARGE[0]).exists()
    assert RECORDS[default]["model_hash"] == load_bundle(DEFAULT_MODEL).hash
    assert set(one) - set(two) == {(default / LARGE[0]).relative_to(HERE).as_posix()}
    assert len(one) == sum((d / LARGE[0]).exists() for d in FOLDERS) > 1


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize(("threads", "env"), RUNS, ids=lambda v: str(v))
def test_conformance_files_decode_identically_on_every_isa_and_thread_count(threads, env, tmp_path):
    leave_out = large_files_left_out(threads)
    script = tmp_path / "decode_all.py"
    script.write_text(SCRIPT)
    r = subprocess.run(
        [sys.executable, str(script), str(threads), str(HERE), *leave_out],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["threads"] == threads
    want = {k: {"full": v["full"], "base": v["base"]} for k, v in all_recorded(leave_out).items()}
    assert got["files"] == want, f"{env or 'best ISA'}, {threads} threads ({got['isa']})"
