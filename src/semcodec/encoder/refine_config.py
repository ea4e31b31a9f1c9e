"""What latent refinement does (refine.py), as a value an encode's options carry: torch-free, so
the command line builds and checks it before any worker imports torch."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RefineConfig"]


@dataclass(frozen=True)
class RefineConfig:
    """Gradient steps on the latents and the rate–distortion objective they minimise."""

    steps: int = 0  # 0: off, CompNet's output is quantised directly (the default, see refine.py)
    lr: float = 0.06  # Adam step on the pre-tanh latents (a quantisation step is about 0.13)
    mse_weight: float = 1000.0  # per mean squared error of [0,1] pixels
    msssim_weight: float = 10.0  # per (1 - MS-SSIM)
    rate_weight: float = 5.0  # per bit per pixel of the compact layer
    # autocast the generator's forward/backward (the result is quantised anyway); None: only
    # where bf16 is native and faster (runtime.bf16_decision), never emulated
    bf16: bool | None = None

    def __post_init__(self) -> None:
        """Refuse settings that cannot describe an optimisation."""
        if self.steps < 0 or self.lr <= 0:
            raise ValueError(f"refinement needs steps >= 0 and lr > 0, got {self.steps}, {self.lr}")
