"""`semcodec train codec`: joint training of CompNet, generator and context model (A7–A9)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from semcodec.encoder.segment import label_map
from semcodec.format.compact import table_neighbours
from semcodec.format.tiling import MAP_SCALE
from semcodec.models.compnet import COMPNET_CONFIGS, CompNet, one_hot_map, quantize_ste
from semcodec.models.context_model import ContextModel
from semcodec.models.discriminator import DISCRIMINATOR_CONFIGS, Discriminator
from semcodec.models.generator import GENERATOR_CONFIGS, Generator
from semcodec.models.losses import (
    ImageNetLite0Features,
    LossWeights,
    PerceptualLoss,
    SegBackboneFeatures,
    d_loss,
    feature_matching_loss,
    g_adv_loss,
    load_vgg19,
    msssim_loss,
    ssimulacra2_loss,
    ssimulacra2_torch,
)
from semcodec.models.segmentation import SegNet, build_segnet
from semcodec.train.common import (
    Progress,
    autocast,
    cleanup_distributed,
    load_checkpoint,
    save_checkpoint,
    seg_config_of,
    seg_source,
    setup_distributed,
)
from semcodec.train.data import list_images, read_photos, read_split
from semcodec.zoo.bundles import load_bundle


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
    context_neighbours: int = 2  # 2: (left, top); 3: + top-right (entropy/compact.py)
    warmup: int = 200  # linear learning-rate warm-up: Adam's first steps are sign-like and large
    weights: LossWeights = field(default_factory=LossWeights)
    bf16: bool = True
    seed: int = 0
    hold_out: int = 0  # the last N photos are kept out of training and evaluated at each save
    # train the generator only: the compact layer (CompNet, context table) stays the bundle's,
    # so a model fine-tuned this way codes every image's base layer in exactly the same bytes
    freeze_compnet: bool = False


class CodecNets(nn.Module):
    """The trainable parts of the base layer: CompNet, generator and compact context model."""

    def __init__(self, compnet: str = "default", generator: str = "default", neighbours: int = 2):
        super().__init__()
        self.comp = CompNet(COMPNET_CONFIGS[compnet])
        self.gen = Generator(GENERATOR_CONFIGS[generator])
        self.ctx = ContextModel(self.comp.cfg.out_channels, self.comp.cfg.levels, neighbours)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """Training forward pass with straight-through quantisation; x in [0, 1]."""
        t = self.comp(x, labels)
        t_q, y = quantize_ste(t, self.comp.cfg.levels)
        bits = self.ctx.bits(y)
        out, base = self.gen(t_q, labels, x.shape[-2:])
        return {"x_hat": (out + 1) * 0.5, "base": (base + 1) * 0.5, "bits": bits}


def compute_maps(seg: SegNet, images: list[np.ndarray], bf16: bool = True) -> list[np.ndarray]:
    """1/8-resolution label maps of whole images, exactly as the encoder computes them."""
    seg.eval()
    return [label_map(seg, img, None if bf16 else False) for img in images]


def hold_out(images: list, maps: list, n: int, photos: int) -> tuple[tuple, tuple]:
    """(training, held-out) pairs of (images, maps): the last n photos are held out."""
    keep = [i for i in range(len(images)) if not photos - n <= i < photos]
    held = range(max(0, photos - n), photos) if n else range(0)
    return (
        ([images[i] for i in keep], [maps[i] for i in keep]),
        ([images[i] for i in held], [maps[i] for i in held]),
    )


def crop8(images: list[np.ndarray]) -> list[np.ndarray]:
    """Crop every image to a multiple of 8 so the 1/8 map aligns with pixels."""
    s = MAP_SCALE
    return [im[: im.shape[0] // s * s, : im.shape[1] // s * s] for im in images]


class CropSampler:
    """A7's random sub-blocks: aligned crops of (image, 1/8 map) pairs with flips."""

    def __init__(self, images: list[np.ndarray], maps: list[np.ndarray], crop: int, seed: int):
        self.images, self.maps, self.crop = images, maps, crop
        self.rng = np.random.default_rng(seed)

    def __call__(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        c, m = self.crop, self.crop // MAP_SCALE
        xs, ls = [], []
        for _ in range(batch):
            k = int(self.rng.integers(0, len(self.images)))
            img, mp = self.images[k], self.maps[k]
            i = int(self.rng.integers(0, mp.shape[0] - m + 1))
            j = int(self.rng.integers(0, mp.shape[1] - m + 1))
            x = img[i * MAP_SCALE : i * MAP_SCALE + c, j * MAP_SCALE : j * MAP_SCALE + c]
            lab = mp[i : i + m, j : j + m]
            if self.rng.random() < 0.5:
                x, lab = x[:, ::-1], lab[:, ::-1]
            xs.append(torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1))
            ls.append(torch.from_numpy(np.ascontiguousarray(lab)))
        return torch.stack(xs).float().div(255), torch.stack(ls).long()


