"""Seed sweeps: the same function over chunks of seeds, in this process, in local worker processes, or
on an existing Dask cluster (`scheduler="tcp://host:8786"`).

Each chunk's result depends only on its seeds, and results come back in seed order, so the tables are the
same, bit for bit, whatever the number of workers or machines. Every chunk runs torch with one thread: the
cores go to processes, not to threads fighting over them (and thread count can change float results).
With a `ShardStore`, every finished chunk is kept on disk as it arrives; a sweep started again over the
same store computes only the chunks that are missing (see shards.py).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

import pandas as pd

from exactness.workbook import dask_scheduler
from exactness.workbook.shards import ShardStore


def chunks(items: Sequence, size: int) -> list[Sequence]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _init_worker() -> None:
    """A process that exists only to run chunks: one thread, glibc's allocator at its defaults."""
    _one_thread()


def _init_pool_worker(owner: int) -> None:
    """A pool worker leaves Ctrl-C to its parent, which cancels what is pending: otherwise every worker
    prints its own KeyboardInterrupt traceback, and again when the kernel shuts down. It exits when the
    process that owns the pool (`owner`, a notebook kernel) is gone: a kernel killed without shutting its
    pool down (SIGKILL, its client gone) would otherwise leave workers of a few hundred MB each running."""
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_gone, args=(owner,), daemon=True, name="owner-watch").start()
    _init_worker()


def _exit_when_gone(owner: int, every: float = 1.0) -> None:
    from exactness.workbook.manifest import process_alive

    while process_alive(owner):
        time.sleep(every)
    os._exit(1)


class _SingleThreaded:
    """`function(chunk)` with torch on one thread, wherever it runs (Dask workers have no initializer)."""

    def __init__(self, function):
        self.function = function

    def __call__(self, chunk):
        _one_thread()  # a Dask worker belongs to the user's cluster: its allocator is left alone
        return self.function(chunk)


class _Timed:
    """`function(chunk)` with the seconds it took and the process that ran it (host and pid: a Dask cluster spans
    machines), for the time left (`Progress`)."""

    def __init__(self, function):
        self.function = function

    def __call__(self, chunk):
        began = time.perf_counter()
        result = self.function(chunk)
        return result, time.perf_counter() - began, (socket.gethostname(), os.getpid())


class Progress:
    """Items done, rate and time left, at most one line every `every` seconds (quiet enough for CI logs).

    Where the sweep reports each chunk's own compute time and the worker that ran it (`advance(n, seconds,
    worker)`, as `map_chunks` does), the time left is the items left times the seconds per item of the chunks
    measured so far, over the workers sharing them; each worker's first chunk is left out of that, as it carries
    the worker's warm-up (a class's template built, its taps learnt), and the pool's start is in no chunk at all.
    Items over wall time since the start, the other estimate, rises whenever the workers finish in step (two
    chunks done, then one more over twice the time) and counts the start-up as work: measured on the near_tie
    screen with 2 workers, 5.6 s of start before 1.1 s chunks put it at 75 s left where 16 s were.

    Without chunk times (a caller's own `advance(n)`), the rate is items done over the time since the start,
    said only once `ESTIMATE_AFTER` chunks are done: the first chunk carries the start-up and is often the
    slowest. The line keeps the form the run's terminal passes through (`run_progress`):
    "label: done/total (n/s, t s left...)"."""

    ESTIMATE_AFTER = 2  # chunks done before a time left is said

    def __init__(self, total: int, label: str, every: float = 10.0, stream=None, clock=time.monotonic,
                 unit: str = "seeds", workers: int = 1, chunks: int = 0):
        self.total, self.label, self.every, self.clock, self.unit = total, label, every, clock, unit
        self.workers, self.chunks_total = max(1, workers), chunks
        self.stream = stream or sys.stderr
        self.done, self.resumed, self.chunks, self.began, self.last = 0, 0, 0, clock(), None
        self.warmed: set = set()  # workers whose first chunk (their warm-up) is done
        self.timed_items, self.timed_seconds = 0, 0.0  # chunks after each worker's first

    def skip(self, n: int, chunks: int = 1) -> None:
        """Items whose results came from an earlier, interrupted run: done, but not part of the rate."""
        self.resumed += n
        self.done += n
        self.chunks_total = max(0, self.chunks_total - chunks)

    def advance(self, n: int, seconds: float | None = None, worker=None) -> None:
        self.done += n
        self.chunks += 1
        if seconds is not None:
            if worker in self.warmed:
                self.timed_items += n
                self.timed_seconds += seconds
            self.warmed.add(worker)
        now = self.clock()
        if self.last is None or now - self.last >= self.every or self.done >= self.total:
            self.last = now
            print(self.line(now), file=self.stream, flush=True)

    def _left_from_chunk_times(self) -> float | None:
        if not self.timed_items:
            return None
        busy = self.workers
        if self.chunks_total:  # the last chunks keep fewer workers busy
            busy = max(1, min(busy, self.chunks_total - self.chunks))
        return (self.total - self.done) * self.timed_seconds / self.timed_items / busy

    def line(self, now: float) -> str:
        """'screen X: 250/2,000 seeds (23 seeds/s, 75 s left)'; under one a second, 'one every 40 s'."""
        resumed = f", {self.resumed:,} resumed" if self.resumed else ""
        elapsed = now - self.began
        measured = self.done - self.resumed
        rate = measured / elapsed if elapsed > 0 else 0.0
        speed = (f"{rate:.0f} {self.unit}/s" if rate >= 1 else
                 f"one every {elapsed / measured:.0f} s" if measured else f"none done in {elapsed:.0f} s")
        head = f"{self.label}: {self.done:,}/{self.total:,} {self.unit}"
        if self.done >= self.total:
            return f"{head} ({speed}, 0 s left{resumed})"
        if self.warmed:
            left = self._left_from_chunk_times()
            if left is None:
                return f"{head} ({speed}, ? s left: estimating from the chunks after each worker's first{resumed})"
            return f"{head} ({speed}, {left:.0f} s left{resumed})"
        if self.chunks < self.ESTIMATE_AFTER or rate <= 0:
            return f"{head} ({speed}, ? s left: estimating until {self.ESTIMATE_AFTER} chunks are done{resumed})"
        left = (self.total - self.done) / rate
        return f"{head} ({speed}, {left:.0f} s left{resumed})"


