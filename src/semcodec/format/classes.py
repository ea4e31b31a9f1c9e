"""The semantic map's classes: CamVid's 11, their names and palette (no torch, no model).

Every model's segmentation network predicts these classes and the map layer codes them, so a
file's map reads without its model (docs/format.md §4).
"""

from __future__ import annotations

NUM_CLASSES = 11  # the network never predicts void
VOID = 11  # label value ignored in training and evaluation
UNKNOWN = VOID  # in a map: the network was not sure (CamVid's void); releases from 2026-12
MAP_SYMBOLS = NUM_CLASSES + 1  # the map's alphabet: the classes and UNKNOWN
CLASSES: tuple[str, ...] = (
    "sky", "building", "pole", "road", "pavement", "tree",
    "signsymbol", "fence", "car", "pedestrian", "bicyclist",
)  # fmt: skip
MAP_NAMES: tuple[str, ...] = (*CLASSES, "unknown")  # a map value's name
# the class CompNet and the generator see at an UNKNOWN position: they were trained on maps
# without it, and an all-zero one-hot input cost 7 dB of base-layer PSNR; among building, sky,
# tree, road and pavement, tree gave the best base layer on held-out training photos
UNKNOWN_AS = CLASSES.index("tree")
PALETTE: tuple[tuple[int, int, int], ...] = (
    (128, 128, 128), (128, 0, 0), (192, 192, 128), (128, 64, 128), (60, 40, 222), (128, 128, 0),
    (192, 128, 128), (64, 64, 128), (64, 0, 128), (64, 64, 0), (0, 128, 192), (0, 0, 0),
)  # fmt: skip
