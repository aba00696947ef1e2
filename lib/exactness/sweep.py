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
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

import pandas as pd

from exactness.shards import ShardStore


def chunks(items: Sequence, size: int) -> list[Sequence]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _init_worker() -> None:
    import torch

    from exactness.allocator import keep_freed_memory

    torch.set_num_threads(1)
    keep_freed_memory()


def _init_pool_worker() -> None:
    """A pool worker leaves Ctrl-C to its parent, which cancels what is pending: otherwise every worker
    prints its own KeyboardInterrupt traceback, and again when the kernel shuts down."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _init_worker()


class _SingleThreaded:
    """`function(chunk)` with torch on one thread, wherever it runs (Dask workers have no initializer)."""

    def __init__(self, function):
        self.function = function

    def __call__(self, chunk):
        _init_worker()
        return self.function(chunk)


class Progress:
    """Seeds done, rate and time left, at most one line every `every` seconds (quiet enough for CI logs)."""

    def __init__(self, total: int, label: str, every: float = 10.0, stream=None):
        self.total, self.label, self.every = total, label, every
        self.stream = stream or sys.stderr
        self.done, self.resumed, self.began, self.last = 0, 0, time.monotonic(), 0.0

    def skip(self, n: int) -> None:
        """Items whose results came from an earlier, interrupted run: done, but not part of the rate."""
        self.resumed += n
        self.done += n

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every or self.done >= self.total:
            self.last = now
            elapsed = now - self.began
            rate = (self.done - self.resumed) / elapsed if elapsed > 0 else 0.0
            left = (self.total - self.done) / rate if rate > 0 else float("nan")
            resumed = f", {self.resumed} resumed" if self.resumed else ""
            print(f"{self.label}: {self.done}/{self.total} ({rate:.0f}/s, {left:.0f} s left{resumed})",
                  file=self.stream, flush=True)


_EXECUTORS: dict[int, ProcessPoolExecutor] = {}


def _executor(workers: int) -> ProcessPoolExecutor:
    """One pool of `workers` processes, kept for the life of this process: workers start once (torch
    imported once, per-process caches such as the screen's template models kept) however many sweeps
    follow. Workers come from a fork server, never forked from this process: a Jupyter kernel that has run
    torch and ONNX Runtime holds thread pools that a forked child inherits half-alive (a replay after
    the checks hung that way)."""
    pool = _EXECUTORS.get(workers)
    if pool is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torch", "exactness.sweep"])
        pool = _EXECUTORS[workers] = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                                         initializer=_init_pool_worker)
    return pool


def _in_processes(function, parts, todo, workers: int, finished) -> None:
    try:
        futures = {_executor(workers).submit(function, parts[i]): i for i in todo}
    except BrokenProcessPool:  # a worker died in an earlier sweep: start a fresh pool
        _EXECUTORS.pop(workers, None)
        futures = {_executor(workers).submit(function, parts[i]): i for i in todo}
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
               combine: Callable[[list], object] = concat_frames):
    """`function(chunk)` for every chunk of `items`, combined in order (tables: concatenated)."""
    parts = chunks(list(items), chunk_size)
    progress = Progress(len(items), label, progress_every)
    results: list = [None] * len(parts)
    keys = [shards.key(label, part) if shards else "" for part in parts]
    for i, key in enumerate(keys):
        if shards and shards.has(key):
            results[i] = shards.load(key)
            progress.skip(len(parts[i]))
    todo = [i for i in range(len(parts)) if results[i] is None]

    def finished(i: int, result) -> None:
        results[i] = result
        if shards:
            shards.save(keys[i], result)
        progress.advance(len(parts[i]))

    if scheduler:
        _on_dask(function, parts, todo, scheduler, finished)
    elif workers <= 1 or len(todo) <= 1:
        import torch

        threads = torch.get_num_threads()
        _init_worker()  # the same arithmetic as a worker process: results don't depend on workers
        try:
            for i in todo:
                finished(i, function(parts[i]))
        finally:
            torch.set_num_threads(threads)
    else:
        _in_processes(function, parts, todo, workers, finished)
    return combine(results)


def _on_dask(function, parts, todo, scheduler: str, finished) -> None:
    from distributed import Client
    from distributed import as_completed as dask_completed

    with Client(scheduler, timeout="30s") as client:
        futures = client.map(_SingleThreaded(function), [parts[i] for i in todo], pure=False)
        index = {future.key: i for future, i in zip(futures, todo, strict=True)}
        for future in dask_completed(futures):
            finished(index[future.key], future.result())


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
