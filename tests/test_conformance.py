"""Conformance: stored .sem files of the shipped default model decode to recorded pixel hashes.

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
RECORD = json.loads((HERE / "hashes.json").read_text())

SCRIPT = r"""
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(int(sys.argv[1]))
sys.path.insert(0, sys.argv[2])
from make_files import pixel_hash
from semcodec.codec import Codec
codec = Codec("default")
out = {"isa": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
       "files": {}}
for path in sorted(Path(sys.argv[2]).glob("*.sem")):
    res = codec.decode(path.read_bytes(), keep_base=True)  # one decode, both layers
    base = res.image if res.header.quality == 0 else None
    if base is None:
        from PIL import Image
        base = Image.fromarray(res.base, "RGB")
        if res.header.mode == "L":
            base = base.convert("L")
        elif res.header.mode == "RGBA":
            base.putalpha(res.image.getchannel("A"))
    out["files"][path.name] = {"full": pixel_hash(res.image), "base": pixel_hash(base)}
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


def test_files_are_those_of_the_shipped_default_model():
    """A model change that alters decoding must come with a new model name/hash and new files."""
    from semcodec.zoo import load_bundle

    b = load_bundle("default")
    assert (RECORD["model"], RECORD["model_hash"]) == (b.name, b.hash), (
        "the shipped default model changed: write new conformance files "
        "(python tests/conformance/make_files.py) for the new model name/hash"
    )
    assert sorted(p.name for p in HERE.glob("*.sem")) == sorted(RECORD["files"])


def test_conformance_files_decode_to_their_hashes_in_this_process():
    sys.path.insert(0, str(HERE))
    from make_files import pixel_hash  # the hash function of the record

    from semcodec.codec import Codec

    codec = Codec("default")
    for name, want in RECORD["files"].items():
        data = (HERE / name).read_bytes()
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
    want = {k: {"full": v["full"], "base": v["base"]} for k, v in RECORD["files"].items()}
    assert got["files"] == want, f"{env or 'best ISA'}, {threads} threads ({got['isa']})"
