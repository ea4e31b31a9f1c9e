"""`semcodec train enhance-data` and `train enhance`: the post-filter on really decoded pictures.

The training pairs are what the decoder sees: each training photo (BSDS500 train + val, CamVid
train + val frames; never Kodak) encoded by the shipped codec at several residual qualities and
decoded, beside the original and the file's map. Generating them is resumable (one shard per
photo); training checkpoints atomically and resumes like the other trainings.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import click
import numpy as np
import torch

from semcodec.defaults import CHROMAS, DEFAULT_CHROMA
from semcodec.format.tiling import MAP_SCALE
from semcodec.imageio import list_images
from semcodec.models.enhance import build_enhance
from semcodec.progress import StepProgress
from semcodec.train.common import (
    RunClock,
    averaged_copy,
    ema_start,
    ema_update,
    load_checkpoint,
    save_checkpoint,
)

QUALITIES = (5, 10, 20, 30, 40, 50, 60, 70, 80, 90)
CROP = 128  # a multiple of 8: the map's grid


@dataclass
class EnhanceTrainConfig:
    """Recipe of the enhancement network."""

    model: str = "small"
    iters: int = 20000
    init: str = ""  # start a new run from these weights (train.gpu's enh-*.pt or a checkpoint)
    batch: int = 16
    lr: float = 1e-3
    seed: int = 0
    hold_out: int = 12  # the last N photos (by name) are evaluated at each save, never trained
    ema: float = 0.0  # >0: also keep an exponential moving average of the weights (decay a step)
    teacher: str = ""  # a bundle whose enhancement network's output is a second target
    teacher_weight: float = 0.0  # the loss: MSE to the original + this × MSE to the teacher


def _codec_pairs(
    codec, rgb: np.ndarray, qualities: list[int], residual: str, chroma: str = DEFAULT_CHROMA
) -> list[dict]:
    """Encode one image at each quality without the enhancement layer (the pictures the
    post-filter will see: before it), decode it: (decoded, labels, quality, bytes)."""
    from semcodec.encoder.options import EncodeOptions

    opts = EncodeOptions(residual=residual, enhance=False, chroma=chroma)
    analysis = codec.analyse(rgb, opts)
    out = []
    for q in qualities:
        data, _ = codec.finish(analysis, quality=q)
        res = codec.decode(data)
        out.append(
            {
                "decoded": np.asarray(res.image.convert("RGB")),
                "labels": res.semantic_map.astype(np.uint8),
                "quality": q,
                "bytes": len(data),
            }
        )
    return out


def shard_qualities(n: int, per_photo: int) -> list[int]:
    """The qualities of the n-th training image: QUALITIES in turn, per_photo of them."""
    return [QUALITIES[(n * per_photo + k) % len(QUALITIES)] for k in range(per_photo)]


def write_shard(
    codec,
    path: Path,
    n: int,
    per_photo: int,
    residual: str,
    out: Path,
    chroma: str = DEFAULT_CHROMA,
) -> Path:
    """One image's training pairs as out/NNNNN-stem.npz (kept if already written: resumable);
    ``chroma`` is the AVIF residual's layout (the native coder has none)."""
    from PIL import Image

    shard = out / f"{n:05d}-{path.stem}.npz"
    if shard.exists():
        return shard
    rgb = np.asarray(Image.open(path).convert("RGB"))
    qs = shard_qualities(n, per_photo)
    chroma = chroma if residual == "avif" else DEFAULT_CHROMA
    pairs = _codec_pairs(codec, rgb, qs, residual, chroma)
    tmp = shard.with_suffix(".tmp.npz")
    np.savez(
        tmp,
        original=rgb,
        decoded=np.stack([d["decoded"] for d in pairs]),
        labels=np.stack([d["labels"] for d in pairs]),
        quality=np.array(qs),
        bytes=np.array([d["bytes"] for d in pairs]),
        residual=np.array(residual),
        chroma=np.array(chroma),
        source=np.array(str(path.name)),
    )
    tmp.rename(shard)
    return shard


