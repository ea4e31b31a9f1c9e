"""`semcodec train seg` and `semcodec eval seg`: CamVid training and evaluation of design B."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click
import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from semcodec.models.segmentation import (
    CLASS_NAMES,
    NUM_CLASSES,
    VOID,
    SegNet,
    build_segnet,
    load_backbone_weights,
    load_imagenet_weights,
)
from semcodec.progress import StepProgress
from semcodec.train.common import (
    RunClock,
    autocast,
    cleanup_distributed,
    ema_start,
    ema_update,
    load_checkpoint,
    poly_lr,
    save_checkpoint,
    setup_distributed,
)
from semcodec.train.data import SegAugment, class_weights, read_split, synthetic_segmentation
from semcodec.train.featcache import (
    CachePlan,
    FeatureCache,
    build_cache,
    cached_logits,
    freeze_backbone,
)
from semcodec.train.outliers import OUTLIER, OutlierPaste, read_objects, uniform_ce
from semcodec.train.persons import NOT_PERSON, PERSON, PersonAugment, read_person_set

OUTLIER_WEIGHT = 0.5  # weight of a pasted object's pixel against a labelled one


@dataclass
class SegTrainConfig:
    """Recipe of B11/B12 with the sizes chosen for this machine."""

    model: str = "default"
    iters: int = 4000
    batch: int = 8
    crop: tuple[int, int] = (240, 320)
    lr: float = 0.02
    momentum: float = 0.9
    weight_decay: float = 1e-4  # B11's L2 term: lambda/(N*B) folded into SGD's weight decay
    class_weight_power: float = 0.5  # 0 disables class balancing (plain B11 cross-entropy)
    bf16: bool = True
    seed: int = 0
    optimizer: str = "sgd"  # "sgd" (B12: momentum SGD, poly) or "adamw" (poly too)
    backbone_lr: float = 1.0  # multiplier of lr for pretrained backbone parameters
    imagenet: bool = True  # lite0 configurations: start from the ImageNet EfficientNet-Lite0
    splits: str = "train+val"  # CamVid splits trained on ("train" keeps val for choices)
    init: str = ""  # start a new run from these weights (a bundle or a checkpoint)
    person_data: str = ""  # Clothing Co-Parsing folder (train.persons); "" trains on CamVid only
    person_share: float = 0.125  # share of each batch drawn from the person photos
    person_scale: tuple[float, float] = (0.35, 3.0)  # relative to the photo fitting the crop
    scale: tuple[float, float] = (0.6, 1.4)  # CamVid frames' random scale (B1)
    aspect: float = 0.0  # CamVid crops' width stretched by exp(U(-aspect, aspect)); 0: none
    blur: float = 0.0  # probability of a Gaussian blur of a CamVid crop (data.BLUR_SIGMA)
    ohem: float = 0.0  # >0: the loss keeps only this hardest share of the labelled pixels
    boundary: float = 1.0  # weight of labelled pixels near another class (BOUNDARY_RADIUS); 1: off
    ema: float = 0.0  # >0: also keep a moving average of the weights (decay a step), shipped
    # lite0: EfficientNets frozen, their features of cache_crops crops reused cache_epochs times
    freeze_backbone: bool = False
    cache_crops: int = 256
    cache_epochs: int = 4
    # outlier exposure (train.outliers): BSDS500 ground-truth folder and its photos; the share
    # of CamVid crops given a pasted object, and the weight of its pixels' loss
    outlier_gt: str = ""
    outlier_photos: str = ""
    outlier_share: float = 0.0
    outlier_weight: float = OUTLIER_WEIGHT
    camera: float = 0.0  # probability of a camera shift of a CamVid crop (data.camera_shift)


def seg_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None,
    pixel_weight: torch.Tensor | None = None,
    outlier_weight: float = OUTLIER_WEIGHT,
) -> torch.Tensor:
    """B11 L1: pixel-wise cross-entropy over the labelled pixels (void ignored).

    NOT_PERSON pixels (person photos outside the mask) add -log(1 - p(pedestrian)): they say
    what a pixel is not, never what it is. OUTLIER pixels (pasted objects, train.outliers) add
    ``outlier_weight`` times their mean cross-entropy to the uniform distribution (none of
    the classes), a mean of its own as in outlier exposure: a few pasted pixels weigh as
    much as many. ``pixel_weight`` scales each labelled pixel's term (and its share of the
    mean), as the class weights do.
    """
    logits = logits.float()
    not_person = target == NOT_PERSON
    outlier = target == OUTLIER
    if pixel_weight is None and not bool(not_person.any()) and not bool(outlier.any()):
        return F.cross_entropy(logits, target, weight=weight, ignore_index=VOID)
    labelled = target.masked_fill(not_person | outlier, VOID)
    n_ce = int((labelled != VOID).sum())
    ce = weighted_ce(logits, labelled, weight, pixel_weight) if n_ce else 0.0
    total, count = ce * n_ce, n_ce
    if bool(not_person.any()):
        others = torch.cat([logits[:, :PERSON], logits[:, PERSON + 1 :]], 1)
        neg = torch.logsumexp(logits, 1) - torch.logsumexp(others, 1)  # -log(1 - p_person)
        total, count = total + neg[not_person].sum(), count + int(not_person.sum())
    known = total / count if count else logits.sum() * 0.0
    if not bool(outlier.any()):
        return known
    return known + outlier_weight * uniform_ce(logits)[outlier].mean()


def weighted_ce(
    logits: torch.Tensor,
    labelled: torch.Tensor,
    weight: torch.Tensor | None,
    pixel_weight: torch.Tensor | None,
) -> torch.Tensor:
    """Cross-entropy's weighted mean with a weight per pixel on top of the class weights."""
    if pixel_weight is None:
        return F.cross_entropy(logits, labelled, weight=weight, ignore_index=VOID)
    per = F.cross_entropy(logits, labelled, weight=weight, ignore_index=VOID, reduction="none")
    valid = labelled != VOID
    cw = torch.ones_like(per) if weight is None else weight[labelled.clamp(0, len(weight) - 1)]
    return (per * pixel_weight).sum() / (cw * pixel_weight * valid).sum()


