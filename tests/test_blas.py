"""BLAS on one thread while the integer grid's numpy kernels run, the process's setting after.

The process's BLAS is first set to HOST threads (neither its default nor one), so that a kernel
that left BLAS alone, or a guard that restored the wrong count, shows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

from semcodec.decoder import parts
from semcodec.intgrid import blas, ops
from semcodec.intgrid.enhancer import IntEnhancer
from semcodec.intgrid.generator import IntegerGenerator

HOST = 3  # the process's BLAS threads during these tests


@pytest.fixture
def host_blas() -> Iterator[None]:
    """The process's BLAS at HOST threads during a test (skipped where none can be set)."""
    if blas.blas_threads() is None:
        pytest.skip("no BLAS library with a thread setting is loaded")
    limiter = blas.controller().limit(limits=HOST)
    try:
        if blas.blas_threads() != HOST:
            pytest.skip(f"this BLAS does not take {HOST} threads")
        yield
    finally:
        limiter.restore_original_limits()
        blas.release_claim()


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """BLAS's threads as each run of convolution rows starts (on the kernels' own threads)."""
    counts: list[int | None] = []
    rows = ops.IntConv._rows

    def spy(self: ops.IntConv, *args: object) -> None:
        counts.append(blas.blas_threads())
        rows(self, *args)

    monkeypatch.setattr(ops.IntConv, "_rows", spy)
    monkeypatch.setattr(ops, "CHUNK_BYTES", 1)  # one row per product: rows split over threads
    return counts


def release() -> parts.DecoderParts:
    """A shipped release with both integer networks."""
    shipped = (parts.find_parts(m["hash"]) for m in parts.installed_release_meta())
    return next(r for r in shipped if r is not None and r.enhancer is not None)


def test_enhancer_bands_run_blas_on_one_thread(host_blas: None, seen: list) -> None:
    enh = IntEnhancer(release().enhancer, threads=2, band=8)
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)
    enh.correction(rgb, rng.integers(0, 11, (5, 7)), 50)
    assert len(seen) > 2 and set(seen) == {1}
    assert blas.blas_threads() == HOST


def test_generator_runs_blas_on_one_thread(host_blas: None, seen: list) -> None:
    r = release()
    gen = IntegerGenerator(r.generator, threads=2)
    rng = np.random.default_rng(1)
    gen.forward(rng.integers(0, r.levels, (r.channels, 4, 6)), rng.integers(0, 11, (4, 6)))
    assert len(seen) > 2 and set(seen) == {1}
    assert blas.blas_threads() == HOST


def test_the_setting_is_back_after_an_error(host_blas: None) -> None:
    with pytest.raises(RuntimeError), blas.one_blas_thread():
        assert blas.blas_threads() == 1
        raise RuntimeError
    assert blas.blas_threads() == HOST


def test_overlapping_holders_keep_one_thread_until_the_last_leaves(host_blas: None) -> None:
    """A enters, B enters, A leaves, B leaves: one thread until B leaves, HOST after."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, int | None] = {}

    def first() -> None:
        with blas.one_blas_thread():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def second() -> None:
        a_in.wait(10)
        with blas.one_blas_thread():
            b_in.set()
            a_out.wait(10)
            seen["after the first left"] = blas.blas_threads()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == {"after the first left": 1}
    assert blas.blas_threads() == HOST
    assert blas.GUARD.holders == 0


@pytest.mark.subprocess
def test_a_forked_child_starts_with_a_free_guard(host_blas: None) -> None:
    """A fork while a thread holds the guard: the child can still enter and leave."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork here")
    with blas.one_blas_thread():
        ctx = multiprocessing.get_context("fork")
        child = ctx.Process(target=_enter_and_leave)
        child.start()
        child.join(30)
    assert child.exitcode == 0
    assert blas.blas_threads() == HOST


def _enter_and_leave() -> None:
    """In a forked child: the guard must neither be held nor locked."""
    assert blas.GUARD.holders == 0 and not blas.GUARD.lock.locked()
    with blas.one_blas_thread():
        assert blas.blas_threads() == 1