_EXECUTORS: dict[int, tuple[ProcessPoolExecutor, tuple, tuple]] = {}  # workers -> pool, roots, fingerprint
_LIBRARY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the whole exactness package


def _code_roots(function) -> tuple[str, ...]:
    """Where the code the workers run lives: this library, and the package of `function` unless it is
    installed under the interpreter's prefix (site-packages are not edited between sweeps)."""
    roots = {_LIBRARY}
    while isinstance(function, (_Timed, _SingleThreaded)):  # the wrappers' module is this one: look inside
        function = function.function
    target = getattr(function, "func", function)  # functools.partial
    name = getattr(target, "__module__", None) or ""
    top = sys.modules.get(name.split(".")[0])
    path = getattr(top, "__file__", None)
    if path and not os.path.abspath(path).startswith((sys.prefix, sys.base_prefix)):
        roots.add(os.path.dirname(os.path.abspath(path)) if os.path.basename(path) == "__init__.py" else path)
    return tuple(sorted(roots))


def _fingerprint(roots) -> tuple:
    """sys.path (fixed in a worker when it starts) and (path, mtime, size) of every .py file under `roots`:
    a few stat calls, well under a millisecond for this library."""
    entries = []
    stack = list(roots)
    while stack:
        root = stack.pop()
        if os.path.isfile(root):
            st = os.stat(root)
            entries.append((root, st.st_mtime_ns, st.st_size))
            continue
        with os.scandir(root) as found:
            for entry in found:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    entries.append((entry.path, st.st_mtime_ns, st.st_size))
    return tuple(sys.path), tuple(entries)  # scandir order is stable for an unchanged folder


def _changed(before: tuple, after: tuple) -> str:
    if before[0] != after[0]:
        return "sys.path"
    old, new = set(before[1]), set(after[1])
    return ", ".join(sorted({path for path, *_ in old ^ new}))


