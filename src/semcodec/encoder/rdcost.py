"""The rate–distortion cost by which the encoder chooses between two files of one quality.

The residual's candidates (encoder/residual.py), the ENHANCE layer against the plain file
(encoder/enhance.py) and the rows of the network's update worth their bits (encoder/adapt.py)
are all compared by one cost, log2(bits) − PSNR / slope(q): a file on the residual coder's own
rate–distortion curve costs the same at every rate of that curve, so a lower cost is a better
file at that quality whatever it spends.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rd_cost", "slope_db"]

# dB of PSNR per doubling of the residual coder's rate, measured with AVIF 4:4:4 on the
# images themselves (5 BSDS500 training photos): what one bit of PSNR is worth in bits
_SLOPE_Q = (1, 10, 25, 40, 55, 70, 85, 100)
_SLOPE_DB = (2.0, 2.0, 2.4, 3.1, 4.1, 6.0, 7.2, 8.0)


def slope_db(quality: int) -> float:
    """The residual coder's dB of PSNR per doubling of its rate at a quality (1..100)."""
    return float(np.interp(min(max(int(quality), 1), 100), _SLOPE_Q, _SLOPE_DB))


def rd_cost(bits: float, mse: float, quality: int) -> float:
    """log2(bits) − PSNR / slope(q): equal for two files on the coder's own RD curve."""
    psnr = 10 * np.log10(255.0**2 / max(mse, 1e-10))
    return float(np.log2(max(bits, 1.0)) - psnr / slope_db(quality))
