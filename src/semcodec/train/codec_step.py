"""`train codec`'s optimisation: the losses (A7–A9), the optimisers, warm-up and the G/D steps."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from semcodec.models.compnet import one_hot_map
from semcodec.models.losses import (
    LossWeights,
    d_loss,
    feature_matching_loss,
    g_adv_loss,
    msssim_loss,
    ssimulacra2_loss,
)
from semcodec.train.codec_nets import CodecNets
from semcodec.train.common import autocast


def uses_discriminator(w: LossWeights) -> bool:
    """Whether the recipe has a term that needs the discriminator (adversarial or matching)."""
    return w.gan > 0 or w.feature_matching > 0


def adam_betas(w: LossWeights) -> tuple[float, float]:
    """GAN-style momentum only with a discriminator."""
    return (0.5, 0.999) if uses_discriminator(w) else (0.9, 0.999)


def make_optimisers(
    nets: CodecNets, disc: nn.Module, lrs: tuple[float, float], betas: tuple[float, float]
) -> tuple[torch.optim.Adam, torch.optim.Adam]:
    """Adam for (CompNet + generator, context table) at lrs, and Adam for the discriminator."""
    opt_g = torch.optim.Adam(
        [
            {"params": [*nets.comp.parameters(), *nets.gen.parameters()], "lr": lrs[0]},
            # the context table is a plain lookup of logits: it needs a far larger step to track
            # the symbol statistics within a few hundred steps
            {"params": nets.ctx.parameters(), "lr": lrs[1]},
        ],
        betas=betas,
    )
    return opt_g, torch.optim.Adam(disc.parameters(), lr=lrs[0], betas=betas)


def restore_optimisers(
    opt_g: torch.optim.Optimizer,
    opt_d: torch.optim.Optimizer,
    state: dict,
    lrs: tuple[float, float],
    betas: tuple[float, float],
) -> None:
    """A checkpoint's Adam moments, under this run's learning rates and betas."""
    opt_g.load_state_dict(state["opt_g"])
    opt_d.load_state_dict(state["opt_d"])
    for group, lr in zip(opt_g.param_groups, lrs, strict=True):
        group["lr"], group["betas"] = lr, betas
    for group in opt_d.param_groups:
        group["lr"], group["betas"] = lrs[0], betas


def warm_up(
    opt: torch.optim.Optimizer, lrs: tuple[float, float], steps_done: int, warmup: int
) -> None:
    """Linear warm-up from the run's first step (also after a resume): Adam's first steps are big."""
    warm = min(1.0, (steps_done + 1) / max(1, warmup))
    for group, lr in zip(opt.param_groups, lrs, strict=True):
        group["lr"] = lr * warm


def descend(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One optimiser step on a loss."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


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


def discriminator_loss(
    d_model: nn.Module,
    x: torch.Tensor,
    logs: dict,
    labels: torch.Tensor,
    num_classes: int,
    device: torch.device,
    bf16: bool,
) -> torch.Tensor:
    """L_D on the real crops and the generator's latest outputs, both conditioned on the map."""
    oh = one_hot_map(labels, num_classes, x.shape[-2:])
    base = logs["base"] * 2 - 1
    with autocast(device, bf16):
        # one discriminator call on [real; fake] so DDP sees one forward per backward
        both = d_model(
            torch.cat([x, logs["x_hat"]]) * 2 - 1,
            torch.cat([oh, oh]),
            torch.cat([base, base]),
        )
        n = x.shape[0]
        return d_loss([[f[:n] for f in sc] for sc in both], [[f[n:] for f in sc] for sc in both])
