"""Tests for the speed benchmark: the table and JSON on the tiny model, its bookkeeping, and the
fallback to default-arch in every process it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from childproc import child_env
from PIL import Image

from semcodec.bench import speed
from semcodec.bench.common import DEFAULT_ARCH, known_everywhere
from semcodec.bench.speed import measure, startup
from semcodec.bench.speed.child import spawn


def _image(d: Path, w: int = 48, h: int = 40) -> Path:
    """One small generated image (not a multiple of 8, so padding is exercised)."""
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 5 % 256, y * 6 % 256, (x + y) * 3 % 256], -1).astype(np.uint8)
    d.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb).save(d / "gen.png")
    return d / "gen.png"


@pytest.mark.subprocess
@pytest.mark.slow
def test_speed_cli_on_tiny_model(tmp_path: Path) -> None:
    _image(tmp_path / "imgs")
    out = tmp_path / "speed.json"
    cmd = [sys.executable, "-m", "semcodec.cli", "bench", "speed", "--images",
           str(tmp_path / "imgs"), "--model", "tiny", "--qualities", "0,5,30", "--threads", "1",
           "--repeats", "2", "--net-size", "64x48", "--no-startup", "--no-batch",
           "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    res = json.loads(out.read_text())
    assert res["schema"] == speed.SCHEMA
    assert res["config"]["model"] == "tiny" and res["config"]["model_note"] is None
    assert {"cpu", "usable_cpus", "ram_gib", "loadavg"} <= set(res["machine"])
    assert res["versions"]["torch"] and res["versions"]["pillow"]
    runs = [(r["image"], r["quality"]) for r in res["runs"]]
    assert runs == [("gen", 0), ("gen", 5), ("gen", 30)]
    for r in res["runs"]:
        assert r["error"] is None and (r["width"], r["height"]) == (48, 40)
        assert len(r["encode_runs"]) == 2 and r["encode_s"] == pytest.approx(
            float(np.median(r["encode_runs"])), abs=1e-5
        )
        assert set(r["encode_stages"]) == set(speed.ENCODE_STAGES)
        assert set(r["decode_stages"]) == set(speed.DECODE_STAGES)
        assert r["encode_stages"]["segmentation"] > 0 and r["decode_stages"]["generator"] > 0
        assert r["model_load_s"] > 0 and r["import_s"] > 0
        assert r["unhooked"] == []  # every stage hook found in semcodec.encoder.codec
        assert r["encode_cpu_s"] > 0 and set(r["encode_stages_cpu"]) == set(speed.ENCODE_STAGES)
        # a light parent: the child's peak is its own (torch alone is > 100 MiB)
        assert r["peak_rss_mib"] >= r["rss_after_load_mib"] > 50
        assert sum(r["layer_bytes"].values()) <= r["bytes"]
    q0, q5, q30 = res["runs"]
    assert q0["encode_stages"]["residual_coding"] == 0 and "residual" not in q0["layer_bytes"]
    assert q0["encode_stages"]["generator"] == 0  # no residual: the encoder skips the generator
    assert q0["encode_stages"]["compnet"] > 0
    assert q5["encode_stages"]["residual_coding"] > 0 and q5["encode_stages"]["generator"] > 0
    # from prediction.SEARCH_QUALITY the default effort codes the image itself, networks unused
    assert q30["encode_stages"]["residual_coding"] > 0 and q30["encode_stages"]["generator"] == 0
    assert q30["encode_stages"]["compnet"] == 0 and "compact" not in q30["layer_bytes"]
    assert set(res["summary"]) == {"0", "5", "30"} and res["summary"]["0"]["n"] == 1
    (net,) = res["networks"]
    assert net["error"] is None and net["size"] == [64, 48] and net["threads"] == 1
    assert (
        set(net["seconds"]) == set(net["cpu_seconds"]) == {"segmentation", "compnet", "generator"}
    )
    from semcodec import runtime

    timed = {"fp32", "bf16"} if runtime.native_bf16() else {"fp32"}  # emulated bf16: not timed
    assert all(
        {k for k, v in secs.items() if v is not None} >= timed for secs in net["seconds"].values()
    )
    assert net["seconds"]["generator"]["integer"] > 0  # what the decoder runs
    enc_prec = "bf16" if runtime.bf16_decision().use else "fp32"
    assert net["targets"]["segmentation"]["codec_precision"] == enc_prec
    assert net["targets"]["generator"]["codec_precision"] == "integer"
    rt = res["runs"][0]["runtime"]
    assert rt["cpu"] == runtime.cpu_model() and rt["threads"] == "1"
    assert "runtime: torch" in proc.stdout and "native bf16" in proc.stdout
    table = proc.stdout
    assert "model tiny" in table and "segmentation" in table and "networks alone" in table
    assert "quality 30" in table and "residual_coding" in table


def _fake_run(spec: dict[str, Any]) -> dict[str, Any]:
    """What a worker returns, without starting one."""
    if spec["kind"] == "nets":
        secs = {"segmentation": {"fp32": 2.0, "bf16": 1.2}, "compnet": {"fp32": 0.3, "bf16": 0.2},
                "generator": {"fp32": 0.6, "bf16": 0.4}}  # fmt: skip
        cpu = {"generator": {"fp32": 0.45}} if spec["arch"] else {}
        weights = "random weights, speed only" if spec["arch"] else "weights as loaded"
        return {"label": spec["label"], "model": spec["model"], "arch": spec["arch"],
                "weights": weights, "size": spec["size"], "threads": spec["threads"],
                "load_s": 0.1, "seconds": secs, "cpu_seconds": cpu, "error": None,
                "peak_rss_mib": 300.0,
                "codec_precision": {"segmentation": "bf16", "compnet": "bf16",
                                    "generator": "fp32"}}  # fmt: skip
    q = spec["quality"]
    enc = {s: 0.01 for s in speed.ENCODE_STAGES}
    dec = {s: 0.02 for s in speed.DECODE_STAGES}
    return {"image": Path(spec["image"]).stem, "width": 8, "height": 8, "quality": q,
            "bytes": 100, "bpp": 12.5, "layer_bytes": {}, "import_s": 1.0, "model_load_s": 0.5,
            "rss_after_load_mib": 200.0, "encode_s": 0.09 + q, "decode_s": 0.12,
            "encode_stages": enc, "decode_stages": dec, "encode_cpu_s": 0.08 + q,
            "decode_cpu_s": 0.1, "encode_stages_cpu": enc, "decode_stages_cpu": dec,
            "unhooked": [], "error": None, "peak_rss_mib": 250.0 + q}  # fmt: skip


def test_fallback_to_default_arch_and_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without trained default weights, `default` measures default-arch (the default
    architecture with random weights, as `bench large` does), never a test bundle; the networks
    alone are timed once, on it, marked random."""
    specs: list[dict[str, Any]] = []

    def fake_spawn(spec: dict[str, Any], threads: int, timeout_s: float | None) -> dict:
        specs.append(dict(spec))
        return _fake_run(spec)

    monkeypatch.setattr(measure, "spawn", fake_spawn)
    monkeypatch.setattr(measure, "default_weights_available", lambda: False)
    img = _image(tmp_path / "imgs")
    res = speed.run_speed(
        [img, img], model="default", qualities=(0, 1), log=lambda s: None, startup=False
    )
    assert res["config"]["model"] == DEFAULT_ARCH and res["config"]["model_requested"] == "default"
    assert "default-arch, the default architecture" in res["config"]["model_note"]
    assert {s["model"] for s in specs if s["kind"] == "codec"} == {DEFAULT_ARCH}
    nets = [s for s in specs if s["kind"] == "nets"]
    assert [(s["model"], s["arch"]) for s in nets] == [(DEFAULT_ARCH, "default")]
    assert nets[0]["size"] == [768, 512] and nets[0]["threads"] == 2
    s1 = res["summary"]["1"]
    assert s1["n"] == 2 and s1["encode_s"] == pytest.approx(1.09) and s1["peak_rss_mib"] == 251
    t = res["networks"][0]["targets"]
    assert t["segmentation"] == {"target_s": 1.5, "codec_precision": "bf16", "seconds": 1.2,
                                 "cpu_seconds": None, "meets": True, "meets_cpu": None}  # fmt: skip
    assert t["generator"]["seconds"] == 0.6 and t["generator"]["meets"] is False
    table = speed.format_speed_table(res)
    assert "requested default" in table and "note: no trained default weights" in table
    assert (
        "MISSES" in table and "meets" in table and "default architecture (random weights" in table
    )
    assert "enc cpu" in table and "1090.0" in table  # quality 1 mean encode, ms
    # busy machine: wall clock misses, CPU time meets; both are shown
    assert t["generator"]["meets_cpu"] is True and "MISSES (CPU time: meets)" in table
    json.dumps(res)  # JSON-ready