def generator_losses(
    nets, disc, perc, x, labels, w: LossWeights, device, bf16
) -> tuple[torch.Tensor, dict]:
    """L_Gp (+ rate): L_p feature matching + L1 + (1 - MS-SSIM) + perceptual + adversarial."""
    with autocast(device, bf16):
        o = nets(x, labels)
    x_hat = o["x_hat"].float()
    bpp = o["bits"] / (x.shape[0] * x.shape[-2] * x.shape[-1])
    l1 = F.l1_loss(x_hat, x)
    ms = msssim_loss(x_hat.clamp(0, 1), x)
    loss = w.l1 * l1 + w.msssim * ms + w.rate * bpp
    logs = {
        "bpp": float(bpp.detach()),
        "l1": float(l1.detach()),
        "msssim": 1 - float(ms.detach()),
        "psnr": float(-10 * torch.log10(F.mse_loss(x_hat.clamp(0, 1), x).detach() + 1e-10)),
    }
    if w.ssimulacra2 > 0:
        s2 = ssimulacra2_loss(x_hat, x)
        loss = loss + w.ssimulacra2 * s2
        logs["s2"] = 100.0 - 100.0 * float(s2.detach())
    if perc is not None and w.perceptual > 0:
        with autocast(device, bf16):
            lp = perc(x_hat, x)
        loss = loss + w.perceptual * lp.float()
        logs["perc"] = float(lp.detach())
    if disc is not None and (w.gan > 0 or w.feature_matching > 0):
        oh = one_hot_map(
            labels,
            nets.comp.cfg.num_classes
            if not isinstance(nets, DDP)
            else nets.module.comp.cfg.num_classes,
            x.shape[-2:],
        )
        disc.requires_grad_(False)  # the generator step needs gradients through D, not for D
        try:
            with autocast(device, bf16):
                fake = disc(x_hat * 2 - 1, oh, o["base"].detach() * 2 - 1)
                with torch.no_grad():
                    real = disc(x * 2 - 1, oh, o["base"].detach() * 2 - 1)
        finally:
            disc.requires_grad_(True)
        adv, fm = g_adv_loss(fake), feature_matching_loss(real, fake)
        loss = loss + w.gan * adv + w.feature_matching * fm
        logs.update(adv=float(adv.detach()), fm=float(fm.detach()))
    return loss, {"x_hat": x_hat.detach(), "base": o["base"].detach(), **logs}


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
    seg_config = "default" if seg_weights is None else seg_config_of(seg_weights)
    seg = build_segnet("tiny" if synthetic else seg_config)
    if seg_weights is not None:
        seg.load_state_dict({k: v.float() for k, v in seg_source(seg_weights)[0].items()})
    images, maps = _training_set(seg, photos, camvid, out, synthetic, rank)
    n_photos = len(list_images(photos)) if photos is not None else 0
    (images, maps), held = hold_out(images, maps, cfg.hold_out, n_photos)
    nets = CodecNets(cfg.compnet, cfg.generator, cfg.context_neighbours).to(device)
    if cfg.freeze_compnet:
        nets.comp.requires_grad_(False)  # no gradients: Adam leaves these parameters alone
        nets.ctx.requires_grad_(False)
    disc = Discriminator(DISCRIMINATOR_CONFIGS[cfg.discriminator]).to(device)
    perc_net = perceptual_features(features, vgg, seg)
    perc = PerceptualLoss(perc_net).to(device)
    use_d = cfg.weights.gan > 0 or cfg.weights.feature_matching > 0
    betas = (0.5, 0.999) if use_d else (0.9, 0.999)  # GAN-style momentum only with a discriminator
    opt_g = torch.optim.Adam(
        [
            {"params": [*nets.comp.parameters(), *nets.gen.parameters()], "lr": cfg.lr},
            # the context table is a plain lookup of logits: it needs a far larger step to track
            # the symbol statistics within a few hundred steps
            {"params": nets.ctx.parameters(), "lr": cfg.lr_context},
        ],
        betas=betas,
    )
    opt_d = torch.optim.Adam(disc.parameters(), lr=cfg.lr, betas=betas)
    ckpt_path = out / "codec-checkpoint.pt"
    state = load_checkpoint(ckpt_path) if resume else None
    step, hours = 0, 0.0
    if state is not None:
        nets.load_state_dict(state["nets"])
        disc.load_state_dict(state["disc"])
        same_recipe = not recipe_changed(state.get("config"), cfg)
        if same_recipe and len(state["opt_g"]["param_groups"]) == len(opt_g.param_groups):
            opt_g.load_state_dict(state["opt_g"])
            opt_d.load_state_dict(state["opt_d"])
            for group, lr in zip(opt_g.param_groups, (cfg.lr, cfg.lr_context), strict=True):
                group["lr"], group["betas"] = lr, betas
            for group in opt_d.param_groups:
                group["lr"], group["betas"] = cfg.lr, betas
        elif rank == 0:
            print("loss recipe changed since the checkpoint: optimiser state reset", flush=True)
        step, hours = int(state["step"]), float(state.get("hours", 0.0))
    elif init_bundle is not None:
        step, hours = init_from_bundle(nets, init_bundle)
        if rank == 0:
            print(f"initialised from {init_bundle} (step {step}, {hours:.2f} h)", flush=True)
    start_step = step
    g_model = DDP(nets) if world > 1 else nets
    d_model = DDP(disc) if world > 1 else disc
    sampler = CropSampler(images, maps, cfg.crop, cfg.seed * 1000 + rank + step)
    prog = Progress(cfg.iters, step, every=10, enabled=rank == 0)
    t_start, last_save, seen = time.time(), time.time(), 0
    use_d = cfg.weights.gan > 0 or cfg.weights.feature_matching > 0
    nets.train()
    disc.train()
    while step < cfg.iters:
        warm = min(1.0, (step - start_step + 1) / max(1, cfg.warmup))  # also after a resume
        for group, lr in zip(opt_g.param_groups, (cfg.lr, cfg.lr_context), strict=True):
            group["lr"] = lr * warm
        x, labels = sampler(cfg.batch)
        x, labels = x.to(device), labels.to(device)
        loss, logs = generator_losses(
            g_model, disc if use_d else None, perc, x, labels, cfg.weights, device, cfg.bf16
        )
        opt_g.zero_grad(set_to_none=True)
        loss.backward()
        opt_g.step()
        if use_d:
            oh = one_hot_map(labels, nets.comp.cfg.num_classes, x.shape[-2:])
            base = logs["base"] * 2 - 1
            with autocast(device, cfg.bf16):
                # one discriminator call on [real; fake] so DDP sees one forward per backward
                both = d_model(
                    torch.cat([x, logs["x_hat"]]) * 2 - 1,
                    torch.cat([oh, oh]),
                    torch.cat([base, base]),
                )
                n = x.shape[0]
                ld = d_loss(
                    [[f[:n] for f in sc] for sc in both], [[f[n:] for f in sc] for sc in both]
                )
            opt_d.zero_grad(set_to_none=True)
            ld.backward()
            opt_d.step()
            logs["d"] = float(ld.detach())
        step += 1
        seen += cfg.batch * world
        shown = {k: v for k, v in logs.items() if isinstance(v, float)}
        prog.update(step, seen, loss=float(loss.detach()), **shown)
        if rank == 0 and step % 10 == 0:
            with open(out / "log.jsonl", "a") as f:
                row = {"step": step, "loss": float(loss.detach()), **shown, "t": time.time()}
                f.write(json.dumps(row) + "\n")
        if rank == 0 and (time.time() - last_save > save_every_s or step == cfg.iters):
            if held[0]:
                val = evaluate(nets, *held, device)
                with open(out / "log.jsonl", "a") as f:
                    f.write(json.dumps({"step": step, **val, "t": time.time()}) + "\n")
                s2 = f" SSIMULACRA 2 {val['val_s2']:.2f}" if "val_s2" in val else ""
                print(
                    f"held-out: {val['val_bpp']:.4f} bpp {val['val_psnr']:.3f} dB{s2}", flush=True
                )
            save_checkpoint(ckpt_path, {
                "nets": nets.state_dict(), "disc": disc.state_dict(), "opt_g": opt_g.state_dict(),
                "opt_d": opt_d.state_dict(), "step": step, "hours": hours + (time.time() - t_start) / 3600,
                "config": json.dumps(asdict(cfg)),
            })  # fmt: skip
            last_save = time.time()
    cleanup_distributed()
    return nets


