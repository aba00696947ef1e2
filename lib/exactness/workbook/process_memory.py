"""Peak resident memory of a process and all its descendants (a CLI run spawns a kernel, which spawns
workers), sampled with psutil. `ru_maxrss` would give only the largest single process."""

from __future__ import annotations

import threading

import psutil


def tree_rss_bytes(root: int) -> int:
    """Resident bytes of `root` and every descendant now; a process that ends while it is read counts 0."""
    try:
        parent = psutil.Process(root)
        tree = [parent, *parent.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for process in tree:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


class TreeMemory:
    """`with TreeMemory(pid) as m: ...` samples every `every` seconds; `m.peak_mb` afterwards."""

    def __init__(self, root: int, every: float = 0.25):
        self.root, self.every, self.peak = root, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_bytes(self.root))
            self._stop.wait(self.every)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20
