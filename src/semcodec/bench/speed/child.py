"""Speed benchmark, the child process protocol: a JSON spec in, a JSON result out, and the
child's own peak resident memory.

Every configuration (one image at one quality, or one set of networks) runs in a fresh child
process so that its peak resident memory is its own: the parent reads the child's
``ru_maxrss`` from ``os.wait4`` (the per-child form of ``getrusage(RUSAGE_CHILDREN)``, whose
``ru_maxrss`` is only the maximum over all children so far).  The parent imports neither torch
nor numpy: Linux carries the exec'ing process's high-water RSS into the child's ``ru_maxrss``,
so a heavy parent would inflate every child's figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from semcodec.bench.speed.codec_runs import worker_codec
from semcodec.bench.speed.networks import worker_nets

__all__ = ["main", "spawn"]


def _child_env(threads: int) -> dict[str, str]:
    """Thread caps for every math library before torch starts (set_num_threads alone is late)."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    return env


def spawn(spec: dict[str, Any], threads: int, timeout_s: float | None) -> dict[str, Any]:
    """Run one configuration in a fresh interpreter; add its own peak RSS (os.wait4)."""
    with tempfile.TemporaryDirectory(prefix="semcodec-speed-") as tmp:
        spec_path, result_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        err_path = Path(tmp) / "stderr.txt"
        spec_path.write_text(json.dumps(spec))
        cmd = [sys.executable, "-m", "semcodec.bench.speed", "--worker", str(spec_path)]
        cmd.append(str(result_path))
        t0 = time.perf_counter()
        with err_path.open("wb") as err:
            proc = subprocess.Popen(
                cmd, env=_child_env(threads), stdout=subprocess.DEVNULL, stderr=err
            )
            status, usage = _wait(proc, timeout_s)
        wall = time.perf_counter() - t0
        out: dict[str, Any] = {}
        if result_path.exists():
            out = json.loads(result_path.read_text())
        code = os.waitstatus_to_exitcode(status) if status is not None else None
        if code != 0 and not out.get("error"):
            tail = err_path.read_text(errors="replace").strip().splitlines()[-5:]
            why = "timed out" if status is None else f"exit status {code}"
            out["error"] = f"child {why}: " + " | ".join(tail)
    out["peak_rss_mib"] = round(usage.ru_maxrss / 1024, 1) if usage else None  # KiB on Linux
    out["process_s"] = round(wall, 3)
    return out


def _wait(proc: subprocess.Popen, timeout_s: float | None) -> tuple[int | None, Any]:
    """wait4 the child (its own rusage); kill it past the timeout."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if deadline else 0)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return status, usage
        if deadline is not None and time.monotonic() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            return None, usage
        time.sleep(0.05)


def _worker_main(spec_path: str, result_path: str) -> int:
    """Child entry point: run one spec and write its JSON result (errors included)."""
    spec = json.loads(Path(spec_path).read_text())
    try:
        out = worker_codec(spec) if spec["kind"] == "codec" else worker_nets(spec)
        code = 0
    except Exception as e:  # noqa: BLE001 - reported in the parent's table, the run goes on
        out = {"error": f"{type(e).__name__}: {e}"}
        code = 1
    Path(result_path).write_text(json.dumps(out))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the child processes (``python -m semcodec.bench.speed --worker``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"] and len(argv) == 3:
        return _worker_main(argv[1], argv[2])
    print(
        "this module runs the benchmark's child processes; use `semcodec bench speed`",
        file=sys.stderr,
    )
    return 2
