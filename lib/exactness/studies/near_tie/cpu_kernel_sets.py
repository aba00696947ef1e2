"""Machine dependence: the same seeds screened and checked under each CPU kernel set this machine offers.

The eager forward's float kernels depend on the CPU's vector extensions (torch's ATen dispatch, oneDNN's
convolutions and matmuls), so two machines of one kind can round differently and count different candidates
and failures. A kernel set (`machine.KERNEL_SETS`) is a few environment variables that must be set before torch
loads: each set other than the notebook's own runs in a fresh Python process (`python -m
exactness.studies.near_tie.cpu_kernel_worker SPEC`), which screens the seeds and checks its own candidates plus the
seeds that failed natively, on one thread, so its tables depend only on the seeds and the kernel set. ONNX Runtime has
no such switch: its side is the same under every set.

The comparison says what a user who copies a failing seed from CI to a laptop needs to know: whether the seed's
smallest gap is bit-identical there, whether it is a candidate there, whether it fails there, and whether the
rate agrees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from exactness.compare.rates import binomial_two_sided_p, wilson_interval
from exactness.studies.near_tie.scale import is_candidate
from exactness.workbook import machine
from exactness.workbook.parameter_rules import StudyParameterError

CHECK_COLUMNS = ["model", "seed", "shape_mode", "n_flipped_rows", "test_rule_passed", "min_gap"]


def unavailable(kernel_sets, extensions=None) -> list[str]:
    """Problems with a `cpu_kernels` list on this CPU, one message each (empty: every set can run)."""
    have = machine.available_kernel_sets(extensions)
    problems = [f"cpu_kernels {name!r} is not a kernel set (choose from {', '.join(machine.KERNEL_SETS)})"
                for name in kernel_sets if name not in machine.KERNEL_SETS]
    problems += [f"cpu_kernels {name!r} needs {', '.join(machine.KERNEL_SET_NEEDS[name])}, which this CPU lacks "
                 f"(available here: {', '.join(have)})" for name in kernel_sets
                 if name in machine.KERNEL_SETS and name not in have]
    return problems


@dataclass(frozen=True)
class SeedRange:
    """What a near-tie run screens and checks, as the native run did it: the same options under every set."""

    models: tuple[str, ...]
    seed_start: int
    n_seeds: int
    threshold: float
    threshold_ulps: float = 0.0
    shape_mode: str = "dynamic"
    atol: float = 1e-3
    rtol: float = 1e-3
    max_checks: int = 0  # per model, smallest gaps first, as the native run's cap (0: all)
    workers: int = 1  # local processes started from the set's process (they inherit its kernel set)
    fast_paths: bool = True  # the native run's choice: the tables are the same either way, the time is not


def run_under(kernel_set: str, seeds: SeedRange,
              also_check: dict[str, list[int]]) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Screen `seeds` and check the candidates plus `also_check` under `kernel_set`, in a fresh process with
    its environment: (screen, checks, torch's CPU capability there). The tables do not depend on the number
    of workers."""
    spec = {**asdict(seeds), "models": list(seeds.models),
            "also_check": {m: [int(s) for s in chosen] for m, chosen in also_check.items()}}
    with tempfile.TemporaryDirectory(prefix=f"kernels-{kernel_set}-") as folder:
        spec_path = Path(folder) / "spec.json"
        spec_path.write_text(json.dumps({**spec, "out": folder}))
        env = {**os.environ, **machine.KERNEL_SETS[kernel_set], "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-m", "exactness.studies.near_tie.cpu_kernel_worker", str(spec_path)],
                              env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"kernel set {kernel_set!r}: the worker process failed:\n{done.stderr[-3000:]}")
        out = Path(folder)
        capability = (out / "capability.txt").read_text().strip()
        return pd.read_parquet(out / "screen.parquet"), pd.read_parquet(out / "checks.parquet"), capability


@dataclass
class KernelSets:
    """The same seeds screened and checked under each kernel set, beside the machine's own ("native")."""

    table: pd.DataFrame  # `compare`: one row per kernel set and class
    capabilities: dict[str, str]  # kernel set -> the capability torch reported under it
    screens: pd.DataFrame  # the other sets' screens, with a kernel_set column
    checks: pd.DataFrame  # the other sets' checks, with a kernel_set column


