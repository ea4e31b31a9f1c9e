"""runtime.py: the bf16 decision, the deterministic parallel split, `semcodec doctor`."""

from __future__ import annotations

import threading

import pytest
import torch
from click.testing import CliRunner

from semcodec import runtime
from semcodec.cli import cli


@pytest.mark.parametrize(
    ("flags", "cap", "native"),
    [
        ({"avx2", "avx512f", "avx512_bf16"}, None, True),
        ({"avx2", "amx_bf16"}, None, True),
        ({"avx2", "avx512f", "avx512_bf16"}, "AVX2", False),  # oneDNN capped below bf16
        ({"avx2", "avx512f", "avx512_bf16"}, "AVX512_CORE", False),
        ({"avx2", "avx512f", "avx512_bf16"}, "AVX512_CORE_BF16", True),
        ({"avx2", "amx_bf16"}, "AVX512_CORE_AMX", True),
        ({"avx2", "fma"}, None, False),  # Zen 3: AVX2 only
        ({"avx2", "avx512f"}, None, False),  # AVX-512 without BF16 (Skylake-SP)
    ],
)
def test_native_bf16(flags, cap, native):
    assert runtime.native_bf16(frozenset(flags), cap) is native


def test_native_bf16_reads_the_isa_cap_from_the_environment(monkeypatch):
    """ONEDNN_MAX_CPU_ISA=AVX2 on a bf16 CPU means bf16 would be emulated."""
    flags = frozenset({"avx512_bf16"})
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    assert runtime.native_bf16(flags) is False
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert runtime.native_bf16(flags) is True


def _never() -> float:
    raise AssertionError("must not measure")


@pytest.mark.parametrize(
    ("env", "native", "speedup", "use", "why"),
    [
        ({}, False, _never, False, "no native bf16"),  # never emulate, never measure
        ({}, True, lambda: 3.0, True, "3.00x faster"),
        ({}, True, lambda: 1.05, False, "1.05x"),  # native but not worth it
        ({}, True, lambda: 0.5, False, "0.50x"),
        ({"SEMCODEC_BF16": "0"}, True, _never, False, "SEMCODEC_BF16=0"),
        ({"SEMCODEC_BF16": "1"}, False, _never, True, "SEMCODEC_BF16=1"),
    ],
)
def test_bf16_decision(env, native, speedup, use, why):
    d = runtime.decide_bf16(env, native=native, speedup=speedup)
    assert d.use is use and why in d.reason


def test_bf16_gain_is_measured_once_per_machine_and_kept(tmp_path):
    """A second process reads the first one's measurement instead of timing again under other
    load: two commands on one machine must not write different files."""
    cache = tmp_path / "c" / "bf16.json"
    first = runtime.decide_bf16({}, native=True, speedup=lambda: 1.5, cache=cache)
    again = runtime.decide_bf16({}, native=True, speedup=_never, cache=cache)
    assert first.use and again.use and "once on this machine" in again.reason
    cache.write_text("{not json")  # damaged: measured again and rewritten
    slow = runtime.decide_bf16({}, native=True, speedup=lambda: 1.0, cache=cache)
    assert not slow.use
    assert not runtime.decide_bf16({}, native=True, speedup=_never, cache=cache).use
    assert runtime.decide_bf16({"SEMCODEC_BF16": "1"}, native=True, speedup=_never, cache=cache).use


def test_bf16_cache_path_depends_on_the_isa_cap(monkeypatch, tmp_path):
    monkeypatch.setenv("SEMCODEC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    best = runtime.bf16_cache_path()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert runtime.bf16_cache_path() != best and best.parent == tmp_path


def test_bf16_is_decided_once_per_process():
    assert runtime.bf16_decision() is runtime.bf16_decision()


def test_run_parallel_runs_each_task_on_one_thread_in_order():
    """Results come back in task order; inside each task torch has one intra-op thread."""
    seen = []

    def task(i: int):
        def run():
            seen.append(threading.get_ident())
            return i, torch.get_num_threads()

        return run

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        out = runtime.run_parallel([task(i) for i in range(5)])
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(before)
    assert out == [(i, 1) for i in range(5)]
    assert len(set(seen)) >= 1


def test_run_parallel_result_does_not_depend_on_workers():
    """A float reduction split into fixed pieces gives the same bits with 1 or 2 workers."""
    x = torch.randn(4, 64, 64, 64, generator=torch.Generator().manual_seed(0))
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).eval()

    def piece(i):
        def run():
            with torch.no_grad():
                return conv(x[i : i + 1])

        return run

    one = runtime.run_parallel([piece(i) for i in range(4)], workers=1)
    two = runtime.run_parallel([piece(i) for i in range(4)], workers=2)
    assert all(torch.equal(a, b) for a, b in zip(one, two, strict=True))


def test_doctor_prints_the_machine_and_the_decisions():
    r = CliRunner().invoke(cli, ["doctor"])
    assert r.exit_code == 0, r.output
    keys = (
        "torch",
        "cpu",
        "torch cpu capability",
        "native bf16",
        "bf16 autocast (encoder)",
        "threads",
    )
    for key in keys:
        assert f"{key}:" in r.output
    assert runtime.cpu_model() in r.output


def test_large_frees_go_back_to_the_os_unless_the_user_chose(monkeypatch):
    """glibc's mmap threshold is fixed once (peak RSS), never over the user's own setting."""
    import platform

    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert runtime.return_large_frees.__wrapped__() is False
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert runtime.return_large_frees.__wrapped__() is expected


_FAULTS = """
import resource, sys
import numpy as np
from semcodec import runtime
from semcodec.batch import workers
if sys.argv[1] == "worker":
    workers.init_pool_worker(())  # what every -j worker runs first
runtime.return_large_frees()  # what every Codec runs
with runtime.network_heap():  # and every network
    pass
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(6):
    a = np.ones(8 << 20)  # 64 MB, written in full, freed
    del a
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.skipif(
    not __import__("platform").libc_ver()[0] == "glibc", reason="glibc's malloc thresholds"
)
def test_batch_workers_keep_their_heap():
    """A one-thread worker reuses freed memory instead of faulting it in again for every file
    (about a third of an encode's CPU); the command's own process still returns large frees."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}

    def faults(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", _FAULTS, mode], env=env, check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        return int(out.split()[-1])

    # the command maps and faults in every 64 MB block again (in 4 kB or 2 MB pages, as the
    # kernel's transparent huge pages allow); a worker faults it in once, then reuses it
    assert 3 * faults("worker") < faults("command")
