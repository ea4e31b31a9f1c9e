"""Photos beside their semantic maps, for the docs: what the map says about people.

    python tools/people_maps.py --images ../shared/data/kodak --names kodim04,kodim05 \
        --weights old=OLD.pt --weights new=models/default-28b3a382.pt --out docs/crops/maps

Each output is the photo (scaled to 256 px high) with the map of each model named beside it,
in the CamVid palette (UNKNOWN black), each panel labelled.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from semcodec.bench.rd.report import label_panel
from semcodec.encoder.segment import full_resolution_labels
from semcodec.labelmap import label_image

HEIGHT = 256


def seg_net(model: str | None, weights: str | None):
    """A bundle's segmentation network, or a checkpoint's (under the bundle's configuration)."""
    from semcodec.zoo.bundles import load_bundle

    if weights is None:
        return load_bundle(model or "default").seg
    from semcodec.train.common import read_seg_source

    return read_seg_source(Path(weights)).net().eval()


def panel(img: Image.Image, text: str) -> Image.Image:
    """An image scaled to HEIGHT with its label."""
    w = round(img.width * HEIGHT / img.height)
    return label_panel(img.convert("RGB").resize((w, HEIGHT), Image.Resampling.NEAREST), text)


def main(argv: Sequence[str] | None = None) -> None:
    """Write one side-by-side PNG per photo."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=Path, required=True)
    ap.add_argument("--names", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", action="append", default=[], help="bundle name (repeatable)")
    ap.add_argument("--weights", action="append", default=[], help="NAME=checkpoint (repeatable)")
    args = ap.parse_args(argv)
    nets = [(m, seg_net(m, None)) for m in args.model]
    nets += [(w.split("=", 1)[0], seg_net(None, w.split("=", 1)[1])) for w in args.weights]
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names.split(","):
        src = next(args.images.glob(f"{name}.*"))
        rgb = np.asarray(Image.open(src).convert("RGB"))
        panels = [panel(Image.fromarray(rgb), name)]
        for label, net in nets:
            labels = full_resolution_labels(net, rgb, bf16=False)
            panels.append(panel(label_image(labels, color=True), label))
        out = Image.new("RGB", (sum(p.width for p in panels), panels[0].height), "white")
        x = 0
        for p in panels:
            out.paste(p, (x, 0))
            x += p.width
        out.save(args.out / f"map-{name}.png", optimize=True)
        print(args.out / f"map-{name}.png")


if __name__ == "__main__":
    main()
