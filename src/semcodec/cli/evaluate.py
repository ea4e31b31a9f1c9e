"""Evaluation commands: `eval seg` (CamVid), `eval enhance` (`segment` is ``cli.segment``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import click

from semcodec.cli.common import debug_option
from semcodec.defaults import DEFAULT_MODEL


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
@click.option(
    "--weights",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A training checkpoint or bundle file instead of --model.",
)
@click.option(
    "--average/--last-step",
    default=True,
    show_default=True,
    help="--weights checkpoint: its moving average of the weights (where the run kept one), or "
    "the last step's weights",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="First N images only.")
@click.option("--bf16/--no-bf16", default=False, show_default=True)
@click.option("--unknown-below", type=float, default=None, help="UNKNOWN threshold to use.")
@click.option("--sweep", default="", help="Also score these UNKNOWN thresholds (comma-separated).")
@click.option(
    "--class-bias",
    default=None,
    metavar="CLASS=OFFSET,...",
    help="Offsets added to the class scores before the decision (a bundle's own by default).",
)
@click.option(
    "--fit-bias",
    is_flag=True,
    help="Fit the class offsets on this split (checked on its two halves), then score with them.",
)
@click.option(
    "--persons",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Clothing Co-Parsing folder: person IoU on its held-out photos.",
)
@click.option(
    "--photos",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A folder of unlabelled photos: the UNKNOWN share of their maps.",
)
@click.option(
    "--anomaly",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    metavar="GT",
    help="BSDS500 groundTruth folder: also score the split's frames with an object outside the "
    "classes pasted into each (AUROC, FPR at 95 % TPR, AP, UNKNOWN shares; train.anomaly).",
)
@click.option(
    "--anomaly-objects",
    type=click.Choice(["test", "val"]),
    default="test",
    show_default=True,
    help="whose objects are pasted: the BSDS500 test photos' (the benchmark) or val's (choices)",
)
@click.option(
    "--anomaly-photos",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="the photos of those objects (default: ../shared/data/bsds500-test, or photos for val)",
)
@click.option(
    "--shift",
    type=int,
    default=None,
    metavar="SEED",
    help="score a copy of the split as another camera gives it (exposure, white balance, "
    "noise, JPEG, resolution; the same copy for the same seed).",
)
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout.")
@debug_option
def eval_seg(
    data: Path,
    split: str,
    model: str,
    weights: Path | None,
    average: bool,
    limit: int | None,
    bf16: bool,
    unknown_below: float | None,
    sweep: str,
    class_bias: str | None,
    fit_bias: bool,
    persons: Path | None,
    photos: Path | None,
    anomaly: Path | None,
    anomaly_objects: str,
    anomaly_photos: Path | None,
    shift: int | None,
    as_json: bool,
) -> None:
    """Per-class IoU and recall, mIoU, pixel accuracy, UNKNOWN share and speed on CamVid."""
    from dataclasses import replace

    from semcodec.models.segmentation import with_class_bias
    from semcodec.train.data import read_split
    from semcodec.train.seg import evaluate_persons, evaluate_seg

    offsets = None if class_bias is None else _class_bias(class_bias)
    # on a copy: the bundle's network is shared in the process
    net = copy.deepcopy(_seg_net(model, weights, average))
    if unknown_below is not None:
        net.cfg = replace(net.cfg, unknown_below=unknown_below)
    if offsets is not None:  # instead of the bundle's own ('' for none)
        net.cfg = with_class_bias(replace(net.cfg, class_bias=()), offsets)
    images, labels = read_split(data, split)
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    if shift is not None:
        from semcodec.train.anomaly import shifted_frame

        pairs = [shifted_frame(im, labels[i], i, shift) for i, im in enumerate(images)]
        images, labels = [p[0] for p in pairs], [p[1] for p in pairs]
    fitted = None
    if fit_bias:
        from semcodec.train.decision import fit_report, pixel_scores

        net.cfg = replace(net.cfg, class_bias=())
        fitted = fit_report(pixel_scores(net, images, labels, bf16), net.cfg.unknown_below)
        net.cfg = with_class_bias(net.cfg, fitted["class_bias"])
    ts = tuple(float(t) for t in sweep.split(",") if t.strip())
    result = evaluate_seg(net, images, labels, bf16=bf16, thresholds=ts)
    result = {"model": str(weights or model), "split": split, **result}
    result["class_bias"] = _named_bias(net.cfg.class_bias)
    if fitted is not None:
        result["fitted_halves"] = fitted["halves"]
        result["miou_without_bias"] = fitted["miou_without"]
    if persons is not None:
        from semcodec.train.persons import read_person_set

        held = read_person_set(persons, "test")
        result["persons"] = evaluate_persons(net, held.images, held.masks)
    if photos is not None:
        result["photos"] = _photo_shares(net, photos, limit)
    if anomaly is not None:
        result["anomaly"] = _anomaly(
            net, images, labels, anomaly, anomaly_objects, anomaly_photos, ts
        )
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    _print_seg(result)


@eval_group.command("enhance")
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="A `train enhance-data` folder; its held-out photos are scored.",
)
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model bundle or file.")
@click.option("--hold-out", default=12, show_default=True, help="as `train enhance --hold-out`")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout.")
@debug_option
def eval_enhance(data: Path, model: str, hold_out: int, as_json: bool) -> None:
    """Held-out gain of the enhancement network: float, integer, and with the per-file fit."""
    from semcodec.train.enhance import load_shards, split_shards
    from semcodec.train.enhance_eval import held_out_gains
    from semcodec.zoo.bundles import load_bundle

    _, held = split_shards(load_shards(data), hold_out)
    if not held:
        raise click.UsageError(f"no held-out photos in {data}")
    result = {"model": model, **held_out_gains(load_bundle(model), held).as_dict()}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(
        f"{result['pictures']} pictures, {result['psnr_before']:.3f} dB decoded: "
        f"float {result['float_gain']:+.3f}, integer {result['integer_gain']:+.3f}, "
        f"with the per-file fit {result['fitted_gain']:+.3f} dB"
    )


def _anomaly(net, images, labels, gt: Path, split: str, photos: Path | None, sweep) -> dict:
    """The pasted-object benchmark (train.anomaly) of a split's frames."""
    from semcodec.train.anomaly import pasted_frames, score_anomaly
    from semcodec.train.outliers import read_objects
    from semcodec.train.seg import image_scores

    default = Path("../shared/data/bsds500-test" if split == "test" else "../shared/data/photos")
    objects = read_objects(gt, photos or default, split)
    net.eval()
    frames = ((image_scores(net, img), lab) for img, lab in pasted_frames(images, labels, objects))
    t = net.cfg.unknown_below
    result = score_anomaly(frames, net.cfg.class_bias, (t, *sweep))
    return {"objects": f"{split} ({len(objects)})", **result.as_dict(t)}


