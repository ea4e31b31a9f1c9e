"""Segmentation commands: ``segment`` (a label map of one image) and ``eval seg`` (CamVid)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..defaults import DEFAULT_MODEL
from ..errors import SemcodecError
from ..labelmap import label_image
from .batch import deliver, plan_problem, stdin_bytes
from .codec import png_bytes
from .common import STDIO, debug_option


@click.command()
@click.argument("image", metavar="IMG")
@click.option(
    "-o", "--output", required=True, metavar="MAP.png", help="Output PNG ('-' for stdout)."
)
@click.option("--color", is_flag=True, help="Palette colours instead of class indices.")
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model bundle.")
@click.option("-f", "--force", is_flag=True, help="Overwrite an existing output.")
@debug_option
def segment(image: str, output: str, color: bool, model: str, force: bool) -> None:
    """Full-resolution semantic label map of an image (mode L class indices, or --color)."""
    problem = plan_problem(image, output, force, set())
    if problem is not None:
        raise SemcodecError(problem)
    from ..imageio import load_image
    from ..segment import full_resolution_labels
    from ..zoo import load_bundle

    bundle = load_bundle(model)
    img = load_image(stdin_bytes() if image == STDIO else image)
    labels = full_resolution_labels(bundle.seg, img.rgb, bf16=False)
    deliver(output, png_bytes(label_image(labels, color)), force)


@click.group("eval")
def eval_group() -> None:
    """Evaluate models."""


@eval_group.command("seg")
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("../shared/data/camvid"),
    show_default=True,
    help="CamVid folder with <split>.txt lists.",
)
@click.option("--split", default="test", show_default=True)
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model bundle.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="First N images only.")
@click.option("--bf16/--no-bf16", default=False, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout.")
@debug_option
def eval_seg(
    data: Path, split: str, model: str, limit: int | None, bf16: bool, as_json: bool
) -> None:
    """Per-class IoU, mIoU, pixel accuracy and speed of a bundle's segmentation net on CamVid."""
    from ..train.data import read_split
    from ..train.seg import evaluate_seg
    from ..zoo import load_bundle

    bundle = load_bundle(model)
    images, labels = read_split(data, split)
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    result = evaluate_seg(bundle.seg, images, labels, bf16=bf16)
    result = {"model": model, "split": split, **result}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"model {model}, split {split}, {result['images']} images")
    for cls, iou in result["per_class_iou"].items():
        click.echo(f"  {cls:<12} IoU {100 * iou:6.2f}")
    click.echo(f"  {'mIoU':<12}     {100 * result['miou']:6.2f}")
    click.echo(f"  {'pixel acc':<12}     {100 * result['pixel_accuracy']:6.2f}")
    click.echo(f"  {'speed':<12}     {result['images_per_s']:6.2f} images/s")
