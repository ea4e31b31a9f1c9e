"""The losses of `train codec` (A7–A9) and its optimisation steps."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from semcodec.models.compnet import one_hot_map
from semcodec.models.losses import (
    LossWeights,
    feature_matching_loss,
    g_adv_loss,
    msssim_loss,
    ssimulacra2_loss,
)
from semcodec.train.common import autocast


def generator_losses(
    nets, disc, perc, x, labels, w: LossWeights, device, bf16
) -> tuple[torch.Tensor, dict]:
    """L_Gp (+ rate): L_p feature matching + L1 + (1 - MS-SSIM) + perceptual + adversarial."""
    with autocast(device, bf16):
        o = nets(x, labels)
    x_hat = o["x_hat"].float()
    bpp = o["bits"] / (x.shape[0] * x.shape[-2] * x.shape[-1])
    l1 = F.l1_loss(x_hat, x)
    ms = msssim_loss(x_hat.clamp(0, 1), x)
    loss = w.l1 * l1 + w.msssim * ms + w.rate * bpp
    logs = {
        "bpp": float(bpp.detach()),
        "l1": float(l1.detach()),
        "msssim": 1 - float(ms.detach()),
        "psnr": float(-10 * torch.log10(F.mse_loss(x_hat.clamp(0, 1), x).detach() + 1e-10)),
    }
    if w.ssimulacra2 > 0:
        s2 = ssimulacra2_loss(x_hat, x)
        loss = loss + w.ssimulacra2 * s2
        logs["s2"] = 100.0 - 100.0 * float(s2.detach())
    if perc is not None and w.perceptual > 0:
        with autocast(device, bf16):
            lp = perc(x_hat, x)
        loss = loss + w.perceptual * lp.float()
        logs["perc"] = float(lp.detach())
    if disc is not None and (w.gan > 0 or w.feature_matching > 0):
        oh = one_hot_map(
            labels,
            nets.comp.cfg.num_classes
            if not isinstance(nets, DDP)
            else nets.module.comp.cfg.num_classes,
            x.shape[-2:],
        )
        disc.requires_grad_(False)  # the generator step needs gradients through D, not for D
        try:
            with autocast(device, bf16):
                fake = disc(x_hat * 2 - 1, oh, o["base"].detach() * 2 - 1)
                with torch.no_grad():
                    real = disc(x * 2 - 1, oh, o["base"].detach() * 2 - 1)
        finally:
            disc.requires_grad_(True)
        adv, fm = g_adv_loss(fake), feature_matching_loss(real, fake)
        loss = loss + w.gan * adv + w.feature_matching * fm
        logs.update(adv=float(adv.detach()), fm=float(fm.detach()))
    return loss, {"x_hat": x_hat.detach(), "base": o["base"].detach(), **logs}
