"""Determinism (docs/robustness.md): same input and options → same bytes, same decoded layers.

Encodes and decodes run in this process and in fresh processes with 1 and 2 torch threads;
files, every decoded layer (map, compact symbols, generator output, residual) and the decoded
images are compared bit for bit, for the tiny bundle and for the default architecture (whose
wide layers are where oneDNN's results depend on the thread count). Two more processes run
with oneDNN capped at AVX2 and at SSE4.1: the decoder
(integer generator) must give the same layers and pixels there too; the encoder's files
may differ across instruction sets (its networks are float) and are not compared. `--jobs 2` against a sequential batch is covered by
tests/test_cli.py::test_jobs_gives_identical_files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# Run in the child processes (and, via exec, in this one): encode the inputs of a folder, then
# decode the reference files of the same folder, and print fingerprints as JSON.
SCRIPT = r"""
import dataclasses, hashlib, json, sys
from pathlib import Path

import numpy as np
import torch

from semcodec.format import container
from semcodec.encoder.gating import GatingConfig
from semcodec.encoder.codec import Codec, Tiling
from semcodec.encoder.options import EncodeOptions
from semcodec.format.container import LayerKind
from semcodec.format.compact import decode_compact
from semcodec.format.residual import backend_by_code
from semcodec.format.map import decode_map

CASES = {  # name: (input file, quality, residual backend, codec)
    "rgb-native": ("photo.png", 60, "native", "tiny"),
    "rgb-avif": ("photo.png", 60, "avif", "tiny"),
    "gray": ("gray.png", 50, "native", "tiny"),
    "rgba": ("rgba.png", 70, "avif", "tiny"),
    "base-only": ("photo.png", 0, "native", "tiny"),
    "tiled": ("wide.png", 50, "native", "tiny-tiled"),
    "default-arch": ("large.png", 60, "native", "default-arch"),
    # segmented at a working scale below the input's size (segment.working_size)
    "working-scale": ("wide.png", 0, "native", "tiny-scaled"),
}
# every layer in every file: each is checked below
OPTIONS = EncodeOptions(gating=GatingConfig(enabled=False))


def digest(a) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes()).hexdigest()[:16]


def codecs():
    # The tiny bundle, untiled and with small tiles, and the default architecture with random
    # weights; its zero-initialised output layers are randomised (seeded) so that every layer
    # computes. Its channel counts are large enough for oneDNN's float results to depend on the
    # thread count, which the codec must neutralise.
    from semcodec.zoo import bundles as zoo
    from semcodec.zoo import registry

    registry.register(registry.BundleSpec("default-arch", seg="default", compnet="default",
                                generator="default", seed=0))
    big = Codec("default-arch")
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for conv in (big.bundle.comp.net[-2], big.bundle.gen.body[-2]):
            conv.weight.copy_(torch.randn(conv.weight.shape, generator=g) * 0.02)
            conv.bias.copy_(torch.randn(conv.bias.shape, generator=g) * 0.02)
    big.bundle.integer_generator = zoo.random_integer_generator(
        big.bundle.gen, big.bundle.levels, big.bundle.spec.seed
    )
    registry.register(registry.BundleSpec("tiny-scaled", seg="tiny", compnet="tiny", generator="tiny",
                                seed=1234))
    scaled = Codec("tiny-scaled")
    scaled.bundle.seg.cfg = dataclasses.replace(scaled.bundle.seg.cfg, work_side=100)
    return {"tiny": Codec("tiny"),
            "tiny-scaled": scaled,
            "tiny-tiled": Codec("tiny", tiling=Tiling(64, 64, 0)),
            "default-arch": big}


def encode_all(folder: Path) -> dict:
    c = codecs()
    out = {}
    for name, (src, quality, residual, key) in CASES.items():
        data = c[key].encode(str(folder / src), OPTIONS, quality=quality, residual=residual)
        out[name] = hashlib.sha256(data).hexdigest()[:16]
    return out