@torch.no_grad()
def evaluate(nets: CodecNets, images: list, maps: list, device) -> dict[str, float]:
    """Mean rate (bits of the hard symbols under the context model), PSNR and SSIMULACRA 2
    (where its package is installed) on whole images."""
    was = nets.training
    nets.eval()
    bpp, psnr, s2 = [], [], []
    for img, mp in zip(images, maps, strict=True):
        x = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float().div(255)[None]
        lab = torch.from_numpy(mp.astype(np.int64))[None]
        t = nets.comp(x.to(device), lab.to(device))
        t_q, y = quantize_ste(t, nets.comp.cfg.levels)
        bits = nets.ctx.bits(torch.round(y))
        out, _ = nets.gen(t_q, lab.to(device), x.shape[-2:])
        x_hat = ((out + 1) * 0.5).clamp(0, 1).cpu()
        bpp.append(float(bits) / (x.shape[-2] * x.shape[-1]))
        psnr.append(float(-10 * torch.log10(F.mse_loss(x_hat, x))))
        try:
            s2.append(float(ssimulacra2_torch(x_hat, x)[0]))
        except ImportError:
            pass
    nets.train(was)
    out = {"val_bpp": float(np.mean(bpp)), "val_psnr": float(np.mean(psnr))}
    if s2:
        out["val_s2"] = float(np.mean(s2))
    return out


