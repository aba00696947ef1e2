"""Seed sweeps: the same function over chunks of seeds, in this process, in local worker processes, or
on an existing Dask cluster (`scheduler="tcp://host:8786"`).

Each chunk's result depends only on its seeds, and results come back in seed order, so the tables are the
same, bit for bit, whatever the number of workers or machines. Every chunk runs torch with one thread: the
cores go to processes, not to threads fighting over them (and thread count can change float results).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

import pandas as pd


def chunks(items: Sequence, size: int) -> list[Sequence]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


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
        self.done, self.began, self.last = 0, time.monotonic(), 0.0

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every or self.done >= self.total:
            self.last = now
            elapsed = now - self.began
            rate = self.done / elapsed if elapsed > 0 else 0.0
            left = (self.total - self.done) / rate if rate > 0 else float("nan")
            print(f"{self.label}: {self.done}/{self.total} ({rate:.0f}/s, {left:.0f} s left)", file=self.stream,
                  flush=True)


def map_chunks(function: Callable[[Sequence], pd.DataFrame], items: Sequence, workers: int = 1,
               chunk_size: int = 500, label: str = "sweep", progress_every: float = 10.0,
               scheduler: str = "") -> pd.DataFrame:
    """`function(chunk)` for every chunk of `items`, concatenated in order."""
    parts = chunks(list(items), chunk_size)
    progress = Progress(len(items), label, progress_every)
    results: list[pd.DataFrame] = []
    if scheduler:
        results = _on_dask(function, parts, scheduler, progress)
    elif workers <= 1:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the same arithmetic as a worker process: results don't depend on workers
        try:
            for part in parts:
                results.append(function(part))
                progress.advance(len(part))
        finally:
            torch.set_num_threads(threads)
    else:
        with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker) as pool:
            for part, result in zip(parts, pool.map(function, parts), strict=True):
                results.append(result)
                progress.advance(len(part))
    return pd.concat(results, ignore_index=True) if results else pd.DataFrame()


def _on_dask(function, parts, scheduler: str, progress: Progress) -> list[pd.DataFrame]:
    from distributed import Client, as_completed

    with Client(scheduler, timeout="30s") as client:
        futures = client.map(_SingleThreaded(function), parts, pure=False)
        index = {future.key: i for i, future in enumerate(futures)}
        results: list = [None] * len(parts)
        for future in as_completed(futures):
            results[index[future.key]] = future.result()
            progress.advance(len(parts[index[future.key]]))
    return results


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