@pytest.mark.subprocess
def test_default_arch_is_known_in_every_process_the_benchmark_starts(tmp_path: Path) -> None:
    """A codec child loads default-arch (it registers it), and a whole command started with
    known_everywhere's environment knows it too, the sitecustomize it hides still run (the
    suite's, which registers tiny); without it a command knows no default-arch."""
    spec = {"kind": "codec", "image": str(_image(tmp_path)), "model": DEFAULT_ARCH,
            "quality": 0, "residual": "native", "threads": 1, "repeats": 1, "avif": None}  # fmt: skip
    run = spawn(spec, 1, 300)
    assert run.get("error") is None and run["bytes"] > 0, run.get("error")
    models = [sys.executable, "-m", "semcodec.cli", "models"]
    with known_everywhere(DEFAULT_ARCH, child_env()) as env:
        listed = subprocess.run(models, capture_output=True, text=True, timeout=120, env=env)
    assert listed.returncode == 0, listed.stderr
    assert f"\n{DEFAULT_ARCH} " in listed.stdout and "\ntiny " in listed.stdout
    plain = subprocess.run(models, capture_output=True, text=True, timeout=120, env=child_env())
    assert plain.returncode == 0 and DEFAULT_ARCH not in plain.stdout
    with known_everywhere("tiny", {"A": "1"}) as env:
        assert env == {"A": "1"}  # a registered model needs nothing


