"""A2's trainable context model: the differentiable rate term the integer table is frozen from.

The coder (format/compact.py) uses only the frozen integer table and needs no torch; this module
is for training, refinement and random test bundles.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from semcodec.format.compact import NEIGHBOURS, TABLE_PRECISION, _contexts


class ContextModel(nn.Module):
    """Trainable categorical model p(symbol | channel, neighbours) = softmax(logits)."""

    def __init__(self, channels: int, levels: int, neighbours: int = 2):
        super().__init__()
        if neighbours not in NEIGHBOURS:
            raise ValueError(f"neighbours must be one of {NEIGHBOURS}, got {neighbours}")
        self.channels, self.levels, self.neighbours = channels, levels, neighbours
        self.logits = nn.Parameter(torch.zeros(channels, (levels + 1) ** neighbours, levels))

    def _contexts(self, hard: torch.Tensor) -> torch.Tensor:
        """Context indices (B,C,h,w) of hard symbols, computed without gradient."""
        return _contexts(hard.detach().long(), self.levels, self.neighbours, torch.full_like)

    def bits(self, y: torch.Tensor) -> torch.Tensor:
        """Total bits of continuous symbols y (B,C,h,w) in [0, L-1]; differentiable in y and logits.

        The hard symbol round(y) is what gets coded; the gradient with respect to y comes from
        interpolating the log-probabilities of the two integer levels around y.
        """
        L = self.levels
        y = y.float().clamp(0, L - 1)
        hard = torch.round(y)
        ctx = self._contexts(hard)
        logp = torch.log_softmax(self.logits.float(), -1)  # (C, K, L)
        b, c, h, w = y.shape
        ch = torch.arange(c, device=y.device).view(1, c, 1, 1).expand(b, c, h, w)
        table = logp[ch, ctx]  # (B,C,h,w,L)
        lo = torch.floor(y).clamp(0, L - 1)
        hi = (lo + 1).clamp(max=L - 1)
        f = y - lo
        lp_hard = table.gather(-1, hard.long().unsqueeze(-1)).squeeze(-1)  # trains the table
        tdet = table.detach()
        lp_lo = tdet.gather(-1, lo.long().unsqueeze(-1)).squeeze(-1)
        lp_hi = tdet.gather(-1, hi.long().unsqueeze(-1)).squeeze(-1)
        interp = (1 - f) * lp_lo + f * lp_hi
        lp = lp_hard + interp - interp.detach()  # value: exact; gradient in y: interpolated
        return -lp.sum() / np.log(2.0)

    @torch.no_grad()
    def load_integer_table(self, table: np.ndarray) -> None:
        """Set the logits to a frozen table's log-probabilities (to fine-tune a shipped model)."""
        if tuple(table.shape) != tuple(self.logits.shape):
            raise ValueError(
                f"table of shape {tuple(table.shape)} does not fit a context model of "
                f"{self.neighbours} neighbours {tuple(self.logits.shape)}"
            )
        t = torch.from_numpy(np.asarray(table, np.float64))
        self.logits.copy_(torch.log(t / t.sum(-1, keepdim=True)).float())

    @torch.no_grad()
    def integer_table(self) -> np.ndarray:
        """Freeze the model into int32 counts (C, (L+1)^n, L), each at least 1."""
        p = torch.softmax(self.logits.double(), -1).numpy()
        return np.maximum(1, np.floor(p * TABLE_PRECISION)).astype(np.int32)