def _photo_shares(net, folder: Path, limit: int | None) -> dict:
    """UNKNOWN and class shares of the maps of a folder's photos."""
    from semcodec.imageio import list_images, load_image
    from semcodec.train.seg import evaluate_photos

    files = list_images(folder, limit)
    if not files:
        raise click.UsageError(f"no images in {folder}")
    return {"folder": str(folder), **evaluate_photos(net, [load_image(f).rgb for f in files])}


def _seg_net(model: str, weights: Path | None, average: bool = True):
    """The segmentation network of a bundle name, or of a checkpoint (its moving average, or
    with ``average`` off its last step) or bundle file."""
    from semcodec.zoo.bundles import load_bundle

    if weights is None:
        return load_bundle(model).seg
    from semcodec.train.common import seg_net_of

    return seg_net_of(weights, average)


def _class_bias(text: str) -> dict[str, float]:
    """--class-bias's offsets, or a usage error that says what is wrong."""
    from semcodec.models.segmentation import parse_class_bias

    try:
        return parse_class_bias(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--class-bias") from None


def _named_bias(bias: tuple[float, ...]) -> dict[str, float]:
    """The non-zero class offsets by class name."""
    from semcodec.models.segmentation import CLASS_NAMES

    return {n: v for n, v in zip(CLASS_NAMES, bias, strict=False) if v != 0}


def _print_seg(result: dict) -> None:
    """The human-readable table of eval seg."""
    click.echo(f"model {result['model']}, split {result['split']}, {result['images']} images")
    for cls, iou in result["per_class_iou"].items():
        rec = result["per_class_recall"][cls]
        click.echo(f"  {cls:<12} IoU {100 * iou:6.2f}  recall {100 * rec:6.2f}")
    click.echo(f"  {'mIoU':<12}     {100 * result['miou']:6.2f}")
    click.echo(f"  {'pixel acc':<12}     {100 * result['pixel_accuracy']:6.2f}")
    click.echo(
        f"  {'unknown':<12}     {100 * result['unknown_share']:6.2f} % "
        f"(below {result['unknown_below']:g})"
    )
    conf = result.get("confusion")
    if conf:
        from semcodec.format.classes import CLASSES, MAP_NAMES

        click.echo("  small classes taken for (share of their pixels):")
        for name in ("pole", "signsymbol", "fence", "pedestrian", "bicyclist"):
            row = conf[CLASSES.index(name)]
            total = max(1, sum(row))
            top = sorted(
                ((v / total, MAP_NAMES[j]) for j, v in enumerate(row) if MAP_NAMES[j] != name),
                reverse=True,
            )[:3]
            click.echo(f"    {name:<11} " + ", ".join(f"{k} {100 * v:.1f} %" for v, k in top))
    if result.get("class_bias"):
        offsets = ", ".join(f"{k} {v:+g}" for k, v in result["class_bias"].items())
        click.echo(f"  class offsets {offsets}")
    if "miou_without_bias" in result:
        click.echo(f"  mIoU without the offsets {100 * result['miou_without_bias']:6.2f}")
    for half in result.get("fitted_halves", ()):
        other = "second" if half["fitted_on"] == "first half" else "first"
        click.echo(
            f"  fitted on the {half['fitted_on']} of the frames, the {other} half: mIoU "
            f"{100 * half['miou_without']:6.2f} -> {100 * half['miou_with']:6.2f}"
        )
    for t, r in result.get("sweep", {}).items():
        click.echo(
            f"  unknown below {t}: mIoU {100 * r['miou']:6.2f}, "
            f"unknown {100 * r['unknown_share']:5.2f} %"
        )
    if "persons" in result:
        p = result["persons"]
        click.echo(
            f"  persons      IoU {100 * p['person_iou']:6.2f}, "
            f"unknown {100 * p['unknown_share']:5.2f} %"
        )
    if "photos" in result:
        ph = result["photos"]
        top = sorted(((v, k) for k, v in ph["class_share"].items()), reverse=True)[:3]
        click.echo(
            f"  photos       {ph['photos']} in {ph['folder']}: unknown "
            f"{100 * ph['unknown_share']:5.2f} %; "
            + ", ".join(f"{k} {100 * v:.1f} %" for v, k in top)
        )
    if "anomaly" in result:
        _print_anomaly(result["anomaly"])
    click.echo(f"  {'speed':<12}     {result['images_per_s']:6.2f} images/s")


def _print_anomaly(a: dict) -> None:
    """The pasted-object benchmark's lines of eval seg."""
    click.echo(
        f"  pasted objects ({a['objects']}): AUROC {100 * a['auroc']:5.2f}, FPR at 95 % TPR "
        f"{100 * a['fpr95']:5.2f} %, AP {100 * a['ap']:5.2f}"
    )
    for t, r in a["sweep"].items():
        click.echo(
            f"    unknown below {t}: pasted pixels UNKNOWN {100 * r['pasted_unknown']:5.1f} %, "
            f"in-vocabulary pixels UNKNOWN {100 * r['inlier_unknown']:5.2f} %"
        )