PERCEPTUAL_FEATURES = ("seg", "imagenet")


def perceptual_features(kind: str, vgg: Path | None, seg: nn.Module) -> nn.Module:
    """The frozen network of the perceptual term: VGG-19 when given, else the segmentation
    net's RGB backbone ('seg') or the ImageNet EfficientNet-Lite0 ('imagenet')."""
    if vgg is not None:
        return load_vgg19(str(vgg))
    if kind == "imagenet":
        return ImageNetLite0Features()
    if kind != "seg":
        raise ValueError(f"perceptual features must be one of {PERCEPTUAL_FEATURES}, got {kind!r}")
    return SegBackboneFeatures(seg.rgb.backbone)


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


def init_from_bundle(nets: CodecNets, bundle_path: Path) -> tuple[int, float]:
    """Start fine-tuning from a shipped bundle: its weights, and its step/hour counts.

    The bundle keeps only the integer table of the context model; the logits are set to its
    log-probabilities, so the rate term starts where the coder is.
    """
    bundle = load_bundle(str(bundle_path))
    n = table_neighbours(bundle.compact_table)
    if n != nets.ctx.neighbours:
        raise click.UsageError(
            f"{bundle_path} codes the compact layer with {n} context neighbours: "
            f"train with --context-neighbours {n}"
        )
    old, new = bundle.comp.cfg.out_channels, nets.comp.cfg.out_channels
    if new < old:
        raise click.UsageError(f"{bundle_path} has {old} compact channels, the run {new}")
    if new == old:
        nets.comp.load_state_dict(bundle.comp.state_dict())
        nets.gen.load_state_dict(bundle.gen.state_dict())
        nets.ctx.load_integer_table(bundle.compact_table)
    else:
        expand_from(nets, bundle)
    return int(bundle.info.get("codec_steps", 0)), float(bundle.info.get("codec_hours", 0.0))