def _executor(workers: int, function=None) -> ProcessPoolExecutor:
    """One pool of `workers` processes, kept for the life of this process: workers start once (torch
    imported once, per-process caches such as the screen's template models kept) however many sweeps
    follow. Workers come from a fork server, never forked from this process: a Jupyter kernel that has run
    torch and ONNX Runtime holds thread pools that a forked child inherits half-alive (a replay after
    the checks hung that way). Workers keep the code they imported, so when a .py file of the library (or
    of the swept function's package) changed since they started, e.g. edited in JupyterLab, the pool is
    replaced. The fork server preloads only third-party modules, so new workers import the library afresh.
    Dask workers are not covered: restart them yourself after an edit."""
    roots = _code_roots(function)
    held = _EXECUTORS.get(workers)
    if held is not None:
        pool, old_roots, before = held
        roots = tuple(sorted(set(roots) | set(old_roots)))
        after = _fingerprint(roots)
        if roots != old_roots and after[0] == before[0]:  # a package first used now: loaded from now on
            _EXECUTORS[workers] = (pool, roots, after)
            return pool
        if after == before:
            return pool
        print(f"sweep: code changed since the {workers} worker processes started ({_changed(before, after)}): "
              "restarting them", file=sys.stderr, flush=True)
        pool.shutdown(wait=False, cancel_futures=True)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "pandas"])
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_pool_worker,
                               initargs=(os.getpid(),))
    _EXECUTORS[workers] = (pool, roots, _fingerprint(roots))
    return pool


def _in_processes(function, parts, todo, workers: int, finished) -> None:
    try:
        futures = {_executor(workers, function).submit(function, parts[i]): i for i in todo}
    except BrokenProcessPool:  # a worker died in an earlier sweep: start a fresh pool
        _EXECUTORS.pop(workers, None)
        futures = {_executor(workers, function).submit(function, parts[i]): i for i in todo}
    try:
        for future in as_completed(futures):
            finished(futures[future], future.result())
    except BaseException:
        for future in futures:  # Ctrl-C or a failing chunk: do not leave the rest running
            future.cancel()
        raise


def concat_frames(results: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(results, ignore_index=True) if results else pd.DataFrame()


def map_chunks(function: Callable[[Sequence], object], items: Sequence, workers: int = 1,
               chunk_size: int = 500, label: str = "sweep", progress_every: float = 10.0,
               scheduler: str = "", shards: ShardStore | None = None,
               combine: Callable[[list], object] = concat_frames, size: Callable[[Sequence], int] = len,
               unit: str = "seeds"):
    """`function(chunk)` for every chunk of `items`, combined in order (tables: concatenated). `size(chunk)`:
    what progress counts of a chunk (its items; the seeds of items that each hold many), in `unit`."""
    parts = chunks(list(items), chunk_size)
    progress = Progress(sum(size(part) for part in parts), label, progress_every, unit=unit,
                        workers=1 if scheduler else workers, chunks=len(parts))
    results: list = [None] * len(parts)
    keys = [shards.key(label, part) if shards else "" for part in parts]
    for i, key in enumerate(keys):
        if shards and shards.has(key):
            results[i] = shards.load(key)
            progress.skip(size(parts[i]))
    todo = [i for i in range(len(parts)) if results[i] is None]
    timed = _Timed(function)

    def finished(i: int, done) -> None:
        result, seconds, worker = done
        results[i] = result
        if shards:
            shards.save(keys[i], result)
        progress.advance(size(parts[i]), seconds, worker)

    if scheduler:
        _on_dask(timed, parts, todo, scheduler, finished, progress)
    elif workers <= 1 or len(todo) <= 1:
        import torch

        progress.workers = 1
        threads = torch.get_num_threads()
        _one_thread()  # the same arithmetic as a worker process: results don't depend on workers
        try:
            for i in todo:
                finished(i, timed(parts[i]))
        finally:
            torch.set_num_threads(threads)
    else:
        _in_processes(timed, parts, todo, workers, finished)
    return combine(results)


def _on_dask(function, parts, todo, scheduler: str, finished, progress: Progress | None = None) -> None:
    from distributed import Client
    from distributed import as_completed as dask_completed

    dask_scheduler.check(scheduler)  # before the client, which hangs or asks for exabytes on another server
    with Client(scheduler, timeout=f"{dask_scheduler.CONNECT_TIMEOUT_S:g}s") as client:
        if progress is not None:  # the cluster's workers share the chunks
            progress.workers = max(1, len(client.scheduler_info().get("workers", {})))
        futures = client.map(_SingleThreaded(function), [parts[i] for i in todo], pure=False)
        index = {future.key: i for future, i in zip(futures, todo, strict=True)}
        for future in dask_completed(futures):
            finished(index[future.key], future.result())


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
