"""The torch integer generator (intgrid/generator_torch.py): exact arithmetic, close to the float
network, and the same pixels under every instruction set, thread count and convolution backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from semcodec.encoder.codec import Codec
from semcodec.errors import ModelError
from semcodec.intgrid import generator_torch
from semcodec.models.compnet import dequantize
from semcodec.models.generator import (
    GENERATOR_CONFIGS,
    Generator,
    has_integer_layout,
    synthetic_calibration,
    to_integer,
    upsample_base,
)
from semcodec.zoo import bundles as zoo
from semcodec.zoo import registry

pytestmark = pytest.mark.usefixtures("one_thread")


def _generator(name: str = "default", seed: int = 0) -> Generator:
    """A generator with every layer random (its output layer too), as after training."""
    torch.manual_seed(seed)
    gen = Generator(GENERATOR_CONFIGS[name]).eval()
    with torch.no_grad():
        last = gen.body[-2]
        last.weight.normal_(0, 0.02)
        last.bias.normal_(0, 0.02)
    return gen


def _inputs(seed: int, h: int = 10, w: int = 14, levels: int = 16):
    g = torch.Generator().manual_seed(seed)
    sym = torch.randint(0, levels, (1, 3, h, w), generator=g)
    lab = torch.randint(0, 11, (1, h, w), generator=g)
    return sym, lab


@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (3, 4), (7, 2)])
@pytest.mark.parametrize("levels", [8, 16])
def test_integer_base_is_torch_bilinear(shape, levels):
    """The integer base is torch's 8x bilinear upsampling of the dequantised symbols, exactly."""
    g = torch.Generator().manual_seed(sum(shape) + levels)
    sym = torch.randint(0, levels, (2, 3, *shape), generator=g)
    u = generator_torch.integer_base(sym, levels)
    ref = upsample_base(dequantize(sym, levels), (8 * shape[0], 8 * shape[1])).double()
    assert u.dtype == torch.int64 and u.shape == ref.shape
    assert torch.allclose(u.double() / (256 * (levels - 1)), ref, atol=1e-6, rtol=0)