BOUNDARY_RADIUS = 4  # pixels: half a map cell, where a 1/8 map's class changes


def boundary_band(target: torch.Tensor, radius: int = BOUNDARY_RADIUS) -> torch.Tensor:
    """Labelled pixels with a pixel of another labelled class within ``radius`` (a square):
    most of the thin classes' pixels (pole 94 % on CamVid train), few of road's (6 %)."""
    valid = target < NUM_CLASSES
    t = target.float().unsqueeze(1)
    hi = square_max(torch.where(valid.unsqueeze(1), t, -1.0), radius)
    lo = -square_max(-torch.where(valid.unsqueeze(1), t, float(NUM_CLASSES)), radius)
    return valid & (hi > lo).squeeze(1)


def square_max(x: torch.Tensor, radius: int) -> torch.Tensor:
    """Maximum over a (2·radius+1)² square as a row pass and a column pass: 2k comparisons, not k²."""
    k = 2 * radius + 1
    x = F.max_pool2d(x, (1, k), 1, (0, radius))
    return F.max_pool2d(x, (k, 1), 1, (radius, 0))


def pixel_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None,
    ohem: float = 0.0,
    boundary: float = 1.0,
    outlier_weight: float = OUTLIER_WEIGHT,
) -> torch.Tensor:
    """The training loss: hard examples (``ohem``), a boundary band weighted ``boundary``
    times, or B11's cross-entropy (pasted objects' pixels weighted ``outlier_weight``)."""
    if ohem > 0:
        return ohem_loss(logits, target, weight, ohem)
    if boundary == 1.0:
        return seg_loss(logits, target, weight, outlier_weight=outlier_weight)
    band = boundary_band(target)
    pixel_weight = 1.0 + (boundary - 1.0) * band.float()
    return seg_loss(logits, target, weight, pixel_weight, outlier_weight)


def ohem_loss(
    logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, keep: float
) -> torch.Tensor:
    """Class-weighted cross-entropy over the hardest `keep` share of the labelled pixels
    (online hard example mining, so the many easy road and sky pixels stop drowning poles);
    keep 0 is seg_loss itself."""
    if keep <= 0:
        return seg_loss(logits, target, weight)
    plain = target.masked_fill(target == NOT_PERSON, VOID)
    per = F.cross_entropy(logits.float(), plain, weight=weight, ignore_index=VOID, reduction="none")
    valid = plain != VOID
    vals = per[valid]
    if vals.numel() == 0:
        return seg_loss(logits, target, weight)
    k = max(1, int(keep * vals.numel()))
    hard = vals.topk(k).values.mean()
    rest = (
        seg_loss(logits, target.masked_fill(valid, VOID), None)
        if bool((target == NOT_PERSON).any())
        else 0.0
    )
    return hard + rest