def across_kernel_sets(kernel_sets, screen: pd.DataFrame, checks: pd.DataFrame, seeds: SeedRange) -> KernelSets:
    """Screen and check the seeds of this run again under every kernel set but "native" (`run_under`), and
    compare each with this run's own screen and checks of `seeds.shape_mode` (the native failing seeds are
    checked under every set, whether or not they are candidates there)."""
    shape_mode, threshold, threshold_ulps = seeds.shape_mode, seeds.threshold, seeds.threshold_ulps
    others = [k for k in kernel_sets if k != "native"]
    capabilities = {"native": machine.torch_cpu_capability()}
    if not others:
        return KernelSets(pd.DataFrame(), capabilities, pd.DataFrame(), pd.DataFrame())
    mine = checks[checks.shape_mode == shape_mode] if len(checks) else checks
    failing = mine[~mine.test_rule_passed.astype(bool)] if len(mine) else mine
    failing_natively = {m: g.seed.tolist() for m, g in failing.groupby("model")} if len(failing) else {}
    screens, kernel_checks = {"native": screen}, {"native": mine}
    for name in others:
        screens[name], kernel_checks[name], capabilities[name] = run_under(name, seeds, failing_natively)
    return KernelSets(compare(screens, kernel_checks, threshold, threshold_ulps), capabilities,
                      pd.concat([s.assign(kernel_set=k) for k, s in screens.items() if k != "native"]),
                      pd.concat([c.assign(kernel_set=k) for k, c in kernel_checks.items() if k != "native"]))


def compare(screens: dict[str, pd.DataFrame], checks: dict[str, pd.DataFrame], threshold: float,
            threshold_ulps: float = 0.0, reference: str = "native") -> pd.DataFrame:
    """Per kernel set other than `reference`, and per class: the fraction of seeds whose smallest gap is
    bit-identical to the reference's, the candidate and failing seed sets and their overlap, both failure rates
    with 95% intervals, and the p-value that they are one rate."""
    rows = []
    base_screen, base_checks = screens[reference], checks[reference]
    for name in screens:
        if name == reference:
            continue
        for model, base in base_screen.groupby("model", sort=True):
            other = screens[name][screens[name].model == model]
            joined = base.merge(other, on="seed", suffixes=("", "_other"))
            same = (joined.min_gap == joined.min_gap_other) & (joined.min_gap_ulps == joined.min_gap_ulps_other)
            cand = set(base.seed[is_candidate(base, threshold, threshold_ulps)])
            cand_other = set(other.seed[is_candidate(other, threshold, threshold_ulps)])
            failing = _failing(base_checks, model)
            failing_other = _failing(checks[name], model)
            n, n_other = len(base), len(other)
            k, k_other = len(failing), len(failing_other)
            low, high = wilson_interval(k, n)
            low_other, high_other = wilson_interval(k_other, n_other)
            rows.append({"kernel_set": name, "model": model, "seeds": len(joined),
                         "identical_gap_fraction": float(same.mean()) if len(joined) else float("nan"),
                         "candidates": len(cand), "candidates_other": len(cand_other),
                         "candidates_both": len(cand & cand_other), "failing": k, "failing_other": k_other,
                         "failing_both": len(failing & failing_other),
                         "rate": k / n, "rate_low": low, "rate_high": high, "rate_other": k_other / n_other,
                         "rate_other_low": low_other, "rate_other_high": high_other,
                         "p_value": binomial_two_sided_p(k, n, k_other, n_other)})
    return pd.DataFrame(rows)


def _failing(checks: pd.DataFrame, model: str) -> set[int]:
    if not len(checks):
        return set()
    mine = checks[(checks.model == model) & ~checks.test_rule_passed.astype(bool)]
    return {int(s) for s in mine.seed}


def portability(table: pd.DataFrame) -> tuple[bool | None, bool]:
    """(is a failing seed portable: every seed failing under one set fails under the others, None when no seed
    failed under any set; is the rate portable: the rates agree at the 5% level in every class)."""
    if not (table.failing + table.failing_other).any():
        seeds = None
    else:
        seeds = bool(((table.failing_both == table.failing) & (table.failing_both == table.failing_other)).all())
    rates = bool((table.p_value >= 0.05).all())
    return seeds, rates


def check_available(cpu_kernels) -> None:
    """This CPU must offer every kernel set in `cpu_kernels`, before any work."""
    if problems := unavailable(cpu_kernels):
        raise StudyParameterError("; ".join(problems))
