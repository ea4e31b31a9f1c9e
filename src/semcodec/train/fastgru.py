"""The segmentation heads' ReNet sweeps for training, batched: the function nn.GRU computes,
with fewer and larger CPU operations.

A ReNet sweep is a bidirectional GRU along every row (then every column) of a stride-8 map:
45 to 60 steps, each a (rows x 64) by (64 x 192) product and a handful of element-wise
operations. nn.GRU runs each direction of each branch separately and autograd records every
step's operations, so on one CPU thread the small operations' overhead is much of a frozen
step. Here the two directions of both branches (their maps have the same shape) run as one
stack of GRUs: each step is one batched product and a few element-wise operations on all of
them, and the backward pass is written out (the recurrent weights' gradient is one product
after the loop). The module, its parameters and inference are untouched: this is a training
path only (`train seg --fast-heads`), checked against nn.GRU in tests/test_training_fast.py.
"""

from __future__ import annotations

import torch
from torch import nn

from semcodec.models.segmentation import Branch, ReNet


def gru_cell(
    x_f: torch.Tensor,
    x_r: torch.Tensor,
    gh: torch.Tensor,
    b_hn: torch.Tensor,
    h: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of nn.GRU's cell for both directions: the new state and what backward needs.

    x_f, x_r (K, N, 3H): the two directions' input projections (b_hh's r, z parts added);
    gh (K, 2, N, 3H): W_hh h; b_hn (K, 2, 1, H); h (K, 2, N, H) float32.
    """
    hid = h.shape[-1]
    x = torch.stack([x_f, x_r], 1).float()
    rz = torch.sigmoid(x[..., : 2 * hid] + gh[..., : 2 * hid])
    r, z = rz[..., :hid], rz[..., hid:]
    ghn = gh[..., 2 * hid :] + b_hn
    nv = torch.tanh(x[..., 2 * hid :] + r * ghn)
    return nv + z * (h - nv), r, z, nv, ghn


def gru_cell_backward(
    dh: torch.Tensor,
    r: torch.Tensor,
    z: torch.Tensor,
    nv: torch.Tensor,
    ghn: torch.Tensor,
    h_prev: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """gru_cell's gradients for dL/dh_new = dh: (d W_hh h, d n-gate input, dL/dh_prev direct)."""
    dn = dh * (1 - z) * (1 - nv * nv)
    dr = dn * ghn * r * (1 - r)
    dz = dh * (h_prev - nv) * z * (1 - z)
    return torch.cat([dr, dz, dn * r], -1), dn, dh * z


CELLS = {"forward": gru_cell, "backward": gru_cell_backward}


def compile_cells() -> None:
    """Swap the cells for torch.compile'd ones (fused element-wise loops; compiled per shape)."""
    CELLS["forward"] = torch.compile(gru_cell, dynamic=False)
    CELLS["backward"] = torch.compile(gru_cell_backward, dynamic=False)


class BiGRUs(torch.autograd.Function):
    """K bidirectional single-layer GRUs from zero state, each over T steps of N sequences.

    Inputs: gi (K, T, N, 2, 3H), direction d's input projection W_ih x + b_ih with b_hh's r
    and z parts added (gate order r, z, n as nn.GRU); w_hh (2K, 3H, H) and b_hn (2K, H),
    forward then reverse direction of each GRU. Output (K, T, N, 2, H): the hidden states in
    time order, as nn.GRU's output. Each step runs the forward direction at time s and the
    reverse one at time T-1-s, all 2K GRUs in one batched product (in gi's dtype: bf16 under
    autocast); the state, the gates and the gradients are float32.
    """

    @staticmethod
    def forward(ctx, gi: torch.Tensor, w_hh: torch.Tensor, b_hn: torch.Tensor) -> torch.Tensor:
        k, t_len, n, _, h3 = gi.shape
        hid = h3 // 3
        mm = gi.dtype
        cell = CELLS["forward"]
        w_t = w_hh.to(mm).transpose(1, 2)  # (2K, H, 3H)
        bias = b_hn.float().view(k, 2, 1, hid)
        h = gi.new_zeros((k, 2, n, hid), dtype=torch.float32)
        saved = []
        for s in range(t_len):
            gh = torch.bmm(h.view(2 * k, n, hid).to(mm), w_t).view(k, 2, n, h3).float()
            h_prev = h
            h, r, z, nv, ghn = cell(gi[:, s, :, 0], gi[:, t_len - 1 - s, :, 1], gh, bias, h)
            saved.append((h_prev, r, z, nv, ghn, h))
        out = torch.stack(
            [
                torch.stack([saved[t][5][:, 0], saved[t_len - 1 - t][5][:, 1]], 2)
                for t in range(t_len)
            ],
            1,
        )
        ctx.saved = saved
        ctx.save_for_backward(w_hh)
        ctx.mm_dtype = mm
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        (w_hh,) = ctx.saved_tensors
        saved, mm = ctx.saved, ctx.mm_dtype
        del ctx.saved
        k, t_len, n, _, hid = grad_out.shape
        w = w_hh.to(mm)  # (2K, 3H, H)
        cell = CELLS["backward"]
        grad_out = grad_out.float()
        d_w = grad_out.new_zeros((2 * k, 3 * hid, hid))
        d_bn = grad_out.new_zeros((k, 2, hid))
        dh = grad_out.new_zeros((k, 2, n, hid))
        d_gi: list[torch.Tensor] = [grad_out] * t_len  # per step s, both directions
        for s in range(t_len - 1, -1, -1):
            dh = dh + torch.stack([grad_out[:, s, :, 0], grad_out[:, t_len - 1 - s, :, 1]], 1)
            h_prev, r, z, nv, ghn, _ = saved[s]
            dgh, dn, direct = cell(dh, r, z, nv, ghn, h_prev)
            d_gi[s] = torch.cat([dgh[..., : 2 * hid], dn], -1)
            g = dgh.view(2 * k, n, 3 * hid).to(mm)
            d_w += torch.bmm(g.transpose(1, 2), h_prev.view(2 * k, n, hid).to(mm)).float()
            d_bn += dgh[..., 2 * hid :].sum(2)
            dh = torch.bmm(g, w).float().view(k, 2, n, hid) + direct
        grad_gi = torch.stack(
            [torch.stack([d_gi[t][:, 0], d_gi[t_len - 1 - t][:, 1]], 2) for t in range(t_len)], 1
        )
        return grad_gi.to(mm), d_w.to(w_hh.dtype), d_bn.view(2 * k, hid).to(w_hh.dtype)


