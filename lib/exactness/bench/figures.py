"""The benchmark table as pictures: speed-ups against their targets, how the screen scales, and the DAC studies'
time and memory against the clip's length beside their plain forward passes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

DAC_STUDIES = ("dac_propagation", "dac_batching")


def overview(table: pd.DataFrame):
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.4))
    speedups(table, axes[0])
    scaling = table[table.benchmark == "scaling"]
    if not len(scaling):
        axes[1].set_axis_off()  # a run of some parts only (`--only`)
    else:
        sns.lineplot(data=scaling, x="seeds", y="median_s", hue="workers", marker="o", ax=axes[1], palette="deep")
        axes[1].set(xscale="log", yscale="log", title="screen wall time (one run each)", xlabel="seeds",
                    ylabel="seconds")
    dac_lengths(table, axes[2], axes[3])
    fig.tight_layout()
    return fig


def speedups(table: pd.DataFrame, ax) -> None:
    """Rates over rates (higher is faster), one bar per case, its target as a red dash."""
    ratios = (table[~table.benchmark.isin(DAC_STUDIES)].dropna(subset=["ratio"]).reset_index(drop=True)
              if "ratio" in table else table.iloc[:0])
    if not len(ratios):
        ax.set_axis_off()
        return
    sns.barplot(data=ratios, x="benchmark", y="ratio", ax=ax, color="tab:blue", errorbar=None)
    for i, row in ratios.iterrows():
        ax.plot([i - 0.4, i + 0.4], [row.target, row.target], color="tab:red", linestyle="--")
        ax.annotate(f"{row.ratio:.0f}x", (i, row.ratio), ha="center", va="bottom")
    ax.set(yscale="log", title="speed-up, measured side by side (red: target)", ylabel="ratio of rates")


def _dac_runs(table: pd.DataFrame) -> pd.DataFrame:
    """One row per DAC run measured at a length: the study, or its plain encode + decode passes."""
    if "seconds_of_audio" not in table:
        return table.iloc[:0]
    runs = table[table.benchmark.isin(DAC_STUDIES) & table.seconds_of_audio.notna()].copy()
    plain = runs.case.str.contains("plain forwards")
    chosen = runs.get("inits", pd.Series("", index=runs.index)).fillna("")
    subset = chosen.where(chosen.isin(["", "as the parameters"]) , " (" + chosen + ")").replace(
        {"as the parameters": ""})
    runs["what"] = (runs.benchmark.str.removeprefix("dac_") + subset
                    + plain.map({True: ": plain encode + decode", False: ": study"}))
    # the plain side's time is that of its passes alone (its process's imports and builds left out)
    runs["seconds"] = runs.median_s.where(~plain, runs.get("encode_decode_s"))
    return runs


def dac_lengths(table: pd.DataFrame, time_ax, memory_ax) -> None:
    """Wall time and peak memory (whole process tree) against seconds of audio, study beside plain passes."""
    runs = _dac_runs(table)
    if not len(runs):
        for ax in (time_ax, memory_ax):
            ax.set_axis_off()
        return
    for what, group in runs.groupby("what", sort=False):
        group = group.sort_values("seconds_of_audio")
        time_ax.plot(group.seconds_of_audio, group.seconds, marker="o", label=what)
        memory_ax.plot(group.seconds_of_audio, group.peak_memory_mb, marker="o", label=what)
    time_ax.legend(fontsize=7, loc="upper left")  # long clips cost most: the upper left stays empty
    time_ax.set(xscale="log", yscale="log", xlabel="seconds of audio", ylabel="wall seconds",
                title="DAC: study against its plain passes (linear = slope 1)")
    studies = runs[~runs.case.str.contains("plain forwards")]
    memory_ax.axhline(2048, color="tab:red", linestyle="--", linewidth=1)
    memory_ax.set(xscale="log", xlabel="seconds of audio", ylabel="peak MB (process tree)", ylim=(0, None),
                  title=f"DAC peak memory (red: 2 GB; studies {studies.peak_memory_mb.min():,.0f} to "
                        f"{studies.peak_memory_mb.max():,.0f} MB)")
