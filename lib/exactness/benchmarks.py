"""`make bench`: every speed claim of the workbook as a ratio measured side by side in one run.

Timings never go into tests; they go here. Each case runs `repeats` times and the table holds the median
(long cases, the paper preset and the DAC study, run once and say so). Results go to
outputs/benchmarks/<stamp>/: the table (parquet and CSV), a plot, the machine they were measured on, and
the measured study runs themselves (runs/, with their reports).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from exactness.process_memory import TreeMemory
from exactness.project import Project

CONFORMER = "Wav2Vec2ConformerForPreTraining"


def _median_seconds(work: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return statistics.median(times), times


def _row(benchmark: str, case: str, seconds: float, times: list[float], items: int, unit: str, **extra) -> dict:
    return {"benchmark": benchmark, "case": case, "repeats": len(times), "median_s": seconds,
            "spread_s": max(times) - min(times), "items": items, "rate": items / seconds, "unit": unit, **extra}


def _ratio(rows: list[dict], target: float, faster: str, slower: str) -> None:
    """The faster case's rate over the slower case's, written on the faster row with its target."""
    by_case = {r["case"]: r for r in rows}
    ratio = by_case[faster]["rate"] / by_case[slower]["rate"]
    by_case[faster].update(ratio=ratio, ratio_of=f"{faster} / {slower}", target=target, meets=ratio >= target)


def screen_paths(repeats: int, plain_seeds: int = 20, fast_seeds: int = 200) -> list[dict]:
    """Seeds per second on one thread: build the whole model and run its forward, or the fast screen."""
    import torch

    from exactness.models.quantizer_logits import FastLogits, plain_logits

    torch.set_num_threads(1)
    fast = FastLogits(CONFORMER)
    plain_s, plain_t = _median_seconds(lambda: [plain_logits(CONFORMER, s) for s in range(plain_seeds)], repeats)
    fast_s, fast_t = _median_seconds(lambda: [fast(s) for s in range(fast_seeds)], repeats)
    rows = [_row("screen", "plain (build + full forward)", plain_s, plain_t, plain_seeds, "seeds/s"),
            _row("screen", "fast (replayed draws, argmax inputs only)", fast_s, fast_t, fast_seeds, "seeds/s")]
    _ratio(rows, 10.0, rows[1]["case"], rows[0]["case"])
    return rows


def check_paths(repeats: int, swapped_checks: int = 10) -> list[dict]:
    """One candidate check with a fresh export against one with the seed's weights swapped into a graph
    exported once and fed to one session (learnt and verified beforehand), both as the study runs most
    checks: the graph exposing what a check reads, the model rebuilt by replaying its draws, the named
    tensors only."""
    import torch

    from exactness.models import wav2vec2_family as family
    from exactness.models.seed_rebuild import Rebuilder
    from exactness.runtimes.graph_pool import GraphPool
    from exactness.studies import near_tie
    from exactness.studies.near_tie_check import check_seed

    torch.set_num_threads(1)
    exposed = family.check_exposed(CONFORMER)
    pool = near_tie.check_pool(CONFORMER, "dynamic")
    one_thread = {"intra_op_threads": 1}  # as the study's workers run ORT (and what one fed session is verified for)
    for seed in (0, 1):  # the template export, then the export the swap is verified on
        check_seed(pool, seed, what_if=False, session_options=one_thread)
    rebuild = Rebuilder(CONFORMER)
    seeds = iter(range(100, 100 + repeats))
    fresh_s, fresh_t = _median_seconds(lambda: check_seed(GraphPool(CONFORMER, "dynamic", swap=False, exposed=exposed),
                                                          next(seeds), what_if=False, all_tensors=False,
                                                          session_options=one_thread), repeats)
    swapped_s, swapped_t = _median_seconds(
        lambda: [check_seed(pool, s, built=rebuild(s), what_if=False, all_tensors=False, session_options=one_thread)
                 for s in range(200, 200 + swapped_checks)], repeats)
    rows = [_row("check", "fresh export per seed", fresh_s, fresh_t, 1, "checks/s"),
            _row("check", "one export, weights fed to one session", swapped_s, swapped_t, swapped_checks,
                 "checks/s")]
    _ratio(rows, 50.0, rows[1]["case"], rows[0]["case"])
    return rows


def scaling(sizes=(1000, 5000, 20000), workers=(1, 2)) -> list[dict]:
    """The screen's wall time for growing seed counts and worker counts (one run each)."""
    from exactness.studies.near_tie_screen import screen

    rows = []
    for n in sizes:
        for w in workers:
            began = time.perf_counter()
            screen([CONFORMER], 0, n, workers=w, progress_every=1e9)
            seconds = time.perf_counter() - began
            rows.append(_row("scaling", f"{n} seeds, {w} worker(s)", seconds, [seconds], n, "seeds/s", seeds=n,
                             workers=w))
    base = {(r["seeds"], r["workers"]): r["median_s"] for r in rows}
    for r in rows:
        r["seconds_per_1k_seeds"] = r["median_s"] / r["seeds"] * 1000
        r["speedup_over_1_worker"] = base[(r["seeds"], 1)] / r["median_s"]
    return rows


