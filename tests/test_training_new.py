"""Training inputs of the segmentation and enhancement networks: person photos, the partial
person loss, the UNKNOWN threshold, enhancement data, training and a bundle made from it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from semcodec.format.classes import UNKNOWN
from semcodec.train.persons import NOT_PERSON, PERSON, PersonAugment, read_person_set
from semcodec.train.seg import seg_loss


def _person_folder(root, n: int = 3) -> None:
    """A Clothing Co-Parsing-like folder: photos and pixel-level label files."""
    scipy_io = pytest.importorskip("scipy.io")
    (root / "photos").mkdir(parents=True)
    (root / "annotations" / "pixel-level").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(1, n + 1):
        img = rng.integers(0, 255, (64, 40, 3), dtype=np.uint8)
        Image.fromarray(img).save(root / "photos" / f"{i:04d}.jpg")
        gt = np.zeros((64, 40), np.uint8)
        gt[10:50, 10:30] = 19  # hair, skin, clothes: any label is the person
        scipy_io.savemat(root / "annotations" / "pixel-level" / f"{i:04d}.mat", {"groundtruth": gt})


def test_person_samples_carry_person_and_not_person(tmp_path) -> None:
    _person_folder(tmp_path)
    data = read_person_set(tmp_path, "test", check=False)
    assert len(data.images) == 3 and data.masks[0].sum() == 40 * 20
    aug = PersonAugment((48, 64), seed=1)
    seen = set()
    for _ in range(20):
        x, y = aug.sample(data)
        assert x.shape == (1, 3, 48, 64) and y.shape == (1, 48, 64)
        seen |= set(torch.unique(y).tolist())
    assert seen <= {PERSON, NOT_PERSON, 11} and {PERSON, NOT_PERSON} <= seen


def test_pinned_hash_is_checked(tmp_path) -> None:
    _person_folder(tmp_path)
    with pytest.raises(ValueError, match="pinned"):
        read_person_set(tmp_path)


def test_not_person_pixels_only_push_the_person_class_down() -> None:
    logits = torch.zeros(1, 11, 1, 2, requires_grad=True)
    target = torch.tensor([[[NOT_PERSON, NOT_PERSON]]])
    loss = seg_loss(logits, target, None)
    assert float(loss.detach()) == pytest.approx(-np.log(1 - 1 / 11), rel=1e-5)
    loss.backward()
    g = logits.grad[0, :, 0, 0]
    assert g[PERSON] > 0  # descent lowers the person score
    others = torch.cat([g[:PERSON], g[PERSON + 1 :]])
    assert torch.allclose(others, others[0].expand_as(others))  # no other class is preferred


def test_unknown_below_threshold() -> None:
    from semcodec.encoder.segment import labels_of

    scores = torch.tensor([[[5.0, 0.1]], [[0.0, 0.0]], [[0.0, 0.0]]])  # (3 classes, 1, 2)
    assert labels_of(scores, 0.0).tolist() == [[0, 0]]
    assert labels_of(scores, 0.5).tolist() == [[0, UNKNOWN]]


def _shards(folder, n: int = 3) -> None:
    """Enhancement shards as train enhance-data writes them (decoded = noisy original)."""
    rng = np.random.default_rng(0)
    folder.mkdir()
    for i in range(n):
        org = rng.integers(0, 255, (136, 144, 3), dtype=np.uint8)
        dec = np.clip(org.astype(int) + rng.integers(-8, 9, org.shape), 0, 255).astype(np.uint8)
        np.savez(
            folder / f"{i:05d}-p{i}.npz",
            original=org,
            decoded=dec[None],
            labels=rng.integers(0, 11, (1, 17, 18)).astype(np.uint8),
            quality=np.array([40]),
            bytes=np.array([1000]),
            residual=np.array("avif"),
            source=np.array(f"p{i}.jpg"),
        )


@pytest.mark.slow
def test_enhance_training_resumes_and_makes_a_bundle(tmp_path) -> None:
    from semcodec.train.attach import attach
    from semcodec.train.enhance import EnhanceTrainConfig, train_enhance
    from semcodec.zoo.bundles import load_bundle

    _shards(tmp_path / "data")
    cfg = EnhanceTrainConfig(model="tiny", iters=4, batch=2, hold_out=1)
    train_enhance(cfg, tmp_path / "data", tmp_path / "run", save_every_s=0.0)
    state = torch.load(tmp_path / "run" / "enh-checkpoint.pt", weights_only=True)
    assert state["step"] == 4
    cfg.iters = 6
    train_enhance(cfg, tmp_path / "data", tmp_path / "run", save_every_s=0.0)
    assert torch.load(tmp_path / "run" / "enh-checkpoint.pt", weights_only=True)["step"] == 6
    path = attach(
        "tiny", tmp_path, None, None, tmp_path / "run" / "enh-checkpoint.pt", tmp_path / "data"
    )
    bundle = load_bundle(str(path))
    assert bundle.spec.enhance == "tiny" and bundle.enh_table is not None
    assert bundle.info["enhance_steps"] == 6


@pytest.mark.slow
def test_attach_without_a_new_enhancer_keeps_the_source_one(tmp_path) -> None:
    """A release that replaces only the map network must not drop the post-filter."""
    from semcodec.train.attach import attach
    from semcodec.zoo.bundles import load_bundle

    src = load_bundle("tiny-enh")
    ckpt = tmp_path / "seg.pt"
    torch.save({"model": src.seg.state_dict(), "step": 3, "hours": 0.5, "config": "{}"}, ckpt)
    bundle = load_bundle(str(attach("tiny-enh", tmp_path, ckpt, None, None, None, "tiny-enh")))
    assert bundle.spec.enhance == src.spec.enhance
    assert bundle.enh_table is not None
    for k, v in src.enh_table.items():
        np.testing.assert_array_equal(bundle.enh_table[k], v)
    assert bundle.info["seg_finetune_steps"] == 3


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe",
    [
        {},
        {"scale": (0.5, 2.0), "aspect": 0.25, "blur": 0.5, "ohem": 0.25},
        {"ema": 0.5},
        {"boundary": 3.0},
    ],
    ids=["plain", "recipes-B-C", "moving-average", "boundary"],
)
def test_seg_training_stopped_and_resumed_reaches_the_uninterrupted_weights(
    tmp_path, one_thread, recipe
) -> None:
    """A run checkpointed and resumed mid-schedule (optimiser, schedule, data order, moving
    average) ends with the weights of the same run never stopped (plain, with recipes B and C's
    options, and the average of a run that keeps one)."""
    from semcodec.train.seg import SegTrainConfig, train_seg

    def run(out, iters: int) -> None:
        cfg = SegTrainConfig(
            model="tiny", iters=iters, batch=2, crop=(32, 32), bf16=False, **recipe
        )
        cfg.iters = 4  # the schedule is the whole run's; `iters` only says where it stops
        train_seg(cfg, None, out, True, save_every_s=0.0, synthetic=True, stop_at=iters)

    run(tmp_path / "once", 4)
    run(tmp_path / "twice", 2)
    assert torch.load(tmp_path / "twice" / "seg-checkpoint.pt", weights_only=True)["step"] == 2
    run(tmp_path / "twice", 4)
    once = torch.load(tmp_path / "once" / "seg-checkpoint.pt", weights_only=True)
    twice = torch.load(tmp_path / "twice" / "seg-checkpoint.pt", weights_only=True)
    kept = ["model", "ema"] if recipe.get("ema") else ["model"]
    assert ("ema" in once) == ("ema" in kept)
    for part in kept:
        a, b = once[part], twice[part]
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=f"{part} {k}")


@pytest.mark.slow
def test_seg_moving_average_is_what_eval_and_attach_take(tmp_path, one_thread) -> None:
    """`train seg --ema` keeps an average apart from the last step's weights; `eval seg
    --weights` (and `train attach --seg`, through `read_seg_source`) take the average, and the last
    step's weights with `--last-step`."""
    from semcodec.cli.evaluate import _seg_net
    from semcodec.train.seg import SegTrainConfig, train_seg

    cfg = SegTrainConfig(model="tiny", iters=4, batch=2, crop=(32, 32), bf16=False, ema=0.5)
    train_seg(cfg, None, tmp_path, True, save_every_s=0.0, synthetic=True)
    ckpt = tmp_path / "seg-checkpoint.pt"
    state = torch.load(ckpt, weights_only=True)
    assert any(not torch.equal(state["ema"][k], state["model"][k]) for k in state["model"])
    for average, part in ((True, "ema"), (False, "model")):
        got = _seg_net("tiny", ckpt, average).state_dict()
        for k, v in state[part].items():
            torch.testing.assert_close(
                got[k], v.to(got[k].dtype), rtol=0, atol=0, msg=f"{part} {k}"
            )


@pytest.mark.slow
def test_seg_training_counts_cpu_hours_across_a_resume(tmp_path, one_thread) -> None:
    """The ledger's CPU hours are the whole run's: a resumed run adds to its checkpoint's."""
    from semcodec.train.seg import SegTrainConfig, train_seg

    def run(iters: int) -> None:
        cfg = SegTrainConfig(model="tiny", iters=20, batch=2, crop=(32, 32), bf16=False)
        train_seg(cfg, None, tmp_path, True, save_every_s=0.0, synthetic=True,
                  log=tmp_path / "log.jsonl", stop_at=iters)  # fmt: skip

    run(10)
    ckpt = tmp_path / "seg-checkpoint.pt"
    state = torch.load(ckpt, weights_only=True)
    assert 0 < state["cpu_hours"] < 0.1
    state["cpu_hours"] = 5.0  # as if the first part had run for five CPU hours
    torch.save(state, ckpt)
    run(20)
    assert torch.load(ckpt, weights_only=True)["cpu_hours"] > 5.0
    ledger = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in ledger] == [10, 20]
    assert ledger[0]["cpu_hours"] < 0.1 < 5.0 < ledger[1]["cpu_hours"]


def test_enhance_training_stopped_and_resumed_reaches_the_uninterrupted_weights(
    tmp_path, one_thread
) -> None:
    """Optimiser, schedule and the crops' order survive a stop: the same weights as one run."""
    from semcodec.train.enhance import EnhanceTrainConfig, train_enhance

    _shards(tmp_path / "data")
    cfg = EnhanceTrainConfig(model="tiny", iters=6, batch=2, hold_out=1)
    train_enhance(cfg, tmp_path / "data", tmp_path / "once", save_every_s=0.0)
    train_enhance(cfg, tmp_path / "data", tmp_path / "twice", save_every_s=0.0, stop_at=3)
    train_enhance(cfg, tmp_path / "data", tmp_path / "twice", save_every_s=0.0)
    a = torch.load(tmp_path / "once" / "enh-checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "twice" / "enh-checkpoint.pt", weights_only=True)
    assert a["step"] == b["step"] == 6
    for k in a["model"]:
        torch.testing.assert_close(a["model"][k], b["model"][k], rtol=0, atol=0, msg=k)


def test_enhance_training_starts_from_given_weights(tmp_path) -> None:
    """--init: a new run starts from another run's weights (e.g. a GPU run), not from zero."""
    from semcodec.models.enhance import build_enhance
    from semcodec.train.enhance import EnhanceTrainConfig, train_enhance

    _shards(tmp_path / "data")
    start = build_enhance("tiny")
    torch.nn.init.normal_(start.last.weight, std=0.1)
    torch.save({"model": start.state_dict()}, tmp_path / "start.pt")
    cfg = EnhanceTrainConfig(model="tiny", iters=1, batch=2, hold_out=1, lr=1e-9)
    cfg.init = str(tmp_path / "start.pt")
    train_enhance(cfg, tmp_path / "data", tmp_path / "run", save_every_s=0.0)
    got = torch.load(tmp_path / "run" / "enh-checkpoint.pt", weights_only=True)["model"]
    torch.testing.assert_close(
        got["last.weight"], start.state_dict()["last.weight"], atol=1e-6, rtol=0
    )


@pytest.mark.slow
@pytest.mark.parametrize("stop", [2, 3])  # at a cache block's boundary, inside a block
def test_frozen_backbone_training_resumes_and_moves_no_backbone_weight(tmp_path, stop) -> None:
    """--freeze-backbone: stopped and resumed (the feature cache rebuilt from its block's draws)
    it ends with the uninterrupted run's weights; the EfficientNets and their BatchNorm
    statistics never move while everything after them does."""
    from semcodec.models.segmentation import build_segnet
    from semcodec.train.seg import SegTrainConfig, train_seg

    def run(out, until: int) -> None:
        cfg = SegTrainConfig(
            model="lite0-tiny", iters=5, batch=2, crop=(32, 32), bf16=False, imagenet=False
        )
        cfg.freeze_backbone, cfg.cache_crops, cfg.cache_epochs = True, 4, 1  # 2 steps a block
        train_seg(cfg, None, out, True, save_every_s=0.0, synthetic=True, stop_at=until)

    run(tmp_path / "once", 5)
    run(tmp_path / "twice", stop)
    run(tmp_path / "twice", 5)
    a = torch.load(tmp_path / "once" / "seg-checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "twice" / "seg-checkpoint.pt", weights_only=True)["model"]
    assert a.keys() == build_segnet("lite0-tiny").state_dict().keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
    torch.manual_seed(0)  # train_seg's seed: the run's initial weights
    start = build_segnet("lite0-tiny")
    params = {n for n, _ in start.named_parameters()}
    for k, v in start.state_dict().items():
        if ".backbone.net." in k:
            assert torch.equal(a[k], v), k
        elif k in params:
            assert not torch.equal(a[k], v), k


def test_enhance_moving_average_resumes_and_is_what_attach_ships(tmp_path, one_thread) -> None:
    """--ema keeps an average of the weights through a stop (the same average as one run), logs
    its held-out PSNR, and the bundle is made from the average, not the last step."""
    from semcodec.train.attach import attach
    from semcodec.train.enhance import EnhanceTrainConfig, train_enhance
    from semcodec.zoo.bundles import load_bundle

    _shards(tmp_path / "data")
    cfg = EnhanceTrainConfig(model="tiny", iters=6, batch=2, hold_out=1, lr=1e-2, ema=0.5)
    train_enhance(cfg, tmp_path / "data", tmp_path / "once", save_every_s=0.0)
    train_enhance(cfg, tmp_path / "data", tmp_path / "twice", save_every_s=0.0, stop_at=3)
    train_enhance(cfg, tmp_path / "data", tmp_path / "twice", save_every_s=0.0)
    a = torch.load(tmp_path / "once" / "enh-checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "twice" / "enh-checkpoint.pt", weights_only=True)
    for k in a["ema"]:
        torch.testing.assert_close(a["ema"][k], b["ema"][k], rtol=0, atol=0, msg=k)
    assert any(not torch.equal(a["ema"][k], a["model"][k]) for k in a["model"])
    assert "psnr_after_ema" in json.loads(a["held_out"]) and a["cpu_hours"] > 0
    bundle = load_bundle(
        str(attach("tiny", tmp_path, None, None, tmp_path / "once" / "enh-checkpoint.pt", None))
    )
    shipped = bundle.enhancer.state_dict()
    for k, v in a["ema"].items():
        torch.testing.assert_close(shipped[k].float(), v.half().float(), rtol=0, atol=0, msg=k)
    assert bundle.info["enhance_weights"] == "moving average"


def test_eval_enhance_scores_the_held_out_pictures_in_three_forms(tmp_path) -> None:
    """`eval enhance`: the held-out pictures only; the integer form follows the float network,
    and the per-file fit (gains, tile mask) is never worse than the trained gains."""
    from click.testing import CliRunner

    from semcodec.cli import cli

    _shards(tmp_path / "data", n=4)
    args = ["eval", "enhance", "--data", str(tmp_path / "data"), "--model", "tiny-enh"]
    got = CliRunner().invoke(cli, [*args, "--hold-out", "2", "--json"])
    assert got.exit_code == 0, got.output
    r = json.loads(got.output)
    assert r["pictures"] == 2
    assert r["float_gain"] != 0 and abs(r["integer_gain"] - r["float_gain"]) < 0.05
    assert r["fitted_gain"] >= r["integer_gain"] and r["fitted_gain"] >= -1e-9
    none = CliRunner().invoke(cli, [*args, "--hold-out", "0"])
    assert none.exit_code != 0 and "no held-out photos" in none.output


def test_seg_class_weight_power_reaches_the_loss_and_the_recipe(tmp_path, one_thread) -> None:
    """`train seg --class-weight-power` is recorded in the checkpoint's recipe and changes
    the steps taken (0: plain cross-entropy; 1: full median-frequency balancing)."""
    from click.testing import CliRunner

    from semcodec.train.seg import seg_command

    def run(power: str) -> dict:
        out = tmp_path / power
        args = ["--synthetic", "--model", "tiny", "--iters", "2", "--batch", "2",
                "--crop", "32x32", "--no-bf16", "--class-weight-power", power, "--out", str(out)]  # fmt: skip
        result = CliRunner().invoke(seg_command, args)
        assert result.exit_code == 0, result.output
        return torch.load(out / "seg-checkpoint.pt", weights_only=True)

    plain, full = run("0"), run("1")
    assert json.loads(plain["config"])["class_weight_power"] == 0.0
    assert json.loads(full["config"])["class_weight_power"] == 1.0
    assert any(not torch.equal(plain["model"][k], full["model"][k]) for k in plain["model"])