def residual_of(n: int, native_every: int) -> str:
    """Every native_every-th image has the native residual coder, the others AVIF."""
    return "native" if native_every and n % native_every == native_every - 1 else "avif"


def make_data(
    photos: Path,
    camvid: Path | None,
    out: Path,
    per_photo: int,
    model: str,
    native_every: int,
    chroma: str = DEFAULT_CHROMA,
) -> None:
    """Write one shard per training image (skips shards already written: resumable)."""
    from semcodec.encoder.codec import Codec

    codec = Codec(model)
    paths = list_images(photos)
    if camvid is not None:
        for split in ("train", "val"):
            lines = (camvid / f"{split}.txt").read_text().split()
            paths += [camvid / rel for rel in lines[0::2]][::2]
    out.mkdir(parents=True, exist_ok=True)
    prog = StepProgress(len(paths), 0, every=10)
    for n, p in enumerate(paths):
        write_shard(codec, p, n, per_photo, residual_of(n, native_every), out, chroma)
        prog.update(n + 1, n + 1)


def load_shards(folder: Path) -> list[dict]:
    """Every shard, in name order (BSDS photos first, then CamVid frames)."""
    out = []
    for f in sorted(folder.glob("*.npz")):
        if f.name.endswith(".tmp.npz"):
            continue
        with np.load(f) as z:
            out.append({k: z[k] for k in z.files})
    return out


def split_shards(shards: list[dict], hold_out: int) -> tuple[list[dict], list[dict]]:
    """The last hold_out BSDS photos are held out (CamVid frames are all training)."""
    photos = [s for s in shards if not str(s["source"]).endswith(".webp")]
    held = {id(s) for s in photos[len(photos) - hold_out :]} if hold_out else set()
    return [s for s in shards if id(s) not in held], [s for s in shards if id(s) in held]


def as_tensors(shards: list[dict], device: torch.device | str = "cpu") -> list[dict]:
    """Shards as tensors on a device, once: originals and decoded (uint8), labels, qualities."""
    return [
        {
            "original": torch.from_numpy(s["original"]).to(device),
            "decoded": torch.from_numpy(s["decoded"]).to(device),
            "labels": torch.from_numpy(s["labels"].astype(np.int64)).to(device),
            "quality": [int(q) for q in s["quality"]],
        }
        for s in shards
    ]


