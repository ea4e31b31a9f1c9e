"""Encoder-side latent refinement (refine.py) with the "tiny" bundle."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.encoder.codec import get_codec
from semcodec.encoder.refine import RefineConfig, rate_model, refine_latents
from semcodec.models.compnet import dequantize, quantize

W, H = 64, 48


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def _image(seed: int = 0) -> np.ndarray:
    """Smooth gradients with a block and noise: structure the compact layer can carry."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    a = np.stack([x * 4, y * 5, (x + y) * 2], -1).astype(np.int16)
    a[8:28, 16:40] = rng.integers(0, 256, 3)
    a += rng.integers(-6, 7, a.shape).astype(np.int16)
    return np.clip(a, 0, 255).astype(np.uint8)


def _objective(codec, t: torch.Tensor, x: torch.Tensor, lab: torch.Tensor, cfg) -> float:
    """The refinement objective at the quantised latents, as the decoder will see them."""
    levels = codec.bundle.levels
    sym = quantize(t, levels)
    with torch.no_grad():
        v, _ = codec.bundle.gen(dequantize(sym, levels), lab, x.shape[-2:])
        mse = ((v + 1) * 0.5 - x).pow(2).mean().item()
        bits = rate_model(codec.bundle.compact_table).bits(sym.float()).item()
    return cfg.mse_weight * mse + cfg.rate_weight * bits / (x.shape[-2] * x.shape[-1])


def _inputs(codec):
    """A tiny image, its map and CompNet's latents."""
    rgb = _image()
    labels = codec.semantic_map(rgb)
    x = torch.from_numpy(rgb).permute(2, 0, 1).float().div(255)[None]
    lab = torch.from_numpy(labels.astype(np.int64))[None]
    with torch.no_grad():
        t = codec.bundle.comp(x, lab).float()
    return x, lab, t


@pytest.mark.slow
def test_refinement_lowers_the_objective_at_the_quantised_latents():
    codec = get_codec("tiny")
    x, lab, t0 = _inputs(codec)
    cfg = RefineConfig(steps=25, msssim_weight=0.0, bf16=False)
    b = codec.bundle
    flags = [p.requires_grad for p in b.gen.parameters()]
    t1 = refine_latents(t0, x, lab, b.gen, b.compact_table, cfg)
    assert t1.shape == t0.shape and float(t1.abs().max()) < 1
    assert _objective(codec, t1, x, lab, cfg) < _objective(codec, t0, x, lab, cfg)
    assert [p.requires_grad for p in b.gen.parameters()] == flags  # left as found


def test_zero_steps_return_the_latents_unchanged():
    codec = get_codec("tiny")
    x, lab, t0 = _inputs(codec)
    b = codec.bundle
    out = refine_latents(t0, x, lab, b.gen, b.compact_table, RefineConfig())
    assert out is t0


def test_rate_model_reproduces_the_coders_table():
    """The rate term must price symbols with the integer table the range coder uses."""
    table = get_codec("tiny").bundle.compact_table
    probs = torch.softmax(rate_model(table).logits.double(), -1).numpy()
    expected = table / table.sum(-1, keepdims=True)
    assert np.allclose(probs, expected, rtol=1e-5, atol=1e-9)


@pytest.mark.slow
def test_refined_base_only_file_decodes_better_and_reproducibly():
    codec = get_codec("tiny")
    rgb = _image(1)
    cfg = RefineConfig(steps=20, bf16=False)
    plain = codec.encode(rgb, quality=0, residual="native")
    refined = codec.encode(rgb, quality=0, residual="native", refine=cfg)
    again = codec.finish(codec.analyse(rgb, refine=cfg), quality=0, residual="native")[0]
    assert refined == again  # same input, same settings, same bytes

    def err(data: bytes) -> float:
        dec = np.asarray(codec.decode(data, layer="base").image.convert("RGB"), np.float64)
        return float(((dec - rgb) ** 2).mean())

    assert err(refined) < err(plain)


def test_refine_config_rejects_nonsense():
    with pytest.raises(ValueError):
        RefineConfig(steps=-1)
    with pytest.raises(ValueError):
        RefineConfig(lr=0)
