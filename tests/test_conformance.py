"""Conformance: stored .sem files of every shipped model decode to recorded pixel hashes.

Each file is decoded in fresh processes with oneDNN's and ATen's kernels at their best, capped
at AVX2 and at SSE4.1 (ATen without vector extensions), with 1 and 2 threads: the decoder's
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

HERE = Path(__file__).resolve().parent / "conformance"
#: every model's folder of files and its record (the default's files sit in HERE itself)
FOLDERS = [HERE, *sorted(p.parent for p in HERE.glob("*/hashes.json"))]
RECORDS = {d: json.loads((d / "hashes.json").read_text()) for d in FOLDERS}

SCRIPT = r"""
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(int(sys.argv[1]))
sys.path.insert(0, sys.argv[2])
from make_files import pixel_hash
from semcodec import container
from semcodec.codec import Codec
codecs = {}
out = {"isa": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
       "files": {}}
for path in sorted(Path(sys.argv[2]).glob("**/*.sem")):
    data = path.read_bytes()
    model = container.read_header(data).model_name
    if model not in codecs:  # one Codec (one model load) per model, not per file
        codecs[model] = Codec(model)
    codec = codecs[model]
    res = codec.decode(data, keep_base=True)  # one decode, both layers
    base = res.image if res.header.quality == 0 else None
    if base is None:
        from PIL import Image
        base = Image.fromarray(res.base, "RGB")
        if res.header.mode == "L":
            base = base.convert("L")
        elif res.header.mode == "RGBA":
            base.putalpha(res.image.getchannel("A"))
    name = path.relative_to(sys.argv[2]).as_posix()
    out["files"][name] = {"full": pixel_hash(res.image), "base": pixel_hash(base)}
print(json.dumps(out))
"""

RUNS = [  # threads, environment
    (1, {}),
    (2, {}),
    (1, {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}),
    (2, {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}),
    (1, {"ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"}),
    (2, {"ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"}),
]


def all_recorded() -> dict[str, dict]:
    """Every recorded file by its path under HERE, with its hashes."""
    return {
        (d / name).relative_to(HERE).as_posix(): want
        for d, record in RECORDS.items()
        for name, want in record["files"].items()
    }


def test_every_shipped_model_has_conformance_files_of_its_weights():
    """A model change that alters decoding must come with a new model name/hash and new files."""
    from semcodec.zoo import REGISTRY, load_bundle

    shipped = {name for name, spec in REGISTRY.items() if spec.weights is not None}
    assert {r["model"] for r in RECORDS.values()} == shipped
    for d, record in RECORDS.items():
        b = load_bundle(record["model"])
        assert (record["model"], record["model_hash"]) == (b.name, b.hash), (
            f"the shipped model {b.name!r} changed: write new conformance files "
            f"(python tests/conformance/make_files.py {b.name}) for the new model hash"
        )
        assert sorted(p.name for p in d.glob("*.sem")) == sorted(record["files"])


def test_conformance_files_decode_to_their_hashes_in_this_process():
    sys.path.insert(0, str(HERE))
    from make_files import pixel_hash  # the hash function of the record

    from semcodec.codec import Codec

    for d, record in RECORDS.items():
        codec = Codec(record["model"])
        for name, want in record["files"].items():
            data = (d / name).read_bytes()
            assert pixel_hash(codec.decode(data).image) == want["full"], name
            assert pixel_hash(codec.decode(data, layer="base").image) == want["base"], name


@pytest.mark.parametrize(("threads", "env"), RUNS, ids=lambda v: str(v))
def test_conformance_files_decode_identically_on_every_isa_and_thread_count(threads, env, tmp_path):
    script = tmp_path / "decode_all.py"
    script.write_text(SCRIPT)
    r = subprocess.run(
        [sys.executable, str(script), str(threads), str(HERE)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["threads"] == threads
    want = {k: {"full": v["full"], "base": v["base"]} for k, v in all_recorded().items()}
    assert got["files"] == want, f"{env or 'best ISA'}, {threads} threads ({got['isa']})"