def _direction_weights(grus: list[nn.GRU], name: str) -> torch.Tensor:
    """One parameter of every GRU's forward and reverse direction, stacked (2 * len(grus), ...)."""
    return torch.stack([getattr(g, f"{name}_l0{sfx}") for g in grus for sfx in ("", "_reverse")])


def sweep(grus: list[nn.GRU], xs: torch.Tensor) -> torch.Tensor:
    """Bidirectional GRUs along axis 1 of xs (K, T, N, C), GRU k on xs[k]; (K, T, N, 2H).

    What ``grus[k](seq)`` gives for the N sequences of length T, forward then reverse channels.
    """
    k, t_len, n, c = xs.shape
    w_ih = _direction_weights(grus, "weight_ih")  # (2K, 3H, C)
    hid = w_ih.shape[1] // 3
    b_hh = _direction_weights(grus, "bias_hh")
    rz_only = torch.cat([b_hh[:, : 2 * hid], torch.zeros_like(b_hh[:, 2 * hid :])], 1)
    bias = (_direction_weights(grus, "bias_ih") + rz_only).view(k, 1, 6 * hid)
    w_pair = w_ih.view(k, 6 * hid, c).transpose(1, 2)  # (K, C, 6H): both directions
    gi = torch.baddbmm(bias, xs.reshape(k, t_len * n, c), w_pair)
    hs = BiGRUs.apply(
        gi.view(k, t_len, n, 2, 3 * hid),
        _direction_weights(grus, "weight_hh"),
        b_hh[:, 2 * hid :],
    )
    return hs.view(k, t_len, n, 2 * hid)


def renet_pair(renets: list[ReNet], xs: torch.Tensor) -> torch.Tensor:
    """ReNet.forward of renets[k] on xs[k] for (K, B, C, H, W) maps of one shape; (K, B, 2H, H, W)."""
    k, b, c, h, w = xs.shape
    rows = xs.permute(0, 4, 1, 3, 2).reshape(k, w, b * h, c)  # time along W, one sequence a row
    y = sweep([r.row_gru for r in renets], rows)  # (K, W, B*H, 2H)
    y = y.view(k, w, b, h, -1).permute(0, 3, 2, 1, 4).reshape(k, h, b * w, -1)  # time along H
    y = sweep([r.col_gru for r in renets], y)  # (K, H, B*W, 2H)
    return y.view(k, h, b, w, -1).permute(0, 2, 4, 1, 3).contiguous()


def heads(branches: list[Branch], feats: list[torch.Tensor]) -> list[torch.Tensor]:
    """Branch.head of each branch on its merged stride-8 map, the ReNets of all run together."""
    f = torch.stack([br.coord(x) for br, x in zip(branches, feats, strict=True)])
    f = renet_pair([br.renet1 for br in branches], f)
    f = torch.stack([br.coord(x) for br, x in zip(branches, f, strict=True)])
    f = renet_pair([br.renet2 for br in branches], f)
    return [br.pyramid(x) for br, x in zip(branches, f, strict=True)]
