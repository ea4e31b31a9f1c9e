"""Training: a few steps lower the loss; torchrun DDP works with two CPU processes; checkpoints resume."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from semcodec.models.discriminator import DISCRIMINATOR_CONFIGS, Discriminator
from semcodec.models.losses import (
    LossWeights,
    PerceptualLoss,
    SegBackboneFeatures,
    VGG19Features,
    d_loss,
    feature_matching_loss,
    g_adv_loss,
    ms_ssim_scales,
    msssim_loss,
)
from semcodec.models.segmentation import build_segnet
from semcodec.train.codec_nets import CodecNets
from semcodec.train.codec_step import generator_losses
from semcodec.train.data import SegAugment, synthetic_segmentation
from semcodec.train.seg import seg_loss, train_step

CPU = torch.device("cpu")


@pytest.mark.slow
def test_seg_steps_lower_the_loss() -> None:
    torch.manual_seed(0)
    images, labels = synthetic_segmentation(8, 64, 64)
    net = build_segnet("tiny")
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255
    y = torch.from_numpy(labels.astype(np.int64))
    with torch.no_grad():
        before = float(seg_loss(net(x), y, None))
    for _ in range(15):
        train_step(net, opt, x, y, None, CPU, bf16=False)
    with torch.no_grad():
        after = float(seg_loss(net(x), y, None))
    assert after < before * 0.9


def test_seg_augment_shapes_and_void_kept() -> None:
    images, labels = synthetic_segmentation(2, 64, 80)
    labels[:, :4] = 11
    x, y = SegAugment((32, 48), seed=1)(images, labels, 3)
    assert x.shape == (3, 3, 32, 48) and y.shape == (3, 32, 48)
    assert 0 <= float(x.min()) and float(x.max()) <= 1
    assert set(np.unique(y.numpy())) <= set(range(12))


@pytest.mark.slow
def test_every_loss_term_is_finite_with_gradients() -> None:
    torch.manual_seed(0)
    nets = CodecNets("tiny", "tiny")
    disc = Discriminator(DISCRIMINATOR_CONFIGS["tiny"])
    perc = PerceptualLoss(SegBackboneFeatures(build_segnet("tiny").rgb.backbone))
    x, lab = torch.rand(2, 3, 64, 64), torch.randint(0, 11, (2, 8, 8))
    w = LossWeights(gan=1, feature_matching=1, perceptual=1, l1=1, msssim=1, rate=1, ssimulacra2=1)
    loss, logs = generator_losses(nets, disc, perc, x, lab, w, CPU, bf16=False)
    for key in ("bpp", "l1", "msssim", "perc", "adv", "fm", "s2"):
        assert np.isfinite(logs[key]), key
    loss.backward()
    for name, p in (("compnet", nets.comp.net[1].weight), ("context", nets.ctx.logits)):
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    # no gradient into D from the generator step
    assert all(p.grad is None for p in disc.parameters())
    real = disc(x, torch.zeros(2, 11, 64, 64), x)
    fake = disc(x.flip(-1), torch.zeros(2, 11, 64, 64), x)
    for v in (
        d_loss(real, fake),
        g_adv_loss(fake),
        feature_matching_loss(real, fake),
        msssim_loss(x, x.flip(-1)),
    ):
        assert torch.isfinite(v)


def test_vgg19_layout_matches_torchvision_names() -> None:
    names = set(VGG19Features().state_dict())
    assert "features.0.weight" in names and "features.34.weight" in names and len(names) == 32


@pytest.mark.slow
def test_ms_ssim_matches_pytorch_msssim_on_large_images() -> None:
    from pytorch_msssim import ms_ssim

    torch.manual_seed(0)
    x = torch.rand(1, 3, 200, 200)
    y = (x + 0.05 * torch.randn_like(x)).clamp(0, 1)
    assert torch.allclose(
        ms_ssim_scales(x, y), ms_ssim(x, y, data_range=1.0, size_average=False), atol=1e-5
    )


@pytest.mark.slow
def test_codec_steps_lower_the_loss() -> None:
    torch.manual_seed(0)
    nets = CodecNets("tiny", "tiny")
    opt = torch.optim.Adam(nets.parameters(), lr=3e-3)
    x = torch.rand(2, 3, 32, 32)
    x = torch.nn.functional.avg_pool2d(x, 8).repeat_interleave(8, -1).repeat_interleave(8, -2)
    lab = torch.randint(0, 11, (2, 4, 4))
    w = LossWeights(gan=0, feature_matching=0, perceptual=0)
    losses = []
    for _ in range(25):
        loss, _ = generator_losses(nets, None, None, x, lab, w, CPU, bf16=False)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])


def _torchrun(module: str, args: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", module, *args]  # fmt: skip
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    if r.returncode != 0 and "SIGABRT" in r.stderr:
        # a rank aborting inside gloo's rendezvous, seen about once in 30 loaded runs and never
        # reproduced in isolation: retried once, and reported, so a real failure still fails
        warnings.warn(f"torchrun rank aborted, retrying once: {_why(r)[:800]}", stacklevel=2)
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    return r


def _why(r: subprocess.CompletedProcess) -> str:
    """The error lines of every rank first (torchrun's tail alone hid the cause once), then the tail."""
    lines = [ln for ln in r.stderr.splitlines() if "Error" in ln or "error:" in ln]
    return "\n".join(lines[:20]) + "\n---\n" + r.stderr[-1500:]


@pytest.mark.subprocess
@pytest.mark.slow
def test_seg_ddp_two_processes(tmp_path) -> None:
    r = _torchrun(
        "semcodec.train.seg",
        [
            "--synthetic",
            "--model",
            "tiny",
            "--iters",
            "2",
            "--batch",
            "2",
            "--crop",
            "32x32",
            "--out",
            str(tmp_path / "seg"),
            "--no-bf16",
        ],
        tmp_path,
    )
    assert r.returncode == 0, _why(r)
    ckpt = tmp_path / "seg" / "seg-checkpoint.pt"
    state = torch.load(ckpt, weights_only=True)
    assert state["step"] == 2
    # Mark the checkpoint with what only a resume carries on: training hours, a weight (the
    # last bias, shifting every class's logit alike, so the loss ignores it) and a momentum.
    names = [name for name, _ in build_segnet("tiny").named_parameters()]
    bias, momentum_of = names[-1], 0
    state["hours"] = 100.0
    state["model"][bias] = state["model"][bias] + 1.0
    state["optim"]["state"][momentum_of]["momentum_buffer"].fill_(10.0)
    torch.save(state, ckpt)
    # resume continues from the checkpoint
    r = _torchrun(
        "semcodec.train.seg",
        [
            "--synthetic",
            "--model",
            "tiny",
            "--iters",
            "3",
            "--batch",
            "2",
            "--crop",
            "32x32",
            "--out",
            str(tmp_path / "seg"),
            "--no-bf16",
        ],
        tmp_path,
    )
    assert r.returncode == 0, _why(r)
    resumed = torch.load(ckpt, weights_only=True)
    assert resumed["step"] == 3 and resumed["hours"] >= 100.0
    moved = resumed["model"][bias] - state["model"][bias]  # one SGD step of lr 0.0075
    assert moved.abs().max() < 0.1, moved
    buffer = resumed["optim"]["state"][momentum_of]["momentum_buffer"]  # 0.9 * 10 + gradient
    assert ((buffer - 9.0).abs() < 1.0).all(), buffer


@pytest.mark.subprocess
@pytest.mark.slow
def test_codec_ddp_two_processes(tmp_path) -> None:
    r = _torchrun(
        "semcodec.train.codec",
        [
            "--synthetic",
            "--tiny",
            "--iters",
            "2",
            "--batch",
            "2",
            "--crop",
            "32",
            "--out",
            str(tmp_path / "codec"),
            "--no-bf16",
        ],
        tmp_path,
    )
    assert r.returncode == 0, _why(r)
    state = torch.load(tmp_path / "codec" / "codec-checkpoint.pt", weights_only=True)
    assert state["step"] == 2 and "nets" in state and "disc" in state


def test_resume_resets_the_optimiser_when_the_loss_recipe_changes() -> None:
    """Adam moments of another loss make oversized steps (the first GAN phase collapsed so)."""
    import json
    from dataclasses import asdict

    from semcodec.models.losses import LossWeights
    from semcodec.train.codec import CodecTrainConfig, recipe_changed

    distortion = CodecTrainConfig(weights=LossWeights(gan=0, feature_matching=0, perceptual=0))
    saved = json.dumps(asdict(distortion))
    assert not recipe_changed(saved, CodecTrainConfig(weights=distortion.weights, lr=1e-5))
    assert recipe_changed(saved, CodecTrainConfig(weights=LossWeights(gan=0.02)))
    assert recipe_changed(None, distortion)


def test_init_from_bundle_starts_where_the_shipped_model_is(tmp_path) -> None:
    """Fine-tuning from a bundle: same networks, a rate term equal to the coder's table, counts."""
    from semcodec.format.compact import encode_compact
    from semcodec.models.segmentation import build_segnet as build
    from semcodec.train.codec_nets import init_from_bundle
    from semcodec.zoo.bundles import REGISTRY, save_bundle

    torch.manual_seed(3)
    src = CodecNets("tiny", "tiny")
    with torch.no_grad():
        src.ctx.logits.normal_(0, 2)
    info = {"codec_steps": 123, "codec_hours": 1.5}
    path = save_bundle(
        tmp_path / "b.pt", REGISTRY["tiny"], build("tiny"), src.comp, src.gen,
        src.ctx.integer_table(), info,
    )  # fmt: skip
    nets = CodecNets("tiny", "tiny")
    assert init_from_bundle(nets, path) == (123, 1.5)
    for a, b in zip(nets.comp.state_dict().values(), src.comp.state_dict().values(), strict=True):
        assert torch.allclose(a.float(), b.float().half().float())
    y = torch.randint(0, nets.comp.cfg.levels, (1, nets.comp.cfg.out_channels, 16, 16)).float()
    coded = 8 * len(encode_compact(y[0].long().numpy(), src.ctx.integer_table()))
    bits = float(nets.ctx.bits(y).detach())
    assert abs(coded - bits) < 0.01 * bits + 64


@pytest.mark.slow
def test_expanded_model_starts_as_the_bundle_and_learns_its_new_channels() -> None:
    """Warm start with 5 more compact channels: the same pictures, under 0.001 bpp more, and
    gradients reaching the new channels' generator weights."""
    from semcodec.train.codec_nets import init_from_bundle
    from semcodec.zoo.registry import weights_path

    path = weights_path("default")
    base, wide = CodecNets("default", "default", 3), CodecNets("c8", "c8", 3)
    init_from_bundle(base, path)
    init_from_bundle(wide, path)
    torch.manual_seed(0)
    x = torch.nn.functional.interpolate(torch.rand(2, 3, 8, 8), size=(64, 64), mode="bilinear")
    lab = torch.randint(0, 11, (2, 8, 8))
    base.eval()
    wide.eval()
    with torch.no_grad():
        a = base(x, lab)
    b = wide(x, lab)
    assert torch.allclose(a["x_hat"], b["x_hat"], atol=1e-5)
    extra_bpp = float(b["bits"].detach() - a["bits"]) / (2 * 64 * 64)
    assert 0 <= extra_bpp < 1e-3
    (b["x_hat"] - x).abs().mean().backward()
    s2 = wide.gen.cfg.space_to_depth**2
    assert wide.gen.body[1].weight.grad[:, 3 * s2 : 8 * s2].abs().max() > 0


@pytest.mark.slow
def test_adversarial_training_steps_are_stable(tmp_path) -> None:
    """The design's full recipe (A7-A9: two-scale PatchGAN, feature matching, L1, MS-SSIM,
    perceptual term) through the real training loop on tiny data: every loss finite, the
    generator's loss falls, the discriminator's stays bounded."""
    import json

    from semcodec.train.codec import CodecTrainConfig, train_codec

    cfg = CodecTrainConfig(
        compnet="tiny", generator="tiny", discriminator="tiny", iters=150, batch=2, crop=32,
        lr=2e-3, warmup=5, bf16=False, weights=LossWeights(gan=0.5, feature_matching=1.0),
    )  # fmt: skip
    torch.set_num_threads(1)
    train_codec(cfg, None, None, None, tmp_path, resume=False, save_every_s=1e9, synthetic=True)
    logs = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    logs = [r for r in logs if "loss" in r]
    assert len(logs) == 15 and all(k in logs[0] for k in ("adv", "fm", "perc", "d"))
    assert all(np.isfinite([r[k] for k in ("loss", "adv", "fm", "perc", "d")]).all() for r in logs)
    assert np.mean([r["loss"] for r in logs[-3:]]) < 0.8 * np.mean([r["loss"] for r in logs[:3]])
    assert max(r["d"] for r in logs) < 4.0  # least squares on two scales: 2.0 is chance level


@pytest.mark.slow
def test_freeze_compnet_trains_the_generator_only(tmp_path) -> None:
    """--freeze-compnet: CompNet and the context table end as they started, the generator moves."""
    from dataclasses import replace

    from semcodec.train.codec import CodecTrainConfig, train_codec

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cfg = CodecTrainConfig(
        compnet="tiny", generator="tiny", discriminator="tiny", iters=5, batch=2, crop=32,
        lr=2e-3, warmup=1, bf16=False, freeze_compnet=True,
    )  # fmt: skip
    start = train_codec(  # no steps: the seeded initial networks
        replace(cfg, iters=0), None, None, None, tmp_path / "a", resume=False, synthetic=True
    )
    nets = train_codec(cfg, None, None, None, tmp_path / "b", resume=False, synthetic=True)
    for a, b in zip(start.comp.parameters(), nets.comp.parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(start.ctx.logits, nets.ctx.logits)
    pairs = zip(start.gen.parameters(), nets.gen.parameters(), strict=True)
    assert any(not torch.equal(a, b) for a, b in pairs)


@pytest.mark.slow
def test_balance_colour_removes_a_generators_mean_cast(tmp_path) -> None:
    """A cast put into the generator's output bias is measured on photos and taken out."""
    from PIL import Image

    from semcodec.train.balance_colour import balance_bundle, mean_shift, subtract_shift
    from semcodec.zoo.bundles import load_bundle, save_bundle

    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i in range(5):
        img = rng.integers(60, 200, (8, 8, 3)).astype(np.uint8).repeat(8, 0).repeat(8, 1)
        Image.fromarray(img).save(photos / f"p{i}.png")
    b = load_bundle("tiny")
    with torch.no_grad():  # an untrained body: the output is the upsampled compact layer
        b.gen.body[-2].weight.zero_()
        b.gen.body[-2].bias.zero_()
    images = [np.asarray(Image.open(photos / f"p{i}.png")) for i in range(4)]
    start = mean_shift(b, images)
    subtract_shift(b, np.array([0.0, -12.0, 0.0]))  # +12 levels of green
    cast = save_bundle(tmp_path, b.spec, b.seg, b.comp, b.gen, b.compact_table)
    out, shift = balance_bundle(cast, photos, count=4, hold_out=1, dest=tmp_path / "out")
    assert shift == pytest.approx(start + [0.0, 12.0, 0.0], abs=2.0)  # clamping to 0..255
    after = mean_shift(load_bundle(str(out)), images)
    assert np.abs(after).max() < 0.5
    assert load_bundle(str(out)).info["output_bias_correction"][1] == round(float(shift[1]), 3)


@pytest.mark.slow
def test_resume_keeps_adam_moments_under_the_new_learning_rate(capsys) -> None:
    """A checkpoint's Adam moments come back with this run's rates; a new recipe starts afresh,
    and the warm-up counts from the resumed step."""
    from dataclasses import replace

    from semcodec.train.codec import CodecTrainConfig, checkpoint, make_nets, restore
    from semcodec.train.codec_step import adam_betas, descend, make_optimisers, warm_up

    torch.manual_seed(0)
    cfg = CodecTrainConfig(compnet="tiny", generator="tiny", discriminator="tiny", bf16=False)
    nets, disc = make_nets(cfg, CPU), Discriminator(DISCRIMINATOR_CONFIGS["tiny"])
    opt_g, opt_d = make_optimisers(nets, disc, (cfg.lr, cfg.lr_context), adam_betas(cfg.weights))
    x, lab = torch.rand(1, 3, 32, 32), torch.randint(0, 11, (1, 4, 4))
    descend(opt_g, (nets(x, lab)["x_hat"] - x).abs().mean() + nets(x, lab)["bits"] * 1e-4)
    state = checkpoint(cfg, nets, disc, opt_g, opt_d, 7, 1.25)

    def resumed(run: CodecTrainConfig) -> tuple[tuple[int, float], torch.optim.Optimizer]:
        n, d = make_nets(run, CPU), Discriminator(DISCRIMINATOR_CONFIGS["tiny"])
        g, dd = make_optimisers(n, d, (run.lr, run.lr_context), adam_betas(run.weights))
        return restore(state, run, n, d, g, dd, rank=0), g

    where, g = resumed(replace(cfg, lr=1e-5, lr_context=1e-3))
    assert where == (7, 1.25) and [p["lr"] for p in g.param_groups] == [1e-5, 1e-3]
    saved = opt_g.state_dict()["state"]
    assert saved and all(
        torch.equal(g.state_dict()["state"][k]["exp_avg"], v["exp_avg"]) for k, v in saved.items()
    )
    assert "optimiser state reset" not in capsys.readouterr().out
    where, g = resumed(replace(cfg, weights=LossWeights(gan=0.0)))
    assert where == (7, 1.25) and not g.state_dict()["state"]
    assert "optimiser state reset" in capsys.readouterr().out
    warm_up(g, (1.0, 10.0), 0, 4)  # the first step after a resume: a quarter of the rate
    assert [p["lr"] for p in g.param_groups] == [0.25, 2.5]


@pytest.mark.slow
def test_export_writes_into_a_new_dest_folder(tmp_path, monkeypatch) -> None:
    """`train export --dest DIR` with DIR not there yet makes the folder and writes
    DIR/<name>-<sha8>.pt into it, not a bundle file named DIR; the map checkpoint is read once."""
    import json

    from semcodec.train import common
    from semcodec.train.codec import CodecTrainConfig, train_codec
    from semcodec.train.export import export_bundle
    from semcodec.zoo.bundles import load_bundle

    cfg = CodecTrainConfig(
        compnet="tiny", generator="tiny", discriminator="tiny", iters=1, batch=2, crop=32,
        warmup=1, bf16=False,
    )  # fmt: skip
    train_codec(cfg, None, None, None, tmp_path / "codec", resume=False, synthetic=True)
    seg_ckpt = tmp_path / "seg.pt"
    seg = load_bundle("tiny").seg
    torch.save({"model": seg.state_dict(), "config": json.dumps({"model": "tiny"})}, seg_ckpt)
    dest = tmp_path / "new" / "bundles"
    reads = []
    real = common._load_weights
    monkeypatch.setattr(common, "_load_weights", lambda p: reads.append(p) or real(p))
    out = export_bundle(seg_ckpt, tmp_path / "codec" / "codec-checkpoint.pt", dest, "tiny")
    assert dest.is_dir() and out.parent == dest and out.name.startswith("tiny-")
    assert load_bundle(str(out)).info["codec_steps"] == 1
    assert reads == [seg_ckpt]  # weights, steps, hours and configuration from one read
    assert load_bundle(str(out)).spec.seg == "tiny"
