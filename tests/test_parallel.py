"""The encoder's fixed split of work (compact.bands, the segmentation branches, tiles) over threads.

The split depends on the image size only; each piece runs on one thread. These tests check the
cut itself, that every path (bands, tiles, the per-tile segmentation above SEG_HEAD_MAX, plain
intra-op threads) gives the untiled result up to float rounding, and that the split, not the
worker count, decides the bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from semcodec import runtime
from semcodec.encoder import compact as compact_mod
from semcodec.encoder import segment
from semcodec.encoder.codec import Codec, Tiling
from semcodec.encoder.compact import COMPNET_MARGIN, bands
from semcodec.encoder.gating import GatingConfig
from semcodec.encoder.options import EncodeOptions
from semcodec.format.tiling import Region
from semcodec.format.tiling import pad_rgb as _pad_rgb

pytestmark = pytest.mark.usefixtures("one_thread")


def _photo(w: int, h: int) -> np.ndarray:
    import matplotlib

    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    return np.asarray(Image.open(path).convert("RGB").resize((w, h), Image.LANCZOS))


@pytest.mark.parametrize(
    ("h", "w", "parts"), [(10, 12, 1), (40, 64, 2), (128, 128, 4), (30, 80, 2)]
)
def test_bands_cover_the_core_once_with_their_margin(h, w, parts):
    core = ctx = (0, h, 0, w)
    cut = bands(Region(core, ctx))
    assert len(cut) == parts
    cover = np.zeros(h, int)
    for b in cut:
        y0, y1, x0, x1 = b.core
        cover[y0:y1] += 1
        assert (x0, x1) == (0, w) and b.ctx[2:] == (0, w)
        assert b.ctx[0] == max(0, y0 - COMPNET_MARGIN) and b.ctx[1] == min(h, y1 + COMPNET_MARGIN)
    assert (cover == 1).all()


def test_bands_stay_inside_a_tile_context():
    core, ctx = (16, 48, 0, 80), (4, 60, 0, 92)
    for b in bands(Region(core, ctx)):
        assert ctx[0] <= b.ctx[0] and b.ctx[1] <= ctx[1] and b.ctx[2:] == ctx[2:]


def _symbols(monkeypatch, bands_from: int, rgb, labels, **kw) -> np.ndarray:
    monkeypatch.setattr(compact_mod, "BANDS_2", bands_from)
    return Codec("tiny", **kw).compact(rgb, labels)


def test_compnet_bands_agree_with_one_piece(monkeypatch):
    """Bands see 48 px of context (CompNet reaches 34): the symbols are those of one piece up to
    float rounding, which moves a value on a rounding boundary by one level at most."""
    rgb = _pad_rgb(_photo(160, 120))
    labels = Codec("tiny").semantic_map(rgb)
    one = _symbols(monkeypatch, 1 << 30, rgb, labels)
    banded = _symbols(monkeypatch, 16, rgb, labels)
    assert len(bands(Region((0, 15, 0, 20), (0, 15, 0, 20)))) == 1  # 15 rows: too few for two bands
    diff = np.abs(banded - one)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.005
    monkeypatch.setattr(compact_mod, "BANDS_2", 16)
    assert len(bands(Region((0, 40, 0, 20), (0, 40, 0, 20)))) == 2


def test_split_not_worker_count_decides_the_symbols(monkeypatch):
    """The same bands with 1 and 2 workers: identical symbols."""
    rgb = _pad_rgb(_photo(160, 120))
    c = Codec("tiny")
    labels = c.semantic_map(rgb)
    monkeypatch.setattr(compact_mod, "BANDS_2", 16)
    one = c.compact(rgb, labels)
    real = runtime.run_parallel
    monkeypatch.setattr(runtime, "run_parallel", lambda tasks, workers=None: real(tasks, 2))
    assert np.array_equal(c.compact(rgb, labels), one)
    assert np.array_equal(c.semantic_map(rgb), labels)


def test_per_tile_segmentation_above_the_head_limit(monkeypatch):
    """Above SEG_HEAD_MAX the whole network runs per tile: its recurrent head then sweeps one
    tile instead of whole rows, so labels differ more than with the global head (78 % agree
    with 64-pixel tiles and the random tiny model; real tiles are 1024 pixels)."""
    rgb = _pad_rgb(_photo(200, 152))
    whole = Codec("tiny").semantic_map(rgb)
    monkeypatch.setattr(segment, "SEG_HEAD_MAX", 16)
    tiled = Codec("tiny", tiling=Tiling(64, 64, 0)).semantic_map(rgb)
    assert tiled.shape == whole.shape
    assert (tiled == whole).mean() > 0.7


def test_intra_op_threads_when_not_deterministic():
    """deterministic=False: plain intra-op threads, the same labels and nearly the same symbols."""
    rgb = _pad_rgb(_photo(160, 120))
    a, b = Codec("tiny"), Codec("tiny", deterministic=False)
    labels = a.semantic_map(rgb)
    assert (b.semantic_map(rgb) == labels).mean() > 0.99
    diff = np.abs(a.compact(rgb, labels) - b.compact(rgb, labels))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.005


@pytest.mark.slow
def test_tiled_images_report_progress_per_tile():
    """A call's progress sees every tile of every stage once, ending at the tile count (a call
    with total 0 says a stage began)."""
    calls = []
    c = Codec("tiny", tiling=Tiling(64, 64, 0))
    opts = EncodeOptions(quality=50, residual="native", gating=GatingConfig(enabled=False))

    def progress(stage: str, done: int, total: int) -> None:
        calls.append((stage, done, total))

    img = _photo(200, 152)
    n = len(Tiling(64, 64, 0).regions(152, 200))
    data = c.encode(img, opts, progress)  # the generator runs once here, for the residual
    for stage in ("segment", "compnet", "generator"):
        mine = [(d, t) for s, d, t in calls if s == stage and t > 0]
        assert mine and mine[-1][0] == mine[-1][1], stage
        assert sorted(d for d, _ in mine) == list(range(1, len(mine) + 1))
    assert [t for s, _, t in calls if s == "generator" and t > 0][0] == n
    began = [s for s, _, t in calls if t == 0]
    assert began == ["segment", "compnet", "generator", "residual"], began
    calls.clear()
    c.decode(data, progress=progress)
    assert calls == [("generator", i, n) for i in range(1, n + 1)]
    calls.clear()
    Codec("tiny").encode(img, opts, progress)  # untiled: no per-tile progress
    assert [t for _, _, t in calls if t > 0] == []
    calls.clear()
    c.encode(img, opts)  # no progress asked for: none heard
    assert calls == []


def test_cli_bar_shows_tile_progress_for_one_file(monkeypatch, capsys):
    from semcodec.cli.batch import BatchProgress

    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    bar = BatchProgress(1, True)
    assert not bar.enabled  # one file: no bar ...
    bar.tiles("compnet", 3, 24)  # ... until a tiled image reports its tiles
    assert bar.enabled and "compnet tile 3/24" in capsys.readouterr().err


@pytest.mark.slow
def test_two_tasks_at_once_on_one_codec_give_the_files_each_gives_alone(tmp_path, monkeypatch):
    """A cluster worker of two threads: tasks of other efforts and qualities run at the same
    time on the process's one codec, each held at the segmentation until both are inside the
    encode, and each file is the one its task writes alone (no task's settings on the codec)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from semcodec.batch import tasks as batch_tasks
    from semcodec.batch.cluster import run_task

    tasks = []
    for i, (effort, quality, residual) in enumerate(((1, 30, "avif"), (9, 70, "avif"))):
        path = tmp_path / f"p{i}.png"
        Image.fromarray(_photo(96 + 32 * i, 64)).save(path)
        tasks.append(
            batch_tasks.EncodeTask(
                str(path),
                None,
                "tiny",
                EncodeOptions(quality=quality, residual=residual, effort=effort),
            )
        )
    alone = [run_task(batch_tasks.encode_worker, t).data for t in tasks]
    assert all(alone) and alone[0] != alone[1]
    barrier = threading.Barrier(2, timeout=120)

    def hold(stage: str, _done: int, total: int) -> None:
        if stage == "segment" and total == 0:  # both tasks have begun before either goes on
            barrier.wait()

    monkeypatch.setattr(batch_tasks, "tile_progress", lambda: hold)
    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda t: run_task(batch_tasks.encode_worker, t), tasks))
    assert [o.error for o in together] == ["", ""]
    assert [o.data for o in together] == alone