@torch.no_grad()
def expand_from(nets: CodecNets, bundle) -> None:
    """Warm-start a model with more compact channels from a bundle: it starts as the bundle.

    The new channels' CompNet outputs start with zero weights and a bias at the centre of a
    quantisation level (a zero start sits on a level boundary and costs about a bit per
    symbol); the generator's weights for them start at zero, so the reconstruction is the
    bundle's; their context table starts as a near-certain constant symbol, which is what
    the first symbols are, so they cost almost no bits until they carry information.
    """
    old, levels = bundle.comp.cfg.out_channels, bundle.comp.cfg.levels
    comp_sd = bundle.comp.state_dict()
    out_w, out_b = nets.comp.net[-2].weight, nets.comp.net[-2].bias
    last = f"net.{len(nets.comp.net) - 2}"
    for k, v in comp_sd.items():
        if k.startswith(last):
            continue
        nets.comp.state_dict()[k].copy_(v)
    out_w.zero_()
    out_w[:old] = comp_sd[f"{last}.weight"]
    centre = levels // 2  # its value 2 c / (L - 1) - 1 is a level centre next to 0
    out_b.fill_(math.atanh(2 * centre / (levels - 1) - 1))
    out_b[:old] = comp_sd[f"{last}.bias"]
    gen_sd = bundle.gen.state_dict()
    s2 = nets.gen.cfg.space_to_depth**2
    for k, v in gen_sd.items():
        dst = nets.gen.state_dict()[k]
        if dst.shape == v.shape:
            dst.copy_(v)
            continue
        # conv 0 over unshuffled [compact channels, map]: channel c occupies rows c*s2..(c+1)*s2
        dst.zero_()
        dst[:, : old * s2] = v[:, : old * s2]
        dst[:, nets.gen.cfg.compact_channels * s2 :] = v[:, old * s2 :]
    t = torch.from_numpy(np.asarray(bundle.compact_table, np.float64))
    logits = nets.ctx.logits
    logits[:old] = torch.log(t / t.sum(-1, keepdim=True)).float()
    logits[old:] = 0.0
    logits[old:, :, centre] = 8.0  # p(centre) = 1 - 5e-3 at 16 levels


def _training_set(seg, photos, camvid, out: Path, synthetic: bool, rank: int):
    """Images and their 1/8 maps; maps are cached per segmentation weights in the run folder."""
    if synthetic:
        rng = np.random.default_rng(0)
        images = [rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(4)]
        images = [np.repeat(np.repeat(im[::8, ::8], 8, 0), 8, 1) for im in images]
        return images, compute_maps(seg, images, bf16=False)
    images: list[np.ndarray] = []
    if photos is not None:
        images += read_photos(photos)
    if camvid is not None:
        for split in ("train", "val"):
            images += list(read_split(camvid, split)[0])
    images = crop8(images)
    cache = out / "maps.npz"
    if cache.exists():
        z = np.load(cache)
        maps = [z[f"m{i}"] for i in range(len(images))]
    else:
        maps = compute_maps(seg, images)
        if rank == 0:
            np.savez_compressed(cache, **{f"m{i}": m for i, m in enumerate(maps)})
    return images, maps


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