def test_stage_medians_and_busy_warning() -> None:
    runs = [{"segmentation": 0.5, "compnet": 0.1}, {"segmentation": 0.7, "compnet": 0.1},
            {"segmentation": 0.6, "compnet": 0.3}]  # fmt: skip
    med = speed.stage_medians(runs, [1.0, 1.0, 1.0], ("segmentation", "compnet", "other"))
    assert med == {"segmentation": 0.6, "compnet": 0.1, "other": pytest.approx(0.2)}
    idle = {"loadavg": [0.1, 0.1, 0.1], "usable_cpus": 2}
    busy = {"loadavg": [2.5, 2.0, 2.0], "usable_cpus": 2}
    assert speed.busy_warning(idle, 2) == []
    assert "inflated" in speed.busy_warning(busy, 2)[0]
    # at the end of a run our own child is part of the load
    assert speed.busy_warning({"loadavg": [2.0], "usable_cpus": 2}, 2, during=True) == []
    assert speed.main(["--images", "."]) == 2  # the module runs child processes only


@pytest.mark.subprocess
@pytest.mark.slow
def test_startup_times_whole_commands_and_reports_them() -> None:
    """Start-up: the commands a shell user runs on one 64x64 file, each in a fresh process."""
    st = startup.measure_startup("tiny", threads=1, repeats=1)
    assert "error" not in st, st.get("error")
    secs = st["seconds"]
    want = {"python", "import torch", "model load", "encode", "decode", "decode --layer map"}
    assert want | {"info", "--help", "models"} == set(secs)
    assert all(v > 0 for v in secs.values())
    # no order of the times is asserted: one repeat on a loaded CI machine can put a warm
    # encode under a cold `import torch`; a command that fails is an error, not a time
    fail = [sys.executable, "-c", "import sys; sys.exit(3)"]
    with pytest.raises(RuntimeError, match="exit 3"):
        startup._wall(fail, dict(os.environ), 1)
    assert set(st["targets"]) == set(startup.STARTUP_TARGETS)
    res = {"config": {"model": "tiny", "model_requested": "tiny", "threads": 1, "repeats": 1},
           "machine": {"cpu": "x", "usable_cpus": 1, "ram_gib": 1, "loadavg": [0]},
           "runs": [], "summary": {}, "networks": [], "startup": st}  # fmt: skip
    table = speed.format_speed_table(res)
    assert "start-up: whole commands on a 64x64 PNG" in table and "decode --layer map" in table


@pytest.mark.subprocess
@pytest.mark.slow
def test_batch_throughput_of_whole_commands(tmp_path: Path) -> None:
    """-j 1 and -j 2 over the same images: images per second of each whole command, and the
    speed-up over -j 1 in the table."""
    images = []
    for i in range(3):
        path = _image(tmp_path / f"imgs{i}")
        images.append(path.rename(tmp_path / f"gen{i}.png"))
    cfg = speed.ThroughputConfig(model="tiny", quality=30, residual="native",
                                 modes=speed.throughput.MODES[:2], timeout_s=300)  # fmt: skip
    res = speed.measure_throughput(images, cfg, log=lambda s: None)
    rows = res["modes"]
    assert [r["mode"] for r in rows] == ["-j 1", "-j 2"]
    for r in rows:
        assert r["error"] is None and r["images"] == 3
        assert r["images_per_s"] == pytest.approx(3 / r["wall_s"], rel=1e-3)
        assert 0 < r["batch_s"] <= r["wall_s"] and r["batch_images_per_s"] > 0
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] > 0
    table = "\n".join(speed.throughput.throughput_lines(res))
    assert "-j 2" in table and "speed-up" in table


@pytest.mark.subprocess
def test_the_parent_imports_neither_torch_nor_numpy() -> None:
    """A heavy parent's RSS carries into every child's ru_maxrss: the parent side stays light."""
    code = (
        "import sys, semcodec.bench.speed, semcodec.bench.speed.measure\n"
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
