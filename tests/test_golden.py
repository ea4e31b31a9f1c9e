"""timm-style golden values: a tiny seeded model's outputs must not drift between versions.

If a deliberate change to a network alters these numbers, every .sem file written with weights of
that network decodes differently: bump the model's name or weights and update the values here.
"""

from __future__ import annotations

import pytest
import torch

from semcodec.models.compnet import COMPNET_CONFIGS, CompNet
from semcodec.models.generator import GENERATOR_CONFIGS, Generator, to_integer
from semcodec.models.segmentation import SEG_CONFIGS, SegNet

GOLDEN = {
    "seg": ((1, 11, 4, 6), -2.533764, 0.02221283),
    "comp": ((1, 3, 4, 6), -3.572324, 0.29831999),
    "gen": ((1, 3, 32, 48), -198.443287, 0.28399108),
}


def _outputs() -> dict[str, torch.Tensor]:
    torch.manual_seed(1234)
    seg = SegNet(SEG_CONFIGS["tiny"]).eval()
    comp = CompNet(COMPNET_CONFIGS["tiny"]).eval()
    gen = Generator(GENERATOR_CONFIGS["tiny"]).eval()
    with torch.no_grad():
        for p in gen.body[
            -2
        ].parameters():  # leave the identity start: give the output layer weights
            p.normal_(0, 0.05)
    x = torch.rand(1, 3, 32, 48, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        s = seg.logits_lowres(x)
        lab = s.argmax(1)
        t = comp(x, lab)
        out, _ = gen(t, lab, (32, 48))
    return {"seg": s, "comp": t, "gen": out}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_tiny_outputs_match_golden_values(name: str) -> None:
    shape, total, mean_abs = GOLDEN[name]
    v = _outputs()[name].double()
    assert tuple(v.shape) == shape
    assert v.sum().item() == pytest.approx(total, rel=1e-4, abs=1e-4)
    assert v.abs().mean().item() == pytest.approx(mean_abs, rel=1e-4)


# The default configurations (the shipped architecture: CompNet with its thumbnail skip, the
# s2d generator and its integer twin) with seeded weights, on a 64x96 input.
GOLDEN_DEFAULT = {
    "seg": ((1, 11, 8, 12), 14.576789, 0.05238),
    "comp": ((1, 3, 8, 12), 22.494794, 0.62187018),
    "gen": ((1, 3, 64, 96), 1667.665786, 0.43959877),
}
GOLDEN_INTEGER_SHA256 = "89abcf59346b49dcfe68217a4ca290d1fef7e0533376f5a821c8587bbf46b02d"


def _default_outputs() -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    from semcodec.models.compnet import quantize

    torch.manual_seed(4321)
    seg = SegNet(SEG_CONFIGS["default"]).eval()
    comp = CompNet(COMPNET_CONFIGS["default"]).eval()
    gen = Generator(GENERATOR_CONFIGS["default"]).eval()
    with torch.no_grad():
        for net in (comp.net[-2], gen.body[-2]):  # zero-initialised output layers: give weights
            for p in net.parameters():
                p.normal_(0, 0.02)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(1, 3, 64, 96, generator=g)
    with torch.no_grad():
        s = seg.logits_lowres(x)
        lab = s.argmax(1)
        t = comp(x, lab)
        sym = quantize(t, 16)
        out, _ = gen(t, lab, (64, 96))
    cal = [
        (
            torch.randint(0, 16, (1, 3, 16, 16), generator=g),
            torch.randint(0, 11, (1, 16, 16), generator=g),
        )
    ]
    # the integer twin of a generator with dyadic weights (random init itself differs in the
    # last bits between ATen's vector paths), on integer inputs straight from the seeded
    # generator (the float nets' argmax and rounding may move)
    with torch.no_grad():
        for p in gen.parameters():
            p.copy_(torch.randint(-24, 25, p.shape, generator=g).float() / 1024)
    fg = to_integer(gen, 16, cal)
    del sym
    sym = torch.randint(0, 16, (1, 3, 8, 12), generator=g)
    lab = torch.randint(0, 11, (1, 8, 12), generator=g)
    return {"seg": s, "comp": t, "gen": out}, fg.forward(sym, lab)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GOLDEN_DEFAULT))
def test_default_configuration_outputs_match_golden_values(name: str) -> None:
    shape, total, mean_abs = GOLDEN_DEFAULT[name]
    v = _default_outputs()[0][name].double()
    assert tuple(v.shape) == shape
    assert v.sum().item() == pytest.approx(total, rel=1e-4, abs=1e-3)
    assert v.abs().mean().item() == pytest.approx(mean_abs, rel=1e-4)


@pytest.mark.slow
def test_default_integer_generator_is_bit_exact_golden() -> None:
    """The integer generator's pixels are exact: one SHA-256, on every CPU."""
    import hashlib

    out = _default_outputs()[1]
    assert hashlib.sha256(out.numpy().tobytes()).hexdigest() == GOLDEN_INTEGER_SHA256
