"""Figures of the DAC studies."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def error_against_depth(propagation: pd.DataFrame, against: str):
    shown = propagation[(propagation.against == against) & (propagation.max_abs_err > 0)]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4), sharex=True)
    sns.lineplot(data=shown, x="depth", y="max_abs_err", hue="variant", style="init", marker="o", ax=axes[0])
    sns.lineplot(data=shown, x="depth", y="rel_err", hue="variant", style="init", marker="o", ax=axes[1], legend=False)
    axes[0].set(yscale="log", title=f"max |error| against {against}", ylabel="max abs error")
    axes[1].set(yscale="log", title="relative to the activation's RMS", ylabel="max error / RMS")
    boundary = shown[shown.layer == "decoder.Conv1"].depth
    for ax in axes:
        if len(boundary):
            ax.axvline(boundary.iloc[0] - 0.5, color="grey", linestyle=":")
        ax.set_xlabel("layer (encoder, then decoder fed identical codes)")
    return fig


def batching_differences(curves: dict, clip: int, stage: str, one_side: int, unit: str):
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for cause in ("padding", "batch size"):
        values = curves[(clip, stage, cause)].clamp(min=1e-12).numpy()
        ax.plot(range(len(values)), values, label=cause, linewidth=1)
    end = len(values)
    ax.axvspan(end - one_side, end, color="orange", alpha=0.2, label="receptive field reaching the padding")
    ax.set(yscale="log", xlabel=f"position ({unit})", ylabel="|alone - other| (1e-12 floor)",
           title=f"Clip {clip}, {stage}: where the padded and batched runs differ")
    ax.legend(fontsize=8)
    return fig
