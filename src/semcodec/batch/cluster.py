"""Encode and decode on a Dask distributed cluster (``--cluster``): a scheduler's address, or
``local:N`` worker processes on this machine.

Workers compute; this process plans, writes and reports, exactly as for ``-j``: every output
is written once, atomically, by one writer, whichever worker computed it and however often a
task ran again after a worker died. Inputs are read by the workers at the paths given, so on
several machines they must be visible at the same paths (a shared file system).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import re
import threading
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import Any

from semcodec.batch.outcome import Outcome
from semcodec.batch.window import WINDOW_PER_WORKER, windowed
from semcodec.batch.workers import one_torch_thread, start_worker
from semcodec.defaults import DEFAULT_CLUSTER_TIMEOUT
from semcodec.errors import SemcodecError, UsageProblem, describe_error

_LOCAL = re.compile(r"local(?::(\d+)(?:x(\d+))?)?")


@dataclass(frozen=True)
class ClusterSpec:
    """Where to run: a scheduler address, or local worker processes and their task threads."""

    address: str | None = None
    local_workers: int = 0
    local_threads: int = 1  # tasks a local worker runs at once (one torch thread each)


def parse_cluster(text: str) -> ClusterSpec:
    """``local``, ``local:N``, ``local:NxT`` (N workers of T threads) or a scheduler address
    such as ``tcp://10.0.0.5:8786``."""
    match = _LOCAL.fullmatch(text.strip())
    if match:
        workers = int(match.group(1) or os.cpu_count() or 1)
        threads = int(match.group(2) or 1)
        if workers < 1 or threads < 1:
            raise UsageProblem("local:NxT needs N, T >= 1", option="--cluster")
        return ClusterSpec(local_workers=workers, local_threads=threads)
    if ":" not in text:
        raise UsageProblem(
            f"expected local:N or a scheduler address (tcp://host:8786), got {text!r}",
            option="--cluster",
        )
    return ClusterSpec(address=text.strip())


def _distributed() -> Any:
    """The distributed package, or a one-line error naming the extra that installs it."""
    try:
        import distributed
    except ImportError:
        raise UsageProblem(
            "--cluster needs Dask distributed: pip install 'semcodec[cluster]'"
        ) from None
    return distributed


def _plugin_class() -> type:
    """The worker plugin class (built here so that importing this module needs no Dask)."""
    from distributed import WorkerPlugin

    class ModelLoader(WorkerPlugin):
        """Loads the models once per worker, with the client's bf16 decision and one torch
        thread per task slot: files must not depend on which worker wrote them."""

        name = "semcodec-models"

        def __init__(self, models: tuple[str, ...], bf16: str | None) -> None:
            self.models, self.bf16 = models, bf16

        def setup(self, worker: Any) -> None:
            """Runs in each worker as it joins: the start a -j worker makes too."""
            start_worker(self.models, self.bf16)

    return ModelLoader


_THREAD_READY = threading.local()


def run_task(fn: Callable[[Any], Outcome], task: Any) -> Outcome:
    """One task on a worker: one torch thread per task thread. A worker runs as many tasks
    at once as it has threads: they share its codec, which holds no task's settings."""
    if not getattr(_THREAD_READY, "done", False):
        one_torch_thread()
        _THREAD_READY.done = True
    return fn(task)


#: what a lost scheduler raises in the client: its futures cancelled, its connection closed
#: (CommClosedError is an OSError), or a reconnection timed out
_CONNECTION_ERRORS = (CancelledError, OSError, TimeoutError)


def scheduler_lost(address: str) -> SemcodecError:
    """The one line a batch ends with when its scheduler goes away mid-run."""
    return SemcodecError(
        f"lost the connection to the scheduler at {address}; the files written so far are "
        "complete: rerun with --skip-existing to finish"
    )


@contextlib.contextmanager
def _quiet_client_logs(debug: bool) -> Iterator[None]:
    """Dask's client logs a lost scheduler as tracebacks; the batch says it in one line."""
    if debug:
        yield
        return
    names = [
        "distributed",
        *(n for n in logging.root.manager.loggerDict if n.startswith("distributed.")),
    ]
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:  # each: a child's own level would let its records through to the handler
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