def draw_batch(
    shards: list[dict], batch: int, rng: np.random.Generator, crop: int = CROP
) -> tuple[torch.Tensor, ...]:
    """Random 8-aligned crops of tensor shards (as_tensors), flipped at random, on their device:
    decoded, original (float 0..255), labels at 1/8, quality."""
    dec, org, lab, qs = [], [], [], []
    for _ in range(batch):
        s = shards[int(rng.integers(0, len(shards)))]
        k = int(rng.integers(0, len(s["quality"])))
        h, w = s["original"].shape[:2]
        y = int(rng.integers(0, (h - crop) // MAP_SCALE + 1)) * MAP_SCALE
        x = int(rng.integers(0, (w - crop) // MAP_SCALE + 1)) * MAP_SCALE
        d = s["decoded"][k, y : y + crop, x : x + crop]
        o = s["original"][y : y + crop, x : x + crop]
        m = s["labels"][
            k, y // MAP_SCALE : (y + crop) // MAP_SCALE, x // MAP_SCALE : (x + crop) // MAP_SCALE
        ]
        if rng.random() < 0.5:
            d, o, m = d.flip(1), o.flip(1), m.flip(1)
        dec.append(d)
        org.append(o)
        lab.append(m)
        qs.append(s["quality"][k])
    device = shards[0]["original"].device
    return (
        torch.stack(dec).permute(0, 3, 1, 2).float(),
        torch.stack(org).permute(0, 3, 1, 2).float(),
        torch.stack(lab),
        torch.tensor(qs, device=device),
    )


def held_pictures(shards: list[dict]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """(original, decoded, labels at 1/8, quality) of every picture, cut to the map's grid."""
    for s in shards:
        h, w = (d // MAP_SCALE * MAP_SCALE for d in s["original"].shape[:2])
        for k in range(len(s["quality"])):
            labels = s["labels"][k, : h // MAP_SCALE, : w // MAP_SCALE].astype(np.int64)
            yield s["original"][:h, :w], s["decoded"][k, :h, :w], labels, int(s["quality"][k])


def _image(rgb: np.ndarray) -> torch.Tensor:
    """(1, 3, H, W) float levels of a uint8 picture."""
    return torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)[None].float()


@torch.no_grad()
def evaluate(net, shards: list[dict]) -> dict:
    """Mean PSNR of the decoded pictures and of the enhanced ones (whole images, 8-aligned)."""
    net.eval()
    before, after = [], []
    for original, decoded, labels, q in held_pictures(shards):
        o, d = _image(original), _image(decoded)
        e = net(d, torch.from_numpy(labels)[None], torch.tensor([q])).round().clamp(0, 255)
        before.append(_psnr(d, o))
        after.append(_psnr(e, o))
    net.train()
    return {"psnr_before": float(np.mean(before)), "psnr_after": float(np.mean(after))}


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB of 0..255 tensors."""
    mse = float(((a - b) ** 2).mean())
    return 10 * np.log10(255.0**2 / max(mse, 1e-10))


def teacher_of(name: str, device: torch.device) -> torch.nn.Module | None:
    """A shipped bundle's float enhancement network, frozen: a smaller network learns from its
    output (a target without the original's noise) as well as from the original."""
    if not name:
        return None
    from semcodec.zoo.bundles import load_bundle

    net = load_bundle(name).enhancer
    if net is None:
        raise click.UsageError(f"model {name!r} has no enhancement network to learn from")
    net = net.float().to(device).eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def distilled_loss(
    out: torch.Tensor,
    original: torch.Tensor,
    teacher: torch.nn.Module | None,
    inputs: tuple[torch.Tensor, ...],
    weight: float,
) -> torch.Tensor:
    """MSE to the original, plus ``weight`` × MSE to the teacher's picture where there is one."""
    loss = ((out - original) ** 2).mean()
    if teacher is None or weight <= 0:
        return loss
    with torch.no_grad():
        target = teacher(*inputs)
    return loss + weight * ((out - target) ** 2).mean()


def train_enhance(
    cfg: EnhanceTrainConfig,
    data: Path,
    out: Path,
    save_every_s: float,
    stop_at: int | None = None,
) -> None:
    """Adam on MSE against the originals, cosine-decayed; resumes from out/enh-checkpoint.pt;
    ``stop_at`` ends the run (checkpointed) before its schedule's last step."""
    torch.manual_seed(cfg.seed)
    shards = load_shards(data)
    train, held = split_shards(shards, cfg.hold_out)
    train_t = as_tensors(train)  # converted once, not per batch
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net = build_enhance(cfg.model).to(device)
    teach = teacher_of(cfg.teacher, device)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    ckpt = out / "enh-checkpoint.pt"
    state = load_checkpoint(ckpt)
    step = 0
    if state is not None:
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        step = int(state["step"])
    elif cfg.init:
        net.load_state_dict(torch.load(cfg.init, map_location="cpu", weights_only=True)["model"])
    net.to(device)
    avg = None
    if cfg.ema > 0:  # a checkpoint without an average (an older run) starts it from its weights
        avg = {k: v.to(device) for k, v in ema_start(state, net).items()}
    rng = np.random.default_rng(cfg.seed * 1000 + step)
    if state is not None and "data_order" in state:  # the uninterrupted run's next crops
        rng.bit_generator.state = json.loads(state["data_order"])
    prog = StepProgress(cfg.iters, step, every=50)
    clock, last = RunClock.resume(state), time.time()
    log = out / "log.jsonl"
    end = cfg.iters if stop_at is None else min(stop_at, cfg.iters)
    while step < end:
        lr = float(cfg.lr * 0.5 * (1 + np.cos(np.pi * step / cfg.iters)))
        for g in opt.param_groups:
            g["lr"] = lr
        dec, org, lab, q = (t.to(device) for t in draw_batch(train_t, cfg.batch, rng))
        loss = distilled_loss(net(dec, lab, q), org, teach, (dec, lab, q), cfg.teacher_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if avg is not None:
            ema_update(avg, net, cfg.ema)
        step += 1
        prog.update(step, step * cfg.batch, loss=loss.item(), lr=lr)
        if time.time() - last > save_every_s or step in (cfg.iters, end):
            h, ch = clock.hours(), clock.cpu_hours()
            ev = evaluate(net.cpu(), held) if held else {}
            net.to(device)
            record = {
                "model": {k: v.cpu() for k, v in net.state_dict().items()},
                "optim": opt.state_dict(),
                "step": step,
                "hours": h,
                "cpu_hours": ch,
                "config": json.dumps(asdict(cfg)),
                "data_order": json.dumps(rng.bit_generator.state),
            }
            if avg is not None:
                record["ema"] = {k: v.cpu() for k, v in avg.items()}
                if held:
                    twin = averaged_copy(net, avg)
                    ev["psnr_after_ema"] = evaluate(twin, held)["psnr_after"]
            record["held_out"] = json.dumps(ev)
            save_checkpoint(ckpt, record)
            with open(log, "a") as f:
                entry = {"step": step, "loss": loss.item(), "hours": h, "cpu_hours": ch, **ev}
                f.write(json.dumps(entry) + "\n")
            last = time.time()


@click.command("enhance-data")
@click.option("--photos", type=click.Path(path_type=Path), default=Path("../shared/data/photos"))
@click.option("--camvid", type=click.Path(path_type=Path), default=None)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--per-photo", default=4, show_default=True, help="qualities per image")
@click.option("--model", default="default", show_default=True)
@click.option(
    "--native-every", default=8, show_default=True, help="every Nth image: native residual"
)
@click.option(
    "--chroma",
    type=click.Choice(CHROMAS),
    default=DEFAULT_CHROMA,
    show_default=True,
    help="chroma layout of the AVIF residual the pictures are decoded from",
)
def enhance_data_command(photos, camvid, out, per_photo, model, native_every, chroma):
    """Encode and decode the training photos at several qualities (enhancement training data)."""
    make_data(photos, camvid, out, per_photo, model, native_every, chroma)


@click.command("enhance")
@click.option("--data", type=click.Path(path_type=Path, exists=True), required=True)
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/enhance"))
@click.option("--model", default="small", show_default=True)
@click.option("--iters", default=20000, show_default=True)
@click.option("--batch", default=16, show_default=True)
@click.option("--lr", default=1e-3, show_default=True)
@click.option("--hold-out", default=12, show_default=True)
@click.option(
    "--ema",
    default=0.0,
    show_default=True,
    help="decay of a moving average of the weights (e.g. 0.999; 0: none); export uses it",
)
@click.option("--save-every", default=300.0, show_default=True, help="seconds between checkpoints")
@click.option(
    "--init",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="start a new run from these weights (a checkpoint or train.gpu's enh-*.pt)",
)
@click.option(
    "--teacher", default="", help="a bundle whose enhancement network's output is a second target"
)
@click.option(
    "--teacher-weight",
    default=1.0,
    show_default=True,
    help="loss: MSE to the original + this × MSE to the teacher's picture (with --teacher)",
)
def enhance_command(
    data, out, model, iters, batch, lr, hold_out, ema, save_every, init, teacher, teacher_weight
):
    """Train the enhancement network on decoded pictures (resumes from --out)."""
    cfg = EnhanceTrainConfig(
        model=model,
        iters=iters,
        batch=batch,
        lr=lr,
        hold_out=hold_out,
        ema=ema,
        init=str(init or ""),
        teacher=teacher,
        teacher_weight=teacher_weight if teacher else 0.0,
    )
    out.mkdir(parents=True, exist_ok=True)
    train_enhance(cfg, data, out, save_every)