def state_path_missing(out: Path, resume: bool) -> bool:
    """True when training starts afresh (no checkpoint to resume from)."""
    return not (resume and (out / "seg-checkpoint.pt").exists())


def make_optimizer(net: SegNet, cfg: SegTrainConfig) -> torch.optim.Optimizer:
    """SGD or AdamW, with the pretrained backbones' learning rate scaled by backbone_lr."""
    back = [p for n, p in net.named_parameters() if ".backbone.net." in n]
    ids = {id(p) for p in back}
    rest = [p for p in net.parameters() if id(p) not in ids]
    groups = [{"params": rest, "lr_scale": 1.0}]
    if back:
        groups.append({"params": back, "lr_scale": cfg.backbone_lr})
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def train_step(
    net,
    opt,
    x,
    y,
    weight,
    device,
    bf16: bool,
    ohem: float = 0.0,
    boundary: float = 1.0,
    outlier_weight: float = OUTLIER_WEIGHT,
) -> float:
    """One SGD step; returns the loss."""
    with autocast(device, bf16):
        logits = net(x.to(device))
    w = None if weight is None else weight.to(device)
    loss = pixel_loss(logits, y.to(device), w, ohem, boundary, outlier_weight)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return float(loss.detach())


def cached_step(
    net: SegNet,
    opt,
    cache: FeatureCache,
    idx: torch.Tensor,
    weight,
    device,
    bf16: bool,
    ohem: float = 0.0,
    boundary: float = 1.0,
    outlier_weight: float = OUTLIER_WEIGHT,
) -> float:
    """One step of the frozen-backbone mode on cached crops; returns the loss."""
    with autocast(device, bf16):
        logits = cached_logits(net, cache, idx.to(device))
    target = cache.labels[idx.to(device)].long()
    w = None if weight is None else weight.to(device)
    loss = pixel_loss(logits, target, w, ohem, boundary, outlier_weight)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return float(loss.detach())


