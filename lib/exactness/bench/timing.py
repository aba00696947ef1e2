"""Timings as `make bench` keeps them: medians over repeats, rates, and ratios against a target."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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