def study_run(study: str, arguments: list[str], label: str, outputs: Path) -> dict:
    """`exactness run STUDY ARGUMENTS` as a user runs it: wall time and the peak memory of its whole process
    tree (the CLI, the kernel, worker processes)."""
    command = [sys.executable, "-m", "exactness.cli", "--out", str(outputs), "run", study, *arguments]
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with TreeMemory(process.pid) as memory:
        output, _ = process.communicate()
    seconds = time.perf_counter() - began
    if process.returncode != 0:
        raise RuntimeError(f"{study} {' '.join(arguments)} failed:\n{output[-2000:]}")
    return _row(study, label, seconds, [seconds], 1, "runs/s", peak_memory_mb=memory.peak_mb)


def run(quick: bool = False, repeats: int = 3, out: Path | None = None) -> pd.DataFrame:
    from exactness.machine import run_facts

    project = Project.at()
    folder = out or project.outputs / "benchmarks" / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=False)
    (folder / "machine.json").write_text(json.dumps(run_facts(project.root), indent=2, default=str) + "\n")
    rows = screen_paths(repeats) + check_paths(repeats)
    rows += scaling((1000, 5000) if quick else (1000, 5000, 20000))
    runs = folder / "runs"  # the measured runs stay, with their reports, apart from outputs/index.html
    for seconds in (1.0,) if quick else (1.0, 10.0):
        rows.append(study_run("dac_propagation", ["-p", "seconds", str(seconds)], f"{seconds:g} s of audio", runs))
    if not quick:
        rows.append(study_run("near_tie", ["-f", "paper"], "paper.yaml", runs))
    table = pd.DataFrame(rows)
    table.to_parquet(folder / "benchmarks.parquet", index=False)
    table.to_csv(folder / "benchmarks.csv", index=False)
    from exactness.plots.benchmarks import overview

    overview(table).savefig(folder / "benchmarks.png", dpi=110, bbox_inches="tight")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exactness.benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the paper preset, 10 s of DAC audio, 20k seeds")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    table = run(args.quick, args.repeats)
    columns = [c for c in ("benchmark", "case", "repeats", "median_s", "rate", "unit", "ratio", "target", "meets",
                           "speedup_over_1_worker", "peak_memory_mb") if c in table]
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.4g}".format):
        print(table[columns].to_string(index=False))
    missed = table[table.get("meets", pd.Series(dtype=object)).eq(False)] if "meets" in table else table.iloc[:0]
    for _, row in missed.iterrows():
        print(f"MISSED TARGET: {row.benchmark}: {row.ratio_of} = {row.ratio:.1f}, target {row.target:g}",
              file=sys.stderr)
    return 1 if len(missed) else 0


if __name__ == "__main__":
    sys.exit(main())
