"""The map's class offsets: the decision rule with them, their fit, and a bundle that records
them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semcodec.encoder.segment import label_map, labels_of
from semcodec.errors import ModelError
from semcodec.format.classes import UNKNOWN
from semcodec.models.segmentation import CLASS_NAMES, NUM_CLASSES, parse_class_bias
from semcodec.train.decision import (
    OFFSETS,
    PixelScores,
    _miou,
    _sweep_class,
    decide,
    fit_class_bias,
    fit_report,
)

POLE = CLASS_NAMES.index("pole")


def test_offsets_move_the_argmax_before_the_unknown_test() -> None:
    scores = torch.tensor([[[2.0, 4.0]], [[1.5, 0.0]], [[0.0, 0.0]]])  # (3 classes, 1, 2)
    assert labels_of(scores, 0.0).tolist() == [[0, 0]]
    assert labels_of(scores, 0.0, (0.0, 1.0, 0.0)).tolist() == [[1, 0]]
    # with the offset, position 0 is a near tie of classes 0 and 1: too unsure to name
    assert labels_of(scores, 0.5, (0.0, 0.6, 0.0)).tolist() == [[UNKNOWN, 0]]


def _shifted_pixels(n: int = 20000, shift: float = 1.5, seed: int = 0) -> PixelScores:
    """Noisy scores of known classes, with the pole class's scores pushed down by ``shift``:
    a network whose prior under-calls poles."""
    g = torch.Generator().manual_seed(seed)
    truth = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    scores = torch.randn(n, NUM_CLASSES, generator=g) + 4.0 * torch.nn.functional.one_hot(
        truth, NUM_CLASSES
    )
    scores[:, POLE] -= shift
    return PixelScores(scores, truth, torch.arange(n) // (n // 10))


@pytest.mark.slow
def test_the_fit_finds_the_shift_and_pays_on_the_other_half() -> None:
    px = _shifted_pixels()
    # the halves are two stretches of the frames, not alternate frames
    assert set(px.half(0).frame.tolist()) == set(range(5))
    assert set(px.half(1).frame.tolist()) == set(range(5, 10))
    bias = fit_class_bias(px, 0.5)
    assert 1.0 <= float(bias[POLE]) <= 2.0  # the 1.5 taken out, to the fit's 0.25 steps
    zero = torch.zeros(NUM_CLASSES)
    assert _miou(px.labels, decide(px.scores, bias, 0.5)) > _miou(
        px.labels, decide(px.scores, zero, 0.5)
    )
    report = fit_report(px, 0.5)
    assert report["class_bias"]["pole"] == pytest.approx(float(bias[POLE]))
    assert report["miou_without"] == pytest.approx(_miou(px.labels, decide(px.scores, zero, 0.5)))
    for half in report["halves"]:
        assert half["miou_with"] > half["miou_without"] + 0.01


def test_the_fast_sweep_scores_as_the_rule_does() -> None:
    """_sweep_class's shortcut (the other classes' top and log-sum-exp, computed once) must
    give the mIoU that decide gives for the offset it picks."""
    px = _shifted_pixels(n=3000, seed=1)
    bias = torch.linspace(-0.5, 0.5, NUM_CLASSES)
    for c in (0, POLE, NUM_CLASSES - 1):
        v, m = _sweep_class(px, bias, c, 0.5)
        assert v in OFFSETS
        b = bias.clone()
        b[c] = v
        assert m == pytest.approx(_miou(px.labels, decide(px.scores, b, 0.5)), abs=1e-12)


def test_offsets_are_parsed_by_class_name() -> None:
    assert parse_class_bias("pole=0.75, road=-0.5") == {"pole": 0.75, "road": -0.5}
    assert parse_class_bias("") == {}
    for bad, words in (
        ("lamp=1", "unknown class 'lamp'"),
        ("pole", "not CLASS=OFFSET"),
        ("pole=x", "not a number"),
        ("pole=nan", "not a finite number"),
    ):
        with pytest.raises(ValueError, match=words):
            parse_class_bias(bad)


@pytest.mark.slow
def test_a_bundle_carries_its_offsets_into_the_map(tmp_path) -> None:
    """attach records the offsets; the loaded bundle's map follows them; a new map network
    drops the offsets fitted to the old one."""
    from semcodec.train.attach import attach
    from semcodec.zoo.bundles import load_bundle

    plain = load_bundle("tiny")
    path = attach("tiny", tmp_path, None, None, None, None, "tiny", {"pole": 40.0})
    biased = load_bundle(str(path))
    assert biased.seg.cfg.class_bias[POLE] == 40.0
    assert sum(biased.seg.cfg.class_bias) == 40.0
    rgb = np.random.default_rng(0).integers(0, 255, (32, 48, 3), dtype=np.uint8)
    assert (label_map(plain.seg, rgb, bf16=False) != POLE).any()
    assert (label_map(biased.seg, rgb, bf16=False) == POLE).all()
    # the bundle file as eval seg --weights and the codec training's maps take it
    from semcodec.train.codec import load_seg
    from semcodec.train.common import seg_net_of

    for net in (seg_net_of(path), load_seg(path, synthetic=False)):
        assert net.cfg.class_bias == biased.seg.cfg.class_bias and net is not biased.seg

    ckpt = tmp_path / "seg.pt"
    torch.save({"model": plain.seg.state_dict(), "step": 1, "hours": 0.1, "config": "{}"}, ckpt)
    (tmp_path / "new").mkdir()
    renewed = load_bundle(str(attach(str(path), tmp_path / "new", ckpt, None, None, None, "tiny")))
    assert renewed.seg.cfg.class_bias == () and "seg_class_bias" not in renewed.info


def test_a_bundle_with_bad_offsets_is_refused(tmp_path) -> None:
    from semcodec.zoo.bundles import load_bundle, save_bundle

    src = load_bundle("tiny")
    path = save_bundle(
        tmp_path,
        src.spec,
        src.seg,
        src.comp,
        src.gen,
        src.compact_table,
        {"seg_class_bias": {"lamp": 1.0}},
    )
    with pytest.raises(ModelError, match="bad segmentation class offsets.*lamp"):
        _ = load_bundle(str(path)).seg
    path = save_bundle(
        tmp_path / "nan",
        src.spec,
        src.seg,
        src.comp,
        src.gen,
        src.compact_table,
        {"seg_class_bias": {"pole": float("nan")}},
    )
    with pytest.raises(ModelError, match="bad segmentation class offsets.*pole"):
        _ = load_bundle(str(path)).seg


def test_attach_counts_a_run_of_its_own_apart_from_a_fine_tune(tmp_path) -> None:
    """A map network trained from ImageNet brings its own steps and hours, not the source's
    plus its own; a fine-tune of the source adds to them."""
    import json

    from semcodec.train.attach import attach
    from semcodec.zoo.bundles import load_bundle

    src = load_bundle("tiny")
    info = {"seg_steps": 1000, "seg_hours": 2.0}
    base = save_bundle_with(tmp_path / "src", src, info)
    for init, steps in (("", 7), ("runs/earlier.pt", 1007)):
        ckpt = tmp_path / f"seg-{steps}.pt"
        cfg = json.dumps({"model": "tiny", "init": init, "imagenet": True})
        torch.save({"model": src.seg.state_dict(), "step": 7, "hours": 0.5, "config": cfg}, ckpt)
        out = tmp_path / f"out-{steps}"
        out.mkdir()
        got = load_bundle(str(attach(str(base), out, ckpt, None, None, None, "tiny"))).info
        assert got["seg_steps"] == steps
        assert got["seg_from"] == (
            "imagenet" if not init else f"tiny-{load_bundle(str(base)).hash[:8]}"
        )


def test_attach_reads_a_map_checkpoint_once(tmp_path, monkeypatch) -> None:
    """A release's checkpoint (100 MB with its optimiser) is read once for its weights, steps,
    hours and start, not once for each."""
    import json

    from semcodec.train import attach as attach_mod
    from semcodec.train import common
    from semcodec.zoo.bundles import load_bundle

    src = load_bundle("tiny")
    ckpt = tmp_path / "seg.pt"
    cfg = json.dumps({"model": "tiny", "init": "", "imagenet": True})
    torch.save({"model": src.seg.state_dict(), "step": 7, "hours": 0.5, "config": cfg}, ckpt)
    reads = []
    real = common._load_weights
    monkeypatch.setattr(common, "_load_weights", lambda p: reads.append(p) or real(p))
    out = tmp_path / "out"
    got = load_bundle(str(attach_mod.attach("tiny", out, ckpt, None, None, None, "tiny"))).info
    assert reads == [ckpt]
    assert (got["seg_steps"], got["seg_from"]) == (7, "imagenet")


def save_bundle_with(folder, src, info):
    """The tiny bundle saved with the given info."""
    from semcodec.zoo.bundles import save_bundle

    folder.mkdir()
    return save_bundle(folder, src.spec, src.seg, src.comp, src.gen, src.compact_table, info)


@pytest.mark.slow
def test_the_fit_in_chunks_is_the_fit_at_once(monkeypatch) -> None:
    """The fit's chunked passes (memory on a whole val set) change no offset and no score."""
    from semcodec.train import decision

    px = _shifted_pixels(n=6000)
    whole = fit_report(px, 0.5)
    monkeypatch.setattr(decision, "CHUNK", 777)
    assert fit_report(px, 0.5) == whole
    shuffled = torch.randperm(len(px.frame), generator=torch.Generator().manual_seed(1))
    mixed = PixelScores(px.scores[shuffled], px.labels[shuffled], px.frame[shuffled])
    for second in (0, 1):  # halves of frames out of order: the same pixels as in order
        a, b = px.half(second), mixed.half(second)
        assert sorted(a.frame.tolist()) == sorted(b.frame.tolist())
        assert float(a.scores.sum()) == pytest.approx(float(b.scores.sum()), rel=1e-6)
