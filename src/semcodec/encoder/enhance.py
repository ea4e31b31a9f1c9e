"""Where and how strongly the enhancement network applies to a picture: the encoder's choice.

The decoder runs the release's integer enhancement network (intgrid/enhancer.py) on its decoded
picture; the file says, per class, how much of the network's correction to add (a gain fitted
to this image by least squares) and per tile whether to add it at all. The encoder has the
original, so it fits these to it and keeps the layer only where it lowers the file's
rate-distortion cost: no file is worse for it. The format's per-class RGB offsets, which
earlier versions fitted at efforts 8 and 9, cost BD-rate in every metric on held-out pictures
(docs/benchmarks.md, the effort table) and stay zero. An effort with an adaptation
(adapt.ADAPT_CONFIGS) also fits the network's class bias rows to the picture by gradient and
keeps that update only where the file with it costs less than the file without.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from semcodec.decoder.pipeline import Decoder
from semcodec.encoder.options import EncodeOptions
from semcodec.encoder.rdcost import rd_cost
from semcodec.format import container
from semcodec.format.container import Header, LayerKind
from semcodec.format.enhance import encode_adjust
from semcodec.intgrid.enhancer import (
    CORR_SHIFT,
    GAIN_ONE,
    Adjust,
    IntEnhancer,
    Update,
    apply,
    class_rows,
    neutral,
)

#: The encoder's stage clock names of the enhancement: the decode of the plain file, the fit of
#: gains and tiles with the network's correction, the adaptation (adapt.ADAPT_CONFIGS) and the
#: check of which file costs least, with the packing of the chosen one.
ENHANCE_STAGES = ("enhance_decode", "enhance_fit", "enhance_adapt", "enhance_check")
#: effort → the fit sees every n-th strip of 64-pixel tiles only, the network run there alone,
#: and the layer covers every tile (efforts not listed: the whole picture, per-tile switching).
#: Every 4th strip against every 2nd at effort 5: +0.01 / +0.06 / +0.07 % BD-rate (PSNR /
#: MS-SSIM dB / SSIMULACRA 2; 6 BSDS500 val photos and 6 CamVid val frames, 2026-12-07) for
#: 0.05 CPU-s less of a Kodak picture, which buys more on the speed-size front: efforts up to
#: 6 fit on every 4th. At effort 6 (then AV1 speed 5) on 4 BSDS500 val photos and 4 CamVid val
#: frames the whole picture with tile switching gave 0.2 / -0.1 / -0.2 points of BD-rate more
#: than every 4th strip for 0.05 CPU-s more (0.17 s of a Kodak picture); at effort 7 (speed 3)
#: every 4th strip lay 0.1 / 0.1 / 0.1 points less far beyond the front for 0.04 s less
FIT_STRIDES: dict[int, int] = {1: 4, 2: 4, 3: 4, 4: 4, 5: 4, 6: 4}
MIN_PIXELS = 256  # a class with fewer pixels keeps the trained gain


@dataclass(frozen=True)
class EnhanceChoice:
    """The chosen adjustment, its picture and what it changed."""

    adjust: Adjust
    picture: np.ndarray  # uint8 (H, W, 3)
    mse_before: float
    mse_after: float


def fit_gains(c: np.ndarray, t: np.ndarray, idx: np.ndarray, classes: int) -> np.ndarray:
    """int64 (classes + 1,): each class's least-squares gain (eighths, 0..15) of c against t,
    from per-class sums (one pass each, not a mask per class); GAIN_ONE for a class with
    fewer than MIN_PIXELS pixels. c, t (h, w, 3) correction and target in levels."""
    flat = idx.ravel()
    size = classes + 1
    count = np.bincount(flat, minlength=size)
    ct = np.bincount(flat, (c * t).sum(-1, dtype=np.float64).ravel(), size)
    cc = np.bincount(flat, (c * c).sum(-1, dtype=np.float64).ravel(), size)
    a = np.divide(ct, cc, out=np.ones(size), where=cc > 0)
    gains = np.clip(np.round(a * GAIN_ONE), 0, 15).astype(np.int64)
    return np.where(count >= MIN_PIXELS, gains, GAIN_ONE)


def choose(
    enhancer: IntEnhancer,
    original: np.ndarray,
    decoded: np.ndarray,
    labels: np.ndarray,
    quality: int,
    tile: int = 64,
    update: Update | None = None,
    tiles: bool = True,
) -> EnhanceChoice:
    """Fit gains to this image, then switch off the tiles it makes worse
    (``tiles`` False: every tile keeps the layer); ``update``: the network's class bias rows
    changed as a file may say."""
    classes = enhancer.classes
    corr = enhancer.correction(decoded, labels, quality, update)
    h, w = decoded.shape[:2]
    idx = class_rows(labels, classes, 8)[:h, :w]
    c = corr.astype(np.float32) / (1 << CORR_SHIFT)
    t = original.astype(np.float32) - decoded
    gains = fit_gains(c, t, idx, classes)
    full = replace(neutral(classes), gains=gains, tile=tile, update=update)  # offsets: none
    enhanced = apply(decoded, corr, labels, full, classes)
    err_before = (t**2).sum(2, dtype=np.float64)
    err_after = ((original.astype(np.float32) - enhanced) ** 2).sum(2, dtype=np.float64)
    th, tw = -(-h // tile), -(-w // tile)
    pad = ((0, th * tile - h), (0, tw * tile - w))
    gain_map = np.pad(err_before - err_after, pad).reshape(th, tile, tw, tile).sum((1, 3))
    on = gain_map > 0 if tiles else np.ones((th, tw), bool)
    if on.all():
        adjust = full
    else:  # apply's tile mask leaves the decoded pixels: the same as masking the full result
        adjust = replace(full, tiles=on)
        mask = np.repeat(np.repeat(on, tile, 0), tile, 1)[:h, :w, None]
        enhanced = np.where(mask, enhanced, decoded)
    mse_before = float(err_before.mean() / 3)
    mse_after = float(((original.astype(np.float32) - enhanced) ** 2).mean(dtype=np.float64))
    return EnhanceChoice(adjust, enhanced, mse_before, mse_after)


def fit_rows(height: int, stride: int, tile: int = 64) -> np.ndarray | None:
    """The picture rows of every ``stride``-th whole strip of tiles (the first in each group of
    ``stride``): the sample a cheap fit sees; None when it would not be smaller than the
    picture or would hold no whole strip."""
    whole = height // tile
    if stride <= 1 or whole < stride:
        return None
    starts = np.arange(0, whole, stride) * tile
    return (starts[:, None] + np.arange(tile)[None, :]).ravel()


def choose_sampled(
    enhancer: IntEnhancer,
    original: np.ndarray,
    decoded: np.ndarray,
    labels: np.ndarray,
    quality: int,
    stride: int,
    tile: int = 64,
) -> EnhanceChoice:
    """The gains fitted on every ``stride``-th strip of tiles, the network run
    there only, every tile keeping the layer; the errors are the sample's (the whole picture
    when it is too small to sample)."""
    rows = fit_rows(decoded.shape[0], stride, tile)
    if rows is None:
        return choose(enhancer, original, decoded, labels, quality, tile, tiles=False)
    lab = labels[np.unique(rows // 8)]
    part = choose(enhancer, original[rows], decoded[rows], lab, quality, tile, tiles=False)
    return EnhanceChoice(part.adjust, decoded, part.mse_before, part.mse_after)


def cost(mse: float, nbytes: int, quality: int) -> float:
    """The rate–distortion cost of a file of this size and error (rdcost.rd_cost)."""
    return rd_cost(8.0 * nbytes, mse, max(int(quality), 1))


def pays(choice: EnhanceChoice, plain_bytes: int, enhanced_bytes: int, quality: int) -> bool:
    """Whether the file with the layer (``enhanced_bytes`` long, the plain file
    ``plain_bytes``) has the lower rate–distortion cost (rdcost.rd_cost)."""
    if choice.adjust.tiles is not None and not choice.adjust.tiles.any():
        return False
    without = cost(choice.mse_before, plain_bytes, quality)
    return cost(choice.mse_after, enhanced_bytes, quality) < without


def adapted(
    enhancer: IntEnhancer,
    original: np.ndarray,
    decoded: np.ndarray,
    labels: np.ndarray,
    opts: EncodeOptions,
    start: EnhanceChoice,
    file_bytes: int,
) -> EnhanceChoice | None:
    """The choice with the network's rows fitted to the picture (encoder/adapt.py) for a file
    of about ``file_bytes``, checked with the integer network; None below its effort or when
    the fit changes nothing that pays."""
    from semcodec.encoder import adapt  # torch: only the efforts that adapt load it

    cfg = adapt.adapt_config(opts.effort)
    if cfg is None:
        return None
    update = adapt.fit_update(
        enhancer, original, decoded, labels, opts.quality, start.adjust, cfg, file_bytes
    )
    if update is None:
        return None
    return choose(enhancer, original, decoded, labels, opts.quality, update=update)


def enhanced_file(
    dec: Decoder,
    data: bytes,
    header: Header,
    layers: dict[LayerKind, bytes],
    original: np.ndarray,
    opts: EncodeOptions,
    clock: Callable[[str], None] | None = None,
) -> tuple[bytes, dict[LayerKind, bytes]]:
    """The file with an ENHANCE layer fitted to the original, where that lowers its cost: of
    the plain file, the closed-form layer and (with an adaptation) the adapted one, the cheapest.
    ``clock`` (the encoder's stage clock) closes ENHANCE_STAGES as they finish."""
    tick = clock or (lambda _stage: None)
    result = dec.decode(data)
    assert dec.enhancer is not None and result.pixels is not None
    tick("enhance_decode")
    args = (dec.enhancer, original, result.pixels, result.semantic_map)
    stride = FIT_STRIDES.get(opts.effort, 1)
    if stride > 1:
        choice = choose_sampled(*args, opts.quality, stride)
    else:
        choice = choose(*args, opts.quality)
    tick("enhance_fit")
    options = [choice, adapted(*args, opts, choice, len(data))]
    tick("enhance_adapt")
    best: tuple[float, bytes | None] = (cost(choice.mse_before, len(data), opts.quality), None)
    for option in options:
        if option is None:
            continue
        layer = encode_adjust(option.adjust)
        size = len(data) + len(layer) + container.ESTIMATED_ENTRY
        if pays(option, len(data), size, opts.quality):
            c = cost(option.mse_after, size, opts.quality)
            if c < best[0]:
                best = (c, layer)
    if best[1] is None:
        tick("enhance_check")
        return data, layers
    layers = {**layers, LayerKind.ENHANCE: best[1]}
    packed = container.pack(header, layers)
    tick("enhance_check")
    return packed, layers