async def _identity(address: str, timeout: float) -> Any:
    """The scheduler's answer to Dask's ``identity`` request."""
    from distributed.comm import connect

    comm = await connect(address, timeout=timeout)
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def _probe(address: str, timeout: float) -> tuple[Any, BaseException | None]:
    """Ask ``address`` who it is, on a thread of its own: a peer that speaks something else can
    make Dask's reader wait forever or allocate exabytes, and neither may hold the command."""
    import asyncio

    found: dict[str, Any] = {}

    def ask() -> None:
        """The request, cancelled at the timeout; any failure is the answer."""
        try:
            found["reply"] = asyncio.run(asyncio.wait_for(_identity(address, timeout), timeout))
        except BaseException as exc:  # noqa: BLE001 - a MemoryError from a stranger's bytes too
            found["error"] = exc

    thread = threading.Thread(target=ask, name="semcodec-scheduler-probe", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    if thread.is_alive():
        return None, TimeoutError(f"no answer within {timeout:g} s")
    return found.get("reply"), found.get("error")


def check_scheduler(address: str, timeout: float = DEFAULT_CLUSTER_TIMEOUT) -> None:
    """One line within about ``timeout`` seconds when ``address`` refuses, does not answer,
    or is not a Dask scheduler (the client itself would hang on some of these)."""
    reply, exc = _probe(address, timeout)
    if isinstance(exc, TimeoutError):  # asyncio's is the builtin since Python 3.11
        why = f"no answer within {timeout:g} s (--cluster-timeout)"
    elif exc is not None and not isinstance(exc, (OSError, *_CONNECTION_ERRORS)):
        why = "it does not speak Dask's protocol (is it a Dask scheduler?)"
    elif exc is not None:
        why = describe_error(exc)
    elif not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        why = "it answers, but not as a Dask scheduler"
    else:
        return
    raise SemcodecError(f"cannot reach the scheduler at {address}: {why}")


@contextlib.contextmanager
def _remote_client(address: str, timeout: float) -> Iterator[Any]:
    """A client of the scheduler at ``address``; one line if it cannot be reached in time."""
    distributed = _distributed()
    check_scheduler(address, timeout)
    try:
        client = distributed.Client(address, timeout=timeout, set_as_default=False)
    except _CONNECTION_ERRORS as exc:
        raise SemcodecError(
            f"cannot reach the scheduler at {address}: {describe_error(exc)}"
        ) from None
    with client:
        yield client


@contextlib.contextmanager
def _client(spec: ClusterSpec, timeout: float) -> Iterator[Any]:
    """A client of the scheduler, or of a local cluster started (and stopped) here."""
    distributed = _distributed()
    if spec.address is not None:
        with _remote_client(spec.address, timeout) as client:
            yield client
        return
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with _local_start_method(), distributed.LocalCluster(
        n_workers=spec.local_workers,
        threads_per_worker=spec.local_threads,
        processes=True,
        dashboard_address=None,
        silence_logs=40,  # logging.ERROR: a restarted worker is not news on the terminal
        env=env,
    ) as cluster, distributed.Client(cluster, set_as_default=False) as client:  # fmt: skip
        yield client


def _local_start_method() -> contextlib.AbstractContextManager:
    """Local workers forked from a server that has imported torch and the codec once: they
    start and stop in a fraction of spawn's time (spawn where there is no forkserver)."""
    import dask

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return contextlib.nullcontext()
    multiprocessing.set_forkserver_preload(["semcodec.encoder.codec"])
    return dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})


def _workers(client: Any) -> int:
    """How many worker threads the cluster has now (at least one)."""
    info = client.scheduler_info()
    return max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))


@contextlib.contextmanager
def cluster_outcomes(
    fn: Callable[[Any], Outcome],
    tasks: Collection[Any],
    cluster: str,
    models: tuple[str, ...],
    debug: bool = False,
    timeout: float = DEFAULT_CLUSTER_TIMEOUT,
) -> Iterator[Iterator[Outcome]]:
    """Outcomes in task order from the cluster's workers, at most a few tasks per worker ahead;
    a scheduler that cannot be reached within ``timeout`` seconds, or is lost mid-run, ends the
    batch with one line (what was written stays complete)."""
    from semcodec import runtime

    spec = parse_cluster(cluster)
    _distributed()  # imported first: its loggers exist and are configured when quietened
    with _quiet_client_logs(debug), _client(spec, timeout) as client:
        plugin = _plugin_class()(models, os.environ.get(runtime.BF16_ENV))
        try:
            client.register_plugin(plugin)
            client.wait_for_workers(spec.local_workers or 1)
        except _CONNECTION_ERRORS:
            raise scheduler_lost(cluster) from None
        killed = _distributed().KilledWorker

        def submit(task: Any) -> Any:
            """One task, never deduplicated against another client's equal one."""
            return client.submit(run_task, fn, task, pure=False)

        def result(future: Any) -> Outcome:
            """The task's outcome, or a failure when its workers kept dying."""
            try:
                return future.result()
            except killed:
                return Outcome(False, error="its worker process died (killed, or out of memory)")
            except _CONNECTION_ERRORS:
                raise scheduler_lost(cluster) from None
            finally:
                with contextlib.suppress(Exception):  # a client already closed
                    future.release()

        yield windowed(submit, result, tasks, WINDOW_PER_WORKER * _workers(client))
