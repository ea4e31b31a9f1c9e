"""Speed benchmark, start-up: whole commands on one small file, as a shell user runs them.

Each command runs ``repeats`` times in a fresh process (after one warm-up run, so that the
files are in the page cache); the median wall time is reported. ``import torch`` (as the
commands import it) and the model load (the file and the segmentation network, what a small
encode builds) are timed on their own, so a reader sees what the codec's own start-up costs.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from semcodec.bench.common import known_everywhere

__all__ = ["STARTUP_TARGETS", "measure_startup", "startup_verdicts"]

SIDE = 64  # the small file: a 64x64 PNG
#: wall-clock targets in seconds on 2 cores (commands on the 64x64 file)
STARTUP_TARGETS: dict[str, float] = {
    "encode": 1.8,
    "decode": 0.4,
    "decode --layer map": 0.5,
    "info": 0.3,
    "--help": 0.3,
    "models": 0.3,
}
MAP_TARGET_S = 0.05  # the map of a Kodak file, beside start-up (measure.py times it)

_IMPORT_TORCH = "from semcodec.cli.common import import_torch; import_torch()"
_LOAD = (
    "import time, torch; torch.set_num_threads({threads}); from semcodec.zoo.bundles import load_bundle;"
    " t = time.perf_counter(); load_bundle({model!r}).seg; print(time.perf_counter() - t)"
)


def _semcodec() -> list[str]:
    """The installed `semcodec` script beside this interpreter, else `python -m semcodec.cli`."""
    script = Path(sys.executable).with_name("semcodec")
    if script.exists():
        return [str(script)]
    found = shutil.which("semcodec")
    return [found] if found else [sys.executable, "-m", "semcodec.cli"]


def _small_png(path: Path) -> None:
    """A 64x64 photo-like PNG (gradients and noise), made with Pillow alone."""
    from PIL import Image

    grad = Image.linear_gradient("L").resize((SIDE, SIDE))
    noise = Image.effect_noise((SIDE, SIDE), 40)
    Image.merge("RGB", (grad, noise, grad.rotate(90))).save(path)


def _wall(cmd: list[str], env: dict[str, str], repeats: int) -> tuple[float, str]:
    """Median wall seconds of a command over repeats (after a warm-up) and its last stdout."""
    runs, out = [], ""
    for i in range(repeats + 1):
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd[-3:])}: exit {r.returncode}: {r.stderr.strip()[-300:]}"
            )
        if i:
            runs.append(time.perf_counter() - t)
        out = r.stdout
    return float(statistics.median(runs)), out


def measure_startup(model: str, threads: int = 2, repeats: int = 3) -> dict[str, Any]:
    """Wall seconds of encode, decode, decode --layer map, info, --help, models on 64x64."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    sc = _semcodec()
    with (
        known_everywhere(model, env) as env,
        tempfile.TemporaryDirectory(prefix="semcodec-startup-") as tmp,
    ):
        d = Path(tmp)
        png, sem = d / "small.png", d / "small.sem"
        _small_png(png)
        wall: dict[str, float] = {}
        try:
            wall["python"], _ = _wall([sys.executable, "-c", "pass"], env, repeats)
            wall["import torch"], _ = _wall([sys.executable, "-c", _IMPORT_TORCH], env, repeats)
            loads = [
                float(
                    _wall(
                        [sys.executable, "-c", _LOAD.format(threads=threads, model=model)], env, 1
                    )[1]
                )
                for _ in range(repeats)
            ]
            wall["model load"] = float(statistics.median(loads))
            enc = [*sc, "encode", str(png), "-o", str(sem), "--force", "--model", model, "-q", "50"]
            wall["encode"], _ = _wall(enc, env, repeats)
            dec = [*sc, "decode", str(sem), "-o", str(d / "out.png"), "--force"]
            wall["decode"], _ = _wall(dec, env, repeats)
            lmap = [*sc, "decode", str(sem), "--layer", "map", "-o", str(d / "map.png"), "--force"]
            wall["decode --layer map"], _ = _wall(lmap, env, repeats)
            wall["info"], _ = _wall([*sc, "info", str(sem)], env, repeats)
            wall["--help"], _ = _wall([*sc, "--help"], env, repeats)
            wall["models"], _ = _wall([*sc, "models"], env, repeats)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            return {"error": str(exc), "seconds": wall}
    return {
        "file": f"{SIDE}x{SIDE} PNG, quality 50",
        "model": model,
        "threads": threads,
        "repeats": repeats,
        "seconds": {k: round(v, 4) for k, v in wall.items()},
        "targets": startup_verdicts(wall),
    }


def startup_verdicts(wall: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Each start-up target against its measured median."""
    return {
        k: {"target": t, "measured": wall.get(k), "meets": wall.get(k) is not None and wall[k] <= t}
        for k, t in STARTUP_TARGETS.items()
    }
