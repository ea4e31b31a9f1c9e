"""Crops per CPU hour of `train seg` steps (plain or frozen-backbone) on CamVid train.

Measures what docs/training.md's throughput table reports: the process's CPU time
(`time.process_time`) of a few steps after warm-up, per crop, with the frozen mode's cache
cost (EfficientNet forward of the crops) spread over its epochs. Run with OMP_NUM_THREADS=1:

    OMP_NUM_THREADS=1 .venv/bin/python tools/seg_throughput.py --crop 360x480 --steps 10
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from semcodec.models.segmentation import build_segnet
from semcodec.train.common import autocast, read_seg_source
from semcodec.train.data import SegAugment, read_split, synthetic_segmentation
from semcodec.train.featcache import build_cache, freeze_backbone
from semcodec.train.seg import SegTrainConfig, cached_step, make_optimizer, train_step
from semcodec.zoo.registry import REGISTRY, weights_path


def measure(args: argparse.Namespace) -> dict:
    """CPU and wall seconds a crop of the chosen mode."""
    torch.manual_seed(0)
    ch, cw = (int(v) for v in args.crop.split("x"))
    cfg = SegTrainConfig(
        model=args.model, batch=args.batch, crop=(ch, cw), optimizer="adamw", lr=1e-4
    )
    net = build_segnet(args.model)
    if args.weights:
        path = weights_path(args.weights) if args.weights in REGISTRY else Path(args.weights)
        state = read_seg_source(path).weights
        net.load_state_dict({k: v.float() for k, v in state.items()})
    if args.synthetic:
        images, labels = synthetic_segmentation(16, 2 * ch, 2 * cw)
    else:
        images, labels = read_split(Path(args.data), "train")
    aug = SegAugment(cfg.crop, seed=0)
    opt = make_optimizer(net, cfg)
    dev = torch.device("cpu")
    net.train()
    out: dict = {"mode": args.mode, "crop": args.crop, "batch": args.batch}
    out["compile"] = "heads+rnn" if args.compile_rnn else "heads" if args.compile else ""
    if args.mode == "plain":

        def step() -> float:
            x, y = aug(images, labels, cfg.batch)
            return train_step(net, opt, x, y, None, dev, cfg.bf16)
    else:
        freeze_backbone(net)
        n_batches = max(1, args.cache_batches)
        t0, w0 = time.process_time(), time.time()
        cache = build_cache(net, lambda: aug(images, labels, cfg.batch), n_batches, dev, cfg.bf16)
        crops = n_batches * cfg.batch
        out["cache_cpu_s_per_crop"] = (time.process_time() - t0) / crops
        out["cache_wall_s_per_crop"] = (time.time() - w0) / crops
        heads = prepare_heads(net, args)
        k = [0]

        def step() -> float:
            idx = torch.arange(cfg.batch) + (k[0] % n_batches) * cfg.batch
            k[0] += 1
            return cached_step(heads, opt, cache, idx, None, dev, cfg.bf16)

    t0, w0, c0 = time.process_time(), time.time(), _children_cpu()
    for _ in range(args.warmup):
        step()
    out["warmup_cpu_s"] = time.process_time() - t0
    out["warmup_children_cpu_s"] = _children_cpu() - c0  # torch.compile's workers
    out["warmup_wall_s"] = time.time() - w0
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(2):
                step()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    losses = []
    t0, w0 = time.process_time(), time.time()
    for _ in range(args.steps):
        losses.append(step())
    cpu, wall = time.process_time() - t0, time.time() - w0
    crops = args.steps * cfg.batch
    out["step_cpu_s_per_crop"] = cpu / crops
    out["step_wall_s_per_crop"] = wall / crops
    total = cpu / crops + (out.get("cache_cpu_s_per_crop", 0.0) / args.cache_epochs)
    out["cpu_s_per_crop"] = total
    out["crops_per_cpu_hour"] = 3600 / total
    out["losses"] = [round(v, 5) for v in losses]
    out["bf16"] = type(autocast(dev, cfg.bf16)).__name__ != "nullcontext"
    out["threads"] = torch.get_num_threads()
    out["load"] = os.getloadavg()[0]
    return out


def _children_cpu() -> float:
    """CPU seconds of finished child processes (the compiler's workers)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def prepare_heads(net, args: argparse.Namespace):
    """The network the frozen steps run; --compile: the branches' heads through torch.compile
    (--compile-rnn: dynamo traces into nn.GRU too, else nn.GRU runs eagerly between graphs)."""
    if args.compile or args.compile_rnn:
        torch._dynamo.config.allow_rnn = args.compile_rnn
        for branch in (net.rgb, net.gray):
            branch.head = torch.compile(branch.head, dynamic=False)
    return net


def main(argv: list[str] | None = None) -> None:
    """Parse the options, measure, print one JSON line."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=["plain", "frozen"], default="frozen")
    p.add_argument("--crop", default="360x480")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--cache-batches", type=int, default=2)
    p.add_argument("--cache-epochs", type=int, default=4)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-rnn", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--model", default="lite0-u")
    p.add_argument("--weights", default="default", help="a model name or file; '' for none")
    p.add_argument("--data", default="../shared/data/camvid", help="CamVid folder")
    p.add_argument("--synthetic", action="store_true", help="tiny synthetic frames (tests)")
    args = p.parse_args(argv)
    print(json.dumps(measure(args)), flush=True)


if __name__ == "__main__":
    main()
