"""Training on a lent accelerator: several short runs sharing one GPU, data resident on it.

A GPU is lent for minutes, not days, and what travels to it is bounded (tens of MiB). So the
data goes as compact packs made here (``pack-camvid``, ``pack-persons``: JPEG frames, PNG
labels and masks), the enhancement's training pairs are made there by the codec itself on the
machine's CPU cores (``enh-data``), and each run keeps its whole data set on the GPU, draws
and augments its batches there (the CPU-side augmentation of ``train seg`` would starve it),
and plans its schedule in wall-clock time: it measures its own step rate after a warm-up and
sets the number of steps of its poly or cosine schedule to fit the minutes it was given.
Every run writes a ledger (steps, images, seconds, held-out figure) and its best weights.

Run as ``semcodec train gpu COMMAND`` (or ``python -m semcodec.train.gpu COMMAND``, where the
``semcodec`` command is not installed); docs/training.md gives the recipe.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import click
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from semcodec.format.classes import NUM_CLASSES
from semcodec.format.tiling import MAP_SCALE
from semcodec.models.enhance import ENHANCE_CONFIGS, EnhanceConfig, EnhanceNet
from semcodec.models.segmentation import VOID, SegNet

# ----- compact packs ------------------------------------------------------------------------


def pack_camvid(src: Path, dst: Path, splits: tuple[str, ...], quality: int) -> None:
    """Frames as lossy WebP, labels copied: a CamVid split small enough to travel."""
    for split in splits:
        lines = []
        (dst / split).mkdir(parents=True, exist_ok=True)
        (dst / f"{split}annot").mkdir(parents=True, exist_ok=True)
        for line in (src / f"{split}.txt").read_text().split("\n"):
            if not line.strip():
                continue
            img_rel, lab_rel = line.split()
            stem = Path(img_rel).stem
            img = Image.open(src / img_rel).convert("RGB")
            img.save(dst / split / f"{stem}.webp", quality=quality, method=4)
            (dst / lab_rel).write_bytes((src / lab_rel).read_bytes())
            lines.append(f"{split}/{stem}.webp {lab_rel}")
        (dst / f"{split}.txt").write_text("\n".join(lines) + "\n")


def pack_persons(src: Path, dst: Path, scale: float, quality: int, every: int = 1) -> None:
    """Every `every`-th person training photo (pinned data, held-out ones left out) scaled,
    JPEG + PNG mask."""
    from semcodec.train.persons import read_person_set

    data = read_person_set(src, "train")
    (dst / "photos").mkdir(parents=True, exist_ok=True)
    (dst / "masks").mkdir(parents=True, exist_ok=True)
    picked = list(zip(data.images, data.masks, data.names, strict=True))[::every]
    for img, mask, name in picked:
        h, w = img.shape[:2]
        size = (max(8, round(w * scale)), max(8, round(h * scale)))
        Image.fromarray(img).resize(size, Image.Resampling.LANCZOS).save(
            dst / "photos" / f"{name}.jpg", quality=quality
        )
        m = Image.fromarray(mask.astype(np.uint8) * 255).resize(size, Image.Resampling.BILINEAR)
        Image.fromarray((np.asarray(m) > 127).astype(np.uint8) * 255).convert("1").save(
            dst / "masks" / f"{name}.png"
        )


def read_packed_persons(root: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Photos (RGB uint8) and person masks (bool) of a pack_persons folder."""
    names = sorted(p.stem for p in (root / "photos").glob("*.jpg"))
    images = [np.asarray(Image.open(root / "photos" / f"{n}.jpg").convert("RGB")) for n in names]
    masks = [np.asarray(Image.open(root / "masks" / f"{n}.png").convert("L")) > 127 for n in names]
    return images, masks


# ----- wall-clock schedules -----------------------------------------------------------------


@dataclass
class TimeBudget:
    """A run's time budget; its schedule runs on the fraction of the budget spent (several runs
    share one GPU and start and stop at different times, so a rate measured early would lie)."""

    minutes: float
    start: float = field(default_factory=time.time)

    def fraction(self) -> float:
        """Progress through the schedule in [0, 1]."""
        return min(1.0, self.elapsed() / (self.minutes * 60))

    def over(self) -> bool:
        """Whether the run's minutes are spent."""
        return self.elapsed() >= self.minutes * 60

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.time() - self.start


def _write(path: Path, record: dict) -> None:
    """Append one JSON line to a ledger (and echo it for the run's log)."""
    line = json.dumps(record)
    print(line, flush=True)
    with open(path, "a") as f:
        f.write(line + "\n")


