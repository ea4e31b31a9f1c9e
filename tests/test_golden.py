"""timm-style golden values: a tiny seeded model's outputs must not drift between versions.

If a deliberate change to a network alters these numbers, every .sem file written with weights of
that network decodes differently: bump the model's name or weights and update the values here.
"""

from __future__ import annotations

import pytest
import torch

from semcodec.models.compnet import COMPNET_CONFIGS, CompNet
from semcodec.models.generator import GENERATOR_CONFIGS, Generator
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


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_tiny_outputs_match_golden_values(name: str) -> None:
    shape, total, mean_abs = GOLDEN[name]
    v = _outputs()[name].double()
    assert tuple(v.shape) == shape
    assert v.sum().item() == pytest.approx(total, rel=1e-4, abs=1e-4)
    assert v.abs().mean().item() == pytest.approx(mean_abs, rel=1e-4)