def decode_all(folder: Path, tag: str) -> dict:
    c = codecs()
    out = {}
    for name, (_src, _q, _r, key) in CASES.items():
        codec = c[key]
        data = (folder / f"{name}.sem").read_bytes()
        header, layers = container.unpack(data)
        mh, mw = -(-header.height // 8), -(-header.width // 8)
        labels = decode_map(layers[LayerKind.SEMANTIC_MAP], mh, mw, codec.bundle.num_classes)
        shape = (codec.bundle.comp.cfg.out_channels, mh, mw)
        symbols = decode_compact(layers[LayerKind.COMPACT], shape, codec.bundle.compact_table)
        recon = codec.reconstruct(symbols, labels, (header.height, header.width))
        f = {"map": digest(labels), "compact": digest(symbols), "generator": digest(recon)}
        if header.residual_backend:
            res = backend_by_code(header.residual_backend).decode(
                layers[LayerKind.RESIDUAL], header.height, header.width
            )
            f["residual"] = digest(res)
        image = codec.decode(data).image
        image.save(folder / f"{name}-{tag}.png")
        f["image"] = digest(np.asarray(image))
        out[name] = f
    return out


if __name__ == "__main__":
    torch.set_num_threads(int(sys.argv[1]))
    folder = Path(sys.argv[2])
    tag = sys.argv[3]
    print(json.dumps({"threads": torch.get_num_threads(), "encode": encode_all(folder),
                      "decode": decode_all(folder, tag)}))
"""


def _helpers() -> dict:
    """SCRIPT's functions, for this process."""
    namespace: dict = {"__name__": "determinism_script"}
    exec(compile(SCRIPT, "determinism_script", "exec"), namespace)
    return namespace


def _inputs(folder: Path) -> None:
    """Small real-photo inputs: RGB, gray, RGBA, and one wide enough for several tiles."""
    import matplotlib

    src = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    img = Image.open(src).convert("RGB")
    img.resize((96, 64), Image.LANCZOS).save(folder / "photo.png")
    img.resize((72, 40), Image.LANCZOS).convert("L").save(folder / "gray.png")
    rgba = img.resize((40, 32), Image.LANCZOS).convert("RGBA")
    alpha = np.full((32, 40), 255, np.uint8)
    alpha[8:24, 10:30] = 60
    rgba.putalpha(Image.fromarray(alpha))
    rgba.save(folder / "rgba.png")
    img.resize((144, 72), Image.LANCZOS).save(folder / "wide.png")
    img.resize((256, 200), Image.LANCZOS).save(folder / "large.png")


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py

# oneDNN's kernels only: ATen's capability also changes torch's random initialisation, and so
# the random test bundles themselves (tests/test_integer_generator_torch.py and the
# conformance files cover it)
ISA_AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2"}
ISA_SSE41 = {"ONEDNN_MAX_CPU_ISA": "SSE41"}


def _tag(threads: int, isa: dict) -> str:
    """The name suffix of one child's decoded images."""
    return f"t{threads}-{isa.get('ONEDNN_MAX_CPU_ISA', 'inherited')}"


@pytest.mark.subprocess
@pytest.mark.slow
def test_same_bytes_and_layers_across_processes_and_thread_counts(tmp_path: Path):
    h = _helpers()
    _inputs(tmp_path)
    codecs = h["codecs"]()
    for name, (src, quality, residual, key) in h["CASES"].items():
        data = codecs[key].encode(
            str(tmp_path / src), h["OPTIONS"], quality=quality, residual=residual
        )
        (tmp_path / f"{name}.sem").write_bytes(data)
    script = tmp_path / "determinism_script.py"
    script.write_text(SCRIPT)
    # PASSIVE: idle OpenMP threads sleep instead of spinning on the shared cores (speed only)
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"}
    runs = [(1, {}), (2, {}), (2, ISA_AVX2), (1, ISA_SSE41)]
    children = [
        subprocess.Popen(
            [sys.executable, str(script), str(n), str(tmp_path), _tag(n, isa)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, **isa},
        )
        for n, isa in runs
    ]
    here_encode = h["encode_all"](tmp_path)
    assert h["encode_all"](tmp_path) == here_encode  # same process, second run
    here_decode = h["decode_all"](tmp_path, "here")
    results = []
    for child in children:
        out, err = child.communicate(timeout=600)  # generous: slow or busy machines
        assert child.returncode == 0, err
        results.append(json.loads(out))
    assert [r["threads"] for r in results] == [n for n, _ in runs]
    for r, (n, isa) in zip(results, runs, strict=True):
        where = f"{n} threads {isa or 'default ISA'}"
        if not isa:
            assert r["encode"] == here_encode, f"{where}: different files"
        assert r["decode"] == here_decode, f"{where}: different layers"
    for name in h["CASES"]:  # the decoded images themselves, pixel for pixel
        ref = np.asarray(Image.open(tmp_path / f"{name}-here.png")).astype(int)
        for tag in (_tag(n, isa) for n, isa in runs):
            other = np.asarray(Image.open(tmp_path / f"{name}-{tag}.png")).astype(int)
            assert np.abs(other - ref).max() == 0, (name, tag)
