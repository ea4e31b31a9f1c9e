"""Held-out measurement of `train codec`: rate, PSNR and SSIMULACRA 2 on whole images."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from semcodec.models.compnet import quantize_ste
from semcodec.models.losses import ssimulacra2_torch
from semcodec.train.codec_nets import CodecNets


@torch.no_grad()
def evaluate(nets: CodecNets, images: list, maps: list, device) -> dict[str, float]:
    """Mean rate (bits of the hard symbols under the context model), PSNR and SSIMULACRA 2
    (where its package is installed) on whole images."""
    was = nets.training
    nets.eval()
    bpp, psnr, s2 = [], [], []
    for img, mp in zip(images, maps, strict=True):
        x = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float().div(255)[None]
        lab = torch.from_numpy(mp.astype(np.int64))[None]
        t = nets.comp(x.to(device), lab.to(device))
        t_q, y = quantize_ste(t, nets.comp.cfg.levels)
        bits = nets.ctx.bits(torch.round(y))
        out, _ = nets.gen(t_q, lab.to(device), x.shape[-2:])
        x_hat = ((out + 1) * 0.5).clamp(0, 1).cpu()
        bpp.append(float(bits) / (x.shape[-2] * x.shape[-1]))
        psnr.append(float(-10 * torch.log10(F.mse_loss(x_hat, x))))
        try:
            s2.append(float(ssimulacra2_torch(x_hat, x)[0]))
        except ImportError:
            pass
    nets.train(was)
    out = {"val_bpp": float(np.mean(bpp)), "val_psnr": float(np.mean(psnr))}
    if s2:
        out["val_s2"] = float(np.mean(s2))
    return out