# ----- segmentation -------------------------------------------------------------------------


@dataclass
class SegRun:
    """One segmentation run's recipe."""

    name: str = "A"
    lr: float = 3e-4
    backbone_lr: float = 0.3
    weight_decay: float = 1e-4
    batch: int = 16
    crop: tuple[int, int] = (360, 480)
    scale: tuple[float, float] = (0.6, 1.4)
    aspect: float = 0.0  # log-uniform aspect jitter: width scaled by exp(U(-a, a))
    blur: float = 0.0  # probability of a Gaussian blur (sigma data.BLUR_SIGMA)
    ohem: float = 0.0  # >0: keep only the hardest share of labelled pixels (at least this share)
    person_share: float = 0.125
    class_weight_power: float = 0.5
    seed: int = 0


SEG_RUNS: dict[str, SegRun] = {
    "A": SegRun("A"),
    "B": SegRun("B", ohem=0.25),
    "C": SegRun("C", scale=(0.5, 2.0), aspect=0.25, blur=0.3),
}


def seg_sample(
    img: torch.Tensor, lab: torch.Tensor, run: SegRun, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """One augmented CamVid crop on the GPU: x (1,3,h,w) in [0,1], y (1,h,w) long."""
    from semcodec.train.data import augment_frame

    return augment_frame(img, lab, run.crop, run.scale, run.aspect, run.blur, rng)


def person_sample(
    img: torch.Tensor, mask: torch.Tensor, crop: tuple[int, int], rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """A person photo at a random scale in a crop (as persons.PersonAugment), on the GPU."""
    from semcodec.train.data import jitter
    from semcodec.train.persons import NOT_PERSON, PERSON

    ch, cw = crop
    x = img.permute(2, 0, 1).float().div(255)[None]
    m = mask.float()[None, None]
    # packs are scaled: the scale range is relative to the photo fitting the crop either way
    fit = min(ch / x.shape[-2], cw / x.shape[-1])
    s = fit * float(np.exp(rng.uniform(np.log(0.35), np.log(3.0))))
    h, w = max(8, round(x.shape[-2] * s)), max(8, round(x.shape[-1] * s))
    x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    m = F.interpolate(m, size=(h, w), mode="bilinear", align_corners=False)[0, 0] > 0.5
    yy = torch.where(m, PERSON, NOT_PERSON).long()
    canvas = torch.full((1, 3, max(h, ch), max(w, cw)), 0.5, device=x.device)
    labels = torch.full(canvas.shape[-2:], VOID, dtype=torch.long, device=x.device)
    top = int(rng.integers(0, canvas.shape[-2] - h + 1))
    left = int(rng.integers(0, canvas.shape[-1] - w + 1))
    canvas[..., top : top + h, left : left + w] = x
    labels[top : top + h, left : left + w] = yy
    t = int(rng.integers(0, canvas.shape[-2] - ch + 1))
    lft = int(rng.integers(0, canvas.shape[-1] - cw + 1))
    x, y = canvas[..., t : t + ch, lft : lft + cw], labels[t : t + ch, lft : lft + cw]
    if rng.random() < 0.5:
        x, y = x.flip(-1), y.flip(-1)
    return jitter(x, rng).clamp(0, 1), y[None]


@torch.no_grad()
def seg_val_miou(net: SegNet, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Plain argmax mIoU over the 11 classes of full frames (the run's own curve)."""
    net.eval()
    conf = torch.zeros(NUM_CLASSES * NUM_CLASSES, dtype=torch.long, device=images.device)
    for k in range(len(images)):
        x = images[k].permute(2, 0, 1).float().div(255)[None]
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=x.is_cuda):
            pred = net(x.contiguous(memory_format=torch.channels_last)).argmax(1)[0]
        lab = labels[k].long()
        ok = lab != VOID
        conf += torch.bincount(lab[ok] * NUM_CLASSES + pred[ok], minlength=NUM_CLASSES**2)
    net.train()
    from semcodec.train.seg import scores_of_conf

    counts = conf.view(NUM_CLASSES, NUM_CLASSES).cpu().numpy()
    no_unknown = np.zeros((NUM_CLASSES, 1), counts.dtype)  # a plain argmax never says UNKNOWN
    return scores_of_conf(np.concatenate([counts, no_unknown], 1))["miou"]


def train_seg_gpu(
    run: SegRun,
    bundle: Path,
    camvid: Path,
    persons: Path | None,
    out: Path,
    minutes: float,
    eval_every_s: float,
) -> None:
    """One segmentation run from a bundle's network; writes seg-RUN.pt (best val) and a ledger."""
    from semcodec.train.common import read_seg_source
    from semcodec.train.data import class_weights, read_split
    from semcodec.train.seg import SegTrainConfig, make_optimizer, ohem_loss

    budget = TimeBudget(minutes)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(run.seed)
    rng = np.random.default_rng(run.seed)
    tr_img, tr_lab = read_split(camvid, "train")
    va_img, va_lab = read_split(camvid, "val")
    weight = class_weights(tr_lab, NUM_CLASSES, run.class_weight_power).to(dev)
    tr_img_t, tr_lab_t = torch.from_numpy(tr_img).to(dev), torch.from_numpy(tr_lab).to(dev)
    va_img_t, va_lab_t = torch.from_numpy(va_img).to(dev), torch.from_numpy(va_lab).to(dev)
    p_img, p_mask = read_packed_persons(persons) if persons else ([], [])
    p_img_t = [torch.from_numpy(a.copy()).to(dev) for a in p_img]
    p_mask_t = [torch.from_numpy(m).to(dev) for m in p_mask]
    source = read_seg_source(bundle)
    name = source.config
    net = source.net()
    net = net.to(dev).to(memory_format=torch.channels_last)
    cfg = SegTrainConfig(
        model=name,
        optimizer="adamw",
        lr=run.lr,
        backbone_lr=run.backbone_lr,
        weight_decay=run.weight_decay,
    )
    opt = make_optimizer(net, cfg)
    ledger = out / f"seg-{run.name}.jsonl"
    best, best_state = seg_val_miou(net, va_img_t, va_lab_t), None
    _write(
        ledger,
        {
            "run": run.name,
            "step": 0,
            "images": 0,
            "s": 0.0,
            "val_miou": best,
            "recipe": asdict(run),
        },
    )
    n_person = round(run.batch * run.person_share) if p_img_t else 0
    step, seen, last_eval = 0, 0, time.time()
    net.train()
    while not budget.over():
        lr = run.lr * (1 - budget.fraction()) ** 0.9
        for g in opt.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        xs, ys = [], []
        for _ in range(run.batch - n_person):
            k = int(rng.integers(0, len(tr_img_t)))
            x, y = seg_sample(tr_img_t[k], tr_lab_t[k], run, rng)
            xs.append(x)
            ys.append(y)
        for _ in range(n_person):
            k = int(rng.integers(0, len(p_img_t)))
            x, y = person_sample(p_img_t[k], p_mask_t[k], run.crop, rng)
            xs.append(x)
            ys.append(y)
        x = torch.cat(xs).contiguous(memory_format=torch.channels_last)
        y = torch.cat(ys)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = net(x)
        loss = ohem_loss(logits, y, weight, run.ohem)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        seen += len(x)
        if time.time() - last_eval > eval_every_s or budget.over():
            miou = seg_val_miou(net, va_img_t, va_lab_t)
            if miou > best:
                best = miou
                best_state = _half_cpu(net.state_dict())
            _write(
                ledger,
                {
                    "run": run.name,
                    "step": step,
                    "images": seen,
                    "s": round(budget.elapsed(), 1),
                    "loss": float(loss.detach()),
                    "lr": lr,
                    "val_miou": miou,
                },
            )
            last_eval = time.time()
    improved = best_state is not None
    if not improved:  # never above the starting point: keep the last weights, marked so
        best_state = _half_cpu(net.state_dict())
    torch.save(
        {
            "model": best_state,
            "config": name,
            "val_miou": best,
            "recipe": asdict(run),
            "images": seen,
            "steps": step,
            "improved": improved,
        },
        out / f"seg-{run.name}.pt",
    )


def _half_cpu(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict in fp16 on the CPU (integer buffers unchanged)."""
    return {
        k: v.detach().half().cpu() if v.is_floating_point() else v.cpu() for k, v in state.items()
    }


# ----- enhancement --------------------------------------------------------------------------


#: the complexity-gain curve's sizes (models.enhance.ENHANCE_CONFIGS): 2.0, 8.6, 12.7, 18.1 kMAC/px
CURVE = ("small-s2", "s2-w32-l3", "s4-w64-l4", "s2-w48-l3")
GPU_ENHANCE: dict[str, EnhanceConfig] = {name: ENHANCE_CONFIGS[name] for name in CURVE}


def macs_per_pixel(cfg: EnhanceConfig) -> float:
    """Multiply-accumulates per output pixel of an enhancement configuration."""
    cin = 3 * cfg.s2d**2
    per_pos = 9 * (cin * cfg.width + cfg.layers * cfg.width**2 + cfg.width * cin)
    return per_pos / cfg.s2d**2


def _pair_worker(args: tuple[str, int, int, str, str]) -> str:
    """One photo's training pairs (enhance.write_shard), on this worker's codec."""
    from semcodec.train.enhance import write_shard

    path, n, per_photo, residual, out = args
    torch.set_num_threads(1)
    return write_shard(_worker_codec(), Path(path), n, per_photo, residual, Path(out)).name


_CODEC = None


def _worker_codec():
    """The worker's codec, loaded once (write_shard encodes without enhancement)."""
    global _CODEC
    if _CODEC is None:
        from semcodec.encoder.codec import Codec

        _CODEC = Codec("default")
    return _CODEC


def make_pairs(photos: Path, out: Path, per_photo: int, workers: int, residual: str) -> None:
    """Training pairs of every photo, on `workers` processes (one torch thread each)."""
    import multiprocessing as mp

    from semcodec.imageio import list_images
    from semcodec.train.enhance import residual_of

    out.mkdir(parents=True, exist_ok=True)
    every = {"mixed": 8, "native": 1, "avif": 0}[residual]
    jobs = [
        (str(p), n, per_photo, residual_of(n, every), str(out))
        for n, p in enumerate(list_images(photos))
    ]
    t0 = time.time()
    with mp.get_context("spawn").Pool(workers) as pool:
        for k, name in enumerate(pool.imap_unordered(_pair_worker, jobs), 1):
            if k % 50 == 0 or k == len(jobs):
                print(f"pairs {k}/{len(jobs)} {time.time() - t0:.0f}s {name}", flush=True)


@torch.no_grad()
def enh_held_out(net: EnhanceNet, shards: list[dict]) -> dict:
    """Mean PSNR gain (dB) of the rounded enhanced pictures over the decoded ones, held out."""
    net.eval()
    gains = []
    for s in shards:
        h, w = (d // MAP_SCALE * MAP_SCALE for d in s["original"].shape[:2])
        o = s["original"][:h, :w].permute(2, 0, 1)[None].float()
        for k, q in enumerate(s["quality"]):
            d = s["decoded"][k, :h, :w].permute(2, 0, 1)[None].float()
            m = s["labels"][k, : h // MAP_SCALE, : w // MAP_SCALE][None]
            e = net(d, m, torch.tensor([q], device=d.device)).round().clamp(0, 255)
            mse_d = float(((d - o) ** 2).mean())
            mse_e = float(((e - o) ** 2).mean())
            gains.append(10 * np.log10(max(mse_d, 1e-10) / max(mse_e, 1e-10)))
    net.train()
    return {"gain_db": float(np.mean(gains)), "pictures": len(gains)}


def train_enh_gpu(
    name: str,
    data: Path,
    out: Path,
    minutes: float,
    batch: int,
    crop: int,
    lr: float,
    hold_out: int,
    eval_every_s: float,
    seed: int = 0,
    init: Path | None = None,
) -> None:
    """One enhancement configuration: Adam on MSE, cosine over its minutes (from `init`'s
    weights when given: a continued run)."""
    from semcodec.train.enhance import as_tensors, draw_batch, load_shards, split_shards

    budget = TimeBudget(minutes)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    train, held = split_shards(load_shards(data), hold_out)
    train_t, held_t = as_tensors(train, dev), as_tensors(held, dev)
    cfg = GPU_ENHANCE[name]
    net = EnhanceNet(cfg)
    if init is not None:
        net.load_state_dict(torch.load(init, map_location="cpu", weights_only=True)["model"])
    net = net.to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    ledger = out / f"enh-{name}.jsonl"
    best, best_state, step, last_eval = -1e9, None, 0, time.time()
    _write(
        ledger,
        {
            "net": name,
            "config": asdict(cfg),
            "macs_per_pixel": macs_per_pixel(cfg),
            "params": sum(p.numel() for p in net.parameters()),
            "train": len(train),
            "held": len(held),
        },
    )
    while not budget.over():
        f = budget.fraction()
        warm = min(1.0, (step + 1) / 200)
        for g in opt.param_groups:
            g["lr"] = lr * warm * 0.5 * (1 + np.cos(np.pi * f))
        dec, org, lab, q = draw_batch(train_t, batch, rng, crop)
        loss = ((net(dec, lab, q) - org) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if time.time() - last_eval > eval_every_s or budget.over():
            ev = enh_held_out(net, held_t) if held_t else {"gain_db": 0.0}
            if ev["gain_db"] > best:
                best = ev["gain_db"]
                best_state = {k: v.detach().float().cpu() for k, v in net.state_dict().items()}
            _write(
                ledger,
                {
                    "net": name,
                    "step": step,
                    "images": step * batch,
                    "s": round(budget.elapsed(), 1),
                    "loss": float(loss),
                    **ev,
                },
            )
            last_eval = time.time()
    torch.save(
        {
            "model": best_state,
            "config": asdict(cfg),
            "held_out_gain_db": best,
            "steps": step,
            "seconds": budget.elapsed(),
            "batch": batch,
            "crop": crop,
        },
        out / f"enh-{name}.pt",
    )


# ----- commands -----------------------------------------------------------------------------


@click.group("gpu")
def gpu_group() -> None:
    """Short runs on a lent GPU: pack the data here, train there (docs/training.md)."""


@gpu_group.command("pack-camvid")
@click.option("--src", type=click.Path(path_type=Path), default=Path("../shared/data/camvid"))
@click.option("--dst", type=click.Path(path_type=Path), required=True)
@click.option("--splits", default="train,val")
@click.option("--quality", default=90)
def pack_camvid_command(src: Path, dst: Path, splits: str, quality: int) -> None:
    """CamVid splits as JPEG frames + PNG labels."""
    pack_camvid(src, dst, tuple(splits.split(",")), quality)


@gpu_group.command("pack-persons")
@click.option("--src", type=click.Path(path_type=Path), required=True)
@click.option("--dst", type=click.Path(path_type=Path), required=True)
@click.option("--scale", default=0.5)
@click.option("--quality", default=85)
@click.option("--every", default=1, help="keep every Nth photo")
def pack_persons_command(src: Path, dst: Path, scale: float, quality: int, every: int) -> None:
    """The person training photos scaled, as JPEG + PNG masks."""
    pack_persons(src, dst, scale, quality, every)


@gpu_group.command("seg")
@click.option("--run", "run_name", type=click.Choice(sorted(SEG_RUNS)), default="A")
@click.option(
    "--bundle",
    type=click.Path(path_type=Path),
    default=None,
    help="weights file to start from (default: the shipped default bundle's)",
)
@click.option("--camvid", type=click.Path(path_type=Path), required=True)
@click.option("--persons", type=click.Path(path_type=Path), default=None)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--minutes", default=7.0)
@click.option("--eval-every", default=45.0)
@click.option("--batch", default=16)
def seg_command(run_name, bundle, camvid, persons, out, minutes, eval_every, batch) -> None:
    """One segmentation run (recipes in SEG_RUNS)."""
    out.mkdir(parents=True, exist_ok=True)
    run = replace(SEG_RUNS[run_name], batch=batch)  # the registered recipe stays as it is
    if bundle is None:
        from semcodec.zoo.registry import weights_path

        bundle = weights_path("default")
    train_seg_gpu(run, bundle, camvid, persons, out, minutes, eval_every)


@gpu_group.command("enh-data")
@click.option("--photos", type=click.Path(path_type=Path), required=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--per-photo", default=6)
@click.option("--workers", default=12)
@click.option("--residual", type=click.Choice(["avif", "native", "mixed"]), default="mixed")
def enh_data_command(photos, out, per_photo, workers, residual) -> None:
    """Decoded training pairs of every photo, made by the codec without its enhancement."""
    make_pairs(photos, out, per_photo, workers, residual)


@gpu_group.command("enh")
@click.option("--net", type=click.Choice(sorted(GPU_ENHANCE)), required=True)
@click.option("--data", type=click.Path(path_type=Path), required=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--minutes", default=6.0)
@click.option("--batch", default=64)
@click.option("--crop", default=128)
@click.option("--lr", default=1e-3)
@click.option("--hold-out", default=12)
@click.option("--eval-every", default=30.0)
@click.option("--init", type=click.Path(path_type=Path), default=None)
def enh_command(net, data, out, minutes, batch, crop, lr, hold_out, eval_every, init) -> None:
    """One enhancement configuration (GPU_ENHANCE)."""
    out.mkdir(parents=True, exist_ok=True)
    train_enh_gpu(net, data, out, minutes, batch, crop, lr, hold_out, eval_every, init=init)


if __name__ == "__main__":
    gpu_group()
