"""BENCHMARKS.md: what `make bench` measured, when and on which machine, as a page for people."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if value != value else f"{value:.3g}"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    return "" if value is None else str(value)


def write_benchmarks(table: pd.DataFrame, path: Path, machine: dict, folder: Path,
                     parts: tuple[str, ...] = (), left_out: tuple[str, ...] = ()) -> Path:
    """The table as markdown under its date and machine; each target with whether it was met; the parts of
    `make bench` this run measured and those it left out, so a missing row is never read as a met target."""
    columns = [c for c in ("benchmark", "case", "median_s", "rate", "unit", "ratio", "target", "target_s", "meets",
                           "peak_memory_mb") if c in table]
    versions = machine.get("versions", {})  # workbook.machine.run_facts
    lines = ["# Benchmarks", "",
             f"Written by `make bench` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, on "
             f"{machine.get('cpu_model', 'an unknown CPU')} ({machine.get('usable_cpus', '?')} cores; torch "
             f"{versions.get('torch', '?')}, onnxruntime {versions.get('onnxruntime', '?')}). Ratios are measured side "
             "by side in the same run; wall times vary by up to 10% between runs of this machine. The measured runs "
             f"and the figure are in `{folder}`.", ""]
    if parts:
        lines += [f"Parts measured: {', '.join(parts)}" + (f"; not measured in this run: {', '.join(left_out)}"
                                                           if left_out else "") + ".", ""]
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row[c]) for c in columns) + " |" for _, row in table.iterrows()]
    missed = table[table["meets"].eq(False)] if "meets" in table else table.iloc[:0]
    named = "; ".join(f"{r.benchmark} {r.case}" for r in missed.itertuples())
    lines += ["", f"Targets missed: {len(missed)}" + (f" ({named})" if len(missed) else ""), ""]
    path.write_text("\n".join(lines))
    return path
