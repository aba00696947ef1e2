"""Peak resident memory of a process and all its descendants (a CLI run spawns a kernel, which spawns
workers), sampled from /proc. `ru_maxrss` would give only the largest single process."""

from __future__ import annotations

import os
import threading
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def tree_rss_bytes(root: int) -> int:
    tree, todo, total = _children(), [root], 0
    while todo:
        pid = todo.pop()
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
        todo += tree.get(pid, [])
    return total


class TreeMemory:
    """`with TreeMemory(pid) as m: ...` samples every `every` seconds; `m.peak_mb` afterwards (NaN where
    /proc does not exist)."""

    def __init__(self, root: int, every: float = 0.25):
        self.root, self.every, self.peak = root, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_bytes(self.root))
            self._stop.wait(self.every)

    def __enter__(self) -> TreeMemory:
        if Path("/proc").exists():
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20 if Path("/proc").exists() else float("nan")
