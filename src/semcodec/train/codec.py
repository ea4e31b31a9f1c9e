"""`semcodec train codec` (A7–A9): the recipe, the training loop, checkpoints and the command."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from semcodec.models.discriminator import DISCRIMINATOR_CONFIGS, Discriminator
from semcodec.models.losses import LossWeights, PerceptualLoss
from semcodec.models.segmentation import SegNet, build_segnet
from semcodec.progress import StepProgress
from semcodec.train.codec_data import CropSampler, hold_out, training_set
from semcodec.train.codec_eval import evaluate
from semcodec.train.codec_nets import (
    PERCEPTUAL_FEATURES,
    CodecNets,
    init_from_bundle,
    perceptual_features,
)
from semcodec.train.codec_step import (
    adam_betas,
    descend,
    discriminator_loss,
    generator_losses,
    make_optimisers,
    restore_optimisers,
    uses_discriminator,
    warm_up,
)
from semcodec.train.common import (
    cleanup_distributed,
    load_checkpoint,
    read_seg_source,
    save_checkpoint,
    seg_net_of,
    setup_distributed,
)
from semcodec.train.data import list_images


@dataclass
class CodecTrainConfig:
    """Recipe for the compression networks; sizes chosen for a 2-core CPU."""

    compnet: str = "default"
    generator: str = "default"
    discriminator: str = "default"
    iters: int = 20000
    batch: int = 8
    crop: int = 128
    lr: float = 2e-4
    lr_context: float = 1e-2
    context_neighbours: int = 2  # 2: (left, top); 3: + top-right (format/compact.py)
    warmup: int = 200  # linear learning-rate warm-up: Adam's first steps are sign-like and large
    weights: LossWeights = field(default_factory=LossWeights)
    bf16: bool = True
    seed: int = 0
    hold_out: int = 0  # the last N photos are kept out of training and evaluated at each save
    # train the generator only: the compact layer (CompNet, context table) stays the bundle's,
    # so a model fine-tuned this way codes every image's base layer in exactly the same bytes
    freeze_compnet: bool = False


def train_codec(
    cfg: CodecTrainConfig,
    photos: Path | None,
    camvid: Path | None,
    seg_weights: Path | None,
    out: Path,
    resume: bool,
    vgg: Path | None = None,
    save_every_s: float = 300.0,
    synthetic: bool = False,
    init_bundle: Path | None = None,
    features: str = "seg",
) -> CodecNets:
    """Joint training on BSDS500 photos and CamVid frames with maps from the trained seg net."""
    rank, world, device = setup_distributed()
    torch.manual_seed(cfg.seed + rank)
    seg = load_seg(seg_weights, synthetic)
    images, maps = training_set(seg, photos, camvid, out, synthetic, rank)
    n_photos = len(list_images(photos)) if photos is not None else 0
    (images, maps), held = hold_out(images, maps, cfg.hold_out, n_photos)
    nets = make_nets(cfg, device)
    disc = Discriminator(DISCRIMINATOR_CONFIGS[cfg.discriminator]).to(device)
    perc = PerceptualLoss(perceptual_features(features, vgg, seg)).to(device)
    use_d = uses_discriminator(cfg.weights)
    lrs, betas = (cfg.lr, cfg.lr_context), adam_betas(cfg.weights)
    opt_g, opt_d = make_optimisers(nets, disc, lrs, betas)
    ckpt_path = out / "codec-checkpoint.pt"
    state = load_checkpoint(ckpt_path) if resume else None
    step, hours = 0, 0.0
    if state is not None:
        step, hours = restore(state, cfg, nets, disc, opt_g, opt_d, rank)
    elif init_bundle is not None:
        step, hours = init_from_bundle(nets, init_bundle)
        if rank == 0:
            print(f"initialised from {init_bundle} (step {step}, {hours:.2f} h)", flush=True)
    start_step = step
    g_model = DDP(nets) if world > 1 else nets
    d_model = DDP(disc) if world > 1 else disc
    sampler = CropSampler(images, maps, cfg.crop, cfg.seed * 1000 + rank + step)
    prog = StepProgress(cfg.iters, step, every=10, enabled=rank == 0)
    t_start, last_save, seen = time.time(), time.time(), 0
    nets.train()
    disc.train()
    while step < cfg.iters:
        warm_up(opt_g, lrs, step - start_step, cfg.warmup)
        x, labels = sampler(cfg.batch)
        x, labels = x.to(device), labels.to(device)
        loss, logs = generator_losses(
            g_model, disc if use_d else None, perc, x, labels, cfg.weights, device, cfg.bf16
        )
        descend(opt_g, loss)
        if use_d:
            classes = nets.comp.cfg.num_classes
            ld = discriminator_loss(d_model, x, logs, labels, classes, device, cfg.bf16)
            descend(opt_d, ld)
            logs["d"] = float(ld.detach())
        step += 1
        seen += cfg.batch * world
        shown = {k: v for k, v in logs.items() if isinstance(v, float)}
        prog.update(step, seen, loss=float(loss.detach()), **shown)
        if rank == 0 and step % 10 == 0:
            log_row(out, {"step": step, "loss": float(loss.detach()), **shown, "t": time.time()})
        if rank == 0 and (time.time() - last_save > save_every_s or step == cfg.iters):
            if held[0]:
                report_held_out(nets, held, device, out, step)
            hours_now = hours + (time.time() - t_start) / 3600
            save_checkpoint(ckpt_path, checkpoint(cfg, nets, disc, opt_g, opt_d, step, hours_now))
            last_save = time.time()
    cleanup_distributed()
    return nets


def load_seg(seg_weights: Path | None, synthetic: bool) -> SegNet:
    """The segmentation net that makes the training maps (a checkpoint's, or a bundle's with
    its class offsets: the maps its encoder makes)."""
    if seg_weights is None:
        return build_segnet("tiny" if synthetic else "default")
    if synthetic:
        seg = build_segnet("tiny")
        seg.load_state_dict({k: v.float() for k, v in read_seg_source(seg_weights).weights.items()})
        return seg
    return seg_net_of(seg_weights)


def make_nets(cfg: CodecTrainConfig, device: torch.device) -> CodecNets:
    """The networks to train; with freeze_compnet, the compact layer gets no gradients."""
    nets = CodecNets(cfg.compnet, cfg.generator, cfg.context_neighbours).to(device)
    if cfg.freeze_compnet:
        nets.comp.requires_grad_(False)  # no gradients: Adam leaves these parameters alone
        nets.ctx.requires_grad_(False)
    return nets


def restore(
    state: dict,
    cfg: CodecTrainConfig,
    nets: CodecNets,
    disc: nn.Module,
    opt_g: torch.optim.Optimizer,
    opt_d: torch.optim.Optimizer,
    rank: int,
) -> tuple[int, float]:
    """Resume from a checkpoint: weights, Adam moments unless the recipe changed, step, hours."""
    nets.load_state_dict(state["nets"])
    disc.load_state_dict(state["disc"])
    same_recipe = not recipe_changed(state.get("config"), cfg)
    if same_recipe and len(state["opt_g"]["param_groups"]) == len(opt_g.param_groups):
        restore_optimisers(opt_g, opt_d, state, (cfg.lr, cfg.lr_context), adam_betas(cfg.weights))
    elif rank == 0:
        print("loss recipe changed since the checkpoint: optimiser state reset", flush=True)
    return int(state["step"]), float(state.get("hours", 0.0))


def checkpoint(
    cfg: CodecTrainConfig,
    nets: CodecNets,
    disc: nn.Module,
    opt_g: torch.optim.Optimizer,
    opt_d: torch.optim.Optimizer,
    step: int,
    hours: float,
) -> dict:
    """What a resume needs: weights, optimiser moments, step, hours and the recipe."""
    return {
        "nets": nets.state_dict(), "disc": disc.state_dict(), "opt_g": opt_g.state_dict(),
        "opt_d": opt_d.state_dict(), "step": step, "hours": hours,
        "config": json.dumps(asdict(cfg)),
    }  # fmt: skip


def log_row(out: Path, row: dict) -> None:
    """Append one record to the run's log.jsonl."""
    with open(out / "log.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


def report_held_out(
    nets: CodecNets, held: tuple, device: torch.device, out: Path, step: int
) -> None:
    """Measure the held-out photos: a log.jsonl record and a line on stdout."""
    val = evaluate(nets, *held, device)
    log_row(out, {"step": step, **val, "t": time.time()})
    s2 = f" SSIMULACRA 2 {val['val_s2']:.2f}" if "val_s2" in val else ""
    print(f"held-out: {val['val_bpp']:.4f} bpp {val['val_psnr']:.3f} dB{s2}", flush=True)


def recipe_changed(saved_config: str | None, cfg: CodecTrainConfig) -> bool:
    """Whether the loss weights differ from the checkpoint's.

    Adam's second moments then describe gradients of another loss: new terms with gradients
    far larger than the old ones get steps of many times the learning rate until those moments
    catch up (with beta1 = 0.5 up to about 16x), which is what wrecked the first GAN phase
    (PSNR 25 -> 7 dB within 20 steps). A fresh optimiser plus the warm-up avoids that.
    """
    if not saved_config:
        return True
    saved = json.loads(saved_config).get("weights", {})
    return saved != asdict(cfg.weights)


@click.command("codec")
@click.option(
    "--photos",
    type=click.Path(path_type=Path),
    default=Path("../shared/data/photos"),
    show_default=True,
)
@click.option(
    "--camvid",
    type=click.Path(path_type=Path),
    default=Path("../shared/data/camvid"),
    show_default=True,
)
@click.option("--no-camvid", is_flag=True, help="train on the photos alone")
@click.option(
    "--seg-weights",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="segmentation weights (checkpoint or exported file) that make the training maps",
)
@click.option(
    "--out", type=click.Path(path_type=Path), default=Path("runs/codec"), show_default=True
)
@click.option("--iters", default=20000, show_default=True)
@click.option("--batch", default=8, show_default=True)
@click.option("--crop", default=128, show_default=True)
@click.option("--lr", default=2e-4, show_default=True)
@click.option("--gan", "w_gan", default=0.1, show_default=True)
@click.option("--fm", "w_fm", default=1.0, show_default=True)
@click.option("--perceptual", "w_perc", default=1.0, show_default=True)
@click.option("--l1", "w_l1", default=20.0, show_default=True)
@click.option("--msssim", "w_ms", default=4.0, show_default=True)
@click.option("--rate", "w_rate", default=1.0, show_default=True)
@click.option(
    "--ssimulacra2",
    "w_s2",
    default=0.0,
    show_default=True,
    help="weight of (100 − SSIMULACRA 2)/100 per crop (needs the [bench] extra)",
)
@click.option(
    "--vgg",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="torchvision-format VGG-19 state dict for L_VGG (default: the seg backbone's features)",
)
@click.option(
    "--features",
    type=click.Choice(PERCEPTUAL_FEATURES),
    default="seg",
    show_default=True,
    help="network of the perceptual term: the segmentation net's RGB backbone, or the "
    "ImageNet EfficientNet-Lite0 of the [train] extra (frozen; stages 3, 5, 7)",
)
@click.option("--resume/--no-resume", default=True, show_default=True)
@click.option(
    "--init-bundle",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="fine-tune from a model bundle (models/*.pt) when the run has no checkpoint yet",
)
@click.option(
    "--context-neighbours",
    type=click.Choice(["2", "3"]),
    default="2",
    show_default=True,
    help="neighbours of the compact layer's context model: left, top (2) and top-right (3)",
)
@click.option(
    "--config",
    "net_config",
    type=click.Choice(["default", "c8", "c16"]),
    default="default",
    show_default=True,
    help="CompNet + generator configuration: the default, or 5 / 13 channels beside the "
    "thumbnail (warm-started from --init-bundle)",
)
@click.option(
    "--hold-out",
    type=int,
    default=0,
    show_default=True,
    help="keep the last N photos out of training; report their rate and PSNR at each save",
)
@click.option(
    "--freeze-compnet",
    is_flag=True,
    help="train the generator only; the compact layer stays the --init-bundle's, byte for byte",
)
@click.option("--bf16/--no-bf16", default=True, show_default=True)
@click.option("--synthetic", is_flag=True, help="tiny synthetic data (smoke tests)")
@click.option("--tiny", is_flag=True, help="tiny networks (smoke tests)")
@click.option("--save-every", default=300.0, show_default=True)
def codec_command(
    photos,
    camvid,
    no_camvid,
    seg_weights,
    out,
    iters,
    batch,
    crop,
    lr,
    w_gan,
    w_fm,
    w_perc,
    w_l1,
    w_ms,
    w_rate,
    w_s2,
    vgg,
    features,
    resume,
    init_bundle,
    context_neighbours,
    net_config,
    hold_out,
    freeze_compnet,
    bf16,
    synthetic,
    tiny,
    save_every,
):
    """Train the compression networks (design A) on photos + CamVid."""
    w = LossWeights(
        gan=w_gan,
        feature_matching=w_fm,
        perceptual=w_perc,
        l1=w_l1,
        msssim=w_ms,
        rate=w_rate,
        ssimulacra2=w_s2,
    )
    size = "tiny" if tiny else net_config
    cfg = CodecTrainConfig(
        compnet=size,
        generator=size,
        hold_out=hold_out,
        freeze_compnet=freeze_compnet,
        discriminator="tiny" if tiny else "default",
        iters=iters,
        batch=batch,
        crop=crop,
        lr=lr,
        weights=w,
        bf16=bf16,
        context_neighbours=int(context_neighbours),
    )
    out.mkdir(parents=True, exist_ok=True)
    train_codec(
        cfg,
        None if synthetic else photos,
        None if synthetic or no_camvid else camvid,
        seg_weights,
        out,
        resume,
        vgg,
        save_every,
        synthetic,
        init_bundle,
        features,
    )


if __name__ == "__main__":
    codec_command()