def test_round_div_is_half_to_even():
    """Pixel rounding is exact integer division, ties to even, also for negative numerators."""
    rng = np.random.default_rng(0)
    den = 48
    nums = np.concatenate([rng.integers(-(10**9), 10**9, 2000), np.arange(-5, 6) * den // 2])
    got = generator_torch._round_div(torch.from_numpy(nums), den).numpy()
    want = [round(Fraction(int(n), den)) for n in nums]  # Python rounds half to even
    assert got.tolist() == want


def test_every_accumulator_is_an_exact_integer():
    """Each conv of the integer generator equals the same sum in float64 (exact at this size)."""
    gen = _generator()
    fg = to_integer(gen, 16, synthetic_calibration(3, 16, 11, n=2, side=16))
    fg.check()
    for conv in fg.convs[1:3]:
        lim = 511
        q = torch.randint(-lim, lim + 1, (1, conv.weight.shape[1], 9, 11)).float()
        if conv is fg.convs[2]:
            q = q.abs()
        got = conv(q).double()
        scale = torch.pow(2.0, -conv.shift.double())[None, :, None, None]
        exact = F.conv2d(q.double(), conv.weight.double(), conv.bias.double(), padding=1) * scale
        assert torch.equal(got, exact)
        assert got.abs().max() > 1e3  # a real test: large sums


@pytest.mark.slow
def test_integer_generator_is_close_to_the_float_one():
    """The integer grids cost under a hundredth of a grey level on average (PSNR > 45 dB)."""
    gen = _generator()
    cal = synthetic_calibration(3, 16, 11, seed=3, n=3, side=24)
    fg = to_integer(gen, 16, cal)
    sym, lab = _inputs(5, 12, 16)
    with torch.no_grad():
        v, _ = gen(dequantize(sym, 16), lab, (96, 128))
    ref = ((v.clamp(-1, 1) + 1) * 127.5).round()
    got = fg.forward(sym, lab).double()
    mse = float(((got - ref) ** 2).mean())
    assert mse > 0  # the generator does something beyond the base
    assert 10 * np.log10(255**2 / mse) > 45
    base = ((upsample_base(dequantize(sym, 16), (96, 128)).clamp(-1, 1) + 1) * 127.5).round()
    assert float(((base - ref) ** 2).mean()) > 20 * mse  # closer to the network than to the base


def test_a_table_over_the_exact_range_is_refused(tmp_path):
    """A stored table whose sums could pass 2**24 is refused before it makes any pixel: when
    the bundle first needs its generator (a network is built on first use)."""
    gen = _generator("tiny")
    fg = to_integer(gen, 8, synthetic_calibration(3, 8, 11, n=1, side=16))
    state = dict(fg.state)
    state["c1.w"] = state["c1.w"].clone()
    state["c1.w"][0, 0, 0, 0] = 1 << 20
    with pytest.raises(ValueError, match="2\\*\\*24"):
        generator_torch.TorchIntegerGenerator(state).check()
    b = zoo.load_bundle("tiny")
    path = zoo.save_bundle(
        tmp_path, b.spec, b.seg, b.comp, b.gen, b.compact_table, {}, generator_table=state
    )
    bundle = zoo.load_bundle(str(path))
    with pytest.raises(ModelError, match="integer generator table"):
        bundle.integer_generator  # noqa: B018 - building it is the check
    codec = Codec(str(path))
    data = codec.encode(np.full((16, 16, 3), 128, np.uint8), quality=0)  # the generator's input
    with pytest.raises(ModelError, match="integer generator table"):
        codec.decode(data)


SCRIPT = r"""
import hashlib, json, sys
import torch
from semcodec.intgrid import generator_torch
torch.set_num_threads(int(sys.argv[1]))
state = torch.load(sys.argv[2], weights_only=True)
sym = torch.load(sys.argv[3], weights_only=True)
fg = generator_torch.TorchIntegerGenerator(state)
with torch.backends.mkldnn.flags(enabled=sys.argv[4] == "onednn"):
    out = fg.forward(sym["symbols"], sym["labels"])
print(json.dumps({"hash": hashlib.sha256(out.numpy().tobytes()).hexdigest(),
                  "isa": torch.backends.cpu.get_cpu_capability()}))
"""

RUNS = [  # threads, environment, convolution backend
    (1, {}, "onednn"),
    (2, {}, "onednn"),
    (2, {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}, "onednn"),
    (1, {"ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"}, "onednn"),
    (2, {"ATEN_CPU_CAPABILITY": "default"}, "native"),  # torch's own im2col + GEMM convs
]


@pytest.mark.subprocess
@pytest.mark.slow
def test_same_pixels_on_every_isa_thread_count_and_backend(tmp_path):
    """The integer generator's output is one hash under every run of RUNS (fresh processes)."""
    gen = _generator("default", seed=4)
    fg = to_integer(gen, 16, synthetic_calibration(3, 16, 11, seed=1, n=2, side=32))
    torch.save(fg.state, tmp_path / "state.pt")
    sym, lab = _inputs(9, 24, 20)
    torch.save({"symbols": sym, "labels": lab}, tmp_path / "inputs.pt")
    (tmp_path / "run.py").write_text(SCRIPT)
    here = fg.forward(sym, lab)
    hashes = set()
    for threads, env, backend in RUNS:
        r = subprocess.run(
            [sys.executable, str(tmp_path / "run.py"), str(threads), str(tmp_path / "state.pt"),
             str(tmp_path / "inputs.pt"), backend],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env},
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        hashes.add(json.loads(r.stdout)["hash"])
    import hashlib

    assert hashes == {hashlib.sha256(here.numpy().tobytes()).hexdigest()}


@pytest.mark.slow
def test_bundles_without_an_integer_table_decode_with_the_float_generator():
    """The paper's global generator has no integer twin: the codec runs it in float, pinned."""
    from semcodec.encoder.codec import Codec

    registry.register(
        registry.BundleSpec("paper-gen", seg="tiny", compnet="tiny", generator="paper")
    )
    try:
        codec = Codec("paper-gen")
        assert codec.bundle.integer_generator is None and not has_integer_layout(codec.bundle.gen)
        img = np.random.default_rng(0).integers(0, 256, (40, 48, 3), dtype=np.uint8)
        data = codec.encode(img, quality=0, residual="native")
        a = codec.decode(data).image
        assert a.size == (48, 40) and a.tobytes() == codec.decode(data).image.tobytes()
        tiny = zoo.load_bundle("tiny")
        assert tiny.integer_generator is not None and has_integer_layout(tiny.gen)
    finally:
        registry.REGISTRY.pop("paper-gen", None)
        zoo._CACHE.pop("paper-gen", None)


def test_packed_weight_block_round_trips_and_is_checked(tmp_path):
    """The bundle stores the integer weights as one compressed int16 block: exact, and checked."""
    tiny = zoo.load_bundle("tiny")
    state = tiny.integer_generator.state
    packed = generator_torch.pack_state(state)
    unpacked = generator_torch.unpack_state(packed)
    assert all(torch.equal(unpacked[k], state[k]) for k in state)
    assert int(packed["weights_bits"]) == 16
    bad = dict(packed)
    bad["weights_zst"] = packed["weights_zst"][:-5].clone()
    with pytest.raises(ValueError, match="weight block"):
        generator_torch.unpack_state(bad)
    big = dict(packed)
    big["weights_shape"] = packed["weights_shape"].clone()
    big["weights_shape"][0, 0] = 1 << 20
    with pytest.raises(ValueError, match="too large|wrong size|weight block"):
        generator_torch.unpack_state(big)


def test_fix_generator_command_writes_a_calibrated_bundle(tmp_path):
    """`semcodec train fix-generator`: a new bundle, same networks, an integer table close to
    the float generator on held-out images."""
    from PIL import Image

    from semcodec.train.fix_generator import fix_bundle

    b = zoo.load_bundle("tiny")
    src = zoo.save_bundle(tmp_path / "in.pt", b.spec, b.seg, b.comp, b.gen, b.compact_table)
    rng = np.random.default_rng(0)
    photos = []
    for i in range(3):
        y, x = np.mgrid[0:48, 0:64]
        img = np.stack([x * 3 + i * 20, y * 4, (x + y) * 2], -1) + rng.integers(0, 25, (48, 64, 3))
        photos.append(tmp_path / f"p{i}.png")
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(photos[-1])
    out, rec = fix_bundle(src, photos, tmp_path / "out", calibration=2, held_out=1)
    new = zoo.load_bundle(str(out))
    assert new.integer_generator is not None and new.hash != b.hash
    assert rec["calibration_images"] == 2 and rec["held_out_images"] == 1
    assert rec["psnr_float_vs_integer"] > 40
    assert new.info["integer_generator"]["act_max"] == 511


@pytest.mark.slow
def test_integer_generator_reads_extra_compact_channels():
    """A generator with 5 channels beside the thumbnail: conv 0 reads all 8, the pixels add the
    enhancement to the first three only, and the integer grid stays close to the float net."""
    gen = _generator("c8")
    cal = synthetic_calibration(8, 16, 11, seed=3, n=3, side=24)
    fg = to_integer(gen, 16, cal)
    assert fg.channels == 8
    g = torch.Generator().manual_seed(9)
    sym = torch.randint(0, 16, (1, 8, 12, 16), generator=g)
    lab = torch.randint(0, 11, (1, 12, 16), generator=g)
    with torch.no_grad():
        v, _ = gen(dequantize(sym, 16), lab, (96, 128))
    ref = ((v.clamp(-1, 1) + 1) * 127.5).round()
    got = fg.forward(sym, lab).double()
    assert got.shape == (1, 3, 96, 128)
    assert 10 * np.log10(255**2 / float(((got - ref) ** 2).mean())) > 45
    other = sym.clone()
    other[:, 3:] = (other[:, 3:] + 5) % 16  # only the extra channels change
    assert not torch.equal(fg.forward(other, lab), fg.forward(sym, lab))
