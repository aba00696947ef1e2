"""Timings as `make bench` keeps them: medians over repeats, rates, and ratios against a target."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from exactness.workbook.process_memory import TreeMemory


def median_seconds(work: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return statistics.median(times), times


def row(benchmark: str, case: str, seconds: float, times: list[float], items: int, unit: str, **extra) -> dict:
    return {"benchmark": benchmark, "case": case, "repeats": len(times), "median_s": seconds,
            "spread_s": max(times) - min(times), "items": items, "rate": items / seconds, "unit": unit, **extra}


def ratio(rows: list[dict], target: float, faster: str, slower: str) -> None:
    """The faster case's rate over the slower case's, written on the faster row with its target."""
    by_case = {r["case"]: r for r in rows}
    ratio = by_case[faster]["rate"] / by_case[slower]["rate"]
    by_case[faster].update(ratio=ratio, ratio_of=f"{faster} / {slower}", target=target, meets=ratio >= target)


def study_run(study: str, arguments: list[str], label: str, outputs: Path) -> dict:
    """`exactness run STUDY ARGUMENTS` as a user runs it: wall time and the peak memory of its whole process
    tree (the CLI, the kernel, worker processes)."""
    command = [sys.executable, "-m", "exactness", "--out", str(outputs), "run", study, *arguments]
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with TreeMemory(process.pid) as memory:
        output, _ = process.communicate()
    seconds = time.perf_counter() - began
    if process.returncode != 0:
        raise RuntimeError(f"{study} {' '.join(arguments)} failed:\n{output[-2000:]}")
    return row(study, label, seconds, [seconds], 1, "runs/s", peak_memory_mb=memory.peak_mb)