def draw_batch(
    aug: SegAugment,
    images: np.ndarray,
    labels: np.ndarray,
    cfg: SegTrainConfig,
    person_aug: PersonAugment,
    persons,
    paste: OutlierPaste | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of CamVid crops (objects pasted into some where ``paste`` is given), the last
    person_share of it person photos when given."""
    n_person = 0 if persons is None else max(1, round(cfg.batch * cfg.person_share))
    x, y = aug(images, labels, cfg.batch - n_person)
    if paste is not None:
        x, y = paste(x, y)
    if n_person == 0:
        return x, y
    extra = [person_aug.sample(persons) for _ in range(n_person)]
    return torch.cat([x] + [e[0] for e in extra]), torch.cat([y] + [e[1] for e in extra])


def train_seg(
    cfg: SegTrainConfig,
    data: Path | None,
    out: Path,
    resume: bool,
    backbone_weights: Path | None = None,
    save_every_s: float = 300.0,
    synthetic: bool = False,
    log: Path | None = None,
    stop_at: int | None = None,
) -> SegNet:
    """Train on CamVid train+val (or a synthetic set) with DDP when launched by torchrun;
    ``stop_at`` ends the run (checkpointed) before its schedule's last step."""
    rank, world, device = setup_distributed()
    torch.manual_seed(cfg.seed + rank)
    if synthetic or data is None:
        images, labels = synthetic_segmentation(16, 64, 64, seed=cfg.seed)
    else:
        parts = [read_split(data, sp) for sp in cfg.splits.split("+")]
        images = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
    weight = (
        class_weights(labels, NUM_CLASSES, cfg.class_weight_power)
        if cfg.class_weight_power
        else None
    )
    net = build_segnet(cfg.model).to(device)
    if backbone_weights is not None:
        load_backbone_weights(
            net, torch.load(backbone_weights, map_location="cpu", weights_only=True)
        )
    fresh = state_path_missing(out, resume)
    if cfg.init and fresh:
        from semcodec.train.common import read_seg_source

        init = read_seg_source(Path(cfg.init)).weights
        net.load_state_dict({k: v.float() for k, v in init.items()})
    elif cfg.imagenet and net.cfg.backbone == "lite0" and fresh:
        from semcodec.models.efficientnet import load_pretrained_state

        load_imagenet_weights(net, load_pretrained_state())
    opt = make_optimizer(net, cfg)
    ckpt_path = out / "seg-checkpoint.pt"
    step = 0
    state = load_checkpoint(ckpt_path) if resume else None
    if state is not None:
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        step = int(state["step"])
    model = DDP(net) if world > 1 else net
    avg = ema_start(state, net) if cfg.ema > 0 else None
    aug = SegAugment(
        cfg.crop,
        scale=cfg.scale,
        seed=cfg.seed * 1000 + rank + step,
        aspect=cfg.aspect,
        blur=cfg.blur,
        camera=cfg.camera,
    )
    persons = read_person_set(Path(cfg.person_data)) if cfg.person_data else None
    person_aug = PersonAugment(cfg.crop, cfg.person_scale, seed=cfg.seed * 1000 + rank + step + 7)
    paste = outlier_paste(cfg, seed=cfg.seed * 1000 + rank + step + 13)
    order = json.loads(state["data_order"]) if state is not None and "data_order" in state else {}
    if order:  # continue the interrupted run's draws
        restore_data_order(order, aug, person_aug, paste)
    plan = frozen_plan(cfg, world)
    cache: FeatureCache | None = None
    block_start: dict = {}
    prog = StepProgress(cfg.iters, step, every=10, enabled=rank == 0)
    last_save, seen, clock = time.time(), 0, RunClock.resume(state)
    net.train()
    if plan is not None:
        freeze_backbone(net)
    end = cfg.iters if stop_at is None else min(stop_at, cfg.iters)
    while step < end:
        lr = poly_lr(cfg.lr, step, cfg.iters)
        for g in opt.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        if plan is None:
            x, y = draw_batch(aug, images, labels, cfg, person_aug, persons, paste)
            loss = train_step(
                model,
                opt,
                x,
                y,
                weight,
                device,
                cfg.bf16,
                cfg.ohem,
                cfg.boundary,
                cfg.outlier_weight,
            )
        else:
            if cache is None or step % plan.steps_per_block == 0:
                if cache is None and order.get("block") == plan.block_of(step):
                    restore_data_order(order["block_start"], aug, person_aug, paste)  # rebuild
                block_start = data_order(aug, person_aug, paste)
                cache = build_cache(
                    net,
                    lambda: draw_batch(aug, images, labels, cfg, person_aug, persons, paste),
                    plan.steps_per_epoch,
                    device,
                    cfg.bf16,
                )
            idx = plan.batch_indices(step)
            loss = cached_step(
                net,
                opt,
                cache,
                idx,
                weight,
                device,
                cfg.bf16,
                cfg.ohem,
                cfg.boundary,
                cfg.outlier_weight,
            )
        if avg is not None:
            ema_update(avg, net, cfg.ema)
        step += 1
        seen += cfg.batch * world
        prog.update(step, seen, loss=loss, lr=lr)
        if log is not None and rank == 0 and step % 10 == 0:
            with open(log, "a") as f:
                ch = clock.cpu_hours()
                entry = {"step": step, "loss": loss, "lr": lr, "t": time.time(), "cpu_hours": ch}
                f.write(json.dumps(entry) + "\n")
        if rank == 0 and (time.time() - last_save > save_every_s or step in (cfg.iters, end)):
            save_checkpoint(
                ckpt_path,
                {
                    **({} if avg is None else {"ema": avg}),
                    "model": net.state_dict(),
                    "optim": opt.state_dict(),
                    "step": step,
                    "hours": clock.hours(),
                    "cpu_hours": clock.cpu_hours(),
                    "config": json.dumps(asdict(cfg)),
                    "data_order": json.dumps(
                        data_order(aug, person_aug, paste)
                        if plan is None
                        else {
                            **data_order(aug, person_aug, paste),
                            "block": plan.block_of(step - 1),
                            "block_start": block_start,
                        }
                    ),
                },
            )
            last_save = time.time()
    cleanup_distributed()
    return net


def frozen_plan(cfg: SegTrainConfig, world: int) -> CachePlan | None:
    """The feature-cache plan of a --freeze-backbone run (one process), else None."""
    if not cfg.freeze_backbone:
        return None
    if world > 1:
        raise click.UsageError("--freeze-backbone trains in one process (no torchrun)")
    return CachePlan(cfg.cache_crops, cfg.cache_epochs, cfg.batch, cfg.seed)


def data_order(
    aug: SegAugment, person_aug: PersonAugment, paste: OutlierPaste | None = None
) -> dict:
    """Where the batch draws stand, so a resumed run draws what the uninterrupted one would."""
    order = {"camvid": aug.rng.bit_generator.state, "persons": person_aug.rng.bit_generator.state}
    if paste is not None:
        order["outliers"] = paste.rng.bit_generator.state
    return order


def restore_data_order(
    order: dict, aug: SegAugment, person_aug: PersonAugment, paste: OutlierPaste | None = None
) -> None:
    """Put the augmenters' generators back where a checkpoint left them."""
    aug.rng.bit_generator.state = order["camvid"]
    person_aug.rng.bit_generator.state = order["persons"]
    if paste is not None and "outliers" in order:
        paste.rng.bit_generator.state = order["outliers"]


def outlier_paste(cfg: SegTrainConfig, seed: int) -> OutlierPaste | None:
    """The outlier exposure of a run (train.outliers' training objects), None without it."""
    if not (cfg.outlier_share > 0 and cfg.outlier_gt):
        return None
    objects = read_objects(Path(cfg.outlier_gt), Path(cfg.outlier_photos), "train")
    return OutlierPaste(objects, cfg.outlier_share, seed)


@torch.no_grad()
def image_scores(net: SegNet, img: np.ndarray, bf16: bool = False) -> torch.Tensor:
    """(C, H, W) class scores of one image at its full size, as the encoder's map sees them."""
    from semcodec.encoder.segment import _working_input, class_scores

    h, w = img.shape[:2]
    x, to_grid = _working_input(net, img)
    scores = to_grid(class_scores(net, x, bf16))
    grid = scores.shape[-2] * 8, scores.shape[-1] * 8
    scores = F.interpolate(scores, size=grid, mode="bilinear", align_corners=False)
    return scores[0, :, :h, :w]


def confusion_from(
    scores: torch.Tensor, lab: np.ndarray, unknown_below: float, class_bias: tuple[float, ...] = ()
) -> np.ndarray:
    """(classes, classes + 1) counts: true class by predicted class or UNKNOWN (last column)."""
    from semcodec.encoder.segment import labels_of

    pred = labels_of(scores, unknown_below, class_bias).astype(np.int64)
    valid = lab != VOID
    n = NUM_CLASSES + 1
    return np.bincount(n * lab[valid].astype(np.int64) + pred[valid], minlength=NUM_CLASSES * n)[
        : NUM_CLASSES * n
    ].reshape(NUM_CLASSES, n)


def scores_of_conf(conf: np.ndarray) -> dict:
    """Per-class IoU and recall, mIoU, pixel accuracy and the UNKNOWN share of a confusion;
    an UNKNOWN pixel is a miss of its true class."""
    inter = np.diag(conf[:, :NUM_CLASSES]).astype(np.float64)
    union = conf.sum(1) + conf[:, :NUM_CLASSES].sum(0) - inter
    iou = inter / np.maximum(union, 1)
    recall = inter / np.maximum(conf.sum(1), 1)
    return {
        "per_class_iou": {n: float(v) for n, v in zip(CLASS_NAMES, iou, strict=True)},
        "per_class_recall": {n: float(v) for n, v in zip(CLASS_NAMES, recall, strict=True)},
        "miou": float(iou.mean()),
        "pixel_accuracy": float(inter.sum() / max(1, conf.sum())),
        "unknown_share": float(conf[:, NUM_CLASSES].sum() / max(1, conf.sum())),
        "confusion": conf.tolist(),
    }


@torch.no_grad()
def evaluate_seg(
    net: SegNet,
    images: np.ndarray,
    labels: np.ndarray,
    bf16: bool = False,
    thresholds: tuple[float, ...] | None = None,
) -> dict:
    """CamVid scores at the network's UNKNOWN threshold (and at each of ``thresholds``)."""
    net.eval()
    ts = (net.cfg.unknown_below,) + tuple(thresholds or ())
    confs = [np.zeros((NUM_CLASSES, NUM_CLASSES + 1), np.int64) for _ in ts]
    t0 = time.time()
    for img, lab in zip(images, labels, strict=True):
        scores = image_scores(net, img, bf16)
        for conf, t in zip(confs, ts, strict=True):
            conf += confusion_from(scores, lab, t, net.cfg.class_bias)
    dt = time.time() - t0
    out = {**scores_of_conf(confs[0]), "images_per_s": len(images) / dt, "images": len(images)}
    out["unknown_below"] = ts[0]
    if thresholds:
        out["sweep"] = {
            f"{t:g}": {k: v for k, v in scores_of_conf(c).items() if k != "confusion"}
            for t, c in zip(ts[1:], confs[1:], strict=True)
        }
    return out


@torch.no_grad()
def evaluate_persons(net: SegNet, images: list[np.ndarray], masks: list[np.ndarray]) -> dict:
    """Person IoU (pedestrian against the union of clothing, skin and hair) and UNKNOWN share."""
    net.eval()
    inter = union = unknown = total = 0
    for img, mask in zip(images, masks, strict=True):
        from semcodec.encoder.segment import labels_of

        pred = labels_of(image_scores(net, img), net.cfg.unknown_below, net.cfg.class_bias)
        hit = pred == PERSON
        inter += int((hit & mask).sum())
        union += int((hit | mask).sum())
        unknown += int((pred == VOID).sum())
        total += pred.size
    return {"person_iou": inter / max(1, union), "unknown_share": unknown / max(1, total)}


@torch.no_grad()
def evaluate_photos(net: SegNet, images: list[np.ndarray]) -> dict:
    """Unlabelled photos: the UNKNOWN share of their maps and each class's share, as the
    encoder's map would say (what a user of the map sees on pictures unlike CamVid's)."""
    from semcodec.encoder.segment import labels_of

    net.eval()
    counts = np.zeros(NUM_CLASSES + 1, np.int64)
    for img in images:
        pred = labels_of(image_scores(net, img), net.cfg.unknown_below, net.cfg.class_bias)
        counts += np.bincount(np.minimum(pred, NUM_CLASSES).ravel(), minlength=NUM_CLASSES + 1)
    total = max(1, int(counts.sum()))
    return {
        "photos": len(images),
        "unknown_share": float(counts[NUM_CLASSES] / total),
        "class_share": {n: float(c / total) for n, c in zip(CLASS_NAMES, counts, strict=False)},
    }


@click.command("seg")
@click.option(
    "--data",
    type=click.Path(path_type=Path),
    default=Path("../shared/data/camvid"),
    show_default=True,
)
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/seg"), show_default=True)
@click.option("--model", default="default", show_default=True)
@click.option("--iters", default=4000, show_default=True)
@click.option("--batch", default=8, show_default=True)
@click.option("--lr", default=0.02, show_default=True)
@click.option("--crop", default="240x320", show_default=True, help="HxW")
@click.option("--resume/--no-resume", default=True, show_default=True)
@click.option(
    "--backbone-weights",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="torchvision-format ResNet state dict (B10)",
)
@click.option("--bf16/--no-bf16", default=True, show_default=True)
@click.option("--synthetic", is_flag=True, help="tiny synthetic data (smoke tests)")
@click.option("--save-every", default=300.0, show_default=True, help="seconds between checkpoints")
@click.option("--optimizer", type=click.Choice(["sgd", "adamw"]), default="sgd", show_default=True)
@click.option(
    "--backbone-lr", default=1.0, show_default=True, help="lr multiplier, pretrained part"
)
@click.option(
    "--imagenet/--no-imagenet",
    default=True,
    show_default=True,
    help="lite0 configurations: start from the pinned ImageNet EfficientNet-Lite0",
)
@click.option("--splits", default="train+val", show_default=True, help="CamVid splits, '+'-joined")
@click.option(
    "--init",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="start a new run from these weights (a bundle or a training checkpoint)",
)
@click.option(
    "--person-data",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="Clothing Co-Parsing folder: people at close range (train.persons)",
)
@click.option("--person-share", default=0.125, show_default=True, help="share of each batch")
@click.option("--scale", default="0.6-1.4", show_default=True, help="CamVid random scale range")
@click.option(
    "--aspect",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="CamVid crops' width stretched by exp(U(-A, A)); recipe C: 0.25",
)
@click.option(
    "--blur",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="probability of a Gaussian blur (sigma 0.5-1.5) of a CamVid crop; recipe C: 0.3",
)
@click.option(
    "--ohem",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="loss over only this hardest share of the labelled pixels; recipe B: 0.25",
)
@click.option(
    "--boundary-weight",
    type=click.FloatRange(1.0, 20.0),
    default=1.0,
    show_default=True,
    help="weight of the labelled pixels within 4 px of another class (thin classes, edges); "
    "1: off. Not with --ohem",
)
@click.option(
    "--ema",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.0,
    show_default=True,
    help="keep a moving average of the weights with this decay a step (0.999: about the last "
    "thousand steps); evaluation and export take it from the checkpoint",
)
@click.option(
    "--class-weight-power",
    type=click.FloatRange(0.0, 2.0),
    default=0.5,
    show_default=True,
    help="class weights (median frequency / frequency) to this power; 1: full balancing, "
    "0: none (plain cross-entropy)",
)
@click.option(
    "--freeze-backbone",
    is_flag=True,
    help="lite0: EfficientNets frozen, the rest trained on their cached features",
)
@click.option(
    "--cache-crops", default=256, show_default=True, help="--freeze-backbone: crops per cache"
)
@click.option(
    "--cache-epochs",
    default=4,
    show_default=True,
    help="--freeze-backbone: passes over a cache before the next is drawn",
)
@click.option(
    "--outlier-gt",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="BSDS500 groundTruth folder: objects outside the classes pasted (train.outliers)",
)
@click.option(
    "--outlier-photos",
    type=click.Path(path_type=Path),
    default=Path("../shared/data/photos"),
    show_default=True,
    help="the BSDS500 train and val photos of --outlier-gt",
)
@click.option(
    "--outlier-share",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="with --outlier-gt: the share of CamVid crops given a pasted object",
)
@click.option(
    "--outlier-weight",
    type=click.FloatRange(0.0, 10.0),
    default=OUTLIER_WEIGHT,
    show_default=True,
    help="weight of a pasted object's pixel (cross-entropy to uniform) against a labelled one",
)
@click.option(
    "--camera",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="probability of a camera shift (exposure, white balance, noise, JPEG, resolution) "
    "of a CamVid crop",
)
def seg_command(
    data,
    out,
    model,
    iters,
    batch,
    lr,
    crop,
    resume,
    backbone_weights,
    bf16,
    synthetic,
    save_every,
    optimizer,
    backbone_lr,
    imagenet,
    splits,
    init,
    person_data,
    person_share,
    scale,
    aspect,
    blur,
    ohem,
    boundary_weight,
    ema,
    class_weight_power,
    freeze_backbone,
    cache_crops,
    cache_epochs,
    outlier_gt,
    outlier_photos,
    outlier_share,
    outlier_weight,
    camera,
):
    """Train the segmentation network (design B) on CamVid."""
    if ohem and boundary_weight != 1.0:
        raise click.UsageError("--ohem and --boundary-weight are two losses: give one")
    ch, cw = (int(v) for v in crop.lower().split("x"))
    lo, hi = (float(v) for v in scale.split("-"))
    cfg = SegTrainConfig(
        model=model,
        iters=iters,
        batch=batch,
        lr=lr,
        crop=(ch, cw),
        bf16=bf16,
        optimizer=optimizer,
        backbone_lr=backbone_lr,
        imagenet=imagenet,
        splits=splits,
        init=str(init or ""),
        person_data=str(person_data or ""),
        person_share=person_share,
        scale=(lo, hi),
        aspect=aspect,
        blur=blur,
        ohem=ohem,
        boundary=boundary_weight,
        ema=ema,
        class_weight_power=class_weight_power,
        freeze_backbone=freeze_backbone,
        cache_crops=cache_crops,
        cache_epochs=cache_epochs,
        outlier_gt=str(outlier_gt or ""),
        outlier_photos=str(outlier_photos),
        outlier_share=outlier_share if outlier_gt else 0.0,
        outlier_weight=outlier_weight,
        camera=camera,
    )
    out.mkdir(parents=True, exist_ok=True)
    train_seg(
        cfg, data, out, resume, backbone_weights, save_every, synthetic, log=out / "log.jsonl"
    )


if __name__ == "__main__":
    seg_command()
