"""Training on a lent GPU (train/gpu.py), checked on the CPU with tiny data."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from childproc import child_env
from click.testing import CliRunner
from PIL import Image

from semcodec.cli import cli
from semcodec.models.enhance import EnhanceNet
from semcodec.models.segmentation import VOID
from semcodec.train import gpu
from semcodec.train.seg import ohem_loss


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(gpu.GPU_ENHANCE))
def test_every_curve_network_trains_and_costs_what_it_says(name: str) -> None:
    """Forward/backward of each size, and its MAC count from the layer shapes."""
    cfg = gpu.GPU_ENHANCE[name]
    net = EnhanceNet(cfg)
    dec = torch.rand(2, 3, 32, 32) * 255
    loss = (net(dec, torch.zeros(2, 4, 4, dtype=torch.long), torch.tensor([10, 90])) - dec).pow(2)
    loss.mean().backward()
    assert all(p.grad is not None for p in net.parameters())
    x = torch.zeros(1, 3, 64, 64)
    macs = 0
    h = torch.nn.functional.pixel_unshuffle(x, cfg.s2d)
    for conv in [net.first, *net.body, net.last]:
        out = conv(h)
        macs += out.numel() * conv.in_channels * 9
        h = out
    assert gpu.macs_per_pixel(cfg) == pytest.approx(macs / (64 * 64))


@pytest.mark.slow
def test_seg_sample_keeps_labels_with_their_pixels() -> None:
    """A crop's labels move with its pixels through scale, aspect, flip and blur."""
    img = np.zeros((40, 60, 3), np.uint8)
    lab = np.zeros((40, 60), np.uint8)
    img[:, 30:] = 255
    lab[:, 30:] = 3
    run = gpu.SegRun(crop=(32, 48), scale=(0.9, 1.6), aspect=0.2, blur=1.0)
    rng = np.random.default_rng(0)
    for _ in range(10):
        x, y = gpu.seg_sample(torch.from_numpy(img), torch.from_numpy(lab), run, rng)
        assert x.shape == (1, 3, 32, 48) and y.shape == (1, 32, 48)
        bright = x[0].mean(0) > 0.5
        # away from the edge (blur, resampling) a bright pixel is class 3, a dark one class 0
        inner = bright == torch.nn.functional.max_pool2d(bright[None].float(), 5, 1, 2)[0].bool()
        assert bool(((y[0] == 3) == bright)[inner].float().mean() > 0.97)


def test_ohem_keeps_only_the_hardest_pixels() -> None:
    """With keep=0.5 the loss is the mean over the worse half, higher than the plain mean."""
    logits = torch.zeros(1, 3, 2, 2)
    logits[0, 0, 0, 0] = 5.0  # one easy pixel
    target = torch.tensor([[[0, 1], [2, VOID]]])
    plain = torch.nn.functional.cross_entropy(logits, target, ignore_index=VOID)
    hard = ohem_loss(logits, target, None, 0.5)
    assert float(hard) > float(plain)
    assert float(ohem_loss(logits, target, None, 0.0)) == pytest.approx(float(plain))


def test_clock_schedule_runs_on_wall_time() -> None:
    """The schedule's fraction follows the clock and ends the run when its minutes are spent."""
    c = gpu.TimeBudget(minutes=1.0)
    c.start -= 30
    assert 0.49 < c.fraction() < 0.6 and not c.over()
    c.start -= 40
    assert c.fraction() == 1.0 and c.over()


def test_camvid_pack_lists_frames_that_read_back(tmp_path) -> None:
    """pack-camvid (run as ``semcodec train gpu pack-camvid``) writes a split list whose frames
    and labels load like CamVid's own."""
    from semcodec.train.data import read_split

    src = tmp_path / "camvid"
    (src / "train").mkdir(parents=True)
    (src / "trainannot").mkdir()
    yy, xx = np.mgrid[0:24, 0:32]
    lines = []
    for k in range(2):
        smooth = np.stack([xx * 8, yy * 10, (xx + yy + 40 * k) * 4], -1).clip(0, 255)
        Image.fromarray(smooth.astype(np.uint8)).save(src / "train" / f"f{k}.png")
        Image.fromarray(np.full((24, 32), k, np.uint8)).save(src / "trainannot" / f"f{k}.png")
        lines.append(f"train/f{k}.png trainannot/f{k}.png")
    (src / "train.txt").write_text("\n".join(lines) + "\n")
    pack = ["--src", str(src), "--dst", str(tmp_path / "pack"), "--splits", "train"]
    r = CliRunner().invoke(cli, ["train", "gpu", "pack-camvid", *pack])
    assert r.exit_code == 0, r.output
    images, labels = read_split(tmp_path / "pack", "train")
    assert images.shape == (2, 24, 32, 3) and labels.shape == (2, 24, 32)
    assert labels[1].max() == 1  # labels are copied, never re-encoded
    orig = np.asarray(Image.open(src / "train" / "f0.png")).astype(float)
    assert np.abs(images[0] - orig).mean() < 3  # lossy, but the same picture


@pytest.mark.subprocess
def test_the_gpu_commands_run_as_a_module_too() -> None:
    """``python -m semcodec.train.gpu`` (a machine without the ``semcodec`` command) is the same
    group as ``semcodec train gpu``: the same commands."""
    r = subprocess.run(
        [sys.executable, "-m", "semcodec.train.gpu", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )
    assert r.returncode == 0, r.stderr
    listed = CliRunner().invoke(cli, ["train", "gpu", "--help"])
    assert listed.exit_code == 0, listed.output
    for name in ("pack-camvid", "pack-persons", "seg", "enh-data", "enh"):
        assert f"  {name} " in r.stdout and f"  {name} " in listed.output
